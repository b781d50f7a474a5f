//! `bench engine --workload ycsb-a..ycsb-f`: YCSB's core workloads (Cooper et al., SoCC 2010)
//! on a freshly loaded store, with YCSB's key generators, as the side-by-side harness runs
//! them (`../shared/peers`), so a user can run the same mixes on their own machine.
//!
//! ```text
//! load N keys (random order) ─► flush ─► for each workload: reopen ─► OPS operations on T
//! threads sharing the store, each timed and checked ─► flush what it wrote ─► close
//! ```
//!
//! Keys: YCSB's scrambled Zipfian (θ = 0.99, Gray et al.; the rank drawn over 10^10 items and
//! FNV-hashed onto the keys); `ycsb-d` reads by YCSB's "latest" (the newest keys most). Every
//! value is a function of its key, and updates rewrite a key's own value, so every read and
//! every scanned entry is checked.
//!
//! The files by job: this one the workloads and the run; `keys` YCSB's key generators;
//! `report` the text and JSON reports.

mod keys;
mod report;

use std::ops::Bound;
use std::path::Path;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use filterstore::hash::mix64;
use filterstore::{Options, Store};

use super::bench_data::{fill_value, key};
use super::latency::Histogram;
use super::{println, CliError, Exit};
use keys::{Inserts, Rng, Scrambled, Zipf};
use report::{json_report, text_report};

/// One of YCSB's core workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Workload {
    A,
    B,
    C,
    D,
    E,
    F,
}

impl Workload {
    const ALL: [Workload; 6] = [
        Workload::A,
        Workload::B,
        Workload::C,
        Workload::D,
        Workload::E,
        Workload::F,
    ];

    pub(super) fn name(self) -> &'static str {
        ["ycsb-a", "ycsb-b", "ycsb-c", "ycsb-d", "ycsb-e", "ycsb-f"][self as usize]
    }

    /// The operation mix, as fractions of the operations.
    fn mix(self) -> Mix {
        let (read, update, insert, scan) = match self {
            Workload::A => (0.5, 0.5, 0.0, 0.0),
            Workload::B => (0.95, 0.05, 0.0, 0.0),
            Workload::C => (1.0, 0.0, 0.0, 0.0),
            Workload::D => (0.95, 0.0, 0.05, 0.0),
            Workload::E => (0.0, 0.0, 0.05, 0.95),
            // The other half: read-modify-write.
            Workload::F => (0.5, 0.0, 0.0, 0.0),
        };
        Mix {
            read,
            update,
            insert,
            scan,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Workload::A => "50 % read, 50 % update",
            Workload::B => "95 % read, 5 % update",
            Workload::C => "100 % read",
            Workload::D => "95 % read latest, 5 % insert",
            Workload::E => "95 % scan of 1..100 entries, 5 % insert",
            Workload::F => "50 % read, 50 % read-modify-write",
        }
    }
}

/// One `--workload` value: `ycsb-a` … `ycsb-f`, or `ycsb` for all six.
#[derive(Clone, Debug)]
pub(super) struct Workloads(pub Vec<Workload>);

pub(super) fn parse_workloads(s: &str) -> Result<Workloads, String> {
    if s == "ycsb" {
        return Ok(Workloads(Workload::ALL.to_vec()));
    }
    Workload::ALL
        .into_iter()
        .find(|w| w.name() == s)
        .map(|w| Workloads(vec![w]))
        .ok_or_else(|| "expected ycsb-a, ycsb-b, ycsb-c, ycsb-d, ycsb-e, ycsb-f or ycsb".into())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Read,
    Update,
    Insert,
    Scan,
    Rmw,
}

const OP_NAMES: [&str; 5] = ["read", "update", "insert", "scan", "rmw"];

struct Mix {
    read: f64,
    update: f64,
    insert: f64,
    scan: f64,
}

impl Mix {
    /// The operation for `u`, uniform in [0, 1).
    fn pick(&self, u: f64) -> Op {
        let mut acc = 0.0;
        for (share, op) in [
            (self.read, Op::Read),
            (self.update, Op::Update),
            (self.insert, Op::Insert),
            (self.scan, Op::Scan),
        ] {
            acc += share;
            if u < acc {
                return op;
            }
        }
        Op::Rmw
    }
}

/// The value stored under `key`: a function of the key, so any value read can be checked.
fn value_of(key: &[u8], out: &mut [u8]) {
    let seed = key.chunks(8).fold(0u64, |h, c| {
        mix64(h ^ c.iter().fold(0, |x, &b| x << 8 | u64::from(b)))
    });
    fill_value(seed, 0.0, out);
}

/// What the threads of one run share.
struct Gen {
    w: Workload,
    mix: Mix,
    zipf: Scrambled,
    inserts: Inserts,
}

