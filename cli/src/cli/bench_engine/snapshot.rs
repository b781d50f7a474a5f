//! `bench engine --workload snapshot`: what a snapshot costs. Lookups through a snapshot
//! against plain lookups, and the put rate while one is held (issue 36's targets;
//! docs/engine.md, "Snapshots").
//!
//! ```text
//! for each round, a store with the snapshot and one without (alternating which goes first):
//!   fresh store ─► N puts ─► [snapshot] ─► N more puts, timed with the final flush
//!                                          (even i < N: overwrites; the rest new keys)
//!   with the snapshot: compact (every table it reads is replaced) ─► stats (what it pins)
//!     ─► one untimed pass of the gets below (warm pages for both) ─► gets of loaded keys
//!        through the snapshot and through the store, in interleaved batches, timed apart
//!        for keys overwritten since (even) and keys only in tables compacted since (odd);
//!        and through a second snapshot taken after the compaction (the store's own tree:
//!        what the snapshot's read path adds, apart from the older tree it holds)
//! medians of the ratios
//! ```
//!
//! Every value is checked on a sample (untimed): the snapshot reads the loaded value, the
//! store the overwrite.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use filterstore::hash::mix64;
use filterstore::{Options, Store};
use filterstore_cli::bench::median;

use super::super::bench_data::{fill_value, key};
use crate::cli::{CliError, Exit};

/// What `snapshot` runs.
pub(super) struct SnapshotRun<'a> {
    /// Parent of the rounds' stores (each removed after its round).
    pub root: &'a Path,
    pub opts: Options,
    pub filter: String,
    /// N: keys loaded before the snapshot, and puts after it.
    pub n: u64,
    /// Gets timed per round, through each of the snapshot and the store.
    pub lookups: u64,
    pub rounds: usize,
    pub value_bytes: usize,
    pub seed: u64,
}

/// The value index of the overwrite of key `i` (its loaded value is `i`'s).
const OVERWRITE: u64 = 1 << 62;

/// Index `i` of the `j`-th put after the snapshot: even `j < N` overwrite loaded key `j`,
/// odd `j` put new key `N + j`.
fn after(n: u64, j: u64) -> u64 {
    if j.is_multiple_of(2) {
        j
    } else {
        n + j
    }
}

/// Time of the gets of one round: `[class][through]`, class 0 overwritten keys, 1 keys only
/// in compacted tables; through 0 the snapshot, 1 the store, 2 a snapshot taken after the
/// compaction. Seconds and counts.
#[derive(Default)]
struct Times {
    secs: [[f64; 3]; 2],
    gets: [u64; 2],
}

/// Writes N puts after an optional snapshot; with one, compacts, measures the gets, and
/// appends the round's lines to `o`. Returns the puts/s and, with a snapshot, the times.
fn one_store(
    r: &SnapshotRun,
    dir: &Path,
    with: bool,
    o: &mut String,
    round: usize,
) -> Result<(f64, Option<Times>), CliError> {
    let n = r.n;
    let store = Store::open(dir, r.opts.clone())?;
    let mut value = vec![0u8; r.value_bytes];
    for i in 0..n {
        fill_value(i, 0.0, &mut value);
        store.put(key(r.seed, i, false), &value)?;
    }
    // Taken with the load's last writes still in the memtable: its overwrites link.
    let snap = with.then(|| store.snapshot());
    let t = Instant::now();
    for j in 0..n {
        let i = after(n, j);
        let v = if i < n { i | OVERWRITE } else { i };
        fill_value(v, 0.0, &mut value);
        store.put(key(r.seed, i, false), &value)?;
    }
    store.flush()?;
    let rate = n as f64 / t.elapsed().as_secs_f64();
    let Some(snap) = snap else {
        return Ok((rate, None));
    };
    eprintln!("bench engine: snapshot round {round}: compacting");
    store.compact()?;
    let s = store.stats().snapshots;
    let _ = writeln!(
        o,
        "round {round}: with the snapshot held {rate:.0} puts/s; after the compaction it pins {} tables, {} bytes of table files ({} MiB), {} bytes of memtables ({} MiB); open snapshots {}, oldest {:.1} s",
        s.pinned_tables,
        s.pinned_table_bytes,
        s.pinned_table_bytes >> 20,
        s.memtable_bytes,
        s.memtable_bytes >> 20,
        s.open,
        s.oldest_age.map_or(0.0, |a| a.as_secs_f64())
    );
    // Loaded keys in random order: even ones overwritten since, odd ones only compacted.
    let idx: Vec<u64> = (0..r.lookups.max(2))
        .map(|j| mix64(j ^ r.seed) % n)
        .collect();
    let mut wrong = 0u64;
    let mut expect = vec![0u8; r.value_bytes];
    for &i in idx.iter().take(10_000) {
        let k = key(r.seed, i, false);
        fill_value(i, 0.0, &mut expect);
        wrong += u64::from(snap.get(k)?.is_none_or(|v| v[..] != expect[..]));
        fill_value(if i % 2 == 0 { i | OVERWRITE } else { i }, 0.0, &mut expect);
        wrong += u64::from(store.get(k)?.is_none_or(|v| v[..] != expect[..]));
    }
    if wrong > 0 {
        return Err(CliError {
            code: Exit::Corrupt,
            message: format!(
                "snapshot workload: {wrong} gets of the checked sample read a wrong value"
            ),
            quiet: false,
        });
    }
    // One untimed pass of every timed get through both, so the timed passes compare lookups
    // on warm pages (the snapshot's tables and the store's are different files).
    for &i in &idx {
        let k = key(r.seed, i, false);
        snap.get(k)?;
        store.get(k)?;
    }
    // Over the store's own tree: only the snapshot read path differs from the store's.
    let fresh = store.snapshot();
    for &i in &idx {
        fresh.get(key(r.seed, i, false))?;
    }
    let mut times = Times::default();
    for class in 0..2 {
        let keys: Vec<[u8; 16]> = idx
            .iter()
            .filter(|&&i| i % 2 == class as u64)
            .map(|&i| key(r.seed, i, false))
            .collect();
        times.gets[class] = keys.len() as u64;
        for (b, chunk) in keys.chunks(10_000).enumerate() {
            // Alternate which goes first, so neither always finds the caches warmer.
            for pass in 0..3 {
                let through = (pass + b) % 3;
                let t = Instant::now();
                let mut found = 0usize;
                match through {
                    0 => {
                        for k in chunk {
                            found += usize::from(snap.get(k)?.is_some());
                        }
                    }
                    1 => {
                        for k in chunk {
                            found += usize::from(store.get(k)?.is_some());
                        }
                    }
                    _ => {
                        for k in chunk {
                            found += usize::from(fresh.get(k)?.is_some());
                        }
                    }
                }
                times.secs[class][through] += t.elapsed().as_secs_f64();
                if found != chunk.len() {
                    return Err(CliError {
                        code: Exit::Corrupt,
                        message: format!(
                            "snapshot workload: {} of {} loaded keys not found",
                            chunk.len() - found,
                            chunk.len()
                        ),
                        quiet: false,
                    });
                }
            }
        }
    }
    drop((snap, fresh));
    Ok((rate, Some(times)))
}

