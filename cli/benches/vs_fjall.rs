//! filterstore next to fjall: the same keys, the same machine, one run; ratios, not single
//! absolute times.
//!
//! `cargo bench --bench vs_fjall -- [KEYS] [LOOKUPS]` (defaults 1,000,000 and 1,000,000).
//! Pin it to one core on a shared machine: `taskset -c 1 cargo bench --bench vs_fjall`.
//!
//! `cargo bench --bench vs_fjall -- tx [KEYS] [OPS] [THREADS]` (defaults 1,000,000, 200,000
//! and 4) runs the transaction workload instead: KEYS keys loaded (16 bytes, values of 100
//! bytes), then OPS transactions from THREADS threads, each 2 gets and 2 puts of two
//! uniform keys (a transfer), retried on conflict, as filterstore `Transaction`s and fjall
//! `OptimisticTxDatabase` write transactions; commits/s and conflicts, medians of
//! `ROUNDS` alternated rounds. Both sides write each commit to the log without an fsync
//! (filterstore `SyncPolicy::OnFlush`, fjall's default `PersistMode::Buffer` per commit),
//! neither compresses, both with their default memtable and cache sizes.
//!
//! Workload, identical for both stores, each in a fresh temporary directory:
//! * keys `key16(42, i)` for i in 0..KEYS (16 bytes), values of 100 bytes;
//! * load: 10 tables — for t in 0..10, put the keys i ≡ t (mod 10), then flush; no
//!   compaction, so every lookup faces 10 overlapping tables behind their Bloom filters;
//! * reopen: drop the store and open it again;
//! * absent `get`: LOOKUPS keys `key16(0x5555_5555_0000_0000, i)`, which are random-looking
//!   and so fall inside every table's key range: only the filters stop the reads;
//! * present `get`: LOOKUPS present keys drawn at random before the clock starts.
//!
//! Lookup keys lie back to back in one `Vec<u8>` and are read in order, so the loop times
//! the stores and not the harness's cache misses. Caches are warm: the files were just
//! written, and a short warm-up pass runs before the timed lookups.
//!
//! Each round runs every phase for both stores, the first store alternating between rounds;
//! the table reports medians of `ROUNDS` rounds (the shared 2-core machine is noisy).
//!
//! Settings, as close as the two engines allow:
//! * filterstore: standard Bloom filters at ε = 1 % (about 9.6 bits per key, 7 hashes),
//!   WAL `SyncPolicy::Buffered`, no compaction, tables sealed only by `flush`, no block
//!   compression, its default 32 MiB block cache;
//! * fjall (built without its `lz4` feature, so nothing is compressed): standard Bloom
//!   filters at 10 bits per key (6 hashes) in every level — its default is 10 bits only
//!   below L0 and ε = 0.01 % (about 19 bits per key) in L0, where these tables live;
//!   filter and index blocks pinned in memory in every level (its default pins filters only
//!   in L0, and leveled compaction moves the first table, unchanged, to the last level);
//!   leveled compaction with an L0 trigger of 255 tables, so the 10 tables are never merged
//!   (fjall's only other strategy, FIFO, refuses overlapping L0 tables); `manual_journal_persist`, so the
//!   journal collects writes in its user-space buffer as filterstore's `Buffered` WAL does
//!   (fjall's default is one `write` system call per insert) and no write fsyncs; its
//!   default 32 MiB block cache, which holds about a quarter of the ~120 MB of data blocks at
//!   1M keys: in both stores the rest of the data-block reads are `pread`s served by the OS
//!   page cache.

use std::error::Error;
use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use filterstore::filter::FilterKind;
use filterstore::store::{Options, Stats, Store, SyncPolicy};
use filterstore::table::Compression;
use filterstore_cli::bench::key16;
use fjall::compaction::Leveled;
use fjall::config::{BloomConstructionPolicy, FilterPolicy, FilterPolicyEntry, PinningPolicy};
use fjall::{Database, Keyspace, KeyspaceCreateOptions};

#[path = "vs_fjall/tx.rs"]
mod tx;

type Res<T> = Result<T, Box<dyn Error>>;

const PRESENT_SEED: u64 = 42;
const ABSENT_SEED: u64 = 0x5555_5555_0000_0000;
const KEY_LEN: usize = 16;
const VALUE_LEN: usize = 100;
const TABLES: usize = 10;
const ROUNDS: usize = 3;
/// Lookups of each kind in the untimed warm-up pass.
const WARMUP: usize = 100_000;

