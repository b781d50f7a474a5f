//! Point lookups in a table: one block searched where it is read (or found in the cache).

use super::*;

impl Table {
    /// [`get`](Self::get) as a read at `now` sees the table: an entry expired by then is a
    /// tombstone (`Some(None)`). A damaged value tag is an error naming the file and the
    /// offset of the key's block.
    #[inline]
    pub(crate) fn get_at(
        &self,
        key: &[u8],
        counters: &TableCounters,
        now: &crate::expiry::Now,
    ) -> Result<Option<Option<Slice>>> {
        match self.get_tagged(key, counters)? {
            Some(v) => self.judge(key, v, now).map(Some),
            None => Ok(None),
        }
    }

    /// The entry [`get_tagged`](Self::get_tagged) found for `key` (`None`: a tombstone) as
    /// a read at `now` sees it: the value without its tag, or `None` when it has expired.
    #[inline]
    pub(crate) fn judge(
        &self,
        key: &[u8],
        found: Option<Slice>,
        now: &crate::expiry::Now,
    ) -> Result<Option<Slice>> {
        match found {
            Some(v) if self.tagged() => self.untag(key, v, now),
            other => Ok(other),
        }
    }

    /// The value of a version 5 table's entry as a read at `now` sees it.
    #[cold]
    fn untag(&self, key: &[u8], v: Slice, now: &crate::expiry::Now) -> Result<Option<Slice>> {
        let (value, exp) = crate::expiry::split_tagged(&v, 0).map_err(|e| {
            // Only on damage: the key's block again, for its offset.
            let at = self
                .block_for(key)
                .and_then(|i| self.index.handle(i))
                .map_or(0, |h| h.0);
            e.in_file(&self.path, at)
        })?;
        if now.expired(exp) {
            return Ok(None);
        }
        Ok(Some(v.sub(value)))
    }

    /// Looks `key` up as [`get_at`](Self::get_at) does, without judging expiry: an expiring
    /// value is returned whatever the time. For tools and tests.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn get(&self, key: &[u8], counters: &TableCounters) -> Result<Option<Option<Slice>>> {
        self.get_at(key, counters, &crate::expiry::Now::fixed(0))
    }

    /// Looks `key` up in its block: `None` when absent, `Some(None)` for a tombstone. The
    /// block comes from the block cache when there is one and it holds the block; a block
    /// read from the file is searched where it was read, and copied into the cache only
    /// when the cache admits it.
    /// A version 5 table's values are returned as stored, tagged ([`judge`](Self::judge)
    /// takes the tag off).
    pub(crate) fn get_tagged(
        &self,
        key: &[u8],
        counters: &TableCounters,
    ) -> Result<Option<Option<Slice>>> {
        let Some(i) = self.block_for(key) else {
            return Ok(None);
        };
        let off = self.index.handle(i).map_or(0, |h| h.0);
        let in_file = |e: Error| e.in_file(&self.path, 0);
        let Some((cache, file)) = &self.cache else {
            return self.search_read(i, key, counters);
        };
        let k = BlockKey {
            file: *file,
            block: i as u64,
        };
        if let Some(b) = cache.get(&k) {
            counters.add_cache_hits(1);
            // Search a copy in this thread's buffer: the copy's independent loads bring
            // the block's cache lines in together, where a search in place waits for them
            // one after another (measured by `examples/lookup_ab.rs cache`: with most blocks
            // no longer in the CPU's caches, a hit costs ~20 % less of a present get so).
            // The value found is returned as a view of the cached block (no allocation).
            return scratch::with(&READ_BUF, |buf| {
                buf.clear();
                buf.extend_from_slice(&b);
                let found = Block::new(buf, off)
                    .and_then(|blk| blk.get_ref(key))
                    .map_err(in_file)?;
                Ok(found.map(|v| v.map(|v| b.share_part(v, buf))))
            });
        }
        counters.add_cache_misses(1);
        // The admission is decided before the read (by the block's estimated length: close
        // enough for the cache's fill accounting), so that a block not admitted is searched
        // where it was read, without a copy.
        if cache.admit(&k, self.cached_len(i)) {
            let b = self.read_block(i, counters, true)?;
            cache.insert(k, b.clone());
            let found = Block::new(&b, off)
                .and_then(|blk| blk.get_ref(key))
                .map_err(in_file)?;
            return Ok(found.map(|v| v.map(|v| b.share_part(v, &b))));
        }
        self.search_read(i, key, counters)
    }

    /// Looks `key` up in block `i`, read from the file (counted, CRC-checked) into this
    /// thread's buffers and not kept: an LZ4 block is decoded only as far as the lookup
    /// needs ([`block::get_decoding`]), any other searched whole.
    fn search_read(
        &self,
        i: usize,
        key: &[u8],
        counters: &TableCounters,
    ) -> Result<Option<Option<Slice>>> {
        scratch::with(&READ_BUF, |buf| {
            let (stored, offset) = self.read_stored(i, counters, buf)?;
            let in_file = |e: Error| e.in_file(&self.path, 0);
            scratch::with(&PLAIN_BUF, |plain| {
                let data = match stored.split_last() {
                    Some((&compress::CODEC_LZ4, payload)) if self.version >= 4 => {
                        let (mut dec, out) =
                            prefix_decoder(payload, offset, plain).map_err(in_file)?;
                        if let Some(found) =
                            block::get_decoding(&mut dec, out, key).map_err(in_file)?
                        {
                            return Ok(found.map(|v| v.map(Slice::from)));
                        }
                        // Undecided: the rest of the block, then the checked search.
                        let raw_len = out.len();
                        dec.fill(out, raw_len).map_err(in_file)?;
                        &*out
                    }
                    Some((&compress::CODEC_LZ4_SPLIT, payload)) if self.version >= 4 => {
                        let (mut dec, out) =
                            prefix_decoder(payload, offset, plain).map_err(in_file)?;
                        if let Some(found) =
                            split::get_decoding(&mut dec, out, key).map_err(in_file)?
                        {
                            return Ok(found.map(|v| v.map(Slice::from)));
                        }
                        // Undecided (bytes no writer makes): decoded whole, the errors named.
                        let mut whole = Vec::new();
                        let data = self.decode(stored, offset, &mut whole)?;
                        let found = Block::new(data, offset)
                            .and_then(|b| b.get_ref(key))
                            .map_err(in_file)?;
                        return Ok(found.map(|v| v.map(Slice::from)));
                    }
                    _ => self.decode(stored, offset, plain)?,
                };
                let found = Block::new(data, offset)
                    .and_then(|b| b.get_ref(key))
                    .map_err(in_file)?;
                Ok(found.map(|v| v.map(|v| self.value_from(v))))
            })
        })
    }

    /// A value found in a block read by [`search_read`](Self::search_read): a view of the
    /// table's map when it lies in it (`mmap_reads`, a block stored raw: no copy, pins the
    /// map), else a copy (inline when short).
    #[inline]
    fn value_from(&self, v: &[u8]) -> Slice {
        match &self.map_bytes {
            Some(m) => {
                let (base, p) = (m.as_ptr() as usize, v.as_ptr() as usize);
                if p >= base && p + v.len() <= base + m.len() {
                    m.share_part(v, m)
                } else {
                    Slice::from(v)
                }
            }
            None => Slice::from(v),
        }
    }
}
