//! Compaction execution: the streaming k-way merge of `merge.rs` feeding table writers that roll to a new
//! file at the target size.
//!
//! ```text
//! sources (newest first) ──► heap merge ──► runs of entries ──► encode (rayon) ──► table
//!   one cursor per L0 table     newest wins,    ≤ RUN entries or     blocks, key      files of
//!   one per sorted level        tombstones      1 MiB each           hashes           ≈ table_bytes
//!                               dropped at the bottom                                  + filters
//! ```
//! The merge fills a window of runs (one per thread) while the previous window is encoded
//! and written, so merging overlaps encoding and writing. **Memory bound:** one
//! [`TableCursor`] chunk (64 KiB) per source, two windows of `threads` runs of at most
//! 1 MiB or 8,192 entries plus one entry each (the merge's and the encoder's) and their
//! encoded copies, and the key hashes of the output table being written (8 bytes per entry). None
//! of it depends on the size of the inputs.

use std::sync::Arc;

use crate::error::Result;
use crate::filter::global::{MergeKey, RunId, RunSet};
use crate::merge::{Merge, State};
use crate::table::files::{NewTable, TableSpec, TableWriter};
use crate::table::{
    encode_part, run_full, OwnedRun, Part, SortedEntries, Table, TableCounters, TableCursor,
};
use crate::tombstone::compact::{RangeInput, RangeOut};
use crate::tombstone::RangeTombstone;
use std::ops::Bound;

/// One input of a merge: one table, or a sorted level's tables one after another.
pub(crate) struct Source {
    tables: Vec<Arc<Table>>,
    next: usize,
    cursor: Option<TableCursor>,
    counters: Arc<TableCounters>,
    /// [`prefix8`](crate::version::prefix8) of the current key: most comparisons between
    /// sources need nothing else.
    head: u64,
}

impl Source {
    /// The entries of `tables` (one table, or a sorted level's tables in key order).
    pub(crate) fn new(tables: Vec<Arc<Table>>, counters: Arc<TableCounters>) -> Result<Source> {
        let mut s = Source {
            tables,
            next: 0,
            cursor: None,
            counters,
            head: 0,
        };
        s.settle()?;
        Ok(s)
    }

    /// Moves to the next table while the current one is exhausted.
    fn settle(&mut self) -> Result<()> {
        while !self.cursor.as_ref().is_some_and(TableCursor::valid) {
            let Some(t) = self.tables.get(self.next) else {
                self.cursor = None;
                return Ok(());
            };
            self.next += 1;
            self.cursor = Some(TableCursor::new(t.clone(), self.counters.clone())?);
        }
        self.head = self.cursor.as_ref().map_or(0, TableCursor::head);
        Ok(())
    }

    fn valid(&self) -> bool {
        self.cursor.is_some()
    }

    #[inline]
    fn key(&self) -> &[u8] {
        self.cursor.as_ref().map_or(&[], TableCursor::key)
    }

    fn value(&self) -> Option<&[u8]> {
        self.cursor.as_ref().and_then(TableCursor::value)
    }

    fn expires(&self) -> u64 {
        self.cursor.as_ref().map_or(0, TableCursor::expires)
    }

    fn advance(&mut self) -> Result<()> {
        if let Some(c) = &mut self.cursor {
            c.advance()?;
        }
        self.settle()
    }
}

impl crate::merge::Source for Source {
    #[inline]
    fn state(&self) -> State {
        if self.valid() {
            State::Ready
        } else {
            State::Done
        }
    }
    #[inline]
    fn key(&self) -> &[u8] {
        Source::key(self)
    }
    #[inline]
    fn head(&self) -> u64 {
        self.head
    }
    #[inline]
    fn value(&self) -> Option<&[u8]> {
        Source::value(self)
    }
    #[inline]
    fn expires(&self) -> u64 {
        Source::expires(self)
    }
    fn open(&mut self, _: Bound<&[u8]>, _: Bound<&[u8]>) -> Result<()> {
        Ok(()) // never pending: positioned on its first entry when made
    }
    #[inline]
    fn advance(&mut self) -> Result<()> {
        Source::advance(self)
    }
}