/// The operations the workload needs, so that one generic routine drives both stores (a
/// generic, not `dyn`: each store's calls are compiled and inlined as in a real caller).
trait Engine: Sized {
    const NAME: &'static str;
    /// Opens (or creates) the store in `dir`.
    fn open(dir: &Path) -> Res<Self>;
    fn put(&self, key: &[u8], value: &[u8]) -> Res<()>;
    /// Seals the memtable into one table on disk and waits until it is there.
    fn flush(&self) -> Res<()>;
    /// Looks `key` up and drops the value; `true` if found.
    fn get(&self, key: &[u8]) -> Res<bool>;
    /// Tables on disk.
    fn tables(&self) -> usize;
    /// filterstore's counters (`None` for fjall, whose metrics are a cargo feature).
    fn stats(&self) -> Option<Stats> {
        None
    }
}

impl Engine for Store {
    const NAME: &'static str = "filterstore";

    fn open(dir: &Path) -> Res<Self> {
        let opts = Options::default()
            .filter(FilterKind::Bloom)
            .fpr(0.01)
            .memtable_bytes(usize::MAX)
            .compaction_trigger(None)
            .sync(SyncPolicy::Buffered)
            .compression(Compression::None);
        Ok(Store::open(dir, opts)?)
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Res<()> {
        Ok(Store::put(self, key, value)?)
    }

    fn flush(&self) -> Res<()> {
        Ok(Store::flush(self)?)
    }

    #[inline]
    fn get(&self, key: &[u8]) -> Res<bool> {
        Ok(Store::get(self, key)?.is_some())
    }

    fn tables(&self) -> usize {
        Store::stats(self).tables.len()
    }

    fn stats(&self) -> Option<Stats> {
        Some(Store::stats(self))
    }
}

/// A fjall database with the one keyspace the workload uses (dropping both closes it).
struct Fjall {
    _db: Database,
    ks: Keyspace,
}

impl Engine for Fjall {
    const NAME: &'static str = "fjall";