/// Runs the rounds and returns the report.
pub(super) fn snapshot(r: &SnapshotRun) -> Result<String, CliError> {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "filterstore bench engine --workload snapshot — {} puts of 16-byte keys and {}-byte values, a snapshot, {} more puts (half overwrites), filter {}, {} rounds",
        r.n,
        r.value_bytes,
        r.n,
        r.filter,
        r.rounds
    );
    let (mut put_ratios, mut get_ratios) = (Vec::new(), [Vec::new(), Vec::new(), Vec::new()]);
    let mut fresh_ratios = Vec::new();
    for round in 0..r.rounds.max(1) {
        let mut rates = [0.0f64; 2];
        let mut times = None;
        for with in [round % 2 == 0, round % 2 != 0] {
            let dir = r.root.join(format!(
                "snapshot-{round}-{}",
                if with { "with" } else { "without" }
            ));
            eprintln!(
                "bench engine: snapshot round {round}, {} a snapshot",
                if with { "with" } else { "without" }
            );
            let (rate, t) = one_store(r, &dir, with, &mut o, round)?;
            let _ = std::fs::remove_dir_all(&dir);
            rates[usize::from(with)] = rate;
            times = times.or(t);
        }
        let _ = writeln!(
            o,
            "round {round}: puts/s with the snapshot held {:.0}, without {:.0}: {:.3}×",
            rates[1],
            rates[0],
            rates[1] / rates[0]
        );
        put_ratios.push(rates[1] / rates[0]);
        let t = times.expect("one store of each round holds the snapshot");
        for (class, name) in ["overwritten since", "only in tables compacted since"]
            .iter()
            .enumerate()
        {
            let per = |s: f64| s * 1e9 / t.gets[class].max(1) as f64;
            let ratio = t.secs[class][0] / t.secs[class][1];
            let _ = writeln!(
                o,
                "round {round}: get of keys {name}: through the snapshot {:.0} ns, through the store {:.0} ns: {ratio:.3}×; through a snapshot taken after the compaction {:.0} ns: {:.3}× ({} gets each)",
                per(t.secs[class][0]),
                per(t.secs[class][1]),
                per(t.secs[class][2]),
                t.secs[class][2] / t.secs[class][1],
                t.gets[class]
            );
            get_ratios[class].push(ratio);
        }
        let both = (t.secs[0][0] + t.secs[1][0]) / (t.secs[0][1] + t.secs[1][1]);
        get_ratios[2].push(both);
        fresh_ratios.push((t.secs[0][2] + t.secs[1][2]) / (t.secs[0][1] + t.secs[1][1]));
    }
    let _ = writeln!(
        o,
        "snapshot:  n {}, filter {}: snapshot get ÷ store get, median {:.3}× (overwritten keys {:.3}×, compacted keys {:.3}×); a snapshot over the same tree as the store (taken after the compaction) ÷ store get, median {:.3}×; puts/s with ÷ without the snapshot, median {:.3}×",
        r.n,
        r.filter,
        median(&mut get_ratios[2]),
        median(&mut get_ratios[0]),
        median(&mut get_ratios[1]),
        median(&mut fresh_ratios),
        median(&mut put_ratios)
    );
    Ok(o)
}
