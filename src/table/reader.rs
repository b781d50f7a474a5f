//! Reading a table file: footer, index and meta checked at open; data blocks read on demand.
//! The files by job: this one opens a table and reads, checks and caches its blocks;
//! `lookup` searches one for a key, `ahead` reads them for scans, `cursor` for compactions.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::Mmap;

use super::block::{self, Block, Entry};
use super::compress;
use super::footer::{decode_footer, Footer, FOOTER_LEN};
use super::index::{mapped_entry, Index};
use super::scratch;
use super::split;
use super::BlockCache;
use super::{page_pad, TableCounters, TableMeta};
use crate::cache::BlockKey;
use crate::codec::{check_crc, le_u32, le_u64, prefix8, Cursor};
use crate::error::{Error, Result};
use crate::Slice;

mod ahead;
mod cursor;
mod expiring;
mod lookup;
mod shared;

pub(crate) use ahead::ReadAhead;
pub use cursor::TableCursor;
pub(crate) use shared::BlockBytes;

thread_local! {
    /// Each thread's buffer for point-lookup block reads (no allocation or zeroing per read).
    static READ_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    /// Each thread's buffer for decompressed blocks.
    static PLAIN_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// An open table file: the meta and the index's search structure stay in memory (a
/// version 3 table's index entries are read in place from a map of the file), data blocks
/// are read on demand, each read counted, its CRC checked and (version 4) decompressed: with
/// a positioned read into a per-thread buffer, or, when the table was opened with
/// `mmap_reads`, in place from the map. With a block cache (see [`Table::with_cache`]),
/// blocks are looked up there first.
#[derive(Debug)]
pub struct Table {
    path: PathBuf,
    file: File,
    /// Format version (from the footer): 4 and up carry a codec byte per data block.
    version: u32,
    /// The store's block cache and this table's file number in it.
    cache: Option<(Arc<BlockCache>, u64)>,
    /// The whole file, mapped read-only (for a version 3 index, or `mmap_reads`).
    map: Option<Arc<Mmap>>,
    /// The same map, shared (with `mmap_reads`): a raw block read in place is a view of it.
    map_bytes: Option<BlockBytes>,
    /// Data blocks are read from `map` rather than with `pread`.
    map_data: bool,
    /// Where the data blocks (and their padding) end.
    pub(crate) index_offset: u64,
    pub(crate) index: Index,
    /// Key range and counts.
    pub meta: TableMeta,
}

impl Table {
    /// Opens and checks footer, index and meta of the table at `path`. With `mmap_reads`,
    /// data blocks are read in place from a map of the file (advised for random access, so a
    /// block that is not cached faults in only its own pages) instead of with `pread`.
    pub fn open(path: &Path, mmap_reads: bool) -> Result<Table> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
        let (mut table, restarts) =
            Self::open_file(file, size, path).map_err(|e| e.in_file(path, 0))?;
        if mmap_reads || restarts.is_some() {
            let map = crate::mmap::map_readonly(&table.file).map_err(|e| Error::io(path, e))?;
            if (map.len() as u64) < size {
                return Err(
                    Error::corrupt(0, "table file shrank while it was opened").in_file(path, 0)
                );
            }
            map.advise(memmap2::Advice::Random)
                .map_err(|e| Error::io(path, e))?;
            let map = Arc::new(map);
            if let Some(restarts) = restarts {
                let block = table.index_offset as usize;
                table.index.use_map(map.clone(), block, restarts);
            }
            if mmap_reads {
                table.map_bytes = Some(BlockBytes::mapped(map.clone()));
            }
            table.map = Some(map);
            table.map_data = mmap_reads;
        }
        Ok(table)
    }

    /// This table with its data blocks cached in `cache` under file number `number` (which
    /// no other table of the store ever has: file numbers are never reused).
    pub(crate) fn with_cache(mut self, cache: Arc<BlockCache>, number: u64) -> Table {
        self.cache = Some((cache, number));
        self
    }

    /// This table with a block cache of its own of `bytes` bytes (none for 0): a table read
    /// outside a store takes the paths a store's lookups take (a cache miss, its admission,
    /// a hit). For the fuzzing harness (the `internals` feature).
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn with_block_cache(self, bytes: usize) -> Table {
        match super::BlockCache::new(bytes) {
            Some(cache) => self.with_cache(Arc::new(cache), 1),
            None => self,
        }
    }

    /// Opens and checks the table in `file`; for a version 3 table also returns where its
    /// index block's restart array starts (the index is then read in place from a map).
    fn open_file(file: File, size: u64, path: &Path) -> Result<(Table, Option<usize>)> {
        if size < FOOTER_LEN as u64 {
            return Err(Error::corrupt(
                0,
                format!("table of {size} bytes is shorter than its footer"),
            ));
        }
        let foot_at = size - FOOTER_LEN as u64;
        let mut footer = [0u8; FOOTER_LEN];
        file.read_exact_at(&mut footer, foot_at)
            .map_err(|e| Error::io(path, e))?;
        let Footer {
            version,
            index_offset: index_off,
            index_len,
            meta_offset: meta_off,
            meta_len,
        } = decode_footer(&footer, foot_at)?;
        // Whether a block (or the index) may start at `start` after a block ending at `end`:
        // at once, or (version 2) at the next page boundary.
        let follows = |end: u64, start: u64| {
            start == end || (version >= 2 && Some(start) == end.checked_add(page_pad(end) as u64))
        };
        // Index, its CRC, meta and its CRC are contiguous just before the footer.
        let end = |off: u64, len: u64| off.checked_add(len).and_then(|x| x.checked_add(4));
        if end(index_off, index_len) != Some(meta_off) || end(meta_off, meta_len) != Some(foot_at) {
            return Err(Error::corrupt(
                foot_at + 8,
                "footer regions do not tile the file",
            ));
        }
        let mut tail = vec![0u8; (foot_at - index_off) as usize];
        file.read_exact_at(&mut tail, index_off)
            .map_err(|e| Error::io(path, e))?;
        let (index_bytes, rest) = tail.split_at(index_len as usize);
        let (index_crc, rest) = rest.split_at(4);
        let (meta_bytes, meta_crc) = rest.split_at(meta_len as usize);
        check_crc(index_bytes, le_u32(index_crc, 0), index_off, "index block")?;
        check_crc(meta_bytes, le_u32(meta_crc, 0), meta_off, "table meta")?;
        let mut index = Index::default();
        let mut prev_end = 0u64;
        // Data bytes as stored (payloads: version 4 handles also count the codec byte).
        let mut stored_data = 0u64;
        for e in Block::new(index_bytes, index_off)?.iter() {
            let (last_key, v) = e?;
            let v = v.filter(|v| v.len() == 12).ok_or_else(|| {
                Error::corrupt(index_off, "index entry without a 12-byte block handle")
            })?;
            let (offset, len) = (le_u64(&v, 0), le_u32(&v, 8));
            let block_end = offset.saturating_add(len as u64 + 4);
            if !follows(prev_end, offset) || block_end > index_off {
                return Err(Error::corrupt(
                    index_off,
                    format!(
                        "index entry points at block {offset}+{len}, out of order or past the data"
                    ),
                ));
            }
            if index.len() > 0 && index.key(index.len() - 1) >= last_key.as_slice() {
                return Err(Error::corrupt(
                    index_off,
                    "index keys are not strictly increasing",
                ));
            }
            if version >= 4 && len == 0 {
                return Err(Error::corrupt(
                    index_off,
                    format!("index entry points at block {offset}+0, without its codec byte"),
                ));
            }
            stored_data += len as u64 - u64::from(version >= 4);
            prev_end = block_end;
            index.push(&last_key, offset, len);
        }
        // Version 3: every entry is a restart point, so entry i is reachable through the
        // restart array; check that each one decodes there to what was read above.
        let restarts = if version >= 3 {
            let b = Block::new(index_bytes, index_off)?;
            if b.restart_count() != index.len() {
                return Err(Error::corrupt(
                    index_off,
                    format!(
                        "version 3 index has {} restart points for {} entries",
                        b.restart_count(),
                        index.len()
                    ),
                ));
            }
            for i in 0..index.len() {
                let at = b.restart(i) as usize;
                let ok = mapped_entry(index_bytes, at)
                    .is_some_and(|(k, h)| k == index.key(i) && Some(h) == index.handle(i));
                if !ok {
                    return Err(Error::corrupt(
                        index_off + at as u64,
                        "version 3 index entry is not a whole key and 12-byte handle",
                    ));
                }
            }
            Some(index_off as usize + b.entries_len())
        } else {
            None
        };
        index.finish();
        if !follows(prev_end, index_off) {
            return Err(Error::corrupt(
                index_off,
                "index does not cover every data block",
            ));
        }
        let mut c = Cursor::new(meta_bytes, meta_off);
        let key = |c: &mut Cursor| -> Result<Vec<u8>> {
            let n = c.len(meta_bytes.len(), "key length")?;
            Ok(c.bytes(n, "key")?.to_vec())
        };
        let min_key = key(&mut c)?;
        let max_key = key(&mut c)?;
        let (entries, tombstones) = (c.varint("entries")?, c.varint("tombstones")?);
        let data_blocks = c.varint("data blocks")?;
        // Version 4 records the blocks' bytes before compression; before it, none was.
        let data_bytes = if version >= 4 {
            c.varint("data bytes")?
        } else {
            stored_data
        };
        let (expiring, expiring_bytes, earliest_expiry, latest_expiry) =
            expiring::meta_facts(&mut c, version)?;
        if version >= 4 && !c.is_empty() {
            return Err(c.err("bytes after the table meta"));
        }
        let meta = TableMeta {
            min_key,
            max_key,
            entries,
            tombstones,
            data_blocks,
            data_bytes,
            stored_data_bytes: stored_data,
            file_bytes: size,
            expiring,
            expiring_bytes,
            earliest_expiry,
            latest_expiry,
        };
        if meta.data_blocks != index.len() as u64 {
            return Err(Error::corrupt(
                meta_off,
                "meta block count disagrees with the index",
            ));
        }
        // The store sizes filters and buffers by these counts: bound them by the bytes that
        // hold them. A block decodes to at most MAX_BLOCK_LEN bytes, and to at most its
        // codec's densest ratio times its stored bytes; an entry takes at least 3 bytes (its
        // three lengths); a block holds at most MAX_BLOCK_ENTRIES; a tombstone is an entry.
        let most_data = (stored_data.saturating_mul(compress::ZSTD_MAX_RATIO as u64)).min(
            meta.data_blocks
                .saturating_mul(compress::MAX_BLOCK_LEN as u64),
        );
        if meta.data_bytes > most_data.max(stored_data)
            || meta.entries > meta.data_bytes / 3
            || meta.entries > meta.data_blocks.saturating_mul(super::MAX_BLOCK_ENTRIES)
            || meta.tombstones > meta.entries
            || meta.expiring > meta.entries - meta.tombstones
            || meta.expiring_bytes > meta.data_bytes
        {
            return Err(Error::corrupt(
                meta_off,
                format!(
                    "meta claims {} entries ({} tombstones) in {} data bytes, \
                     more than {} blocks of {stored_data} stored bytes hold",
                    meta.entries, meta.tombstones, meta.data_bytes, meta.data_blocks
                ),
            ));
        }
        Ok((
            Table {
                path: path.to_path_buf(),
                file,
                version,
                cache: None,
                map: None,
                map_bytes: None,
                map_data: false,
                index_offset: index_off,
                index,
                meta,
            },
            restarts,
        ))
    }

    /// Heap bytes this table's index takes (the search structure; for tables before version
    /// 3, also the keys and handles).
    pub fn index_memory_bytes(&self) -> u64 {
        self.index.heap_bytes() as u64
    }

    /// Number of data blocks.
    pub fn block_count(&self) -> usize {
        self.index.len()
    }

    /// File offset and length (its CRC not included) of data block `i`, as the index says.
    pub fn block_span(&self, i: usize) -> Option<(u64, u32)> {
        self.index.handle(i)
    }

    /// The path this table was opened from.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Checks that the padding between data blocks (and before the index) is all zeros.
    /// Readers never look at it; `verify` does, so damage there is still found.
    pub fn check_padding(&self) -> Result<()> {
        let n = self.index.len();
        let h: Vec<(u64, u32)> = (0..n).filter_map(|i| self.index.handle(i)).collect();
        let next = (1..h.len()).map(|i| h[i].0);
        let mut gap = Vec::new();
        for (&(off, len), next) in h.iter().zip(next.chain([self.index_offset])) {
            // `Table::open` checked that `next` is `end` or the next page boundary.
            let end = off + len as u64 + 4;
            gap.resize(next.saturating_sub(end) as usize, 0);
            self.file
                .read_exact_at(&mut gap, end)
                .map_err(|e| Error::io(&self.path, e))?;
            if let Some(at) = gap.iter().position(|&b| b != 0) {
                return Err(
                    Error::corrupt(end + at as u64, "non-zero padding after a data block")
                        .in_file(&self.path, 0),
                );
            }
        }
        Ok(())
    }

    /// Reads data block `i` as stored (into `buf`, reused, only growth zero-filled; or in
    /// place from the map), counts the read, checks its CRC and returns the stored bytes
    /// (version 4: the payload and the codec byte) and their file offset.
    fn read_stored<'b>(
        &'b self,
        i: usize,
        counters: &TableCounters,
        buf: &'b mut Vec<u8>,
    ) -> Result<(&'b [u8], u64)> {
        let Some((offset, len)) = self.index.handle(i) else {
            return Err(Error::Internal(format!("block {i} out of range")));
        };
        let need = len as usize + 4;
        let raw: &'b [u8] = match &self.map {
            // `Table::open` checked every block lies inside the file, and the map covers it.
            // (A handle read in place that no longer decodes is (0, 0): its CRC check fails.)
            Some(map) if self.map_data => map
                .get(offset as usize..offset as usize + need)
                .ok_or_else(|| {
                    Error::corrupt(offset, "data block past the end of the map")
                        .in_file(&self.path, 0)
                })?,
            _ => {
                if buf.len() < need {
                    buf.resize(need, 0);
                }
                let raw = &mut buf[..need];
                self.file
                    .read_exact_at(raw, offset)
                    .map_err(|err| Error::io(&self.path, err))?;
                raw
            }
        };
        Ok((self.checked(raw, offset, counters)?, offset))
    }

    /// The stored bytes of the block in `raw` (the block and its CRC, read from `offset`),
    /// once the CRC matches; counts the read.
    fn checked<'b>(
        &self,
        raw: &'b [u8],
        offset: u64,
        counters: &TableCounters,
    ) -> Result<&'b [u8]> {
        counters.add_block_reads(1);
        counters.add_bytes_read(raw.len() as u64);
        let (data, crc) = raw.split_at(raw.len().saturating_sub(4));
        check_crc(data, le_u32(crc, 0), offset, "data block")
            .map_err(|err| err.in_file(&self.path, 0))?;
        Ok(data)
    }

    /// The block held by the stored bytes of a block at `offset` (checked), decompressed if
    /// it is compressed, as shared bytes on the heap.
    fn heap_block(&self, stored: &[u8], offset: u64) -> Result<BlockBytes> {
        scratch::with(&PLAIN_BUF, |plain| {
            let data = self.decode(stored, offset, plain)?;
            Ok(BlockBytes::copied(data))
        })
    }

    /// The length of the block `stored` holds (as [`Table::read_stored`] returns it) when
    /// it is stored raw, a prefix of `stored`: `None` for a compressed block.
    fn raw_len(&self, stored: &[u8]) -> Option<usize> {
        match self.version {
            ..4 => Some(stored.len()),
            _ => (stored.last() == Some(&compress::CODEC_NONE)).then(|| stored.len() - 1),
        }
    }

    /// The block held by the stored bytes of a block at `offset`: in place, or (a compressed
    /// version 4 block) decompressed into `plain`.
    fn decode<'b>(
        &self,
        stored: &'b [u8],
        offset: u64,
        plain: &'b mut Vec<u8>,
    ) -> Result<&'b [u8]> {
        if self.version < 4 {
            return Ok(stored);
        }
        compress::decode(stored, offset, plain).map_err(|e| e.in_file(&self.path, 0))
    }

    /// Data block `i`, verified: from the store's block cache when it holds it, else read
    /// from the file, CRC-checked, decompressed and counted, and inserted into the cache
    /// when `fill_cache` is true (and the cache admits it: see `cache.rs`).
    ///
    /// Counted in `counters`: a cache hit as a hit; otherwise, with a cache, a miss, and
    /// always the read from the file (a data-block read and its bytes).
    pub(crate) fn block(
        &self,
        i: usize,
        counters: &TableCounters,
        fill_cache: bool,
    ) -> Result<BlockBytes> {
        self.through_cache(i, counters, fill_cache, touch, |owned| {
            self.read_block(i, counters, owned)
        })
    }

    /// Data block `i` from the store's block cache when it holds it (counted as a hit), else
    /// read by `read` (with a cache, counted as a miss) and inserted into the cache when
    /// `fill_cache` is true and the cache admits it. `read(owned)`: `owned` is true when the
    /// block will be cached, which holds only copies (see [`Table::read_block`]). A hit is
    /// brought into the CPU's caches with `warm` ([`touch`], or a scan's [`prefetch`]).
    fn through_cache(
        &self,
        i: usize,
        counters: &TableCounters,
        fill_cache: bool,
        warm: fn(&[u8]),
        read: impl FnOnce(bool) -> Result<BlockBytes>,
    ) -> Result<BlockBytes> {
        let Some((cache, file)) = &self.cache else {
            return read(false);
        };
        let key = BlockKey {
            file: *file,
            block: i as u64,
        };
        if let Some(b) = cache.get(&key) {
            counters.add_cache_hits(1);
            warm(&b);
            return Ok(b);
        }
        counters.add_cache_misses(1);
        let admit = fill_cache && cache.admit(&key, self.cached_len(i));
        let b = read(admit)?;
        if admit {
            cache.insert(key, b.clone());
        }
        Ok(b)
    }

    /// About the bytes block `i` takes in the block cache, known before it is read: its
    /// stored length, scaled by the table's ratio of bytes before compression to bytes as
    /// stored (a compressed block is cached decompressed; counting its stored length kept
    /// a full cache of LZ4 blocks "filling", admitting every miss, for ~60 % longer).
    /// At most [`compress::MAX_BLOCK_LEN`] (a block a damaged index claims larger fails its
    /// read).
    pub(crate) fn cached_len(&self, i: usize) -> usize {
        let stored = self.index.handle(i).map_or(0, |h| u64::from(h.1));
        let m = &self.meta;
        let total = m.stored_data_bytes.max(1);
        let scaled = if m.data_bytes <= total {
            stored // nothing compressed (or nothing shrank)
        } else {
            match stored.checked_mul(m.data_bytes) {
                Some(x) => x / total,
                // More than 4 GiB of data in the table.
                None => {
                    let x = u128::from(stored) * u128::from(m.data_bytes) / u128::from(total);
                    u64::try_from(x).unwrap_or(u64::MAX)
                }
            }
        };
        let most = compress::MAX_BLOCK_LEN as u64;
        usize::try_from(scaled.max(stored).min(most)).unwrap_or(0)
    }

    /// Reads block `i` from the file (counted, CRC-checked, decompressed) into shared bytes:
    /// in place in the map for a raw block of a table opened with `mmap_reads` (unless
    /// `owned`), else a copy. The cache holds only copies: a view would keep the map, and
    /// with it the file's disk space, alive after compaction removed the table.
    fn read_block(&self, i: usize, counters: &TableCounters, owned: bool) -> Result<BlockBytes> {
        scratch::with(&READ_BUF, |buf| {
            let (stored, offset) = self.read_stored(i, counters, buf)?;
            if let Some(map) = self.map_bytes.as_ref().filter(|_| self.map_data && !owned) {
                if let Some(len) = self.raw_len(stored) {
                    // `read_stored` took the block from `map[offset..offset + len + 4]`.
                    let at = offset as usize;
                    return Ok(map.slice(at..at + len));
                }
            }
            self.heap_block(stored, offset)
        })
    }

    /// The index of the only block that can hold `key` (the first whose last key >= key).
    pub fn block_for(&self, key: &[u8]) -> Option<usize> {
        let i = self.index.search(key);
        (i < self.index.len()).then_some(i)
    }

    /// Decodes every entry of block `i` (read through the cache, filling it, when the table
    /// has one).
    pub fn block_entries(&self, i: usize, counters: &TableCounters) -> Result<Vec<Entry>> {
        let entries = self.block_entries_exp(i, counters)?;
        Ok(entries.into_iter().map(|(e, _)| e).collect())
    }
}