/// The merge of a compaction's sources (newest first): the one k-way merge of `merge.rs`,
/// forward over the whole key range, tombstones included.
type Merger = Merge<Source, false>;

/// Where and how a merge writes its output.
pub(crate) struct Output<'a> {
    /// Where the output tables go, their level, filters and compression.
    pub spec: TableSpec<'a>,
    /// A new table is started once the current one holds this many key and value bytes.
    pub table_bytes: u64,
    /// What the merge does to the entries it writes: expiry and the compaction filter.
    pub expiry: super::expire::Rewrite<'a>,
    /// The inputs' range tombstones: the entries they drop and the ones the output keeps
    /// (`tombstone::compact`).
    pub ranges: RangeInput,
}

/// Where a merge's keys were and go in a store's global filter: the run of each source and
/// of the output, `None` for a source or output whose tables have filters of their own
/// (their keys are not in the global filter: the deepest level's). The merge collects what
/// the filter must change (see [`Moves`]).
pub(crate) struct Runs {
    /// The run id of each source, in the order of the sources.
    pub sources: Vec<Option<RunId>>,
    /// The run id of the output level.
    pub output: Option<RunId>,
}

/// What a merge changes in a store's global filter, for its owner to apply (with
/// [`Writer::merge_batch`]): one [`MergeKey`] per merged key that was in a run other than
/// the output, or that was dropped: the runs that held it and the run that holds it after
/// (the output, or none). Keys that only the output level held and that stay cost nothing;
/// so do keys that neither a source nor the output holds in the filter. A key kept in an
/// output in the filter that only sources outside it held is inserted (`from` empty); a
/// key whose output has a filter of its own leaves the filter (`to` none).
///
/// [`Writer::merge_batch`]: crate::filter::global::Writer::merge_batch
#[derive(Debug, Default)]
pub(crate) struct Moves {
    pub keys: Vec<MergeKey>,
}

impl Moves {
    /// Notes one merged key: the sources that `held` it, and whether it was `kept`.
    fn note(&mut self, runs: &Runs, key: &[u8], held: &[u32], kept: bool) {
        let run = |s: u32| match runs.sources.get(s as usize) {
            Some(r) => *r,
            None => runs.output,
        };
        let to = if kept { runs.output } else { None };
        if held.len() == 1 && run(held[0]) == to {
            // In the filter under the run it stays in, or in neither.
            return;
        }
        let mut from = RunSet::EMPTY;
        let mut cached = None;
        let mut hash = || *cached.get_or_insert_with(|| crate::hash::key_hash(key));
        for &s in held {
            let Some(r) = run(s) else { continue };
            if from.contains(r) {
                // Two L0 tables that share an id (past 26 of them) both held the key: the
                // second entry is removed on its own.
                self.keys.push(MergeKey {
                    hash: hash(),
                    from: RunSet::of(r),
                    to: None,
                });
            } else {
                from = from.with(r);
            }
        }
        if from.is_empty() && to.is_none() {
            return;
        }
        self.keys.push(MergeKey {
            hash: hash(),
            from,
            to,
        });
    }
}

/// A run of the merge's output and whether the output table ends with it.
struct Chunk {
    run: OwnedRun,
    ends_table: bool,
    /// When it ends a table: that table's range tombstones.
    tombstones: Vec<RangeTombstone>,
}

/// What the merge side keeps between windows.
struct MergeSide<'d> {
    merger: Merger,
    drop_tombstone: &'d (dyn Fn(&[u8]) -> bool + Sync),
    table_bytes: u64,
    /// Key and value bytes in the output table being filled.
    in_table: u64,
    /// An entry that did not fit the last run (it starts the next table).
    carry: Option<(Vec<u8>, Option<Vec<u8>>, u64)>,
    rewrite: &'d super::expire::Rewrite<'d>,
    done: bool,
    /// The global filter's runs, when the store has one, and what the merge changes there.
    track: Option<(&'d Runs, Moves)>,
    ranges: &'d RangeInput,
    range_out: RangeOut,
    /// Expired entries met, and the bytes not written again for them ([`Expired`]).
    expired: Expired,
}

