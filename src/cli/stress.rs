//! `stress`: a soak test in the manner of RocksDB's `db_stress` and `db_crashtest`.
//!
//! ```text
//! without --kill:  one process: random ops ─► store, each checked against a BTreeMap model
//! with --kill:     parent ── spawns ─► child: random ops, fsynced (SyncPolicy::EveryWrite),
//!                    ▲                 on --threads threads (each its own keys), prints
//!                    │                 "W id key=version ..." before each write and "A id"
//!                    │                 once it is acknowledged
//!                    └── SIGKILL at a random moment, reopen, check every key against the
//!                        acknowledged writes (a write begun but not acknowledged, one per
//!                        thread, may or may not be there, all or nothing), verify, then the
//!                        next child
//! ```

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use clap::Args;
use filterstore::{FilterKind, Options, Store, SyncPolicy, WriteBatch};

use super::{println, CliError, Exit, Global, Run};

/// Run a random workload (puts, deletes, batches, gets, scans, flush, compact, refilter,
/// reopen) with background flushes and compactions, checking every answer against an
/// in-memory model.
///
/// With --kill, a child process runs the writes (each fsynced) and is killed with SIGKILL at
/// random moments; after each kill the store is reopened and every key is checked against
/// the writes the child had acknowledged. Prints ops, kills, keys checked and problems (each
/// problem on stderr). Exit 0 when there were no problems, 3 when there were. Without --dir a
/// temporary directory is used (on /dev/shm when there is one) and removed; a --dir must be
/// new or empty.
///
/// With --threads N, N threads share the store, each with its own keys and its own model
/// (no reopen from the workload then), so writes are committed in groups; with --kill the
/// line also gives the child's commit groups and the writes in them.
#[derive(Args, Debug)]
pub struct Stress {
    /// Run for this many seconds
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub duration: u64,
    /// Seed of the random workload (the same seed gives the same workload; with --kill the
    /// kill times vary)
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// Kill a child process that writes at random moments, and check what survives
    #[arg(long)]
    pub kill: bool,
    /// Threads that share the store, each writing its own keys (1 to 64)
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub threads: u64,
    /// Internal: run as the child of `stress --kill`
    #[arg(long, hide = true)]
    pub child: bool,
    /// Internal: the child's first write version
    #[arg(long, hide = true, default_value_t = 0)]
    pub version_base: u64,
}

type Model = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// xorshift64*: deterministic for a seed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const KEYS: u64 = 4000;

fn key(i: u64) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// The value written under `key` at `version`: unique per write, so a stale or invented
/// value cannot pass for the right one.
fn value(key: &[u8], version: u64) -> Vec<u8> {
    let mut v = key.to_vec();
    v.extend_from_slice(format!(":{version}:").as_bytes());
    let h = filterstore::hash::key_hash(&v);
    v.extend(std::iter::repeat_n(
        b'a' + (h % 26) as u8,
        (h % 200) as usize,
    ));
    v
}

fn options(sync: SyncPolicy) -> Options {
    Options {
        // Small memtables, tables and levels: background flushes and compactions all the time.
        memtable_bytes: 64 << 10,
        table_bytes: 32 << 10,
        l1_bytes: 128 << 10,
        level_ratio: 4,
        compaction_trigger: Some(4),
        sync,
        ..Options::default()
    }
}

/// Counters of a run.
#[derive(Default)]
struct Tally {
    ops: u64,
    kills: u64,
    checked: u64,
    problems: Vec<String>,
}

impl Tally {
    fn problem(&mut self, p: String) {
        if self.problems.len() < 20 {
            eprintln!("store: stress: {p}");
        }
        self.problems.push(p);
    }
}

/// One random write: (key, Some(version) for a put, None for a delete).
type Write1 = (Vec<u8>, Option<u64>);

/// The workload, shared by the checked single process and the child of --kill. `complete`:
/// the model knows every key of the store (else only the keys this process wrote).
struct Workload {
    rng: Rng,
    version: u64,
    complete: bool,
    model: Model,
    /// This workload's keys: the key numbers `lane`, `lane + lanes`, ... (all of them with
    /// one lane). Threads of one store each take a lane.
    lane: u64,
    lanes: u64,
}