/// An LZ4 prefix decoder over a block's `payload` (at file offset `at`) and the start of
/// `plain`, grown to the block's claimed length, for the decoder to fill.
#[inline]
fn prefix_decoder<'a, 'b>(
    payload: &'a [u8],
    at: u64,
    plain: &'b mut Vec<u8>,
) -> Result<(compress::Lz4Prefix<'a>, &'b mut [u8])> {
    let (dec, raw_len) = compress::Lz4Prefix::new(payload, at)?;
    if plain.len() < raw_len {
        plain.resize(raw_len, 0);
    }
    Ok((dec, &mut plain[..raw_len]))
}

/// Loads one byte of every cache line of `b`: independent loads that bring a cached block
/// into the CPU's caches together, before a cursor's binary search and entry decoding would
/// wait for its lines one after another (see `Table::get`, which copies a hit for the same
/// reason).
#[inline]
fn touch(b: &[u8]) {
    let mut x = 0u8;
    for line in b.chunks(64) {
        x ^= line[0];
    }
    std::hint::black_box(x);
}

/// As [`touch`], without waiting for the lines (a prefetch of each): what a scan does with
/// a cached block, whose cursor goes on at once (its search over the block's restarts) while
/// the rest of the block comes in. On E-like scans 0.973x the CPU time per scan of `touch`
/// (12 alternating pairs, medians); without either, 1.1x the time.
#[inline]
fn prefetch(b: &[u8]) {
    for line in b.chunks(64) {
        crate::filter::prefetch_ref(&line[0]);
    }
}