/// What expiry removed in a merge: entries, and their bytes not written again (the value's,
/// and the key's where the tombstone it became was dropped).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Expired {
    pub entries: u64,
    pub bytes: u64,
}

impl MergeSide<'_> {
    /// Fills up to `n` runs, reusing `spare` buffers.
    fn fill(&mut self, n: usize, spare: &mut Vec<OwnedRun>) -> Result<Vec<Chunk>> {
        let mut out: Vec<Chunk> = Vec::with_capacity(n);
        while out.len() < n && !self.done {
            let mut run = spare.pop().unwrap_or_default();
            run.clear();
            run.tagged = self.rewrite.tagged;
            let mut ends_table = false;
            let (ranges, range_out) = (self.ranges, &mut self.range_out);
            if let Some((k, v, e)) = self.carry.take() {
                self.in_table += (k.len() + v.as_ref().map_or(0, Vec::len)) as u64;
                range_out.reach(ranges, &k);
                run.push(&k, v.as_deref(), e);
            }
            let (limit, drop_t, rewrite) = (self.table_bytes, self.drop_tombstone, self.rewrite);
            let mut in_table = self.in_table;
            let mut carry = None;
            let expired = &mut self.expired;
            while !run_full(run.len(), run.bytes()) {
                let mut kept = false;
                let more = self.merger.next_entry_all(|src, k, v, exp| {
                    if v.is_some() && ranges.drops(k, src) {
                        // Under a newer range tombstone, expiring or not: neither the
                        // compaction filter nor expiry sees it.
                        return;
                    }
                    let changed;
                    let gone = v.filter(|_| crate::expiry::expired_at(exp, rewrite.now));
                    if let Some(gone) = gone {
                        expired.entries += 1;
                        expired.bytes += gone.len() as u64;
                    }
                    let (v, exp) = match rewrite.apply(k, v, exp) {
                        super::expire::Out::Same => (v, exp),
                        super::expire::Out::Tombstone => (None, 0),
                        super::expire::Out::Value(nv) => {
                            changed = nv;
                            (Some(changed.as_slice()), exp)
                        }
                    };
                    if v.is_none() && drop_t(k) && !ranges.keeps_start(k) {
                        if gone.is_some() {
                            expired.bytes += k.len() as u64;
                        }
                        return;
                    }
                    kept = true;
                    let size = (k.len() + v.map_or(0, <[u8]>::len)) as u64;
                    if in_table > 0 && in_table + size > limit && range_out.may_cut_before(k) {
                        carry = Some((k.to_vec(), v.map(<[u8]>::to_vec), exp));
                    } else {
                        in_table += size;
                        range_out.reach(ranges, k);
                        run.push(k, v, exp);
                    }
                })?;
                if !more {
                    self.done = true;
                    ends_table = true;
                    break;
                }
                if let Some((runs, moves)) = &mut self.track {
                    let m = &self.merger;
                    moves.note(runs, m.last().unwrap_or_default(), m.held(), kept);
                }
                if carry.is_some() {
                    ends_table = true;
                    in_table = 0;
                    break;
                }
            }
            self.in_table = in_table;
            self.carry = carry;
            let tombstones = if ends_table {
                self.range_out.end_table(self.ranges, self.done)
            } else {
                Vec::new()
            };
            if run.len() > 0 || ends_table {
                out.push(Chunk {
                    run,
                    ends_table,
                    tombstones,
                });
            } else {
                spare.push(run);
            }
        }
        Ok(out)
    }
}

/// What the write side keeps between windows.
struct WriteSide<'o> {
    out: &'o Output<'o>,
    /// Encoding buffers of written parts, for reuse.
    bufs: Vec<Vec<u8>>,
    /// The output table being written, with its filters' inputs.
    table: Option<TableWriter>,
    /// The tables written (their files go if the merge fails: `table/files.rs`).
    tables: Vec<NewTable>,
    /// Bytes written to table and filter files.
    written: u64,
}

