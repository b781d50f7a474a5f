//! A scan's reads of a table: one block at a time, with the blocks after it (a reverse
//! scan: before it) that fit in one read ([`ReadAhead`]).

use super::*;

/// Bytes a scan reads at once when a block it needs is not cached: the block and the blocks
/// after it that end within this many bytes of its start (see [`Table::scan_block`]).
pub(crate) const SCAN_READ: usize = 4 << 10;

/// Buffers of dropped [`ReadAhead`]s (each [`SCAN_READ`] bytes), for the next scans of the
/// thread: a short scan then neither allocates nor zero-fills its read buffers.
pub(super) const SPARE_BUFS: usize = 16;

thread_local! {
    pub(super) static SPARE: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Data blocks of one table that a scan read together, as stored (see
/// [`Table::scan_block`]): one buffer of [`SCAN_READ`] bytes per read, shared with the raw
/// blocks taken out of it (a cursor and the values it hands out hold it, not a copy). A
/// buffer goes back to its thread's spares when the last of them drops, for the next read.
#[derive(Debug, Default)]
pub(crate) struct ReadAhead {
    /// The bytes of the last read (`None` before the first, or after a [`clear`](Self::clear)).
    unit: Option<BlockBytes>,
    /// File offset of the unit's first byte.
    at: u64,
    /// The blocks the unit holds, whole.
    pub(super) blocks: std::ops::Range<usize>,
}

impl ReadAhead {
    /// Forgets the blocks held (before a read of another table).
    pub(crate) fn clear(&mut self) {
        self.blocks = 0..0;
        self.unit = None;
    }

    /// Bytes of the last read (0 when none is held).
    #[cfg(test)]
    pub(super) fn held(&self) -> usize {
        self.unit.as_ref().map_or(0, |u| u.len())
    }
}

/// A read-ahead buffer ([`SCAN_READ`] bytes) as the owner of shared bytes: back to the
/// spares of the thread that drops the last view of it (up to [`SPARE_BUFS`]).
struct Pooled(Vec<u8>);

impl Pooled {
    /// A spare buffer of this thread, or a new one.
    fn take() -> Pooled {
        let spare = SPARE.with(|s| s.try_borrow_mut().ok().and_then(|mut s| s.pop()));
        Pooled(spare.unwrap_or_else(|| vec![0; SCAN_READ]))
    }
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        // Every buffer is SCAN_READ bytes (a longer block is read without one): at most
        // SPARE_BUFS * SCAN_READ bytes are kept per thread.
        if self.0.len() != SCAN_READ {
            return;
        }
        let buf = std::mem::take(&mut self.0);
        // Nothing to keep it in while the thread ends.
        let _ = SPARE.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                if s.len() < SPARE_BUFS {
                    s.push(buf);
                }
            }
        });
    }
}

impl Table {
    /// Data block `i` for a scan: from `ahead` when an earlier read of the scan brought it
    /// in (neither a cache hit nor a miss: no cache lookup, and not cached), else as
    /// [`Table::block`] with `fill_cache`, except that a block missing from the cache and
    /// read with `pread` comes in with the blocks after it that end within [`SCAN_READ`]
    /// bytes of its start, in one read, kept in `ahead` (which then holds only them). A
    /// scan that goes on into the next block then neither looks it up nor reads it. A block
    /// longer than `SCAN_READ` (a large value) is read alone, as [`Table::block`] reads it.
    pub(crate) fn scan_block(
        &self,
        i: usize,
        counters: &TableCounters,
        ahead: &mut ReadAhead,
    ) -> Result<BlockBytes> {
        self.scan_block_dir(i, counters, ahead, false)
    }

    /// Data block `i` for a reverse scan: as [`scan_block`](Self::scan_block), except that
    /// a block read from the file comes in with the blocks *before* it that start within
    /// [`SCAN_READ`] bytes of its end, the ones a reverse scan asks for next.
    pub(crate) fn scan_block_back(
        &self,
        i: usize,
        counters: &TableCounters,
        ahead: &mut ReadAhead,
    ) -> Result<BlockBytes> {
        self.scan_block_dir(i, counters, ahead, true)
    }

    fn scan_block_dir(
        &self,
        i: usize,
        counters: &TableCounters,
        ahead: &mut ReadAhead,
        rev: bool,
    ) -> Result<BlockBytes> {
        if ahead.blocks.contains(&i) {
            return self.block_ahead(i, counters, ahead, false);
        }
        if self.map_data {
            return self.block(i, counters, true);
        }
        self.through_cache(i, counters, true, super::prefetch, |owned| {
            // A block longer than a read-ahead buffer (a large value) has no block after it
            // within reach: it is read alone, as any block is.
            let fits =
                (self.index.handle(i)).is_some_and(|h| u64::from(h.1) + 4 <= SCAN_READ as u64);
            if fits {
                self.read_ahead(i, ahead, rev)?;
                self.block_ahead(i, counters, ahead, owned)
            } else {
                ahead.clear();
                self.read_block(i, counters, owned)
            }
        })
    }

