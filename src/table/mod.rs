//! Sorted, immutable table files (`NNNNNN.sst`) and their filter files (`NNNNNN.filter`).
//!
//! ```text
//! | data block | crc u32 | pad | data block | crc u32 | pad | ... |  <- from offset 0, ≤ 4 KiB each
//! | index block | crc u32 |                               <- last key of each data block -> handle
//! | meta | crc u32 |                                      <- key range and counts
//! | footer (64 bytes) |                                   <- fixed size, at the end
//! ```
//! The filter of a table is a separate file holding one filter block, so `refilter` can
//! replace it (new file + manifest swap) without rewriting the table's data.

pub mod block;

use std::cmp::Ordering;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use self::block::{Block, BlockBuilder, Entry};
use crate::codec::{check_crc, put_varint, Cursor};
pub use crate::counters::TableCounters;
use crate::error::{Error, Result};
use crate::filter::{self, Filter, FilterKind, Header};
use crate::io::{Fs, WritableFile};

/// Magic at the start of a table footer.
pub const TABLE_MAGIC: [u8; 4] = *b"FSTB";
/// Magic at the very end of a table file.
pub const TABLE_END_MAGIC: [u8; 4] = *b"FSTE";
/// Table format version written (version 1, still read, packed blocks back to back).
pub const TABLE_VERSION: u32 = 2;
/// Footer size.
pub const FOOTER_LEN: usize = 64;
/// Page size of the table layout: a data block and its CRC fit in one page unless a single
/// entry is larger, and a block is followed by zero padding up to the next page boundary
/// when that takes at most [`MAX_PAD`] bytes, so reading a block of small entries touches
/// one page of the file, not two (see `format.md`).
pub const BLOCK_SIZE: usize = 4096;
/// Most zero bytes written after a block to start the next one on a page (an eighth of a
/// page: with larger entries, blocks follow each other unaligned instead of wasting space).
pub const MAX_PAD: usize = BLOCK_SIZE / 8;
/// Entries per run encoded by one task when a table is written: a block never spans two
/// runs, and the run length does not depend on the thread count, so neither does the file.
const RUN: usize = 32 * 1024;

/// Zero bytes after a block that ends at `end`, up to the next page boundary.
fn page_pad(end: u64) -> usize {
    (end.wrapping_neg() % BLOCK_SIZE as u64) as usize
}
const WRITE_BUFFER: usize = 1 << 20;

/// Table-wide facts, kept in the table's meta section and in the manifest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableMeta {
    /// Smallest key.
    pub min_key: Vec<u8>,
    /// Largest key.
    pub max_key: Vec<u8>,
    /// Entries, tombstones included.
    pub entries: u64,
    /// Tombstones.
    pub tombstones: u64,
    /// Data blocks.
    pub data_blocks: u64,
    /// File size in bytes.
    pub file_bytes: u64,
}

/// Writes one table file from parts encoded by [`encode_part`], then its index, meta and
/// footer (see [`write_table`]).
struct TableBuilder {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    buf: Vec<u8>,
    offset: u64,
    index: BlockBuilder,
    meta: TableMeta,
}

impl TableBuilder {
    /// Creates the file at `path`.
    fn create(fs: &dyn Fs, path: &Path) -> Result<TableBuilder> {
        let file = fs.create(path).map_err(|e| Error::io(path, e))?;
        Ok(TableBuilder {
            file,
            path: path.to_path_buf(),
            buf: Vec::with_capacity(WRITE_BUFFER + BLOCK_SIZE * 2),
            offset: 0,
            index: BlockBuilder::default(),
            meta: TableMeta::default(),
        })
    }

    fn write_with_crc(&mut self, data: &[u8]) -> Result<()> {
        self.buf.extend_from_slice(data);
        self.buf
            .extend_from_slice(&crc32fast::hash(data).to_le_bytes());
        self.offset += data.len() as u64 + 4;
        if self.buf.len() >= WRITE_BUFFER {
            self.flush_buf()?;
        }
        Ok(())
    }

    fn flush_buf(&mut self) -> Result<()> {
        self.file
            .write_all(&self.buf)
            .map_err(|e| Error::io(&self.path, e))?;
        self.buf.clear();
        Ok(())
    }