    fn open(dir: &Path) -> Res<Self> {
        let db = Database::builder(dir).manual_journal_persist(true).open()?;
        // The options are stored with a new keyspace; a reopen reads them back from disk.
        let ks = db.keyspace("bench", || {
            KeyspaceCreateOptions::default()
                .filter_policy(FilterPolicy::all(FilterPolicyEntry::Bloom(
                    BloomConstructionPolicy::BitsPerKey(10.0),
                )))
                .filter_block_pinning_policy(PinningPolicy::all(true))
                .index_block_pinning_policy(PinningPolicy::all(true))
                .compaction_strategy(Arc::new(Leveled::default().with_l0_threshold(u8::MAX)))
                // Only `flush` seals a table (100,000 keys are ~12 MiB, under the 64 MiB
                // default, but larger KEYS would cross it).
                .max_memtable_size(4 << 30)
                // Journal writes stay in the buffer until it fills, a flush or the drop.
                .manual_journal_persist(true)
        })?;
        Ok(Fjall { _db: db, ks })
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Res<()> {
        Ok(self.ks.insert(key, value)?)
    }

    fn flush(&self) -> Res<()> {
        // Hidden from fjall's docs ("used in tests") but public: seals the active memtable
        // and waits for the background flush to write it as a table. fjall 3 has no other
        // way to ask for a flush.
        Ok(self.ks.rotate_memtable_and_wait()?)
    }

    #[inline]
    fn get(&self, key: &[u8]) -> Res<bool> {
        Ok(self.ks.get(key)?.is_some())
    }

    fn tables(&self) -> usize {
        self.ks.table_count()
    }
}

/// What one round measured for one store.
#[derive(Default)]
struct Round {
    puts_per_sec: f64,
    reopen_ms: f64,
    /// The drop's share of `reopen_ms`.
    drop_ms: f64,
    absent_ns: f64,
    present_ns: f64,
    /// Tables after the load (should be `TABLES`).
    tables: usize,
    /// filterstore only: filter bits per key over all tables.
    bits_per_key: Option<f64>,
    /// filterstore only: counter deltas over the timed absent and present lookups.
    absent_stats: Option<Stats>,
    present_stats: Option<Stats>,
}

/// SplitMix64, for drawing the present lookups.
fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Keys `key16(seed, i)` for i in 0..n, back to back.
fn flat_keys(seed: u64, n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * KEY_LEN);
    for i in 0..n as u64 {
        out.extend_from_slice(&key16(seed, i));
    }
    out
}

/// `count` keys drawn at random (with repetition) from `keys`, laid out in draw order.
fn drawn(keys: &[u8], count: usize, seed: u64) -> Vec<u8> {
    let n = (keys.len() / KEY_LEN) as u64;
    let mut out = Vec::with_capacity(count * KEY_LEN);
    let mut x = seed;
    for _ in 0..count {
        x = splitmix(x);
        let i = (x % n) as usize * KEY_LEN;
        out.extend_from_slice(&keys[i..i + KEY_LEN]);
    }
    out
}

/// Looks every key up; returns ns per lookup and checks that all (or none) were found.
fn time_gets<E: Engine>(store: &E, keys: &[u8], present: bool) -> Res<f64> {
    let count = keys.len() / KEY_LEN;
    let start = Instant::now();
    let mut found = 0usize;
    for key in keys.chunks_exact(KEY_LEN) {
        found += usize::from(store.get(black_box(key))?);
    }
    let ns = start.elapsed().as_nanos() as f64 / count as f64;
    let expected = if present { count } else { 0 };
    if found != expected {
        return Err(format!(
            "{}: found {found} of {count} keys, expected {expected}",
            E::NAME
        )
        .into());
    }
    Ok(ns)
}

/// `after - before` for the counters this benchmark prints.
fn delta(before: &Stats, after: &Stats) -> Stats {
    let mut d = Stats::default();
    d.lookups = after.lookups - before.lookups;
    d.filter_negatives = after.filter_negatives - before.filter_negatives;
    d.filter_positives = after.filter_positives - before.filter_positives;
    d.false_positives = after.false_positives - before.false_positives;
    d.data_block_reads = after.data_block_reads - before.data_block_reads;
    d.bytes_read = after.bytes_read - before.bytes_read;
    d
}

/// One round for one store: load, reopen, warm up, absent gets, present gets.
fn round<E: Engine>(present_keys: &[u8], absent: &[u8], present: &[u8]) -> Res<Round> {
    let tmp = tempfile::Builder::new().prefix("vs-fjall").tempdir()?;
    let dir = tmp.path().join(E::NAME);
    let n = present_keys.len() / KEY_LEN;

    // Load: 10 tables, each flushed (the flushes are part of the load time).
    let mut store = E::open(&dir)?;
    let mut value = [0u8; VALUE_LEN];
    let start = Instant::now();
    for t in 0..TABLES {
        for i in (t..n).step_by(TABLES) {
            // A value that differs per key (a counter tag, so no compression would gain much).
            for (j, chunk) in value.chunks_mut(8).enumerate() {
                let tag = (i as u64 ^ j as u64).to_le_bytes();
                chunk.copy_from_slice(&tag[..chunk.len()]);
            }
            store.put(&present_keys[i * KEY_LEN..(i + 1) * KEY_LEN], &value)?;
        }
        store.flush()?;
    }
    let puts_per_sec = n as f64 / start.elapsed().as_secs_f64();

    // Reopen: drop (closing the WAL/journal and background threads) and open again.
    let start = Instant::now();
    drop(store);
    let drop_ms = start.elapsed().as_secs_f64() * 1e3;
    store = E::open(&dir)?;
    let reopen_ms = start.elapsed().as_secs_f64() * 1e3;
    let tables = store.tables();
    let bits_per_key = store.stats().map(|s| {
        let bits: u64 = s.tables.iter().map(|t| t.filter_bytes * 8).sum();
        bits as f64 / s.table_keys().max(1) as f64
    });

    // Warm-up, untimed.
    let warm = WARMUP
        .min(absent.len() / KEY_LEN)
        .min(present.len() / KEY_LEN)
        * KEY_LEN;
    time_gets(&store, &absent[..warm], false)?;
    time_gets(&store, &present[..warm], true)?;

    let s0 = store.stats();
    let absent_ns = time_gets(&store, absent, false)?;
    let s1 = store.stats();
    let present_ns = time_gets(&store, present, true)?;
    let s2 = store.stats();
    let (absent_stats, present_stats) = match (s0, s1, s2) {
        (Some(a), Some(b), Some(c)) => (Some(delta(&a, &b)), Some(delta(&b, &c))),
        _ => (None, None),
    };
    drop(store);
    Ok(Round {
        puts_per_sec,
        reopen_ms,
        drop_ms,
        absent_ns,
        present_ns,
        tables,
        bits_per_key,
        absent_stats,
        present_stats,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Prints filterstore's counters for one kind of lookup.
fn print_counters(what: &str, s: &Stats) {
    let per = |x: u64| x as f64 / s.lookups.max(1) as f64;
    println!(
        "  {what:<8} lookups {:>9}  block reads/lookup {:.4}  filter probes/lookup {:.3}  \
         false positives/lookup {:.4}  bytes read/lookup {:.0}",
        s.lookups,
        per(s.data_block_reads),
        per(s.filter_negatives + s.filter_positives),
        per(s.false_positives),
        per(s.bytes_read),
    );
}

fn main() -> Res<()> {
    // `cargo bench` passes `--bench`; the numbers are ours.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if args.first().is_some_and(|a| a == "tx") {
        return tx::main(&args[1..]);
    }
    let nums: Vec<usize> = args
        .iter()
        .map(|a| a.replace('_', "").parse())
        .collect::<Result<_, _>>()?;
    let n = nums.first().copied().unwrap_or(1_000_000);
    let lookups = nums.get(1).copied().unwrap_or(1_000_000);
    if n < TABLES || lookups == 0 {
        return Err("usage: vs_fjall [KEYS >= 10] [LOOKUPS >= 1]".into());
    }

    let present_keys = flat_keys(PRESENT_SEED, n);
    let absent = flat_keys(ABSENT_SEED, lookups);
    let present = drawn(&present_keys, lookups, 7);

    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    println!(
        "vs_fjall: {n} keys of {KEY_LEN} B, values {VALUE_LEN} B, {TABLES} tables, \
         {lookups} lookups of each kind, {ROUNDS} rounds, {cpus} usable core(s)"
    );
    let (mut fs, mut fj) = (Vec::new(), Vec::new());
    for r in 0..ROUNDS {
        // Alternate which store goes first.
        if r % 2 == 0 {
            fs.push(round::<Store>(&present_keys, &absent, &present)?);
            fj.push(round::<Fjall>(&present_keys, &absent, &present)?);
        } else {
            fj.push(round::<Fjall>(&present_keys, &absent, &present)?);
            fs.push(round::<Store>(&present_keys, &absent, &present)?);
        }
        let (a, b) = (&fs[r], &fj[r]);
        eprintln!(
            "round {}: load {:.0} / {:.0} puts/s, reopen {:.2} / {:.2} ms (drop {:.2} / {:.2}), absent {:.1} / {:.1} ns, \
             present {:.1} / {:.1} ns (filterstore / fjall; tables {} / {})",
            r + 1,
            a.puts_per_sec,
            b.puts_per_sec,
            a.reopen_ms,
            b.reopen_ms,
            a.drop_ms,
            b.drop_ms,
            a.absent_ns,
            b.absent_ns,
            a.present_ns,
            b.present_ns,
            a.tables,
            b.tables
        );
    }

    type Pick = fn(&Round) -> f64;
    let rows: [(&str, Pick, &str); 4] = [
        (
            "load (puts/s, incl. 10 flushes)",
            |r| r.puts_per_sec,
            "higher",
        ),
        ("reopen (ms, drop + open)", |r| r.reopen_ms, "lower"),
        ("absent get (ns)", |r| r.absent_ns, "lower"),
        ("present get (ns)", |r| r.present_ns, "lower"),
    ];
    println!();
    println!(
        "{:<32} {:>12} {:>12} {:>15}  better",
        "median of 3", "filterstore", "fjall", "fjall/filterst."
    );
    for (name, pick, better) in rows {
        let a = median(fs.iter().map(pick).collect());
        let b = median(fj.iter().map(pick).collect());
        println!("{name:<32} {a:>12.1} {b:>12.1} {:>15.2}  {better}", b / a);
    }

    println!();
    println!(
        "tables after load: filterstore {}, fjall {}",
        fs[0].tables, fj[0].tables
    );
    let last = fs.last().expect("ROUNDS > 0");
    println!(
        "filter bits per key: filterstore {:.2} (Bloom, ε = 1 %), fjall 10 (Bloom, set)",
        last.bits_per_key.unwrap_or(f64::NAN)
    );
    println!("filterstore counters (last round's timed lookups):");
    if let (Some(a), Some(p)) = (&last.absent_stats, &last.present_stats) {
        print_counters("absent", a);
        print_counters("present", p);
    }
    Ok(())
}
