//! `bench engine --workload tx`: transactions of 2 reads and 2 writes over uniform keys
//! from several threads, against the same operations as plain batches, in one run.
//!
//! ```text
//! one store, -n keys loaded (16-byte keys, --value-bytes values), then for each round
//! (the two modes alternate which goes first):
//!   tx:    T threads, each --ops/T times: 2 distinct uniform keys a, b;
//!          tx = store.transaction(); tx.get(a); tx.get(b); tx.put(a, ..); tx.put(b, ..);
//!          tx.commit(), again from the start on Error::Conflict  ─► commits/s, conflicts
//!   batch: the same keys: store.get(a); store.get(b); store.write(batch of put a, put b)
//!                                                               ─► batches/s
//! medians of each mode and their ratio
//! ```
//! Durability is the store's `--sync` (default on-flush: each commit's log record is
//! written to the operating system, no fsync), the same in both modes.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use filterstore::{Error, Options, Store, WriteBatch};
use filterstore_cli::bench::median;

use super::super::bench_data::{fill_value, key};
use crate::cli::CliError;

/// What `tx` runs.
pub(super) struct TxRun<'a> {
    /// Parent of the store (removed after the run).
    pub root: &'a Path,
    pub opts: Options,
    pub n: u64,
    pub threads: u64,
    pub ops: u64,
    pub rounds: usize,
    pub value_bytes: usize,
    pub seed: u64,
}

/// SplitMix64 step: the next uniform draw.
fn next(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One mode's round: operations per second, conflicts met.
fn round(m: &TxRun, store: &Store, as_tx: bool, r: usize) -> Result<(f64, u64), CliError> {
    let per = (m.ops / m.threads).max(1);
    let conflicts = AtomicU64::new(0);
    let t = Instant::now();
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..m.threads)
            .map(|th| {
                let conflicts = &conflicts;
                s.spawn(move || -> filterstore::Result<()> {
                    let mut rng = m.seed ^ (th << 32) ^ ((r as u64) << 48) ^ u64::from(as_tx);
                    let mut value = vec![0u8; m.value_bytes];
                    for _ in 0..per {
                        let a = next(&mut rng) % m.n;
                        let b = (a + 1 + next(&mut rng) % (m.n - 1).max(1)) % m.n;
                        let (ka, kb) = (key(m.seed, a, false), key(m.seed, b, false));
                        fill_value(next(&mut rng), 0.0, &mut value);
                        if !as_tx {
                            std::hint::black_box(store.get(ka)?);
                            std::hint::black_box(store.get(kb)?);
                            let mut batch = WriteBatch::new();
                            batch.put(ka.to_vec(), value.clone());
                            batch.put(kb.to_vec(), value.clone());
                            store.write(batch)?;
                            continue;
                        }
                        loop {
                            let mut tx = store.transaction();
                            std::hint::black_box(tx.get(ka)?);
                            std::hint::black_box(tx.get(kb)?);
                            tx.put(ka, &value);
                            tx.put(kb, &value);
                            match tx.commit() {
                                Err(Error::Conflict) => conflicts.fetch_add(1, Relaxed),
                                r => break r?,
                            };
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().expect("a tx worker panicked"))
    })?;
    let secs = t.elapsed().as_secs_f64();
    Ok(((per * m.threads) as f64 / secs, conflicts.load(Relaxed)))
}

/// Loads the store, runs the rounds and returns the report.
pub(super) fn tx(m: &TxRun) -> Result<String, CliError> {
    let dir = m.root.join("tx");
    let store = Store::open(&dir, m.opts.clone())?;
    let mut value = vec![0u8; m.value_bytes];
    for chunk in (0..m.n).collect::<Vec<_>>().chunks(1000) {
        let mut batch = WriteBatch::new();
        for &i in chunk {
            fill_value(i, 0.0, &mut value);
            batch.put(key(m.seed, i, false).to_vec(), value.clone());
        }
        store.write(batch)?;
    }
    let (mut txs, mut batches, mut conflicts) = (Vec::new(), Vec::new(), 0);
    let mut o = String::new();
    let per = (m.ops / m.threads).max(1) * m.threads;
    let _ = writeln!(
        o,
        "filterstore bench engine --workload tx — {} keys of 16 bytes, {}-byte values; {per} operations of 2 gets + 2 puts over uniform keys from {} threads, {} rounds",
        m.n, m.value_bytes, m.threads, m.rounds
    );
    for r in 0..m.rounds.max(1) {
        let modes = if r % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for as_tx in modes {
            let (rate, c) = round(m, &store, as_tx, r)?;
            let name = if as_tx {
                "transactions"
            } else {
                "plain batches"
            };
            eprintln!("bench engine: tx round {r}, {name}: {rate:.0}/s, {c} conflicts");
            let _ = writeln!(
                o,
                "round {r}: {name:<14} {rate:>10.0} commits/s{}",
                if as_tx {
                    format!(", {c} conflicts (each retried)")
                } else {
                    String::new()
                }
            );
            if as_tx {
                txs.push(rate);
                conflicts += c;
            } else {
                batches.push(rate);
            }
        }
    }
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
    let (t, b) = (median(&mut txs), median(&mut batches));
    let _ = writeln!(
        o,
        "tx: transactions {t:.0} commits/s, plain batches {b:.0}/s (medians of {}): {:.2}×; {conflicts} conflicts retried in all ({:.3} % of commits)",
        txs.len(),
        t / b,
        conflicts as f64 * 100.0 / (per as f64 * txs.len() as f64)
    );
    Ok(o)
}