    /// Appends blocks encoded elsewhere (see [`write_table`]); they must follow every key
    /// added so far. Returns the part's buffer for reuse.
    fn add_part(&mut self, part: Part) -> Result<Vec<u8>> {
        if part.entries == 0 {
            return Ok(part.bytes);
        }
        debug_assert_eq!(page_pad(self.offset), 0, "parts start on a page");
        if self.meta.entries == 0 {
            self.meta.min_key = part.first_key;
        }
        self.meta.entries += part.entries;
        self.meta.tombstones += part.tombstones;
        for (last, rel, len) in part.index {
            let mut handle = [0u8; 12];
            handle[..8].copy_from_slice(&(self.offset + rel).to_le_bytes());
            handle[8..].copy_from_slice(&len.to_le_bytes());
            self.index.add(&last, Some(&handle));
            self.meta.max_key = last;
            self.meta.data_blocks += 1;
        }
        // A part is large: it goes to the file as it is, without a copy into `buf`.
        if !self.buf.is_empty() {
            self.flush_buf()?;
        }
        self.file
            .write_all(&part.bytes)
            .map_err(|e| Error::io(&self.path, e))?;
        self.offset += part.bytes.len() as u64;
        Ok(part.bytes)
    }

    /// Writes index, meta and footer, fsyncs, and returns the table's facts.
    fn finish(mut self) -> Result<TableMeta> {
        let index_offset = self.offset;
        let index = self.index.finish();
        self.write_with_crc(&index)?;
        let meta_offset = self.offset;
        let mut meta = Vec::new();
        for k in [&self.meta.min_key, &self.meta.max_key] {
            put_varint(&mut meta, k.len() as u64);
            meta.extend_from_slice(k);
        }
        put_varint(&mut meta, self.meta.entries);
        put_varint(&mut meta, self.meta.tombstones);
        put_varint(&mut meta, self.meta.data_blocks);
        self.write_with_crc(&meta)?;
        let mut footer = Vec::with_capacity(FOOTER_LEN);
        footer.extend_from_slice(&TABLE_MAGIC);
        footer.extend_from_slice(&TABLE_VERSION.to_le_bytes());
        footer.extend_from_slice(&index_offset.to_le_bytes());
        footer.extend_from_slice(&(index.len() as u64).to_le_bytes());
        footer.extend_from_slice(&meta_offset.to_le_bytes());
        footer.extend_from_slice(&(meta.len() as u64).to_le_bytes());
        footer.extend_from_slice(&[0u8; 16]);
        footer.extend_from_slice(&crc32fast::hash(&footer).to_le_bytes());
        footer.extend_from_slice(&TABLE_END_MAGIC);
        debug_assert_eq!(footer.len(), FOOTER_LEN);
        self.buf.extend_from_slice(&footer);
        self.offset += FOOTER_LEN as u64;
        self.flush_buf()?;
        self.file.sync().map_err(|e| Error::io(&self.path, e))?;
        self.meta.file_bytes = self.offset;
        Ok(self.meta)
    }
}

/// Sorted, distinct entries a table is written from, read by position: a slice, or a
/// memtable's sorted view (so sealing copies no entry list out of the memtable).
pub trait SortedEntries: Sync {
    /// Number of entries.
    fn len(&self) -> usize;
    /// Entry `i` (`None` = tombstone).
    fn entry(&self, i: usize) -> (&[u8], Option<&[u8]>);
    /// About how many key and value bytes the entries hold (an over-estimate is fine; it
    /// sizes the encoding buffers).
    fn payload_bytes(&self) -> usize;
    /// True when there is no entry.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl SortedEntries for [(&[u8], Option<&[u8]>)] {
    fn len(&self) -> usize {
        <[_]>::len(self)
    }
    fn entry(&self, i: usize) -> (&[u8], Option<&[u8]>) {
        self[i]
    }
    fn payload_bytes(&self) -> usize {
        self.iter()
            .map(|(k, v)| k.len() + v.map_or(0, <[u8]>::len))
            .sum()
    }
}

/// Blocks encoded from a run of sorted entries, with offsets relative to the run's start.
struct Part {
    bytes: Vec<u8>,
    index: Vec<(Vec<u8>, u64, u32)>,
    first_key: Vec<u8>,
    entries: u64,
    tombstones: u64,
}

