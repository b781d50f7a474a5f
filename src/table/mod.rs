//! Sorted, immutable table files (`NNNNNN.sst`) and their filter files (`NNNNNN.filter`).
//!
//! ```text
//! | data block | codec u8 | crc u32 | pad | ... |          <- from offset 0, ≤ 4 KiB each before
//!                                                            compression (compress.rs)
//! | index block | crc u32 |                               <- last key of each data block -> handle
//! | meta | crc u32 |                                      <- key range and counts
//! | footer (64 bytes) |                                   <- fixed size, at the end
//! ```
//! The filter of a table is a separate file holding one filter block, so `refilter` can
//! replace it (new file + manifest swap) without rewriting the table's data.

pub mod block;
pub mod compress;
pub(crate) mod files;
mod footer;
mod index;
pub mod key_hashes;
pub mod lz4;
mod range_file;
mod reader;
mod scratch;
pub mod split;
mod writer;

use std::fs::File;
use std::path::Path;

use memmap2::Mmap;

pub use self::compress::Compression;
#[cfg(feature = "internals")]
pub use self::footer::{
    decode_footer, Footer, FOOTER_LEN, TABLE_END_MAGIC, TABLE_MAGIC, TABLE_VERSION,
    TABLE_VERSION_EXPIRING,
};
pub use self::range_file::{write_range_file, MappedRangeFilter};
pub use self::reader::Table;
#[cfg(feature = "internals")]
pub use self::reader::TableCursor;
#[cfg(not(feature = "internals"))]
pub(crate) use self::reader::TableCursor;
pub(crate) use self::reader::{BlockBytes, ReadAhead};
/// A store's block cache of its tables' blocks (`src/cache.rs`).
pub(crate) type BlockCache = crate::cache::BlockCache<BlockBytes>;
pub(crate) use self::writer::{encode_part, run_full, OwnedRun, Part};
pub use self::writer::{write_table, SortedEntries};
pub use crate::counters::TableCounters;
use crate::error::{Error, Result};
use crate::filter::{self, Filter, FilterKind};
use crate::io::Fs;

/// Page size of the table layout: a data block and its CRC fit in one page unless a single
/// entry is larger, and a block is followed by zero padding up to the next page boundary
/// when that takes at most [`MAX_PAD`] bytes, so reading a block of small entries touches
/// one page of the file, not two (see `format.md`).
pub const PAGE_SIZE: usize = 4096;
/// Most bytes of a data block before compression, trailer (restart array, codec byte, CRC)
/// included, while the table's blocks compress: a page (compression gains from the
/// context of a larger block).
pub const BLOCK_SIZE: usize = PAGE_SIZE;
/// Most bytes of a data block, trailer included, in a table written without compression
/// or after a block that was stored raw: half a page, two blocks to a page. A lookup that
/// misses the block cache reads, checks and searches a whole block, so it copies and
/// checksums half as much, for twice the index entries (`docs/benchmark.md`, "Data block
/// size").
pub const RAW_BLOCK_SIZE: usize = PAGE_SIZE / 2;
/// Most zero bytes written after a block to start the next one on a page (an eighth of a
/// page: with larger entries, blocks follow each other unaligned instead of wasting space).
pub const MAX_PAD: usize = PAGE_SIZE / 8;
/// Most entries a data block holds, in every version a writer produced: a block of more
/// than one entry ends before [`BLOCK_SIZE`] bytes (version 1: once it reached them, so at
/// most one entry past them), and an entry takes at least 3 bytes (its three lengths). A
/// reader refuses a table meta claiming more than this many entries per data block.
pub const MAX_BLOCK_ENTRIES: u64 = (BLOCK_SIZE / 3 + 1) as u64;

/// Zero bytes after a block that ends at `end`, up to the next page boundary.
pub(crate) fn page_pad(end: u64) -> usize {
    (end.wrapping_neg() % PAGE_SIZE as u64) as usize
}
/// Bytes a table writer collects before handing them to the operating system.
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
    /// Bytes of the data blocks before compression (entries and restart arrays; no codec
    /// bytes, CRCs or padding).
    pub data_bytes: u64,
    /// Bytes of the data blocks as stored (compressed or raw payloads; no codec bytes, CRCs
    /// or padding). Equal to `data_bytes` when no block is compressed.
    pub stored_data_bytes: u64,
    /// File size in bytes.
    pub file_bytes: u64,
    /// Values with an expiry (version 5; 0 before).
    pub expiring: u64,
    /// Key and value bytes of those entries.
    pub expiring_bytes: u64,
    /// The earliest `expires_at` among them (Unix milliseconds; 0 when there is none).
    pub earliest_expiry: u64,
    /// The latest `expires_at` among them (0 when there is none).
    pub latest_expiry: u64,
}