/// One thread's results (then their sum).
#[derive(Default)]
struct Tally {
    lat: [Histogram; 5],
    missing: u64,
    wrong: u64,
    scanned: u64,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        for (a, b) in self.lat.iter_mut().zip(&o.lat) {
            a.merge(b);
        }
        self.missing += o.missing;
        self.wrong += o.wrong;
        self.scanned += o.scanned;
    }
}

/// What `store bench engine --workload` was given.
pub(super) struct Ycsb<'a> {
    pub dir: &'a Path,
    pub opts: Options,
    pub records: u64,
    pub value_bytes: usize,
    pub seed: u64,
    pub workloads: Vec<Workload>,
    pub ops: u64,
    pub threads: u64,
    pub json: bool,
    /// The store's configuration, for the report's first line.
    pub config: String,
}

/// One workload's results.
struct Run {
    workload: Workload,
    secs: f64,
    open_ms: f64,
    t: Tally,
}

impl Ycsb<'_> {
    /// Key number `k`'s data index: the loaded keys, then each workload's inserts (d and e
    /// insert different keys).
    fn index(&self, w: Workload, k: u64) -> u64 {
        match (k < self.records, w) {
            (true, _) => k,
            (false, Workload::E) => self.records + (1 << 40) + (k - self.records),
            (false, _) => k,
        }
    }

    /// Runs `w` on the store, reopened; every read checked.
    fn run(&self, w: Workload) -> Result<Run, CliError> {
        let n = self.records;
        let mix = w.mix();
        // As YCSB: with inserts, the Zipfian key space is sized for the keys expected by the
        // end (twice the expected inserts), and draws past the written keys are drawn again.
        let expected_new = (self.ops as f64 * mix.insert * 2.0) as u64;
        let g = Gen {
            w,
            zipf: Scrambled::new(n + expected_new),
            inserts: Inserts::new(n, if mix.insert > 0.0 { self.ops } else { 0 }),
            mix,
        };
        // "latest": YCSB's SkewedLatestGenerator, max − Zipfian(max) over the written keys.
        let latest = (w == Workload::D).then(|| Zipf::new((n - 1).max(1)));
        let salt = mix64(w as u64 + 1);
        let t0 = Instant::now();
        let store = Store::open(self.dir, self.opts.clone())?;
        let open_ms = t0.elapsed().as_secs_f64() * 1e3;
        let threads = self.threads;
        let barrier = Barrier::new(threads as usize + 1);
        let (secs, tallies) = std::thread::scope(|sc| {
            let handles: Vec<_> = (0..threads)
                .map(|th| {
                    let ops = self.ops * (th + 1) / threads - self.ops * th / threads;
                    let (store, barrier, g) = (&store, &barrier, &g);
                    let mut latest = latest.clone();
                    sc.spawn(move || {
                        let mut rng = Rng::new(self.seed ^ salt ^ (th << 48));
                        barrier.wait();
                        self.thread(g, store, &mut latest, &mut rng, ops)
                    })
                })
                .collect();
            barrier.wait();
            let t = Instant::now();
            let tallies: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
            (t.elapsed().as_secs_f64(), tallies)
        });
        let mut t = Tally::default();
        for r in tallies {
            let r = r.map_err(|_| CliError::usage("a benchmark thread panicked"))?;
            t.add(&r?);
        }
        if g.mix.read < 1.0 {
            // Untimed: what this run wrote goes into a table, so that the next workload does
            // not start with it replayed from the log.
            store.flush()?;
        }
        Ok(Run {
            workload: w,
            secs,
            open_ms,
            t,
        })
    }

    /// One thread's `ops` operations.
    fn thread(
        &self,
        g: &Gen,
        store: &Store,
        latest: &mut Option<Zipf>,
        rng: &mut Rng,
        ops: u64,
    ) -> Result<Tally, CliError> {
        let mut t = Tally::default();
        let mut v = vec![0u8; self.value_bytes];
        let mut want = vec![0u8; self.value_bytes];
        for _ in 0..ops {
            let op = g.mix.pick(rng.next_f64());
            if op == Op::Insert {
                let k = g.inserts.claim();
                let key = key(self.seed, self.index(g.w, k), false);
                value_of(&key, &mut v);
                let t0 = Instant::now();
                store.put(key, &v)?;
                t.lat[op as usize].record(t0.elapsed().as_nanos() as u64);
                g.inserts.ack(k);
                continue;
            }
            let limit = g.inserts.limit();
            let k = match latest {
                Some(z) => {
                    let max = limit - 1;
                    z.grow(max);
                    max - z.next(rng).min(max)
                }
                None => loop {
                    let k = g.zipf.next(rng);
                    if k < limit {
                        break k;
                    }
                },
            };
            let key = key(self.seed, self.index(g.w, k), false);
            value_of(&key, &mut v);
            let t0 = Instant::now();
            let got = match op {
                Op::Read => store.get(key)?,
                Op::Update => {
                    store.put(key, &v)?;
                    t.lat[op as usize].record(t0.elapsed().as_nanos() as u64);
                    continue;
                }
                Op::Rmw => {
                    // Read, then write the value back: updates rewrite a key's own bytes.
                    let got = store.get(key)?;
                    store.put(key, &v)?;
                    got
                }
                Op::Scan => {
                    let len = 1 + (rng.next_u64() % 100) as usize;
                    let from = (Bound::Included(&key[..]), Bound::Unbounded);
                    let mut entries = Vec::with_capacity(len);
                    for e in store.scan::<&[u8]>(from).take(len) {
                        entries.push(e?);
                    }
                    t.lat[op as usize].record(t0.elapsed().as_nanos() as u64);
                    t.scanned += entries.len() as u64;
                    // It starts at an existing key; each entry holds its key's value.
                    match entries.first() {
                        Some((k, _)) if k[..] == key[..] => {}
                        _ => t.missing += 1,
                    }
                    for (k, got) in &entries {
                        value_of(k, &mut want);
                        t.wrong += u64::from(got[..] != want[..]);
                    }
                    continue;
                }
                Op::Insert => continue,
            };
            t.lat[op as usize].record(t0.elapsed().as_nanos() as u64);
            match got {
                None => t.missing += 1,
                Some(got) => t.wrong += u64::from(got != v),
            }
        }
        Ok(t)
    }
}

