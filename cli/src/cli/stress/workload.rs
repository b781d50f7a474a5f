//! The random workload (puts, deletes, batches, gets, scans, flush, compact, refilter,
//! reopen) and the model that checks each answer as it runs.

use std::collections::BTreeMap;
use std::path::Path;

use filterstore::{FilterKind, Options, Store, SyncPolicy, WriteBatch};

use crate::cli::CliError;

pub(super) type Model = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// xorshift64*: deterministic for a seed.
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

pub(super) const KEYS: u64 = 4000;

pub(super) fn key(i: u64) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// The value written under `key` at `version`: unique per write, so a stale or invented
/// value cannot pass for the right one.
pub(super) fn value(key: &[u8], version: u64) -> Vec<u8> {
    let mut v = key.to_vec();
    v.extend_from_slice(format!(":{version}:").as_bytes());
    let h = filterstore::hash::key_hash(&v);
    v.extend(std::iter::repeat_n(
        b'a' + (h % 26) as u8,
        (h % 200) as usize,
    ));
    v
}

pub(super) fn options(sync: SyncPolicy) -> Options {
    Options::default()
        // Small memtables, tables and levels: background flushes and compactions all the time.
        .memtable_bytes(64 << 10)
        .table_bytes(32 << 10)
        .l1_bytes(128 << 10)
        .level_ratio(4)
        .compaction_trigger(Some(4))
        .sync(sync)
}

/// Counters of a run.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) ops: u64,
    pub(super) kills: u64,
    pub(super) checked: u64,
    pub(super) problems: Vec<String>,
}

impl Tally {
    pub(super) fn problem(&mut self, p: String) {
        if self.problems.len() < 20 {
            eprintln!("store: stress: {p}");
        }
        self.problems.push(p);
    }
}

/// One random write: (key, Some(version) for a put, None for a delete).
pub(super) type Write1 = (Vec<u8>, Option<u64>);

/// The workload, shared by the checked single process and the child of --kill. `complete`:
/// the model knows every key of the store (else only the keys this process wrote).
pub(super) struct Workload {
    rng: Rng,
    version: u64,
    complete: bool,
    pub(super) model: Model,
    /// This workload's keys: the key numbers `lane`, `lane + lanes`, ... (all of them with
    /// one lane). Threads of one store each take a lane.
    lane: u64,
    lanes: u64,
}

impl Workload {
    pub(super) fn new(seed: u64, version: u64, complete: bool, lane: u64, lanes: u64) -> Workload {
        Workload {
            rng: Rng::new(seed),
            version,
            complete,
            model: Model::new(),
            lane,
            lanes,
        }
    }

    /// A random key of this workload's lane.
    fn key(&mut self) -> Vec<u8> {
        key(self.rng.below(KEYS / self.lanes) * self.lanes + self.lane)
    }

    fn writes(&mut self) -> Vec<Write1> {
        let n = match self.rng.below(10) {
            0 => 2 + self.rng.below(20),
            _ => 1,
        };
        (0..n)
            .map(|_| {
                let k = self.key();
                self.version += 1;
                let put = self.rng.below(5) != 0;
                (k, put.then_some(self.version))
            })
            .collect()
    }

    /// Runs one random op on `s`. `announce` is called before a write with its id and after
    /// its acknowledgement. Returns true when the op is a reopen, which the caller does (with
    /// one lane; with several, a flush stands in for it).
    fn step(
        &mut self,
        s: &Store,
        t: &mut Tally,
        announce: &mut dyn FnMut(&[Write1], bool),
    ) -> Result<bool, CliError> {
        t.ops += 1;
        let r = self.rng.below(1000);
        match r {
            0..=549 => {
                let w = self.writes();
                let mut b = WriteBatch::new();
                for (k, v) in &w {
                    match v {
                        Some(ver) => b.put(k.clone(), value(k, *ver)),
                        None => b.delete(k.clone()),
                    };
                }
                announce(&w, false);
                s.write(b)?;
                announce(&w, true);
                for (k, v) in &w {
                    self.model.insert(k.clone(), v.map(|ver| value(k, ver)));
                }
            }
            550..=899 => {
                let k = self.key();
                let got = s.get(&k)?;
                match self.model.get(&k) {
                    Some(want) if got.as_deref() != want.as_deref() => t.problem(format!(
                        "get {}: {} but {} was acknowledged",
                        String::from_utf8_lossy(&k),
                        show(got.as_deref()),
                        show(want.as_deref())
                    )),
                    None if self.complete && got.is_some() => t.problem(format!(
                        "get {}: a value for a key never written",
                        String::from_utf8_lossy(&k)
                    )),
                    _ => {}
                }
                t.checked += 1;
            }
            900..=979 => {
                let a = self.rng.below(KEYS);
                let (lo, hi) = (key(a), key(a + 1 + self.rng.below(300)));
                let mut seen = BTreeMap::new();
                for e in s.scan(lo.as_slice()..hi.as_slice()) {
                    let (k, v) = e?;
                    seen.insert(k.to_vec(), v.to_vec());
                }
                for (k, want) in self.model.range(lo.clone()..hi.clone()) {
                    if seen.get(k) != want.as_ref() {
                        t.problem(format!(
                            "scan: {} reads {} but {} was acknowledged",
                            String::from_utf8_lossy(k),
                            show(seen.get(k).map(Vec::as_slice)),
                            show(want.as_deref())
                        ));
                    }
                    t.checked += 1;
                }
                if self.complete {
                    for k in seen.keys() {
                        if !self.model.contains_key(k) {
                            t.problem(format!(
                                "scan: {} was never written",
                                String::from_utf8_lossy(k)
                            ));
                        }
                    }
                }
            }
            980..=986 => s.flush()?,
            987..=990 => s.compact()?,
            991..=994 => {
                let kind = FilterKind::ALL[self.rng.below(FilterKind::ALL.len() as u64) as usize];
                s.refilter(kind, 0.01 + self.rng.below(5) as f64 / 100.0)?;
            }
            _ if self.lanes == 1 => return Ok(true),
            _ => s.flush()?,
        }
        Ok(false)
    }

    /// Runs the workload on the store in `dir` until `stop` says so: with one lane on its own
    /// handle, reopened when the workload says; with several, on the shared `store`.
    pub(super) fn run(
        &mut self,
        dir: &Path,
        shared: Option<&Store>,
        sync: SyncPolicy,
        t: &mut Tally,
        announce: &mut dyn FnMut(&[Write1], bool),
        stop: &mut dyn FnMut(&mut Tally) -> bool,
    ) -> Result<(), CliError> {
        let mut own = None;
        while !stop(t) {
            let s = match (shared, &mut own) {
                (Some(s), _) => s,
                (None, Some(s)) => s,
                (None, own) => own.insert(Store::open(dir, options(sync))?),
            };
            if self.step(s, t, announce)? {
                // The old handle is closed (its lock released) before the new one opens.
                drop(own.take());
                own = Some(Store::open(dir, options(sync))?);
            }
        }
        Ok(())
    }
}

pub(super) fn show(v: Option<&[u8]>) -> String {
    match v {
        None => "nothing".to_string(),
        Some(v) => {
            let s = String::from_utf8_lossy(v);
            format!("{:?}", s.chars().take(24).collect::<String>())
        }
    }
}