/// Encodes entries `range` into blocks (the format of [`BlockBuilder`], written in place
/// into `bytes`, which is cleared and reused).
fn encode_part<E: SortedEntries + ?Sized>(
    entries: &E,
    range: std::ops::Range<usize>,
    mut bytes: Vec<u8>,
) -> Part {
    let n = range.len();
    let per_entry = entries.payload_bytes() / entries.len().max(1) + 4;
    bytes.clear();
    bytes.reserve(n * per_entry + n / 2 + 64);
    let mut part = Part {
        bytes: Vec::new(),
        index: Vec::with_capacity(n * per_entry / BLOCK_SIZE + 2),
        first_key: Vec::new(),
        entries: n as u64,
        tombstones: 0,
    };
    if !range.is_empty() {
        part.first_key = entries.entry(range.start).0.to_vec();
    }
    let mut restarts: Vec<u32> = Vec::with_capacity(BLOCK_SIZE / block::RESTART_INTERVAL);
    let (mut start, mut count) = (0usize, 0usize);
    let mut prev: &[u8] = &[];
    let cut = |bytes: &mut Vec<u8>,
               restarts: &mut Vec<u32>,
               index: &mut Vec<(Vec<u8>, u64, u32)>,
               start: usize,
               last: &[u8]| {
        block::put_restarts(bytes, restarts);
        restarts.clear();
        let len = bytes.len() - start;
        let crc = crc32fast::hash(&bytes[start..]);
        bytes.extend_from_slice(&crc.to_le_bytes());
        // Parts start on page boundaries, so padding within the part aligns in the file.
        let pad = page_pad(bytes.len() as u64);
        if pad <= MAX_PAD {
            bytes.resize(bytes.len() + pad, 0);
        }
        index.push((last.to_vec(), start as u64, len as u32));
    };
    // Entries come in batches: their bytes are first touched together, so the cache misses
    // of a batch (a memtable's entries lie at random places in its arena) overlap instead
    // of stalling the encoder one by one.
    const BATCH: usize = 16;
    let mut batch: [(&[u8], Option<&[u8]>); BATCH] = [(&[], None); BATCH];
    let mut at = range.start;
    while at < range.end {
        let m = BATCH.min(range.end - at);
        let mut touch = 0u8;
        for (j, e) in batch[..m].iter_mut().enumerate() {
            *e = entries.entry(at + j);
        }
        for (k, v) in &batch[..m] {
            touch ^= k.first().copied().unwrap_or(0);
            if let Some(v) = v {
                touch ^= v.last().copied().unwrap_or(0);
            }
        }
        std::hint::black_box(touch);
        at += m;
        for &(key, value) in &batch[..m] {
            let restart = count.is_multiple_of(block::RESTART_INTERVAL);
            let mut shared = if restart {
                0
            } else {
                block::common_prefix(key, prev)
            };
            // Cut before an entry that would push block + CRC past one page.
            let grown = block::finished_len(
                bytes.len() - start + block::entry_len(shared, key, value),
                restarts.len() + restart as usize,
            );
            if count > 0 && grown + 4 > BLOCK_SIZE {
                cut(&mut bytes, &mut restarts, &mut part.index, start, prev);
                start = bytes.len();
                count = 0;
                shared = 0;
            }
            if count.is_multiple_of(block::RESTART_INTERVAL) {
                restarts.push((bytes.len() - start) as u32);
            }
            block::put_entry(&mut bytes, shared, key, value);
            part.tombstones += value.is_none() as u64;
            count += 1;
            prev = key;
        }
    }
    if count > 0 {
        cut(&mut bytes, &mut restarts, &mut part.index, start, prev);
    }
    // The next part (or the index) starts on a page.
    bytes.resize(bytes.len() + page_pad(bytes.len() as u64), 0);
    part.bytes = bytes;
    part
}