#[cfg(test)]
mod tests {
    use super::cursor::next_head;
    use super::*;

    /// `next_head` agrees with `prefix8` of the rebuilt key for every split of short and
    /// long keys into a shared prefix and a suffix.
    #[test]
    fn next_head_is_the_prefix_of_the_rebuilt_key() {
        let keys: [&[u8]; 6] = [
            b"",
            b"a",
            b"abcdefg",
            b"abcdefgh",
            b"abcdefghij",
            b"\xff\x00\xfe",
        ];
        for prev in keys {
            for key in keys {
                for shared in 0..=prev.len().min(key.len()) {
                    if prev[..shared] != key[..shared] {
                        continue;
                    }
                    let got = next_head(prefix8(prev), shared, &key[shared..]);
                    assert_eq!(got, prefix8(key), "{prev:?} -> {key:?} sharing {shared}");
                }
            }
        }
    }
}

#[cfg(test)]
mod read_ahead_tests {
    use super::ahead::{SCAN_READ, SPARE, SPARE_BUFS};
    use super::*;
    use crate::io::RealFs;
    use crate::table::{write_table, Compression};

    /// Bytes the spare read-ahead buffers of this thread hold.
    fn spare_bytes() -> usize {
        SPARE.with(|s| s.borrow().iter().map(Vec::capacity).sum())
    }

