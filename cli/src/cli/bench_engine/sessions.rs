//! `bench engine --workload sessions`: session churn on a moved clock (issue 39's target).
//! N sessions with a 60 s time to live are written, then `minutes` simulated minutes pass
//! at `rate` operations per simulated second, 80 % refreshes of a live session (its value
//! written again with a new TTL) and 20 % new sessions; the clock moves one simulated second
//! at a time (`ManualClock`), the store compacts in the background as usual.
//!
//! ```text
//! load N sessions (TTL 60 s) ─► for each simulated second: advance the clock 1 s,
//!   `rate` puts with TTL: 80 % refresh (a random session of the last 60 s of writes), 20 % new
//! ─► wait for compactions ─► disk bytes (every file) vs the live sessions' key+value bytes
//! ─► the live set copied into a store without TTLs; both compacted; gets of live sessions
//!    in both, interleaved batches, medians (ratio with TTL ÷ without)
//! ```

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use filterstore::expiry::ManualClock;
use filterstore::hash::mix64;
use filterstore::{Options, Store};
use filterstore_cli::bench::median;

use super::super::bench_data::{fill_value, key};
use super::dir_bytes;
use crate::cli::CliError;

/// What `sessions` runs.
pub(super) struct Sessions<'a> {
    /// Parent of the stores (removed afterwards).
    pub root: &'a Path,
    pub opts: Options,
    /// Sessions loaded at the start.
    pub n: u64,
    /// Operations per simulated second.
    pub rate: u64,
    pub minutes: u64,
    /// Gets timed per store and round.
    pub lookups: u64,
    pub rounds: usize,
    pub value_bytes: usize,
    pub seed: u64,
}

const TTL: Duration = Duration::from_secs(60);
const T0: u64 = 1_800_000_000_000;

pub(super) fn sessions(r: &Sessions) -> Result<String, CliError> {
    let mut o = String::new();
    let clock = ManualClock::new(T0);
    let dir = r.root.join("sessions");
    let opts = r.opts.clone().clock(Arc::new(clock.clone()));
    let store = Store::open(&dir, opts.clone())?;
    let mut value = vec![0u8; r.value_bytes];
    // Session ids in write order: `born[id]` is the simulated second of its creation; a
    // refresh picks one created in the last 60 s of writes (most still live).
    let mut next = 0u64;
    let started = Instant::now();
    for _ in 0..r.n {
        fill_value(next, 0.0, &mut value);
        store.put_with_ttl(key(r.seed, next, false), &value, TTL)?;
        next += 1;
    }
    let mut x = r.seed;
    let mut born: Vec<u64> = vec![0; r.n as usize];
    let seconds = r.minutes * 60;
    let (mut refreshes, mut news) = (0u64, 0u64);
    for s in 1..=seconds {
        clock.advance(Duration::from_secs(1));
        // The window of sessions created in the last 60 simulated seconds.
        let from = born.partition_point(|&b| b + 60 <= s);
        for _ in 0..r.rate {
            x = mix64(x);
            let id = if x.is_multiple_of(5) || from as u64 >= next {
                born.push(s);
                next += 1;
                news += 1;
                next - 1
            } else {
                refreshes += 1;
                from as u64 + (x >> 8) % (next - from as u64)
            };
            fill_value(id ^ s, 0.0, &mut value);
            store.put_with_ttl(key(r.seed, id, false), &value, TTL)?;
        }
    }
    let churn_secs = started.elapsed().as_secs_f64();
    store.flush()?;
    store.wait_for_compaction()?;
    // Live sessions: what a scan returns at the clock's time.
    let (mut live, mut live_bytes) = (0u64, 0u64);
    let mut live_keys = Vec::new();
    for item in store.scan::<&[u8]>(..) {
        let (k, v) = item?;
        live += 1;
        live_bytes += (k.len() + v.len()) as u64;
        if live_keys.len() < 1 << 20 {
            live_keys.push(k);
        }
    }
    let disk = dir_bytes(&dir);
    let s = store.stats();
    let table_keys: u64 = s.tables.iter().map(|t| t.keys).sum();
    let _ = writeln!(
        o,
        "sessions: {} loaded, {} simulated s at {} ops/s ({} refreshes, {} new), TTL 60 s; {:.1} s wall",
        r.n, seconds, r.rate, refreshes, news, churn_secs
    );
    let _ = writeln!(
        o,
        "  at the end: {live} live sessions, {live_bytes} key+value bytes; disk {disk} bytes = {:.2}x the live bytes ({} tables, {table_keys} entries in tables)",
        disk as f64 / live_bytes.max(1) as f64,
        s.tables.len(),
    );
    // The same live set without TTLs, both compacted: gets of live sessions.
    let plain_dir = r.root.join("plain");
    let plain = Store::open(&plain_dir, r.opts.clone())?;
    for item in store.scan::<&[u8]>(..) {
        let (k, v) = item?;
        plain.put(&k, &v)?;
    }
    plain.flush()?;
    plain.compact()?;
    store.compact()?;
    let mut ratios = Vec::new();
    let mut ns = [Vec::new(), Vec::new()];
    let mut y = r.seed ^ 0x5e55;
    for round in 0..r.rounds.max(1) {
        let mut t = [0.0f64; 2];
        for batch in 0..20 {
            for pass in 0..2 {
                let which = (pass + round + batch) % 2;
                let st = if which == 0 { &store } else { &plain };
                let per = r.lookups / 20;
                let mut z = y;
                let t0 = Instant::now();
                for _ in 0..per {
                    z = mix64(z);
                    let k = &live_keys[(z % live_keys.len().max(1) as u64) as usize];
                    std::hint::black_box(st.get(k)?);
                }
                t[which] += t0.elapsed().as_secs_f64();
            }
            y = mix64(y);
        }
        let per_get = |secs: f64| secs * 1e9 / (r.lookups / 20 * 20).max(1) as f64;
        ns[0].push(per_get(t[0]));
        ns[1].push(per_get(t[1]));
        ratios.push(t[0] / t[1].max(1e-12));
    }
    let _ = writeln!(
        o,
        "  get of a live session: {:.0} ns with TTL, {:.0} ns without (the same live set, both compacted); ratio {:.3} (median of {} rounds, {} gets each)",
        median(&mut ns[0]),
        median(&mut ns[1]),
        median(&mut ratios),
        r.rounds.max(1),
        r.lookups / 20 * 20
    );
    drop(store);
    drop(plain);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&plain_dir);
    Ok(o)
}