/// Writes a table file from sorted, distinct entries (`None` = tombstone), encoding blocks
/// in parallel on the current rayon pool and writing them in order; fsynced on return.
///
/// Entries go in runs of [`RUN`], a window of one run per thread at a time; a window is
/// written while the next one is encoded, and the buffers of written parts are reused, so
/// memory stays bounded and the write (a copy into the page cache) overlaps encoding. The
/// bytes written do not depend on the number of threads.
pub fn write_table<E: SortedEntries + ?Sized>(
    fs: &dyn Fs,
    path: &Path,
    entries: &E,
) -> Result<TableMeta> {
    use rayon::prelude::*;
    let threads = rayon::current_num_threads().max(1);
    let n = entries.len();
    let chunk = RUN;
    let window = chunk * threads;
    let mut b = TableBuilder::create(fs, path)?;
    let mut pending: Vec<Part> = Vec::new();
    let mut spare: Vec<Vec<u8>> = Vec::new();
    let mut at = 0;
    while at < n || !pending.is_empty() {
        let end = (at + window).min(n);
        let jobs: Vec<(std::ops::Range<usize>, Vec<u8>)> = (at..end)
            .step_by(chunk)
            .map(|s| (s..(s + chunk).min(end), spare.pop().unwrap_or_default()))
            .collect();
        let to_write = std::mem::take(&mut pending);
        let builder = &mut b;
        let (written, parts) = rayon::join(
            move || -> Result<Vec<Vec<u8>>> {
                to_write.into_iter().map(|p| builder.add_part(p)).collect()
            },
            || -> Vec<Part> {
                jobs.into_par_iter()
                    .map(|(r, buf)| encode_part(entries, r, buf))
                    .collect()
            },
        );
        spare.extend(written?);
        pending = parts;
        at = end;
    }
    b.finish()
}

thread_local! {
    /// Each thread's buffer for point-lookup block reads (no allocation or zeroing per read).
    static READ_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The index kept in memory: last keys of all blocks in one buffer, each block's handle, and
/// a search structure over their "heads": for block `i`, the 8 bytes of its last key after
/// the prefix `lcp` that all last keys share, as a big-endian `u64` (zero-padded). Heads sit
/// 8 to a 64-byte line (the last line padded with `u64::MAX`), and `top` holds the last head
/// of each line: a lookup binary-searches `top` (small, so it stays cached), then counts in
/// one line. Whole keys are compared only among blocks whose head ties with the key's.
#[derive(Debug, Default)]
struct Index {
    keys: Vec<u8>,
    ends: Vec<usize>,
    handles: Vec<(u64, u32)>,
    lines: Vec<Line>,
    top: Vec<u64>,
    lcp: usize,
}

/// Heads per line of the index's search structure.
const LINE: usize = 8;

/// One cache line of heads.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Line([u64; LINE]);

impl Index {
    fn push(&mut self, last_key: &[u8], offset: u64, len: u32) {
        self.keys.extend_from_slice(last_key);
        self.ends.push(self.keys.len());
        self.handles.push((offset, len));
    }

    /// Builds the search structure once every block is pushed. Keys must be strictly
    /// increasing (checked by `Table::open`), so the prefix shared by the first and last key
    /// is shared by all.
    fn finish(&mut self) {
        let n = self.len();
        self.lcp = match n {
            0 => 0,
            _ => block::lcp_cmp(self.key(0), self.key(n - 1)).0,
        };
        let heads: Vec<u64> = (0..n)
            .map(|i| block::head(self.key(i).get(self.lcp..).unwrap_or_default()))
            .collect();
        self.lines = heads
            .chunks(LINE)
            .map(|c| {
                let mut line = Line([u64::MAX; LINE]);
                line.0[..c.len()].copy_from_slice(c);
                line
            })
            .collect();
        self.top = heads
            .chunks(LINE)
            .filter_map(|c| c.last().copied())
            .collect();
    }

    fn len(&self) -> usize {
        self.handles.len()
    }

    fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.keys[start..self.ends[i]]
    }

    fn head(&self, i: usize) -> u64 {
        self.lines[i / LINE].0[i % LINE]
    }

    /// The first block whose last key is >= `key` (`len()` when there is none).
    fn search(&self, key: &[u8]) -> usize {
        let n = self.len();
        if n == 0 {
            return 0;
        }
        // Every last key starts with `shared`; decide on it first.
        let k = key.len().min(self.lcp);
        if self.lcp > 0 {
            let shared = self.key(0).get(..self.lcp).unwrap_or_default();
            match block::lcp_cmp(&key[..k], shared.get(..k).unwrap_or_default()).1 {
                Ordering::Less => return 0,
                Ordering::Greater => return n,
                // `key` is a proper prefix of every last key, so below all of them.
                Ordering::Equal if k < self.lcp => return 0,
                Ordering::Equal => {}
            }
        }
        let h = block::head(&key[k..]);
        // The first line whose last head is >= h holds the first head >= h; padding
        // (u64::MAX) is never below h.
        let j = self.top.partition_point(|&x| x < h);
        let Some(line) = self.lines.get(j) else {
            return n;
        };
        // The block's handle is one of the line's 8 (128 bytes of handles, on two or three
        // cache lines): start loading the 1st and 5th now, so their misses overlap the line's
        // instead of following it.
        let first = j * LINE;
        let mut acc = 0;
        for h in self.handles[first..].iter().take(LINE).step_by(LINE / 2) {
            acc ^= h.1;
        }
        std::hint::black_box(acc);
        let lo = j * LINE + line.0.iter().filter(|&&x| x < h).count();
        if lo >= n || self.head(lo) != h {
            return lo;
        }
        // Ties on the 8 bytes: compare whole keys within the run of equal heads.
        let hi = first_false(lo, n, |i| self.head(i) == h);
        first_false(lo, hi, |i| self.key(i) < key)
    }
}