    /// Reads block `i` (at most [`SCAN_READ`] bytes with its CRC) and the blocks after it
    /// that end within `SCAN_READ` bytes of its start (`rev`: the blocks before it that
    /// start within `SCAN_READ` bytes of its end) into `ahead`, with one `pread` (not
    /// counted: each block is counted when it is taken out, by [`Table::block_ahead`]).
    fn read_ahead(&self, i: usize, ahead: &mut ReadAhead, rev: bool) -> Result<()> {
        // The last unit's buffer goes back to the spares unless a block of it is held.
        ahead.clear();
        let Some((offset, len)) = self.index.handle(i) else {
            return Err(Error::Internal(format!("block {i} out of range")));
        };
        let (mut start, mut end) = (offset, offset.saturating_add(u64::from(len) + 4));
        let (mut first, mut j) = (i, i + 1);
        // `Table::open` checked that every block lies inside the data; stop at anything
        // out of order all the same.
        if rev {
            let limit = end.saturating_sub(SCAN_READ as u64);
            while let Some((o, l)) = first.checked_sub(1).and_then(|p| self.index.handle(p)) {
                let e = o.saturating_add(u64::from(l) + 4);
                if e > start || o < limit {
                    break;
                }
                start = o;
                first -= 1;
            }
        } else {
            let limit = offset.saturating_add(SCAN_READ as u64);
            while let Some((o, l)) = self.index.handle(j) {
                let e = o.saturating_add(u64::from(l) + 4);
                if o < end || e > limit || e > self.index_offset {
                    break;
                }
                end = e;
                j += 1;
            }
        }
        let mut buf = Pooled::take();
        let n = usize::try_from(end - start).unwrap_or(usize::MAX);
        let Some(dst) = buf.0.get_mut(..n) else {
            return Err(Error::Internal(format!(
                "block {i}: {n} bytes to read ahead"
            )));
        };
        self.file
            .read_exact_at(dst, start)
            .map_err(|err| Error::io(&self.path, err))?;
        ahead.unit = Some(BlockBytes::owned(buf).slice(0..n));
        ahead.at = start;
        ahead.blocks = first..j;
        Ok(())
    }

    /// Block `i`, which `ahead` holds: CRC-checked, decompressed and counted as a read. A
    /// block stored raw is a view of the read's buffer, unless `owned` (a block for the
    /// cache, which holds only copies of the bytes it counts).
    fn block_ahead(
        &self,
        i: usize,
        counters: &TableCounters,
        ahead: &ReadAhead,
        owned: bool,
    ) -> Result<BlockBytes> {
        let Some((offset, len)) = self.index.handle(i) else {
            return Err(Error::Internal(format!("block {i} out of range")));
        };
        let start = offset
            .checked_sub(ahead.at)
            .and_then(|s| usize::try_from(s).ok())
            .unwrap_or(usize::MAX);
        let unit = ahead.unit.as_ref();
        let raw = usize::try_from(u64::from(len) + 4)
            .ok()
            .and_then(|n| start.checked_add(n))
            .and_then(|end| unit?.get(start..end))
            .ok_or_else(|| Error::Internal(format!("block {i} not in the read-ahead")))?;
        let stored = self.checked(raw, offset, counters)?;
        match (self.raw_len(stored), unit) {
            // `raw` (and so the block) lies at `start..` in the unit.
            (Some(n), Some(unit)) if !owned => Ok(unit.slice(start..start + n)),
            _ => self.heap_block(stored, offset),
        }
    }

    /// Decodes every entry of the table, block after block, as a scan reads them
    /// ([`Table::scan_block`]: from the cache, or read with the blocks after it), into
    /// `out`: each block's entries once the whole block decodes, up to the first that
    /// fails. For the fuzzing harness (the `internals` feature).
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn scan_entries(&self, counters: &TableCounters, out: &mut Vec<Entry>) -> Result<()> {
        let mut ahead = ReadAhead::default();
        for i in 0..self.block_count() {
            let off = self.index.handle(i).map_or(0, |h| h.0);
            let data = self.scan_block(i, counters, &mut ahead)?;
            let block = Block::new(&data, off).map_err(|e| e.in_file(&self.path, 0))?;
            let entries = block.iter().collect::<Result<Vec<_>>>();
            out.extend(entries.map_err(|e| e.in_file(&self.path, 0))?);
        }
        Ok(())
    }
}