impl WriteSide<'_> {
    /// Encodes `chunks` in parallel, then writes them in order.
    fn write(&mut self, chunks: Vec<Chunk>, spare: &mut Vec<OwnedRun>) -> Result<()> {
        use rayon::prelude::*;
        let bufs: Vec<Vec<u8>> = (0..chunks.len())
            .map(|_| self.bufs.pop().unwrap_or_default())
            .collect();
        let compression = self.out.spec.compression;
        let parts: Vec<(Part, bool)> = chunks
            .par_iter()
            .zip(bufs)
            .map(|(c, buf)| {
                let r = 0..c.run.len();
                (encode_part(&c.run, r, buf, true, compression), c.ends_table)
            })
            .collect();
        for ((part, ends), chunk) in parts.into_iter().zip(&chunks) {
            if part.hashes.is_empty() && !ends {
                continue;
            }
            if !part.hashes.is_empty() {
                let w = match &mut self.table {
                    Some(w) => w,
                    None => self.table.insert(TableWriter::create(&self.out.spec)?),
                };
                let keys = (0..chunk.run.len()).map(|i| chunk.run.entry(i).0);
                self.bufs.push(w.add_part(part, keys)?);
            }
            if ends {
                self.finish_table(&chunk.tombstones)?;
            }
        }
        spare.extend(chunks.into_iter().map(|c| c.run));
        Ok(())
    }

    /// Finishes the table being written, and writes its filters and `tombstones`.
    fn finish_table(&mut self, tombstones: &[RangeTombstone]) -> Result<()> {
        let Some(w) = self.table.take() else {
            if !tombstones.is_empty() {
                // Never dropped silently: the keys they hide would be seen again.
                return Err(crate::Error::Internal(format!(
                    "a compaction kept {} range tombstones for an output table without entries",
                    tombstones.len()
                )));
            }
            return Ok(());
        };
        let t = w.finish(&self.out.spec)?;
        let t = t.with_tombstones(&self.out.spec, tombstones)?;
        self.written += t.record.file_bytes + t.filter_bytes;
        self.tables.push(t);
        Ok(())
    }
}

/// What a merge did.
#[derive(Debug, Default)]
pub(crate) struct MergeResult {
    /// The output tables, in key order (their files go if they are dropped unpublished).
    pub tables: Vec<NewTable>,
    /// Bytes written to table and filter files.
    pub bytes_written: u64,
    /// What the global filter must change (when the merge was given its [`Runs`]).
    pub moves: Moves,
    /// What expiry removed.
    pub expired: Expired,
}

/// Merges `sources` (newest first) into new tables at `out.level`, dropping every older
/// version of a key and every tombstone for which `drop_tombstone` says so. The outputs are
/// durable (fsynced) when this returns; on an error they are removed.
///
/// With `runs` (a store with a global filter), it also collects what the filter must change
/// ([`Moves`], 16 bytes per key that moves: memory that grows with the upper inputs).
pub(crate) fn merge(
    sources: Vec<Source>,
    drop_tombstone: &(dyn Fn(&[u8]) -> bool + Sync),
    out: &Output<'_>,
    runs: Option<&Runs>,
) -> Result<MergeResult> {
    let mut w = WriteSide {
        out,
        bufs: Vec::new(),
        table: None,
        tables: Vec::new(),
        written: 0,
    };
    // On an error the tables written and the one being written are dropped, and their
    // files with them.
    let (moves, expired) = run_pipeline(sources, drop_tombstone, out, &mut w, runs)?;
    Ok(MergeResult {
        tables: std::mem::take(&mut w.tables),
        bytes_written: w.written,
        moves,
        expired,
    })
}