/// How many keys ahead of its query [`MappedFilter::retain_maybe`] prefetches a key's
/// filter lines: enough misses in flight to cover a trip to memory, few enough that the
/// lines are still in L1 when their query comes.
pub const PREFETCH_AHEAD: usize = 16;

/// A filter file mapped into memory; queried in place.
#[derive(Debug)]
pub struct MappedFilter {
    map: Mmap,
    /// The decoded, checked filter, rebound to `&[]`; queried over `map` with
    /// [`Filter::may_contain_in`].
    checked: Filter<'static>,
}

impl MappedFilter {
    /// Checks the filter file fully (magic, version, lengths, both CRCs) and maps it.
    ///
    /// The check reads the file with `read`, not through the map: the map's pages then come
    /// into this process only as queries touch them, so filters that are not queried (all
    /// of them during a bulk load or a compaction) stay in the page cache, outside the
    /// store's resident memory.
    pub fn open(path: &Path) -> Result<MappedFilter> {
        let mut file = File::open(path).map_err(|e| Error::io(path, e))?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut bytes).map_err(|e| Error::io(path, e))?;
        let checked = Filter::decode(&bytes)
            .map_err(|e| e.in_file(path, 0))?
            .rebind(&[]);
        drop(bytes);
        let map = crate::mmap::map_readonly(&file).map_err(|e| Error::io(path, e))?;
        if map.len() as u64 != checked.block_len() {
            return Err(
                Error::corrupt(0, "filter file changed while it was opened").in_file(path, 0)
            );
        }
        Ok(MappedFilter { map, checked })
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