/// The first `i` in `lo..hi` for which `pred` is false (`hi` if none), where `pred` is true
/// on a prefix of the range and false after it.
fn first_false(mut lo: usize, mut hi: usize, pred: impl Fn(usize) -> bool) -> usize {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// An open table file: the index and meta stay in memory, data blocks are read on demand,
/// each read counted and its CRC checked: with a positioned read into a per-thread buffer,
/// or, when the table was opened with `mmap_reads`, in place from a read-only map of the file.
#[derive(Debug)]
pub struct Table {
    /// File number.
    pub number: u64,
    path: PathBuf,
    file: File,
    /// The whole file, mapped, when blocks are read in place.
    map: Option<Mmap>,
    version: u32,
    /// Where the data blocks (and their padding) end.
    index_offset: u64,
    index: Index,
    /// Key range and counts.
    pub meta: TableMeta,
}

impl Table {
    /// Opens and checks footer, index and meta of the table at `path`. With `mmap_reads`,
    /// data blocks are read in place from a map of the file (advised for random access, so a
    /// block that is not cached faults in only its own pages) instead of with `pread`.
    pub fn open(path: &Path, number: u64, mmap_reads: bool) -> Result<Table> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
        let mut table =
            Self::open_file(file, size, number, path).map_err(|e| e.in_file(path, 0))?;
        if mmap_reads {
            let map = crate::mmap::map_readonly(&table.file).map_err(|e| Error::io(path, e))?;
            if (map.len() as u64) < size {
                return Err(
                    Error::corrupt(0, "table file shrank while it was opened").in_file(path, 0)
                );
            }
            map.advise(memmap2::Advice::Random)
                .map_err(|e| Error::io(path, e))?;
            table.map = Some(map);
        }
        Ok(table)
    }

    fn open_file(file: File, size: u64, number: u64, path: &Path) -> Result<Table> {
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
        check_crc(index_bytes, le32(index_crc), index_off, "index block")?;
        check_crc(meta_bytes, le32(meta_crc), meta_off, "table meta")?;
        let mut index = Index::default();
        let mut prev_end = 0u64;
        for e in Block::new(index_bytes, index_off)?.iter() {
            let (last_key, v) = e?;
            let v = v.filter(|v| v.len() == 12).ok_or_else(|| {
                Error::corrupt(index_off, "index entry without a 12-byte block handle")
            })?;
            let offset = u64::from_le_bytes(v[..8].try_into().unwrap_or_default());
            let len = u32::from_le_bytes(v[8..].try_into().unwrap_or_default());
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
            prev_end = block_end;
            index.push(&last_key, offset, len);
        }
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
        let meta = TableMeta {
            min_key,
            max_key,
            entries: c.varint("entries")?,
            tombstones: c.varint("tombstones")?,
            data_blocks: c.varint("data blocks")?,
            file_bytes: size,
        };
        if meta.data_blocks != index.len() as u64 {
            return Err(Error::corrupt(
                meta_off,
                "meta block count disagrees with the index",
            ));
        }
        Ok(Table {
            number,
            path: path.to_path_buf(),
            file,
            map: None,
            version,
            index_offset: index_off,
            index,
            meta,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of data blocks.
    pub fn block_count(&self) -> usize {
        self.index.len()
    }

    /// The footer's format version.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Offset and length (without CRC) of data block `i`.
    pub fn block_handle(&self, i: usize) -> Option<(u64, u32)> {
        self.index.handles.get(i).copied()
    }

    /// Checks that the padding between data blocks (and before the index) is all zeros.
    /// Readers never look at it; `verify` does, so damage there is still found.
    pub fn check_padding(&self) -> Result<()> {
        let h = &self.index.handles;
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

    /// Reads data block `i` (into `buf`, reused, only growth zero-filled; or in place from the
    /// map), counts the read, checks its CRC and returns the block's bytes.
    fn read_block_into<'b>(
        &'b self,
        i: usize,
        counters: &TableCounters,
        buf: &'b mut Vec<u8>,
    ) -> Result<&'b [u8]> {
        let Some(&(offset, len)) = self.index.handles.get(i) else {
            return Err(Error::InvalidArgument(format!("block {i} out of range")));
        };
        let need = len as usize + 4;
        let raw: &'b [u8] = match &self.map {
            // `Table::open` checked every block lies inside the file, and the map covers it.
            Some(map) => &map[offset as usize..offset as usize + need],
            None => {
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
        counters.add_block_reads(1);
        counters.add_bytes_read(need as u64);
        let (data, crc) = raw.split_at(len as usize);
        check_crc(data, le32(crc), offset, "data block")
            .map_err(|err| err.in_file(&self.path, 0))?;
        Ok(data)
    }

    /// The index of the only block that can hold `key` (the first whose last key >= key).
    pub fn block_for(&self, key: &[u8]) -> Option<usize> {
        let i = self.index.search(key);
        (i < self.index.len()).then_some(i)
    }

    /// Looks `key` up in its block: `None` when absent, `Some(None)` for a tombstone.
    pub fn get(&self, key: &[u8], counters: &TableCounters) -> Result<Option<Option<Vec<u8>>>> {
        let Some(i) = self.block_for(key) else {
            return Ok(None);
        };
        let off = self.index.handles[i].0;
        READ_BUF.with(|cell| {
            let mut buf = cell.borrow_mut();
            let data = self.read_block_into(i, counters, &mut buf)?;
            Block::new(data, off)
                .and_then(|b| b.get(key))
                .map_err(|e| e.in_file(&self.path, 0))
        })
    }

    /// Decodes every entry of block `i`.
    pub fn block_entries(&self, i: usize, counters: &TableCounters) -> Result<Vec<Entry>> {
        let off = self.index.handles.get(i).map_or(0, |h| h.0);
        let mut buf = Vec::new();
        let data = self.read_block_into(i, counters, &mut buf)?;
        let block = Block::new(data, off).map_err(|e| e.in_file(&self.path, 0))?;
        block
            .iter()
            .collect::<Result<Vec<_>>>()
            .map_err(|e| e.in_file(&self.path, 0))
    }
}

fn le32(b: &[u8]) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[..4]);
    u32::from_le_bytes(w)
}

/// A table footer's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footer {
    /// Format version (1 or 2).
    pub version: u32,
    /// Offset of the index block.
    pub index_offset: u64,
    /// Length of the index block, without its CRC.
    pub index_len: u64,
    /// Offset of the meta section.
    pub meta_offset: u64,
    /// Length of the meta section, without its CRC.
    pub meta_len: u64,
}