/// Loads the store, runs each workload, reports; exit 3 when a read missed or was wrong.
pub(super) fn run(y: Ycsb<'_>) -> Result<Exit, CliError> {
    let n = y.records.max(1);
    let y = Ycsb { records: n, ..y };
    let store = Store::open(y.dir, y.opts.clone())?;
    let mut v = vec![0u8; y.value_bytes];
    let t = Instant::now();
    let mut last = Instant::now();
    for i in 0..n {
        let k = key(y.seed, i, false);
        value_of(&k, &mut v);
        store.put(k, &v)?;
        if last.elapsed() > Duration::from_secs(5) {
            last = Instant::now();
            eprintln!("bench engine: {i} of {n} puts");
        }
    }
    store.flush()?;
    let load_secs = t.elapsed().as_secs_f64();
    drop(store);
    let mut workloads = y.workloads.clone();
    workloads.sort();
    workloads.dedup();
    let mut runs = Vec::new();
    for &w in &workloads {
        eprintln!(
            "bench engine: {} ({} ops, {} threads)",
            w.name(),
            y.ops,
            y.threads
        );
        runs.push(y.run(w)?);
    }
    let out = if y.json {
        json_report(&y, load_secs, &runs)
    } else {
        text_report(&y, load_secs, &runs)
    };
    println(out)?;
    let bad: u64 = runs.iter().map(|r| r.t.missing + r.t.wrong).sum();
    if bad > 0 {
        // A store that loses or garbles keys fails its integrity promise: exit 3.
        return Err(CliError {
            code: Exit::Corrupt,
            message: format!("{bad} reads or scans missed their key or read a wrong value"),
            quiet: false,
        });
    }
    Ok(Exit::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generators keep to their ranges, the scrambled Zipfian favours few keys, "latest"
    /// the newest ones, and each mix adds up to its shares.
    #[test]
    fn generators_and_mixes() {
        let mut rng = Rng::new(7);
        let s = Scrambled::new(1000);
        let mut hits = vec![0u32; 1000];
        for _ in 0..100_000 {
            hits[s.next(&mut rng) as usize] += 1;
        }
        hits.sort_unstable_by(|a, b| b.cmp(a));
        // Rank 0 has 1/zeta(10^10) = 3.8 % of the draws, ranks 0..10 about 11 % (uniform
        // draws would give each key 0.1 %).
        let top10: u32 = hits[..10].iter().sum();
        assert!(hits[0] > 3_000, "top key: {} of 100000 draws", hits[0]);
        assert!(top10 > 10_000, "top 10 keys: {top10} of 100000 draws");
        let z = Zipf::new(999);
        // Ranks 0..10 of 999: zeta(10) / zeta(999), about 39 % (uniform: 1 %).
        let newest = (0..10_000).filter(|_| z.next(&mut rng) < 10).count();
        assert!(newest > 3_000, "{newest}");
        for w in Workload::ALL {
            let m = w.mix();
            let mut counts = [0u32; 5];
            for i in 0..10_000 {
                counts[m.pick((i as f64 + 0.5) / 10_000.0) as usize] += 1;
            }
            let share = |op: Op| f64::from(counts[op as usize]) / 10_000.0;
            assert!((share(Op::Read) - m.read).abs() < 1e-3, "{}", w.name());
            assert!((share(Op::Insert) - m.insert).abs() < 1e-3, "{}", w.name());
            assert!((share(Op::Scan) - m.scan).abs() < 1e-3, "{}", w.name());
        }
        assert_eq!(parse_workloads("ycsb").unwrap().0.len(), 6);
        assert_eq!(parse_workloads("ycsb-e").unwrap().0, [Workload::E]);
        assert!(parse_workloads("ycsb-g").is_err());
    }
}