impl Workload {
    fn new(seed: u64, version: u64, complete: bool, lane: u64, lanes: u64) -> Workload {
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
                    Some(want) if &got != want => t.problem(format!(
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
                    seen.insert(k, v);
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
    fn run(
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

fn show(v: Option<&[u8]>) -> String {
    match v {
        None => "nothing".to_string(),
        Some(v) => {
            let s = String::from_utf8_lossy(v);
            format!("{:?}", s.chars().take(24).collect::<String>())
        }
    }
}

impl Run for Stress {
    fn run(self, g: &Global) -> Result<Exit, CliError> {
        if self.child {
            return self.child(g);
        }
        let (dir, _tmp) = match &g.dir {
            Some(d) if !d.as_os_str().is_empty() => {
                let busy = std::fs::read_dir(d).is_ok_and(|mut e| e.next().is_some());
                if busy {
                    return Err(CliError::usage(format_args!(
                        "{} is not empty; stress needs a new directory (or none: a temporary one)",
                        d.display()
                    )));
                }
                (d.clone(), None)
            }
            _ => {
                // A RAM file system when there is one: a SIGKILL loses nothing the kernel
                // holds, so fsyncs need not reach a disk for the check to mean something.
                let shm = Path::new("/dev/shm");
                let t = match shm.is_dir() {
                    true => tempfile::tempdir_in(shm).or_else(|_| tempfile::tempdir())?,
                    false => tempfile::tempdir()?,
                };
                (t.path().join("stress"), Some(t))
            }
        };
        let started = Instant::now();
        let deadline = started + Duration::from_secs(self.duration);
        let mut t = Tally::default();
        let mut grouped = None;
        if self.kill {
            grouped = self.parent(&dir, deadline, &mut t)?;
        } else {
            let mut model = Model::new();
            let mut stop = |_: &mut Tally| Instant::now() >= deadline;
            if self.threads == 1 {
                let mut w = Workload::new(self.seed, 0, true, 0, 1);
                w.run(
                    &dir,
                    None,
                    SyncPolicy::OnFlush,
                    &mut t,
                    &mut |_, _| {},
                    &mut stop,
                )?;
                model = w.model;
            } else {
                let store = Store::open(&dir, options(SyncPolicy::OnFlush))?;
                let lanes = on_lanes(self.threads, |lane| {
                    let mut w = Workload::new(
                        self.lane_seed(lane),
                        lane << LANE_VERSION_BITS,
                        false,
                        lane,
                        self.threads,
                    );
                    let mut t = Tally::default();
                    let mut stop = |_: &mut Tally| Instant::now() >= deadline;
                    let r = w.run(
                        &dir,
                        Some(&store),
                        SyncPolicy::OnFlush,
                        &mut t,
                        &mut |_, _| {},
                        &mut stop,
                    );
                    r.map(|()| (w.model, t))
                })?;
                for (m, lt) in lanes {
                    model.extend(m);
                    t.ops += lt.ops;
                    t.checked += lt.checked;
                    t.problems.extend(lt.problems);
                }
            }
            check_reopened(&dir, &model, &[], &mut t)?;
        }
        let grouped = match grouped {
            Some((groups, writes)) => format!(", commit groups {groups} for {writes} writes"),
            None => String::new(),
        };
        println(format_args!(
            "stress: seed {}, {:.0} s, ops {}, kills {}, keys checked {}, problems {}{grouped}",
            self.seed,
            started.elapsed().as_secs_f64(),
            t.ops,
            t.kills,
            t.checked,
            t.problems.len()
        ))?;
        Ok(if t.problems.is_empty() {
            Exit::Success
        } else {
            Exit::Corrupt
        })
    }
}

/// A lane's write versions start at `lane << LANE_VERSION_BITS` (plus the child's base), so
/// every write of a run has its own version.
const LANE_VERSION_BITS: u32 = 26;

/// Runs `f(lane)` for each lane on its own thread; the results in lane order, or the first
/// error.
fn on_lanes<T: Send>(
    lanes: u64,
    f: impl Fn(u64) -> Result<T, CliError> + Sync,
) -> Result<Vec<T>, CliError> {
    std::thread::scope(|sc| {
        let handles: Vec<_> = (0..lanes)
            .map(|lane| {
                let f = &f;
                sc.spawn(move || f(lane))
            })
            .collect();
        let mut out = Vec::new();
        for h in handles {
            match h.join() {
                Ok(r) => out.push(r?),
                Err(_) => return Err(CliError::usage("a stress thread panicked")),
            }
        }
        Ok(out)
    })
}

/// Writes one line to stdout for the parent; exits quietly when the parent is gone (a
/// closed pipe).
fn emit(line: &str) {
    let mut out = std::io::stdout().lock();
    if out
        .write_all(line.as_bytes())
        .and_then(|()| out.flush())
        .is_err()
    {
        std::process::exit(0);
    }
}

impl Stress {
    /// The workload seed of `lane` (lane 0: the run's seed).
    fn lane_seed(&self, lane: u64) -> u64 {
        self.seed ^ lane.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    /// The child of `--kill`: writes until killed, announcing each write on stdout. Write ids
    /// are unique over the lanes: lane `l`'s `n`-th write is `n × lanes + l`.
    fn child(&self, g: &Global) -> Result<Exit, CliError> {
        let dir = g.dir();
        let lanes = self.threads;
        // A safety stop, should the parent never kill this process.
        let stop_at = Instant::now() + Duration::from_secs(self.duration.max(1) * 2 + 10);
        let total_ops = AtomicU64::new(0);
        let lane_run = |lane: u64, shared: Option<&Store>| -> Result<(), CliError> {
            let version = self.version_base + (lane << LANE_VERSION_BITS);
            let mut w = Workload::new(self.lane_seed(lane), version, false, lane, lanes);
            let mut t = Tally::default();
            let mut n = 0u64;
            let mut announce = |ws: &[Write1], done: bool| {
                if done {
                    emit(&format!("A {}\n", n * lanes + lane));
                    return;
                }
                n += 1;
                let mut l = format!("W {}", n * lanes + lane);
                for (k, v) in ws {
                    let k = String::from_utf8_lossy(k);
                    match v {
                        Some(ver) => l.push_str(&format!(" {k}={ver}")),
                        None => l.push_str(&format!(" {k}=-")),
                    }
                }
                l.push('\n');
                emit(&l);
            };
            let mut stop = |t: &mut Tally| {
                if t.ops.is_multiple_of(256) && t.ops > 0 {
                    // Ops so far (and the commit groups of the shared store), for the
                    // parent's count.
                    let ops = total_ops.fetch_add(256, Relaxed) + 256;
                    emit(&format!("O {ops}\n"));
                    if let Some(s) = shared {
                        let st = s.stats();
                        emit(&format!("G {} {}\n", st.commit_groups, st.commit_writes));
                    }
                }
                for p in t.problems.drain(..) {
                    // The parent counts problems from lines starting with "P ".
                    emit(&format!("P {p}\n"));
                }
                Instant::now() >= stop_at
            };
            w.run(
                &dir,
                shared,
                SyncPolicy::EveryWrite,
                &mut t,
                &mut announce,
                &mut stop,
            )
        };
        if lanes == 1 {
            lane_run(0, None)?;
        } else {
            let store = Store::open(&dir, options(SyncPolicy::EveryWrite))?;
            on_lanes(lanes, |lane| lane_run(lane, Some(&store)))?;
        }
        Ok(Exit::Success)
    }

    /// `--kill`: children killed at random moments, the store checked after each. Returns the
    /// children's commit groups and the writes in them (with several threads).
    fn parent(
        &self,
        dir: &Path,
        deadline: Instant,
        t: &mut Tally,
    ) -> Result<Option<(u64, u64)>, CliError> {
        let exe = std::env::current_exe()?;
        let mut rng = Rng::new(self.seed ^ 0x5eed);
        let mut must = Model::new();
        let mut round = 0u64;
        let mut grouped = (self.threads > 1).then_some((0, 0));
        while Instant::now() < deadline {
            round += 1;
            let mut child = Command::new(&exe)
                .arg("--dir")
                .arg(dir)
                .args(["stress", "--child", "--duration"])
                .arg(self.duration.to_string())
                .arg("--threads")
                .arg(self.threads.to_string())
                .arg("--seed")
                .arg(
                    self.seed
                        .wrapping_mul(1_000_003)
                        .wrapping_add(round)
                        .to_string(),
                )
                .arg("--version-base")
                .arg((round << 32).to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()?;
            let stdout = child
                .stdout
                .take()
                .ok_or_else(|| CliError::usage("no pipe to the child"))?;
            let reader = std::thread::spawn(move || {
                BufReader::new(stdout)
                    .lines()
                    .map_while(Result::ok)
                    .collect::<Vec<String>>()
            });
            // Kill at a random moment: during open and recovery sometimes, mostly while
            // writes, flushes and compactions run.
            let left = deadline.saturating_duration_since(Instant::now());
            let wait = Duration::from_millis(20 + rng.below(1500)).min(left);
            std::thread::sleep(wait);
            let _ = child.kill();
            let status = child.wait()?;
            let lines = reader.join().unwrap_or_default();
            let mut stderr = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
            }
            if status.code().is_some_and(|c| c != 0) {
                t.problem(format!(
                    "child {round} exited with {status} before it was killed: {}",
                    stderr.trim()
                ));
            }
            t.kills += 1;
            let (in_flight, groups) = self.apply_lines(&lines, &mut must, t);
            if let (Some(g), Some(c)) = (&mut grouped, groups) {
                g.0 += c.0;
                g.1 += c.1;
            }
            check_reopened(dir, &must, &in_flight, t)?;
            // What the store shows for the writes in flight is now the truth.
            if !in_flight.is_empty() {
                let s = Store::open(dir, options(SyncPolicy::EveryWrite))?;
                for k in in_flight.iter().flat_map(BTreeMap::keys) {
                    must.insert(k.clone(), s.get(k)?);
                }
            }
        }
        Ok(grouped)
    }

    /// Applies the child's acknowledged writes to `must`; returns the writes in flight (at
    /// most one per thread) and the last commit group counts the child reported.
    fn apply_lines(
        &self,
        lines: &[String],
        must: &mut Model,
        t: &mut Tally,
    ) -> (Vec<Model>, Option<(u64, u64)>) {
        let mut pending: BTreeMap<u64, Model> = BTreeMap::new();
        let (mut ops, mut acked) = (0u64, 0u64);
        let mut groups = None;
        for line in lines {
            let mut parts = line.split(' ');
            let tag = parts.next();
            let mut num = || parts.next().and_then(|s| s.parse::<u64>().ok());
            match tag {
                Some("W") => {
                    let id = num().unwrap_or(0);
                    let ops = line
                        .split(' ')
                        .skip(2)
                        .filter_map(|p| p.split_once('='))
                        .map(|(k, v)| {
                            let k = k.as_bytes().to_vec();
                            let v = v.parse::<u64>().ok().map(|ver| value(&k, ver));
                            (k, v)
                        })
                        .collect::<Model>();
                    pending.insert(id, ops);
                }
                Some("A") => {
                    let id = num().unwrap_or(0);
                    match pending.remove(&id) {
                        Some(writes) => {
                            acked += 1;
                            must.extend(writes);
                        }
                        None => t.problem(format!("child protocol: ack {id} for no write")),
                    }
                }
                Some("O") => ops = ops.max(num().unwrap_or(0)),
                Some("G") => {
                    if let (Some(g), Some(w)) = (num(), num()) {
                        groups = Some((g, w));
                    }
                }
                Some("P") => t.problem(format!("child: {}", &line[2.min(line.len())..])),
                _ => {}
            }
        }
        // Ops reported so far, or at least the acknowledged writes.
        t.ops += ops.max(acked);
        (pending.into_values().collect(), groups)
    }
}

/// Reopens the store in `dir` and checks every key of `must` (a key of a write in flight,
/// `in_flight`, may instead read that write's value, and each write in flight must be there
/// whole or not at all), a full scan, and `verify`.
fn check_reopened(
    dir: &Path,
    must: &Model,
    in_flight: &[Model],
    t: &mut Tally,
) -> Result<(), CliError> {
    if !dir.join(filterstore::store::MANIFEST_NAME).exists() {
        if must.values().any(Option::is_some) {
            t.problem("the MANIFEST is gone after acknowledged writes".to_string());
        }
        return Ok(());
    }
    let s = match Store::open(dir, options(SyncPolicy::EveryWrite)) {
        Ok(s) => s,
        Err(e) => {
            t.problem(format!("reopen failed: {}", super::error_chain(&e)));
            return Ok(());
        }
    };
    let acked = |k: &[u8]| must.get(k).and_then(Option::as_ref);
    let fine = |k: &[u8], got: Option<&Vec<u8>>| {
        got == acked(k)
            || in_flight
                .iter()
                .any(|w| w.get(k).is_some_and(|alt| got == alt.as_ref()))
    };
    let may = in_flight.iter().flat_map(BTreeMap::keys);
    for k in must.keys().chain(may) {
        let got = s.get(k)?;
        if !fine(k, got.as_ref()) {
            t.problem(format!(
                "after reopen, {} reads {} but {} was acknowledged",
                String::from_utf8_lossy(k),
                show(got.as_deref()),
                show(must.get(k).and_then(Option::as_deref))
            ));
        }
        t.checked += 1;
    }
    // A write in flight is all or nothing: of the keys it changes, all read its values or
    // none does.
    for w in in_flight {
        let changes: Vec<_> = w.iter().filter(|(k, v)| v.as_ref() != acked(k)).collect();
        let mut applied = 0;
        for (k, v) in &changes {
            applied += usize::from(s.get(k)? == **v);
        }
        if applied != 0 && applied != changes.len() {
            t.problem(format!(
                "after reopen, {applied} of the {} changes of a write in flight are there",
                changes.len()
            ));
        }
    }
    for e in s.scan::<&[u8]>(..) {
        let (k, v) = e?;
        if !fine(&k, Some(&v)) {
            t.problem(format!(
                "after reopen, a scan shows {} = {} (acknowledged: {})",
                String::from_utf8_lossy(&k),
                show(Some(&v)),
                show(must.get(&k).and_then(Option::as_deref))
            ));
        }
    }
    drop(s);
    let r = filterstore::verify::verify_dir(dir)?;
    for p in &r.problems {
        t.problem(format!("verify: {}", super::error_chain(p)));
    }
    Ok(())
}