/// Checks a footer read at `at` and returns its fields.
pub fn decode_footer(footer: &[u8; FOOTER_LEN], at: u64) -> Result<Footer> {
    if footer[..4] != TABLE_MAGIC || footer[60..] != TABLE_END_MAGIC {
        return Err(Error::corrupt(at, "bad table footer magic"));
    }
    check_crc(
        &footer[..56],
        le32(&footer[56..60]),
        at + 56,
        "table footer",
    )?;
    let version = le32(&footer[4..8]);
    if !(1..=TABLE_VERSION).contains(&version) {
        return Err(Error::corrupt(
            at + 4,
            format!("unsupported table version {version}"),
        ));
    }
    let mut c = Cursor::new(&footer[8..40], at + 8);
    Ok(Footer {
        version,
        index_offset: c.u64("index offset")?,
        index_len: c.u64("index length")?,
        meta_offset: c.u64("meta offset")?,
        meta_len: c.u64("meta length")?,
    })
}

/// A filter file mapped into memory; queried in place.
#[derive(Debug)]
pub struct MappedFilter {
    /// File number of the filter file.
    pub number: u64,
    map: Mmap,
    /// The decoded, checked filter, rebound to `&[]`; queried over `map` with
    /// [`Filter::may_contain_in`].
    checked: Filter<'static>,
}

