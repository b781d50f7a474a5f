//! `bench engine --workload sync-mix`: durable puts/s from several threads when 1 write in K
//! is synced by its `WriteOptions` (the others not), against every write synced
//! (`SyncPolicy::EveryWrite`), same threads, same operations, in one run.
//!
//! ```text
//! for each round (the two modes alternate which goes first):
//!   fresh store, SyncPolicy::EveryWrite ─► OPS puts from T threads ─► puts/s   ("all synced")
//!   fresh store, SyncPolicy::OnFlush    ─► OPS puts from T threads, 1 in K     ("mix")
//!                                          with WriteOptions::default().sync(true) ─► puts/s
//! medians of each mode and their ratio
//! ```

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use filterstore::{Options, Store, SyncPolicy, WriteOptions};
use filterstore_cli::bench::median;

use super::super::bench_data::{fill_value, key};
use crate::cli::CliError;

/// What `sync-mix` runs.
pub(super) struct SyncMix<'a> {
    /// Parent of the rounds' stores (each removed after its round).
    pub root: &'a Path,
    /// Options of the stores (their `sync` is set here per mode).
    pub opts: Options,
    pub threads: u64,
    pub ops: u64,
    /// K: one write in K synced in the mix.
    pub synced_every: u64,
    pub rounds: usize,
    pub value_bytes: usize,
    pub seed: u64,
}

/// Puts/s of `ops` puts from `threads` threads into a fresh store in `dir`; `every`: `None`
/// for every write synced by the store's policy, `Some(k)` for one in k synced by its
/// `WriteOptions` on a store that syncs on flush.
fn run(m: &SyncMix, dir: &Path, every: Option<u64>) -> Result<f64, CliError> {
    let opts = m.opts.clone().sync(match every {
        None => SyncPolicy::EveryWrite,
        Some(_) => SyncPolicy::OnFlush,
    });
    let store = Store::open(dir, opts)?;
    let per = (m.ops / m.threads).max(1);
    let t = Instant::now();
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..m.threads)
            .map(|th| {
                let store = &store;
                s.spawn(move || -> filterstore::Result<()> {
                    let mut value = vec![0u8; m.value_bytes];
                    for j in 0..per {
                        let i = th * per + j;
                        fill_value(i, 0.0, &mut value);
                        let k = key(m.seed, i, false);
                        match every {
                            None => store.put(k, &value)?,
                            Some(every) => {
                                let synced = j % every == every - 1;
                                let wo = WriteOptions::default().sync(synced);
                                store.put_opt(k, &value, &wo)?
                            }
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().expect("a sync-mix writer panicked"))
    })?;
    let secs = t.elapsed().as_secs_f64();
    drop(store);
    Ok((per * m.threads) as f64 / secs)
}

/// Runs the rounds and returns the report.
pub(super) fn sync_mix(m: &SyncMix) -> Result<String, CliError> {
    let (mut all, mut mix) = (Vec::new(), Vec::new());
    let mut o = String::new();
    let every = m.synced_every.max(1);
    let _ = writeln!(
        o,
        "filterstore bench engine --workload sync-mix — {} puts of 16-byte keys and {}-byte values from {} threads, {} rounds",
        (m.ops / m.threads).max(1) * m.threads,
        m.value_bytes,
        m.threads,
        m.rounds
    );
    for r in 0..m.rounds.max(1) {
        // Alternate the order, so that neither mode always runs on a warmer disk.
        let modes = if r % 2 == 0 {
            [None, Some(every)]
        } else {
            [Some(every), None]
        };
        for mode in modes {
            let name = if mode.is_some() { "mix" } else { "all" };
            let dir = m.root.join(format!("sync-mix-{r}-{name}"));
            let rate = run(m, &dir, mode)?;
            let _ = std::fs::remove_dir_all(&dir);
            eprintln!("bench engine: sync-mix round {r}, {name}: {rate:.0} puts/s");
            let _ = writeln!(
                o,
                "round {r}: {:<30} {rate:.0} puts/s",
                if mode.is_some() {
                    format!("1 in {every} synced (put_opt):")
                } else {
                    "all synced (EveryWrite):".to_string()
                }
            );
            if mode.is_some() { &mut mix } else { &mut all }.push(rate);
        }
    }
    let (a, x) = (median(&mut all), median(&mut mix));
    let _ = writeln!(
        o,
        "sync-mix:  1 in {every} synced {x:.0} puts/s, all synced {a:.0} puts/s (medians of {}): {:.2}×",
        all.len(),
        x / a
    );
    Ok(o)
}