    /// 200 keys, `k0000` to `k0199`.
    pub(super) fn keys() -> Vec<Vec<u8>> {
        (0..200).map(|i| format!("k{i:04}").into_bytes()).collect()
    }

    /// Entries of `keys`, each with a 100-byte value but the 78th, whose value is `big`.
    pub(super) fn with_one_large_value<'a>(
        keys: &'a [Vec<u8>],
        big: &'a [u8],
    ) -> Vec<(&'a [u8], Option<&'a [u8]>)> {
        const SMALL: [u8; 100] = [b'v'; 100];
        keys.iter()
            .enumerate()
            .map(|(i, k)| (k.as_slice(), Some(if i == 77 { big } else { &SMALL[..] })))
            .collect()
    }

    /// A block longer than [`SCAN_READ`] (a large value) is read whole, and every block
    /// read through [`Table::scan_block`] is the block [`Table::block`] reads; what a thread
    /// keeps for later scans stays within `SPARE_BUFS` buffers of `SCAN_READ` bytes however
    /// large the blocks its scans read, and so does each scan's buffer.
    #[test]
    fn read_ahead_buffers_stay_small_after_a_large_block() {
        let dir = tempfile::tempdir().unwrap();
        let big: Vec<u8> = (0..1u32 << 20)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        let keys = keys();
        let entries = with_one_large_value(&keys, &big);
        let path = dir.path().join("big.sst");
        write_table(&RealFs, &path, entries.as_slice(), Compression::None).unwrap();
        let t = Table::open(&path, false).unwrap().with_block_cache(0);
        let largest = (0..t.block_count())
            .filter_map(|i| t.block_span(i))
            .map(|s| s.1 as usize)
            .max()
            .unwrap();
        assert!(largest > 1 << 20, "a block of {largest} bytes");
        let c = TableCounters::default();
        let mut scans = Vec::new();
        for _ in 0..2 * SPARE_BUFS {
            let mut ahead = ReadAhead::default();
            for i in 0..t.block_count() {
                let got = t.scan_block(i, &c, &mut ahead).unwrap();
                assert_eq!(&*got, &*t.block(i, &c, false).unwrap(), "block {i}");
                let held = ahead.held();
                assert!(held <= SCAN_READ, "block {i}: a buffer of {held} bytes");
            }
            scans.push(ahead);
        }
        drop(scans);
        let kept = spare_bytes();
        assert!(kept <= SPARE_BUFS * SCAN_READ, "{kept} bytes kept");
    }

    /// A reverse scan's read brings in the blocks before the block it asked for: walking a
    /// table backward, every block is the block [`Table::block`] reads, and a block of 100-byte
    /// values comes from the read-ahead unless it is the last of the table or follows the
    /// large block (which is read alone). Forward likewise, with the blocks after.
    #[test]
    fn read_ahead_goes_both_ways() {
        let dir = tempfile::tempdir().unwrap();
        let big = vec![7u8; 64 << 10];
        let keys = keys();
        let path = dir.path().join("t.sst");
        let entries = with_one_large_value(&keys, &big);
        write_table(&RealFs, &path, entries.as_slice(), Compression::None).unwrap();
        let t = Table::open(&path, false).unwrap().with_block_cache(0);
        let n = t.block_count();
        let large = (0..n).find(|&i| t.block_span(i).unwrap().1 as usize > SCAN_READ);
        let large = large.expect("the large value's block");
        assert!(
            n > 6 && large > 2 && large + 3 < n,
            "{n} blocks, large at {large}"
        );
        let c = TableCounters::default();
        for rev in [false, true] {
            let mut ahead = ReadAhead::default();
            let mut from_file = Vec::new();
            let order: Vec<usize> = if rev {
                (0..n).rev().collect()
            } else {
                (0..n).collect()
            };
            for i in order {
                let was_ahead = ahead.blocks.contains(&i);
                let got = if rev {
                    t.scan_block_back(i, &c, &mut ahead).unwrap()
                } else {
                    t.scan_block(i, &c, &mut ahead).unwrap()
                };
                assert_eq!(
                    &*got,
                    &*t.block(i, &c, false).unwrap(),
                    "block {i}, rev {rev}"
                );
                if !was_ahead {
                    from_file.push(i);
                }
            }
            // Reads from the file: the first block asked for, the large block, the block
            // after it in the scan's direction, and then one read per SCAN_READ bytes of
            // blocks (raw blocks are cut at about 2 KiB: two blocks a read).
            let expected = if rev {
                [n - 1, large, large - 1]
            } else {
                [0, large, large + 1]
            };
            for e in expected {
                assert!(from_file.contains(&e), "rev {rev}: {from_file:?} lacks {e}");
            }
            assert!(
                from_file.len() * 3 < n * 2,
                "rev {rev}: {from_file:?} of {n} blocks"
            );
        }
    }
}

