//! Writing a table file: data blocks encoded in parallel runs, then index, meta and footer.

use std::path::{Path, PathBuf};

use super::block::{self, BlockBuilder};
use super::compress::{Compression, Compressor, CODEC_NONE, TRAILER};
use super::footer::{encode_footer, Footer, FOOTER_LEN, TABLE_VERSION, TABLE_VERSION_EXPIRING};
use super::{page_pad, TableMeta, MAX_PAD, PAGE_SIZE, RAW_BLOCK_SIZE, WRITE_BUFFER};
use crate::codec::put_varint;
use crate::error::{Error, Result};
use crate::io::{Fs, WritableFile};

/// Writes one table file from parts encoded by [`encode_part`], then its index, meta and
/// footer (see [`write_table`]).
pub(crate) struct TableBuilder {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    buf: Vec<u8>,
    offset: u64,
    index: BlockBuilder,
    meta: TableMeta,
    /// Its parts store values tagged (version 5).
    tagged: bool,
}

impl TableBuilder {
    /// Creates the file at `path`.
    pub(crate) fn create(fs: &dyn Fs, path: &Path) -> Result<TableBuilder> {
        let file = fs.create(path).map_err(|e| Error::io(path, e))?;
        Ok(TableBuilder {
            file,
            path: path.to_path_buf(),
            buf: Vec::with_capacity(WRITE_BUFFER + PAGE_SIZE * 2),
            offset: 0,
            index: BlockBuilder::with_restart_interval(1),
            meta: TableMeta::default(),
            tagged: false,
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
    pub(crate) fn add_part(&mut self, part: Part) -> Result<Vec<u8>> {
        if part.entries == 0 {
            return Ok(part.bytes);
        }
        debug_assert_eq!(page_pad(self.offset), 0, "parts start on a page");
        if self.meta.entries == 0 {
            self.meta.min_key = part.first_key;
        }
        self.meta.entries += part.entries;
        self.meta.tombstones += part.tombstones;
        self.meta.data_bytes += part.data_bytes;
        self.meta.stored_data_bytes += part.stored_data_bytes;
        debug_assert!(self.meta.data_blocks == 0 || self.tagged == part.tagged);
        self.tagged |= part.tagged;
        self.meta.expiring += part.expiring;
        self.meta.expiring_bytes += part.expiring_bytes;
        if part.earliest_expiry != 0 {
            let e = self.meta.earliest_expiry;
            self.meta.earliest_expiry = if e == 0 {
                part.earliest_expiry
            } else {
                e.min(part.earliest_expiry)
            };
        }
        self.meta.latest_expiry = self.meta.latest_expiry.max(part.latest_expiry);
        let (mut key_at, mut last): (usize, &[u8]) = (0, &[]);
        for &(key_end, rel, len) in &part.index {
            last = &part.index_keys[key_at..key_end];
            key_at = key_end;
            let mut handle = [0u8; 12];
            handle[..8].copy_from_slice(&(self.offset + rel).to_le_bytes());
            handle[8..].copy_from_slice(&len.to_le_bytes());
            self.index.add(last, Some(&handle));
            self.meta.data_blocks += 1;
        }
        self.meta.max_key.clear();
        self.meta.max_key.extend_from_slice(last);
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
    pub(crate) fn finish(mut self) -> Result<TableMeta> {
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
        put_varint(&mut meta, self.meta.data_bytes);
        if self.tagged {
            put_varint(&mut meta, self.meta.expiring);
            put_varint(&mut meta, self.meta.expiring_bytes);
            put_varint(&mut meta, self.meta.earliest_expiry);
            put_varint(&mut meta, self.meta.latest_expiry);
        }
        self.write_with_crc(&meta)?;
        let footer = encode_footer(&Footer {
            version: if self.tagged {
                TABLE_VERSION_EXPIRING
            } else {
                TABLE_VERSION
            },
            index_offset,
            index_len: index.len() as u64,
            meta_offset,
            meta_len: meta.len() as u64,
        });
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
    /// `expires_at` of entry `i` (Unix milliseconds; 0: never).
    fn expires(&self, _i: usize) -> u64 {
        0
    }
    /// Whether the table is written in the layout that stores expiries (version 5): true
    /// when an entry may have one.
    fn tagged(&self) -> bool {
        false
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
pub(crate) struct Part {
    bytes: Vec<u8>,
    /// Per block: where its last key ends in `index_keys` (it starts where the previous
    /// block's ends), and the block's offset relative to the part and its length. One buffer
    /// for the keys, not an allocation per block.
    index: Vec<(usize, u64, u32)>,
    /// The blocks' last keys, one after another.
    index_keys: Vec<u8>,
    first_key: Vec<u8>,
    entries: u64,
    tombstones: u64,
    /// Bytes of the blocks before and after compression (see [`super::TableMeta`]).
    data_bytes: u64,
    stored_data_bytes: u64,
    /// The entries' key hashes, in order, when asked for.
    pub(crate) hashes: Vec<u64>,
    /// Values are stored tagged (version 5), and what the part holds of expiring entries
    /// (see [`super::TableMeta`]).
    tagged: bool,
    expiring: u64,
    expiring_bytes: u64,
    earliest_expiry: u64,
    latest_expiry: u64,
}

/// Appends the trailer of the block `bytes[start..]` (its restart array, then, compressed
/// by `compressor` when that pays, the codec byte and the CRC) and the padding to the next
/// page when it is short; records the block in `index` and its sizes in `part`.
fn cut_block(
    bytes: &mut Vec<u8>,
    start: usize,
    restarts: &mut Vec<u32>,
    last: &[u8],
    compressor: &mut Compressor,
    part: &mut Part,
) {
    block::put_restarts(bytes, restarts);
    restarts.clear();
    let raw_len = bytes.len() - start;
    part.data_bytes += raw_len as u64;
    let codec = match compressor.compress(&bytes[start..]) {
        Some((payload, codec)) => {
            bytes.truncate(start);
            bytes.extend_from_slice(payload);
            codec
        }
        None => CODEC_NONE,
    };
    part.stored_data_bytes += (bytes.len() - start) as u64;
    bytes.push(codec);
    let len = bytes.len() - start;
    let crc = crc32fast::hash(&bytes[start..]);
    bytes.extend_from_slice(&crc.to_le_bytes());
    // Parts start on page boundaries, so padding within the part aligns in the file. A
    // compressed block is read whole by its offset and length and spans pages anyway: no
    // padding after it.
    let pad = page_pad(bytes.len() as u64);
    if pad <= MAX_PAD && codec == CODEC_NONE {
        bytes.resize(bytes.len() + pad, 0);
    }
    part.index_keys.extend_from_slice(last);
    part.index
        .push((part.index_keys.len(), start as u64, len as u32));
}

/// Encodes entries `range` into blocks (the format of [`BlockBuilder`], written in place
/// into `bytes`, which is cleared and reused, each block then compressed as `compression`
/// says when that saves an eighth of it); with `hashes`, also the keys' [`key_hash`]es.
///
/// [`key_hash`]: crate::hash::key_hash
pub(crate) fn encode_part<E: SortedEntries + ?Sized>(
    entries: &E,
    range: std::ops::Range<usize>,
    mut bytes: Vec<u8>,
    hashes: bool,
    compression: Compression,
) -> Part {
    let n = range.len();
    let per_entry = entries.payload_bytes() / entries.len().max(1) + 4;
    bytes.clear();
    bytes.reserve(n * per_entry + n / 2 + 64);
    let mut part = Part {
        bytes: Vec::new(),
        index: Vec::with_capacity(n * per_entry / RAW_BLOCK_SIZE + 2),
        index_keys: Vec::new(),
        first_key: Vec::new(),
        entries: n as u64,
        tombstones: 0,
        data_bytes: 0,
        stored_data_bytes: 0,
        hashes: Vec::with_capacity(if hashes { n } else { 0 }),
        tagged: entries.tagged(),
        expiring: 0,
        expiring_bytes: 0,
        earliest_expiry: 0,
        latest_expiry: 0,
    };
    let tagged = part.tagged;
    let mut compressor = Compressor::new(compression);
    if !range.is_empty() {
        part.first_key = entries.entry(range.start).0.to_vec();
    }
    let mut restarts: Vec<u32> = Vec::with_capacity(PAGE_SIZE / block::RESTART_INTERVAL);
    let (mut start, mut count) = (0usize, 0usize);
    let mut prev: &[u8] = &[];
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
        for (j, &(key, value)) in batch[..m].iter().enumerate() {
            let exp = if tagged && value.is_some() {
                entries.expires(at - m + j)
            } else {
                0
            };
            let restart = count.is_multiple_of(block::RESTART_INTERVAL);
            let mut shared = if restart {
                0
            } else {
                block::common_prefix(key, prev)
            };
            // Cut before an entry that would push block + trailer past the block size.
            let grown = block::finished_len(
                bytes.len() - start
                    + if tagged {
                        block::entry_len_tagged(shared, key, value, exp)
                    } else {
                        block::entry_len(shared, key, value)
                    },
                restarts.len() + restart as usize,
            );
            if count > 0 && grown + TRAILER > compressor.block_size() {
                cut_block(
                    &mut bytes,
                    start,
                    &mut restarts,
                    prev,
                    &mut compressor,
                    &mut part,
                );
                start = bytes.len();
                count = 0;
                shared = 0;
            }
            if count.is_multiple_of(block::RESTART_INTERVAL) {
                restarts.push((bytes.len() - start) as u32);
            }
            if tagged {
                block::put_entry_tagged(&mut bytes, shared, key, value, exp);
                if exp != 0 {
                    part.expiring += 1;
                    part.expiring_bytes += (key.len() + value.map_or(0, <[u8]>::len)) as u64;
                    let e = part.earliest_expiry;
                    part.earliest_expiry = if e == 0 { exp } else { e.min(exp) };
                    part.latest_expiry = part.latest_expiry.max(exp);
                }
            } else {
                block::put_entry(&mut bytes, shared, key, value);
            }
            if hashes {
                part.hashes.push(crate::hash::key_hash(key));
            }
            part.tombstones += value.is_none() as u64;
            count += 1;
            prev = key;
        }
    }
    if count > 0 {
        cut_block(
            &mut bytes,
            start,
            &mut restarts,
            prev,
            &mut compressor,
            &mut part,
        );
    }
    // The next part (or the index) starts on a page.
    bytes.resize(bytes.len() + page_pad(bytes.len() as u64), 0);
    part.bytes = bytes;
    part
}

/// Most entries in one run (see [`run_ends`]).
pub(crate) const RUN: usize = 8 * 1024;
/// A run ends once its keys and values reach this many bytes (see [`run_ends`]).
pub(crate) const RUN_BYTES: usize = 1 << 20;

/// Whether a run that holds `entries` entries and `bytes` bytes of keys and values is full.
/// Runs are the unit of parallel encoding: a block never spans two, and each starts on a
/// page. They depend only on the entries (not on the thread count), so neither does the
/// file, and a table written from a memtable and one streamed out of a merge are laid out
/// alike.
#[inline]
pub(crate) fn run_full(entries: usize, bytes: usize) -> bool {
    entries >= RUN || bytes >= RUN_BYTES
}

/// Where the runs of `entries` end (exclusive), by [`run_full`].
fn run_ends<E: SortedEntries + ?Sized>(entries: &E) -> Vec<usize> {
    let mut ends = Vec::new();
    let (mut count, mut bytes) = (0usize, 0usize);
    for i in 0..entries.len() {
        let (k, v) = entries.entry(i);
        count += 1;
        bytes += k.len() + v.map_or(0, <[u8]>::len);
        if run_full(count, bytes) {
            ends.push(i + 1);
            (count, bytes) = (0, 0);
        }
    }
    if count > 0 {
        ends.push(entries.len());
    }
    ends
}

/// Writes a table file from sorted, distinct entries (`None` = tombstone), encoding (and
/// compressing, as `compression` says) blocks in parallel on the current rayon pool and
/// writing them in order; fsynced on return.
///
/// Entries go in runs (a run is full at 8,192 entries or 1 MiB), a window of one run per thread at a time; a window
/// is written while the next one is encoded, and the buffers of written parts are reused, so
/// memory stays bounded and the write (a copy into the page cache) overlaps encoding. The
/// bytes written do not depend on the number of threads.
pub fn write_table<E: SortedEntries + ?Sized>(
    fs: &dyn Fs,
    path: &Path,
    entries: &E,
    compression: Compression,
) -> Result<TableMeta> {
    use rayon::prelude::*;
    let threads = rayon::current_num_threads().max(1);
    let ends = run_ends(entries);
    let mut b = TableBuilder::create(fs, path)?;
    let mut pending: Vec<Part> = Vec::new();
    let mut spare: Vec<Vec<u8>> = Vec::new();
    let (mut run, mut at) = (0usize, 0usize);
    while run < ends.len() || !pending.is_empty() {
        let window = &ends[run..(run + threads).min(ends.len())];
        let jobs: Vec<(std::ops::Range<usize>, Vec<u8>)> = window
            .iter()
            .map(|&end| {
                let r = at..end;
                at = end;
                (r, spare.pop().unwrap_or_default())
            })
            .collect();
        run += window.len();
        let to_write = std::mem::take(&mut pending);
        let builder = &mut b;
        let (written, parts) = rayon::join(
            move || -> Result<Vec<Vec<u8>>> {
                to_write.into_iter().map(|p| builder.add_part(p)).collect()
            },
            || -> Vec<Part> {
                jobs.into_par_iter()
                    .map(|(r, buf)| encode_part(entries, r, buf, false, compression))
                    .collect()
            },
        );
        spare.extend(written?);
        pending = parts;
    }
    b.finish()
}

/// Entries copied into one buffer: a run of a merge's output, encoded while the merge goes
/// on (see `compaction::run`).
#[derive(Debug, Default)]
pub(crate) struct OwnedRun {
    data: Vec<u8>,
    /// Per entry: where its key starts in `data`, the key's length, and the value's length
    /// ([`u32::MAX`] for a tombstone); the value follows the key.
    ents: Vec<(u32, u32, u32)>,
    /// Per entry, when `tagged`: its `expires_at` (0: never).
    exps: Vec<u64>,
    /// Written in the layout that stores expiries (version 5).
    pub(crate) tagged: bool,
}

impl OwnedRun {
    /// Appends an entry; keys must arrive in strictly increasing order.
    pub(crate) fn push(&mut self, key: &[u8], value: Option<&[u8]>, expires_at: u64) {
        if self.tagged {
            self.exps.push(expires_at);
        }
        let at = self.data.len() as u32;
        self.data.extend_from_slice(key);
        let vlen = match value {
            Some(v) => {
                self.data.extend_from_slice(v);
                v.len() as u32
            }
            None => u32::MAX,
        };
        self.ents.push((at, key.len() as u32, vlen));
    }

    /// Key and value bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.data.len()
    }

    /// Empties the run, keeping its buffers.
    pub(crate) fn clear(&mut self) {
        self.data.clear();
        self.ents.clear();
        self.exps.clear();
    }
}

impl SortedEntries for OwnedRun {
    fn len(&self) -> usize {
        self.ents.len()
    }
    fn entry(&self, i: usize) -> (&[u8], Option<&[u8]>) {
        let (at, klen, vlen) = self.ents[i];
        let (k0, k1) = (at as usize, at as usize + klen as usize);
        let value = (vlen != u32::MAX).then(|| &self.data[k1..k1 + vlen as usize]);
        (&self.data[k0..k1], value)
    }
    fn payload_bytes(&self) -> usize {
        self.data.len()
    }
    fn expires(&self, i: usize) -> u64 {
        self.exps.get(i).copied().unwrap_or(0)
    }
    fn tagged(&self) -> bool {
        self.tagged
    }
}
