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
//! with --bank:     transfers between accounts as transactions, the total checked in every
//!                  snapshot and, after each kill, every acknowledged transfer (`bank`)
//! --checkpoints --kill: a child puts, deletes ranges and makes checkpoints; after each
//!                  kill every checkpoint opens, verifies and holds what was acknowledged
//!                  before it began, and the store every acknowledged write (`checkpoint`)
//! --keyspaces K --kill: batches spanning K keyspaces; after each kill no batch torn and
//!                  no acknowledged write lost in any keyspace (`keyspaces`)
//! ```
//!
//! The files by job: this one runs the command (the single process, or threads on one
//! store); `workload` is the random ops and the model that checks them as they run; `kill`
//! is the parent that kills children and the child that writes; `check` checks a reopened
//! store against the acknowledged writes.

mod bank;
mod check;
mod checkpoint;
mod keyspaces;
mod kill;
mod workload;

use std::path::Path;
use std::time::{Duration, Instant};

use clap::Args;
use filterstore::{Store, SyncPolicy};

use super::{println, CliError, Exit, Global, Run};
use check::check_reopened;
use workload::{options, Model, Tally, Workload};

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
    /// Instead of the random workload: --threads threads move money between 1,000
    /// accounts by transactions (retried on conflict) while a reader checks that every
    /// snapshot sums to the total; with --kill each transfer is fsynced and also records
    /// itself, and after each kill the reopened store must sum to the total, hold every
    /// acknowledged transfer, and show each balance as the transfers present make it
    #[arg(long)]
    pub bank: bool,
    /// With --kill, instead of the random workload: one writer puts keys and deletes
    /// ranges while another thread makes checkpoints; after each kill every checkpoint must
    /// open, verify clean and hold every write acknowledged before it began (a prefix of
    /// the writes), and the store every acknowledged write
    #[arg(long, requires = "kill", conflicts_with = "bank")]
    pub checkpoints: bool,
    /// With --kill, instead of the random workload: --threads threads write batches that
    /// each span 2 to K keyspaces (every value carrying its batch id), each fsynced; after
    /// each kill every acknowledged batch must be there in every keyspace and no batch in
    /// flight partly there (torn)
    #[arg(long, value_name = "K", requires = "kill", conflicts_with_all = ["bank", "checkpoints"], value_parser = clap::value_parser!(u64).range(2..=16))]
    pub keyspaces: Option<u64>,
    /// Internal: run as the child of `stress --kill`
    #[arg(long, hide = true)]
    pub child: bool,
    /// Internal: the child's first write version
    #[arg(long, hide = true, default_value_t = 0)]
    pub version_base: u64,
}

impl Run for Stress {
    fn run(self, g: &Global) -> Result<Exit, CliError> {
        if self.child && self.bank {
            return self.bank_child(g);
        }
        if self.child && self.checkpoints {
            return self.checkpoint_child(g);
        }
        if let (true, Some(k)) = (self.child, self.keyspaces) {
            return self.keyspace_child(g, k);
        }
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
        let mut checkpoints = None;
        let mut spanning = None;
        if self.bank {
            self.bank(&dir, deadline, &mut t)?;
        } else if self.checkpoints {
            checkpoints = Some(self.checkpoint_soak(&dir, deadline, &mut t)?);
        } else if let Some(k) = self.keyspaces {
            spanning = Some(self.keyspace_soak(&dir, k, deadline, &mut t)?.line(k));
        } else if self.kill {
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
        let mut grouped = match grouped {
            Some((groups, writes)) => format!(", commit groups {groups} for {writes} writes"),
            None => String::new(),
        };
        if let Some(n) = checkpoints {
            grouped.push_str(&format!(", checkpoints checked {n}"));
        }
        grouped.push_str(spanning.as_deref().unwrap_or(""));
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

impl Stress {
    /// The arguments of a soak's child: `mode` (the soak's own flags), then `--child` with
    /// this run's duration and threads.
    fn child_args(&self, mode: &[&str]) -> Vec<String> {
        let (duration, threads) = (self.duration.to_string(), self.threads.to_string());
        let common = ["--child", "--duration", &duration, "--threads", &threads];
        mode.iter().chain(&common).map(|a| a.to_string()).collect()
    }

    /// The workload seed of `lane` (lane 0: the run's seed).
    fn lane_seed(&self, lane: u64) -> u64 {
        self.seed ^ lane.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }
}

/// Writes one line to stdout for the parent; exits quietly when the parent is gone (a
/// closed pipe).
fn emit(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if out
        .write_all(line.as_bytes())
        .and_then(|()| out.flush())
        .is_err()
    {
        std::process::exit(0);
    }
}

/// One round of a kill soak: runs this binary as `store --dir DIR stress ARGS --seed S
/// --version-base V` (S drawn from `seed` and `round`), lets it run for a random 20 ms to
/// 1.5 s (never past `deadline`), SIGKILLs it and returns the lines it printed; an exit of
/// its own with an error is a problem of `t`'s. The kill, bank and checkpoint soaks all watch
/// their child this way.
#[allow(clippy::too_many_arguments)]
fn kill_round(
    dir: &Path,
    args: &[String],
    seed: u64,
    round: u64,
    version_base: u64,
    rng: &mut workload::Rng,
    deadline: Instant,
    t: &mut Tally,
) -> Result<Vec<String>, CliError> {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let mut child = Command::new(std::env::current_exe()?)
        .arg("--dir")
        .arg(dir)
        .arg("stress")
        .args(args)
        .arg("--seed")
        .arg(seed.wrapping_mul(1_000_003).wrapping_add(round).to_string())
        .arg("--version-base")
        .arg(version_base.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    // Kill at a random moment: during open and recovery sometimes, mostly while writes,
    // flushes and compactions run.
    let left = deadline.saturating_duration_since(Instant::now());
    let wait = Duration::from_millis(20 + rng.below(1500)).min(left);
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| CliError::usage("no pipe to the child"))?;
    let reader = std::thread::spawn(move || {
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<String>>()
    });
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
    Ok(lines)
}