#[cfg(test)]
mod thread_buffer_tests {
    use super::*;
    use crate::io::RealFs;
    use crate::table::scratch::{held, KEEP};
    use crate::table::{write_table, Compression};

    /// Capacities of this thread's block buffers: read, decompressed, split form.
    fn buffers() -> [usize; 3] {
        [
            held(&READ_BUF),
            held(&PLAIN_BUF),
            held(&compress::SPLIT_BUF),
        ]
    }

    /// After a lookup or a whole-block read of a table holding a 1 MiB value (raw, LZ4 and
    /// zstd blocks; with and without a block cache; read with `pread` and in place), each of
    /// the thread's block buffers holds at most [`KEEP`] bytes; a lookup in a block of small
    /// entries keeps its buffer for the next one.
    #[test]
    fn thread_buffers_give_back_a_large_block() {
        let dir = tempfile::tempdir().unwrap();
        // 64-byte pieces drawn from 32: every codec shrinks it, none to nothing.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let pieces: Vec<Vec<u8>> = (0..32)
            .map(|_| (0..64).map(|_| next() as u8).collect())
            .collect();
        let mut big = Vec::with_capacity(1 << 20);
        while big.len() < 1 << 20 {
            big.extend_from_slice(&pieces[(next() % 32) as usize]);
        }
        let keys = super::read_ahead_tests::keys();
        let entries = super::read_ahead_tests::with_one_large_value(&keys, &big);
        for codec in Compression::ALL {
            let path = dir.path().join(format!("{}.sst", codec.name()));
            write_table(&RealFs, &path, entries.as_slice(), codec).unwrap();
            for mmap_reads in [false, true] {
                for cache in [0, 8 << 20] {
                    let case = format!("{} mmap_reads {mmap_reads} cache {cache}", codec.name());
                    let t = Table::open(&path, mmap_reads)
                        .unwrap()
                        .with_block_cache(cache);
                    let i = t.block_for(&keys[77]).unwrap();
                    let stored = t.block_span(i).unwrap().1 as usize;
                    match codec {
                        Compression::None => assert!(stored > 1 << 20, "{case}: {stored}"),
                        _ => assert!(stored < 1 << 19, "{case}: stored {stored} bytes"),
                    }
                    let c = TableCounters::default();
                    let check = |what: &str| {
                        let b = buffers();
                        assert!(b.iter().all(|&n| n <= KEEP), "{case}, {what}: {b:?}");
                    };
                    // Twice: a miss, then (with a cache that admits it) a hit.
                    for _ in 0..2 {
                        let got = t.get(&keys[77], &c).unwrap().map(|v| v.map(Vec::from));
                        assert_eq!(got, Some(Some(big.clone())), "{case}");
                        check("get");
                    }
                    for j in 0..t.block_count() {
                        let n = t.block_entries(j, &c).unwrap().len();
                        assert!(n > 0, "{case}: block {j}");
                        check("block_entries");
                    }
                    let mut all = Vec::new();
                    t.scan_entries(&c, &mut all).unwrap();
                    assert_eq!(all.len(), keys.len(), "{case}");
                    check("scan");
                    // A block of small entries: the buffer it was read into stays.
                    assert_eq!(
                        t.get(&keys[3], &c).unwrap().map(|v| v.map(Vec::from)),
                        Some(Some(vec![b'v'; 100]))
                    );
                    check("a small get");
                    if !mmap_reads && cache == 0 {
                        assert!(held(&READ_BUF) > 0, "{case}: the read buffer was dropped");
                    }
                }
            }
        }
    }
}