impl MappedFilter {
    /// Maps the filter file and checks it fully (magic, version, lengths, both CRCs).
    pub fn open(path: &Path, number: u64) -> Result<MappedFilter> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let map = crate::mmap::map_readonly(&file).map_err(|e| Error::io(path, e))?;
        let checked = Filter::decode(&map)
            .map_err(|e| e.in_file(path, 0))?
            .rebind(&[]);
        Ok(MappedFilter {
            number,
            map,
            checked,
        })
    }

    /// False means the key is certainly not in the table.
    #[inline]
    pub fn may_contain(&self, hash: u64) -> bool {
        self.checked.may_contain_in(&self.map, hash)
    }

    /// See [`Filter::touch`].
    #[inline]
    pub fn touch(&self, hash: u64) -> u8 {
        self.checked.touch_in(&self.map, hash)
    }

    /// The filter's header.
    pub fn header(&self) -> &Header {
        self.checked.header()
    }

    /// Size of the filter block in bytes.
    pub fn bytes(&self) -> u64 {
        self.map.len() as u64
    }

    /// Theoretical false-positive rate of this filter.
    pub fn theoretical_fpr(&self) -> f64 {
        self.checked.theoretical_fpr()
    }
}

/// Writes a filter block for `hashes` to `path` (fsynced). Returns the block length, or
/// `None` for [`FilterKind::None`] (no file is written).
pub fn write_filter_file(
    fs: &dyn Fs,
    path: &Path,
    kind: FilterKind,
    fpr: f64,
    hashes: &[u64],
) -> Result<Option<u64>> {
    let Some(block) = filter::build(kind, fpr, hashes)? else {
        return Ok(None);
    };
    let io = |e| Error::io(path, e);
    let mut f = fs.create(path).map_err(io)?;
    f.write_all(&block).map_err(io)?;
    f.sync().map_err(io)?;
    Ok(Some(block.len() as u64))
}

#[cfg(test)]
mod tests {
    use super::block::tests::{adversarial_key_sets, probes};
    use super::*;
    use crate::io::RealFs;

    #[test]
    fn index_search_agrees_with_a_linear_search() {
        for set in adversarial_key_sets() {
            // Whole sets, and slices of them with longer shared prefixes.
            for range in [0..set.len(), set.len() / 3..set.len() / 2, 1..3, 0..1] {
                let keys = &set[range.start.min(set.len())..range.end.min(set.len())];
                let mut index = Index::default();
                for (i, k) in keys.iter().enumerate() {
                    index.push(k, i as u64, 0);
                }
                index.finish();
                for p in probes(keys) {
                    let want = keys.iter().position(|k| k >= &p).unwrap_or(keys.len());
                    assert_eq!(index.search(&p), want, "probe {p:?} lcp {}", index.lcp);
                }
            }
        }
        assert_eq!(Index::default().search(b"x"), 0);
    }