fn run_pipeline(
    sources: Vec<Source>,
    drop_tombstone: &(dyn Fn(&[u8]) -> bool + Sync),
    out: &Output<'_>,
    w: &mut WriteSide<'_>,
    runs: Option<&Runs>,
) -> Result<(Moves, Expired)> {
    let threads = rayon::current_num_threads().max(1);
    let mut m = MergeSide {
        merger: Merger::new(sources, Bound::Unbounded, Bound::Unbounded),
        drop_tombstone,
        table_bytes: out.table_bytes.max(1),
        in_table: 0,
        carry: None,
        rewrite: &out.expiry,
        done: false,
        track: runs.map(|r| (r, Moves::default())),
        ranges: &out.ranges,
        range_out: RangeOut::default(),
        expired: Expired::default(),
    };
    let (mut spare_m, mut spare_w) = (Vec::new(), Vec::new());
    let mut pending: Vec<Chunk> = Vec::new();
    loop {
        if m.done && pending.is_empty() {
            break;
        }
        let to_write = std::mem::take(&mut pending);
        let (written, filled) = rayon::join(
            || w.write(to_write, &mut spare_w),
            || {
                if m.done {
                    Ok(Vec::new())
                } else {
                    m.fill(threads, &mut spare_m)
                }
            },
        );
        written?;
        pending = filled?;
        spare_m.append(&mut spare_w);
    }
    w.finish_table(&[])?;
    let moves = m.track.map(|(_, moves)| moves).unwrap_or_default();
    Ok((moves, m.expired))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::RealFs;
    use crate::table::{write_table, Compression};

    /// A merge writes the same bytes whatever the number of threads: runs end where the
    /// entries say, not where the threads do.
    #[test]
    fn merge_output_does_not_depend_on_the_thread_count() {
        let dir = tempfile::tempdir().unwrap();
        // Three overlapping inputs with overwrites and tombstones, enough entries for many
        // runs and several output tables.
        let mut tables = Vec::new();
        for t in 0..3u64 {
            let keys: Vec<Vec<u8>> = (0..40_000u64)
                .map(|i| format!("key{:08}", i * 3 + t % 2).into_bytes())
                .collect();
            let value = [b'a' + t as u8; 60];
            let entries: Vec<(&[u8], Option<&[u8]>)> = keys
                .iter()
                .enumerate()
                .map(|(i, k)| (k.as_slice(), (i % 13 != t as usize).then_some(&value[..])))
                .collect();
            let path = crate::filename::table_path(dir.path(), 100 + t);
            write_table(&RealFs, &path, entries.as_slice(), Compression::None).unwrap();
            tables.push(Arc::new(Table::open(&path, false).unwrap()));
        }
        let mut outputs: Vec<Vec<Vec<u8>>> = Vec::new();
        for threads in [1, 3] {
            let out_dir = dir.path().join(format!("out{threads}"));
            std::fs::create_dir(&out_dir).unwrap();
            let next = std::sync::atomic::AtomicU64::new(1);
            let alloc = || Ok(next.fetch_add(1, std::sync::atomic::Ordering::SeqCst));
            let fs: Arc<dyn crate::io::Fs> = Arc::new(RealFs);
            let out = Output {
                expiry: Default::default(),
                spec: TableSpec {
                    fs: &fs,
                    dir: &out_dir,
                    level: 1,
                    filter: (crate::filter::FilterKind::BlockedBloom, 0.01),
                    compression: Compression::Lz4,
                    range_bits: 16.0,
                    range_clock: None,
                    alloc: &alloc,
                    key_hashes: false,
                },
                table_bytes: 1 << 20,
                ranges: Default::default(),
            };
            let counters = Arc::new(TableCounters::default());
            let sources: Vec<Source> = tables
                .iter()
                .map(|t| Source::new(vec![t.clone()], counters.clone()).unwrap())
                .collect();
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let result = pool
                .install(|| merge(sources, &|_: &[u8]| true, &out, None))
                .unwrap();
            assert!(result.tables.len() > 2, "{} tables", result.tables.len());
            let mut files: Vec<_> = std::fs::read_dir(&out_dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            files.sort();
            outputs.push(files.iter().map(|p| std::fs::read(p).unwrap()).collect());
        }
        assert_eq!(outputs[0].len(), outputs[1].len());
        assert!(
            outputs[0] == outputs[1],
            "1 and 3 threads wrote different bytes"
        );
    }
}