    /// Pushes onto `maybe`, in order, each of `keys` (indices into `hashes`) whose hash the
    /// filter may contain: the answers of [`may_contain`](Self::may_contain), with the
    /// filter's cache misses overlapped. Before each query the lines of the key
    /// [`PREFETCH_AHEAD`] places further on are prefetched ([`Filter::retain_maybe_in`]), so
    /// that many misses are on their way while this key is tested, and the queries find
    /// their lines in cache.
    ///
    /// # Panics
    /// If an index in `keys` is out of bounds for `hashes`.
    pub fn retain_maybe(&self, keys: &[u32], hashes: &[u64], maybe: &mut Vec<u32>) {
        self.checked
            .retain_maybe_in(&self.map, keys, hashes, PREFETCH_AHEAD, maybe);
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
    use super::block::Entry;
    use super::index::Index;
    use super::writer::RUN;
    use super::*;
    use crate::io::RealFs;
    use std::sync::Arc;

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
            let map: std::collections::BTreeMap<&[u8], Option<&[u8]>> =
                entries.iter().copied().collect();
            for compression in Compression::ALL {
                let path = dir.path().join(format!("{n}-{compression}.sst"));
                write_table(&RealFs, &path, entries.as_slice(), compression).unwrap();
                for mmap_reads in [false, true] {
                    let t = Table::open(&path, mmap_reads).unwrap();
                    let c = TableCounters::default();
                    let what = format!("set {n} {compression} mmap {mmap_reads}");
                    check_layout(&t, &c, &what);
                    for p in probes(&set) {
                        let want = map.get(p.as_slice()).map(|v| v.map(<[u8]>::to_vec));
                        let reads = c.block_reads();
                        assert_eq!(
                            t.get(&p, &c).unwrap().map(|v| v.map(Vec::from)),
                            want,
                            "{what} probe {p:?}"
                        );
                        // A key inside the table's range costs exactly one block read.
                        let inside = p.as_slice() <= t.meta.max_key.as_slice();
                        assert_eq!(c.block_reads() - reads, inside as u64);
                    }
                    // Every entry, in order, through the merge's cursor.
                    let mut cur =
                        TableCursor::new(Arc::new(t), Arc::new(TableCounters::default())).unwrap();
                    let mut seen = Vec::new();
                    while cur.valid() {
                        // The head the merge orders by, computed from the block's bytes.
                        let head = crate::codec::prefix8(cur.key());
                        assert_eq!(cur.head(), head, "{what}: head of {:?}", cur.key());
                        seen.push((cur.key().to_vec(), cur.value().map(<[u8]>::to_vec)));
                        cur.advance().unwrap();
                    }
                    let want: Vec<(Vec<u8>, Option<Vec<u8>>)> = entries
                        .iter()
                        .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                        .collect();
                    assert!(seen == want, "{what}: the cursor disagrees");
                }
            }
        }
    }

    /// The largest entry (a key of `MAX_KEY_LEN` bytes, a value of `MAX_VALUE_LEN`) in an
    /// LZ4 table: a split block (codec 3) of its own, read back by a lookup while it is
    /// decoded, by a whole decode and by the merge's cursor; so are the empty key with an
    /// empty value, keys sharing a 1,000-byte prefix, and a tombstone around it.
    #[test]
    fn the_largest_entry_in_a_split_block() {
        let dir = tempfile::tempdir().unwrap();
        let big_key = vec![b'k'; crate::codec::MAX_KEY_LEN];
        let big_value: Vec<u8> = (0..crate::codec::MAX_VALUE_LEN)
            .map(|i| (i % 251) as u8)
            .collect();
        let mut keys: Vec<Vec<u8>> = vec![Vec::new()];
        keys.extend((0..40).map(|i| [&big_key[..1000], format!("{i:02}").as_bytes()].concat()));
        keys.push(big_key.clone());
        keys.push(b"l".to_vec());
        let small = [b'v'; 30];
        let entries: Vec<(&[u8], Option<&[u8]>)> = keys
            .iter()
            .map(|k| match k.len() {
                0 => (&k[..], Some(&[][..])),
                1 => (&k[..], None),
                n if n == crate::codec::MAX_KEY_LEN => (&k[..], Some(&big_value[..])),
                _ => (&k[..], Some(&small[..])),
            })
            .collect();
        let path = dir.path().join("largest.sst");
        write_table(&RealFs, &path, entries.as_slice(), Compression::Lz4).unwrap();
        let t = Table::open(&path, false).unwrap();
        let c = TableCounters::default();
        let bytes = std::fs::read(&path).unwrap();
        let big = t.block_for(&big_key).unwrap();
        let (off, len) = t.block_span(big).unwrap();
        assert_eq!(
            bytes[off as usize + len as usize - 1],
            compress::CODEC_LZ4_SPLIT
        );
        for (k, v) in &entries {
            let got = t.get(k, &c).unwrap().map(|v| v.map(Vec::from));
            assert!(
                got == Some(v.map(<[u8]>::to_vec)),
                "key of {} bytes",
                k.len()
            );
        }
        let all: Vec<Entry> = (0..t.block_count())
            .flat_map(|i| t.block_entries(i, &c).unwrap())
            .collect();
        let want: Vec<Entry> = entries
            .iter()
            .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
            .collect();
        assert!(all == want, "the blocks decode to other entries");
        let mut cur = TableCursor::new(Arc::new(t), Arc::new(TableCounters::default())).unwrap();
        let mut n = 0;
        while cur.valid() {
            assert!(cur.key() == want[n].0 && cur.value() == want[n].1.as_deref());
            n += 1;
            cur.advance().unwrap();
        }
        assert_eq!(n, want.len());
    }

    /// Blocks that compress are stored compressed, the others raw, in one table; both kinds
    /// read back the same through `get`, `block_entries`, the cursor and a block cache, and
    /// the meta counts the bytes before and after.
    #[test]
    fn raw_and_compressed_blocks_in_one_table() {
        let dir = tempfile::tempdir().unwrap();
        let mut x = 1u64;
        let (keys, values): (Vec<Vec<u8>>, Vec<Vec<u8>>) = (0..3000u64)
            .map(|i| {
                let k = format!("key{i:06}").into_bytes();
                // Runs of 400 keys alternate between compressible and random values.
                let v: Vec<u8> = if (i / 400) % 2 == 0 {
                    vec![b'a' + (i % 26) as u8; 120]
                } else {
                    (0..120)
                        .map(|_| {
                            x = crate::hash::mix64(x.wrapping_add(i));
                            x as u8
                        })
                        .collect()
                };
                (k, v)
            })
            .unzip();
        let entries: Vec<(&[u8], Option<&[u8]>)> = keys
            .iter()
            .zip(&values)
            .map(|(k, v)| (k.as_slice(), Some(v.as_slice())))
            .collect();
        let path = dir.path().join("mixed.sst");
        let meta = write_table(&RealFs, &path, entries.as_slice(), Compression::Lz4).unwrap();
        let t = Table::open(&path, false).unwrap();
        assert_eq!(t.meta, meta);
        let bytes = std::fs::read(&path).unwrap();
        let codecs: Vec<u8> = (0..t.block_count())
            .map(|i| {
                let (off, len) = t.block_span(i).unwrap();
                bytes[off as usize + len as usize - 1]
            })
            .collect();
        assert!(
            codecs.contains(&compress::CODEC_NONE) && codecs.contains(&compress::CODEC_LZ4_SPLIT)
        );
        assert!(meta.stored_data_bytes < meta.data_bytes);
        let stored: u64 = (0..t.block_count())
            .map(|i| t.block_span(i).unwrap().1 as u64 - 1)
            .sum();
        assert_eq!(meta.stored_data_bytes, stored);
        let c = TableCounters::default();
        let all: Vec<Entry> = (0..t.block_count())
            .flat_map(|i| t.block_entries(i, &c).unwrap())
            .collect();
        let raw: u64 = (0..t.block_count())
            .map(|i| t.block(i, &c, false).unwrap().len() as u64)
            .sum();
        assert_eq!(raw, meta.data_bytes);
        assert_eq!(all.len(), 3000);
        for (e, (k, v)) in all.iter().zip(&entries) {
            assert_eq!((e.0.as_slice(), e.1.as_deref()), (*k, *v));
        }
        // The cache's fill accounting counts a block at about its decompressed length.
        let cached: usize = (0..t.block_count()).map(|i| t.cached_len(i)).sum();
        let want = meta.data_bytes as f64;
        assert!(
            (cached as f64 - want).abs() < want * 0.02,
            "{cached} vs {want}"
        );
        let cache = Arc::new(crate::cache::BlockCache::new(1 << 20).unwrap());
        let t = Table::open(&path, false).unwrap().with_cache(cache, 1);
        for round in 0..2 {
            for (k, v) in &entries {
                assert_eq!(
                    t.get(k, &c).unwrap().map(|v| v.map(Vec::from)),
                    Some(v.map(<[u8]>::to_vec)),
                    "{round}"
                );
            }
        }
    }

    /// A block that a damaged index claims larger than any block can be counts at most
    /// `MAX_BLOCK_LEN` in the cache's fill accounting, in a table whose blocks shrank and in
    /// one whose blocks did not (it used to be a `clamp` with its minimum above its maximum:
    /// a panic).
    #[test]
    fn cached_len_of_a_block_claimed_too_large_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        for (name, fill) in [("raw", None), ("lz4", Some(b'a'))] {
            let values: Vec<Vec<u8>> = (0..500u64)
                .map(|i| match fill {
                    Some(b) => vec![b; 100],
                    None => (0..13u64)
                        .flat_map(|j| crate::hash::mix64(i * 13 + j).to_le_bytes())
                        .collect(),
                })
                .collect();
            let keys: Vec<Vec<u8>> = (0..500).map(|i| format!("k{i:04}").into_bytes()).collect();
            let entries: Vec<(&[u8], Option<&[u8]>)> = keys
                .iter()
                .zip(&values)
                .map(|(k, v)| (k.as_slice(), Some(v.as_slice())))
                .collect();
            let path = dir.path().join(format!("{name}.sst"));
            let meta = write_table(&RealFs, &path, entries.as_slice(), Compression::Lz4).unwrap();
            assert_eq!(meta.stored_data_bytes < meta.data_bytes, fill.is_some());
            let mut t = Table::open(&path, false).unwrap();
            let mut index = Index::default();
            index.push(b"k9999", 0, u32::MAX);
            index.finish();
            t.index = index;
            assert_eq!(t.cached_len(0), compress::MAX_BLOCK_LEN, "{name}");
        }
    }

    /// The layout rules of `format.md` (version 2): a block and its CRC fit in a page unless
    /// the block holds a single entry; the next block (or the index) follows at once only
    /// when padding to the page would take more than `MAX_PAD` bytes or the block is stored
    /// compressed (version 4), else on the page.
    fn check_layout(t: &Table, c: &TableCounters, what: &str) {
        let n = t.block_count();
        let bytes = std::fs::read(t.path()).unwrap();
        for i in 0..n {
            let (offset, len) = t.block_span(i).unwrap();
            let single = t.block_entries(i, c).unwrap().len() == 1;
            assert!(
                single || len as usize + 4 <= PAGE_SIZE,
                "{what} block {i}: {len}"
            );
            let end = offset + len as u64 + 4;
            let next = t.block_span(i + 1).map_or(t.index_offset, |h| h.0);
            let raw = bytes[offset as usize + len as usize - 1] == compress::CODEC_NONE;
            if next == end {
                let pad = page_pad(end);
                let last = i + 1 == n;
                assert!(
                    pad == 0 || pad > MAX_PAD || (!raw && !last),
                    "{what} block {i}: not padded"
                );
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
            pool.install(|| write_table(&RealFs, &path, entries.as_slice(), Compression::None))
                .unwrap();
            // Compressed tables too: which blocks are tried depends only on the entries.
            let lz4 = dir.path().join(format!("{threads}-lz4.sst"));
            pool.install(|| write_table(&RealFs, &lz4, entries.as_slice(), Compression::Lz4))
                .unwrap();
            files.push(std::fs::read(&lz4).unwrap());
            files.push(std::fs::read(&path).unwrap());
            let t = Table::open(&path, false).unwrap();
            check_layout(&t, &TableCounters::default(), &format!("{threads} threads"));
            // 100-byte values: half-page blocks, every other one starting on a page.
            for i in (0..t.block_count()).step_by(2) {
                assert_eq!(
                    t.block_span(i).unwrap().0 % PAGE_SIZE as u64,
                    0,
                    "block {i}"
                );
            }
        }
        assert!(
            files[0] == files[2] && files[1] == files[3],
            "1 and 3 threads wrote different bytes"
        );
    }

    /// Blocks stored raw are cut at half a page, each inside one page; blocks that compress
    /// at a page before compression; in a compressed table of values that do not compress,
    /// the run's first block is cut at a page (it is tried first) and the rest at half a page.
    #[test]
    fn blocks_are_cut_at_half_a_page_when_stored_raw() {
        let dir = tempfile::tempdir().unwrap();
        let n = 3000;
        let keys: Vec<Vec<u8>> = (0..n).map(|i| format!("key{i:09}").into_bytes()).collect();
        let random: Vec<Vec<u8>> = (0..n as u64)
            .map(|i| {
                (0..100u64)
                    .map(|j| crate::hash::mix64(i * 1000 + j) as u8)
                    .collect()
            })
            .collect();
        let same = vec![b'v'; 100];
        let c = TableCounters::default();
        // (values, compression, first block's most bytes, every other block's most bytes),
        // as `format.md` gives them.
        let cases: [(&str, Compression, usize, usize); 3] = [
            ("none", Compression::None, 2048, 2048),
            ("lz4 compressible", Compression::Lz4, 4096, 4096),
            ("lz4 random", Compression::Lz4, 4096, 2048),
        ];
        for (what, compression, first, rest) in cases {
            let entries: Vec<(&[u8], Option<&[u8]>)> = keys
                .iter()
                .zip(&random)
                .map(|(k, r)| {
                    let v = if what == "lz4 random" { r } else { &same };
                    (k.as_slice(), Some(v.as_slice()))
                })
                .collect();
            let path = dir.path().join(format!("{what}.sst"));
            write_table(&RealFs, &path, entries.as_slice(), compression).unwrap();
            let t = Table::open(&path, false).unwrap();
            check_layout(&t, &c, what);
            // Bytes of block i before compression, with its codec byte and CRC.
            let raw = |i: usize| t.block(i, &c, false).unwrap().len() + 5;
            let most = |i: usize| if i == 0 { first } else { rest };
            for i in 0..t.block_count() {
                let (offset, len) = t.block_span(i).unwrap();
                assert!(raw(i) <= most(i), "{what}: block {i} of {} bytes", raw(i));
                // Not cut early: one more entry (at most 115 bytes and a restart) did not fit.
                if i + 1 < t.block_count() {
                    assert!(
                        raw(i) + 119 > most(i),
                        "{what}: block {i} of {} bytes",
                        raw(i)
                    );
                }
                // A raw block lies in one page (compressed ones may straddle two).
                let end = offset + len as u64 + 4;
                if raw(i) == len as usize + 4 {
                    assert_eq!(
                        offset / PAGE_SIZE as u64,
                        (end - 1) / PAGE_SIZE as u64,
                        "{what}: block {i} crosses a page"
                    );
                }
            }
        }
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
            let meta = write_table(&RealFs, &path, entries.as_slice(), Compression::None).unwrap();
            let payload = keys.len() * (keys[0].len() + value_len);
            let ratio = meta.file_bytes as f64 / payload as f64;
            assert!(
                ratio < 1.05,
                "{value_len}-byte values: file / payload = {ratio:.3}"
            );
            let t = Table::open(&path, false).unwrap();
            check_layout(&t, &TableCounters::default(), &format!("{value_len} B"));
        }
    }
}