    #[test]
    fn table_get_agrees_with_a_map() {
        let dir = tempfile::tempdir().unwrap();
        for (n, set) in adversarial_key_sets().into_iter().enumerate() {
            // Values large enough to spread each set over many blocks; now and then one
            // larger than a page.
            let values: Vec<Vec<u8>> = (0..set.len())
                .map(|i| vec![i as u8; if i % 97 == 5 { 5000 } else { 50 + i % 300 }])
                .collect();
            let entries: Vec<(&[u8], Option<&[u8]>)> = set
                .iter()
                .zip(&values)
                .enumerate()
                .map(|(i, (k, v))| (k.as_slice(), (i % 7 != 2).then_some(v.as_slice())))
                .collect();
            let path = dir.path().join(format!("{n}.sst"));
            write_table(&RealFs, &path, entries.as_slice()).unwrap();
            let t = Table::open(&path, 1, false).unwrap();
            let c = TableCounters::default();
            check_layout(&t, &c, &format!("set {n}"));
            let map: std::collections::BTreeMap<&[u8], Option<&[u8]>> =
                entries.iter().copied().collect();
            for p in probes(&set) {
                let want = map.get(p.as_slice()).map(|v| v.map(<[u8]>::to_vec));
                let reads = c.block_reads();
                assert_eq!(t.get(&p, &c).unwrap(), want, "set {n} probe {p:?}");
                // A key inside the table's range costs exactly one block read.
                let inside = p.as_slice() <= t.meta.max_key.as_slice();
                assert_eq!(c.block_reads() - reads, inside as u64);
            }
        }
    }

    /// The layout rules of `format.md` (version 2): a block and its CRC fit in a page unless
    /// the block holds a single entry; the next block (or the index) follows at once only
    /// when padding to the page would take more than `MAX_PAD` bytes, else on the page.
    fn check_layout(t: &Table, c: &TableCounters, what: &str) {
        let n = t.block_count();
        for i in 0..n {
            let (offset, len) = t.block_handle(i).unwrap();
            let single = t.block_entries(i, c).unwrap().len() == 1;
            assert!(
                single || len as usize + 4 <= BLOCK_SIZE,
                "{what} block {i}: {len}"
            );
            let end = offset + len as u64 + 4;
            let next = t.block_handle(i + 1).map_or(t.index_offset, |h| h.0);
            if next == end {
                let pad = page_pad(end);
                assert!(pad == 0 || pad > MAX_PAD, "{what} block {i}: not padded");
            } else {
                assert_eq!(next, end + page_pad(end) as u64, "{what} block {i}");
            }
        }
    }

    fn entries_with_values(n: usize, value_len: usize) -> (Vec<Vec<u8>>, Vec<u8>) {
        let keys = (0..n).map(|i| format!("key{i:09}").into_bytes()).collect();
        (keys, vec![b'v'; value_len])
    }

    #[test]
    fn the_file_does_not_depend_on_the_thread_count() {
        let dir = tempfile::tempdir().unwrap();
        // More than two runs of entries, so the runs are encoded by different tasks.
        let (keys, value) = entries_with_values(2 * RUN + 1000, 100);
        let entries: Vec<(&[u8], Option<&[u8]>)> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.as_slice(), (i % 11 != 3).then_some(value.as_slice())))
            .collect();
        let mut files = Vec::new();
        for threads in [1, 3] {
            let path = dir.path().join(format!("{threads}.sst"));
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| write_table(&RealFs, &path, entries.as_slice()))
                .unwrap();
            files.push(std::fs::read(&path).unwrap());
            let t = Table::open(&path, 1, false).unwrap();
            check_layout(&t, &TableCounters::default(), &format!("{threads} threads"));
            // 100-byte values: every block starts on a page.
            for i in 0..t.block_count() {
                assert_eq!(t.block_handle(i).unwrap().0 % BLOCK_SIZE as u64, 0);
            }
        }
        assert!(
            files[0] == files[1],
            "1 and 3 threads wrote different bytes"
        );
    }

    #[test]
    fn padding_costs_little_space_at_any_value_size() {
        let dir = tempfile::tempdir().unwrap();
        for value_len in [10, 100, 1000, 1500, 2100, 3000, 4000, 5000, 9000] {
            let (keys, value) = entries_with_values(3000, value_len);
            let entries: Vec<(&[u8], Option<&[u8]>)> = keys
                .iter()
                .map(|k| (k.as_slice(), Some(value.as_slice())))
                .collect();
            let path = dir.path().join(format!("{value_len}.sst"));
            let meta = write_table(&RealFs, &path, entries.as_slice()).unwrap();
            let payload = keys.len() * (keys[0].len() + value_len);
            let ratio = meta.file_bytes as f64 / payload as f64;
            assert!(
                ratio < 1.05,
                "{value_len}-byte values: file / payload = {ratio:.3}"
            );
            let t = Table::open(&path, 1, false).unwrap();
            check_layout(&t, &TableCounters::default(), &format!("{value_len} B"));
        }
    }
}
