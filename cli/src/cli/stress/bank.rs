//! `--bank`: money moved between accounts by transactions, the bank invariant checked.
//!
//! ```text
//! without --kill: --threads threads make random transfers between ACCOUNTS accounts as
//!                 transactions (retried on conflict) while a reader takes snapshots: each
//!                 snapshot must sum to the total; at the end the store is reopened and
//!                 checked as below (each transfer records itself there too)
//! with --kill:    parent ── spawns ─► child: the same transfers, fsynced
//!                   ▲                 (SyncPolicy::EveryWrite), each also writing its record
//!                   │                 xfer/<id> = "from to amount"; prints "A id" once a
//!                   │                 transfer is acknowledged (and "P ..." for a snapshot
//!                   │                 that does not sum to the total)
//!                   └── SIGKILL at a random moment, reopen, check: the balances sum to
//!                       the total, every acknowledged transfer's record is there, and
//!                       every balance is the start plus what the records present move
//!                       (no transfer half applied), then the next child
//! ```

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use filterstore::{Error, Store, SyncPolicy, WriteBatch};

use super::emit;
use super::workload::{options, Rng, Tally};
use super::{on_lanes, Stress};
use crate::cli::{CliError, Exit, Global};

/// Accounts, each starting with `START`.
pub(super) const ACCOUNTS: u64 = 1000;
const START: i64 = 1000;

fn account(i: u64) -> String {
    format!("acct/{i:04}")
}

fn parse(v: &[u8]) -> Option<i64> {
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// Creates the accounts in a new store.
fn create(dir: &Path) -> Result<(), CliError> {
    let store = Store::open(dir, options(SyncPolicy::EveryWrite))?;
    let mut b = WriteBatch::new();
    for i in 0..ACCOUNTS {
        b.put(account(i).into_bytes(), START.to_string().into_bytes());
    }
    store.write(b)?;
    store.close()?;
    Ok(())
}

/// Sum and count of the balances in `pairs`; a value that does not parse is a problem.
fn sum(
    pairs: impl Iterator<Item = filterstore::Result<(filterstore::Slice, filterstore::Slice)>>,
) -> filterstore::Result<Result<(i64, u64), String>> {
    let (mut s, mut n) = (0i64, 0u64);
    for r in pairs {
        let (k, v) = r?;
        match parse(&v) {
            Some(x) => s += x,
            None => {
                return Ok(Err(format!(
                    "{} holds no number",
                    String::from_utf8_lossy(&k)
                )))
            }
        }
        n += 1;
    }
    Ok(Ok((s, n)))
}

/// One transfer as a transaction, retried on conflict, with its record `xfer/<id>`.
/// Returns the conflicts met.
fn transfer(store: &Store, rng: &mut Rng, id: u64) -> filterstore::Result<u64> {
    let from = rng.below(ACCOUNTS);
    let to = (from + 1 + rng.below(ACCOUNTS - 1)) % ACCOUNTS;
    let amount = rng.below(50) as i64 + 1;
    let mut conflicts = 0;
    loop {
        let mut t = store.transaction();
        let a = t
            .get(account(from))?
            .as_deref()
            .and_then(parse)
            .unwrap_or(0);
        let b = t.get(account(to))?.as_deref().and_then(parse).unwrap_or(0);
        t.put(account(from), (a - amount).to_string());
        t.put(account(to), (b + amount).to_string());
        t.put(format!("xfer/{id:016x}"), format!("{from} {to} {amount}"));
        match t.commit() {
            Err(Error::Conflict) => conflicts += 1,
            r => return r.map(|()| conflicts),
        }
    }
}

/// Takes snapshots until `stop`, reporting each that does not sum to the total.
fn audit(store: &Store, stop: &AtomicBool, problem: &dyn Fn(String)) -> filterstore::Result<u64> {
    let want = (START * ACCOUNTS as i64, ACCOUNTS);
    let mut n = 0;
    while !stop.load(Relaxed) {
        let snap = store.snapshot();
        match sum(snap.scan_prefix("acct/"))? {
            Ok(got) if got == want => {}
            Ok(got) => problem(format!(
                "snapshot {} sums to {got:?}, not {want:?}",
                snap.seq()
            )),
            Err(e) => problem(e),
        }
        n += 1;
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(n)
}

/// Reopens the store and checks it: the balances sum to the total; each is the start plus
/// what the transfer records present move; every id of `acked` has its record.
fn check(dir: &Path, acked: &HashSet<u64>, t: &mut Tally) -> Result<(), CliError> {
    let store = Store::open(dir, options(SyncPolicy::EveryWrite))?;
    let mut want = vec![START; ACCOUNTS as usize];
    let mut present = HashSet::new();
    for r in store.scan_prefix(b"xfer/") {
        let (k, v) = r?;
        let id = std::str::from_utf8(&k[5..])
            .ok()
            .and_then(|s| u64::from_str_radix(s, 16).ok());
        let f: Vec<u64> = String::from_utf8_lossy(&v)
            .split(' ')
            .filter_map(|x| x.parse().ok())
            .collect();
        match (id, f.as_slice()) {
            (Some(id), &[from, to, amount]) if from < ACCOUNTS && to < ACCOUNTS => {
                want[from as usize] -= amount as i64;
                want[to as usize] += amount as i64;
                present.insert(id);
            }
            _ => t.problem(format!(
                "a damaged transfer record {}",
                String::from_utf8_lossy(&k)
            )),
        }
    }
    for id in acked {
        t.checked += 1;
        if !present.contains(id) {
            t.problem(format!("acknowledged transfer {id:016x} is lost"));
        }
    }
    for (i, w) in want.iter().enumerate() {
        t.checked += 1;
        let got = store.get(account(i as u64))?;
        if got.as_deref().and_then(parse) != Some(*w) {
            t.problem(format!(
                "{}: {got:?}, but its transfers make {w}",
                account(i as u64)
            ));
        }
    }
    match sum(store.scan_prefix(b"acct/"))? {
        Ok(s) if s == (START * ACCOUNTS as i64, ACCOUNTS) => {}
        Ok(s) => t.problem(format!("the balances sum to {s:?} after reopen")),
        Err(e) => t.problem(e),
    }
    store.close()?;
    Ok(())
}

impl Stress {
    /// `--bank` (with or without `--kill`) in `dir`, until `deadline`.
    pub(super) fn bank(
        &self,
        dir: &Path,
        deadline: Instant,
        t: &mut Tally,
    ) -> Result<(), CliError> {
        create(dir)?;
        if !self.kill {
            let store = Store::open(dir, options(SyncPolicy::OnFlush))?;
            let stop = AtomicBool::new(false);
            let problems = std::sync::Mutex::new(Vec::new());
            let ops = AtomicU64::new(0);
            std::thread::scope(|s| -> Result<(), CliError> {
                let reader = s.spawn(|| {
                    audit(&store, &stop, &|p| {
                        problems.lock().unwrap_or_else(|p| p.into_inner()).push(p)
                    })
                });
                let r = on_lanes(self.threads, |lane| {
                    let mut rng = Rng::new(self.lane_seed(lane));
                    for n in 0u64.. {
                        if Instant::now() >= deadline {
                            break;
                        }
                        transfer(&store, &mut rng, lane << 32 | n)?;
                        ops.fetch_add(1, Relaxed);
                    }
                    Ok(())
                });
                stop.store(true, Relaxed);
                let snaps = reader
                    .join()
                    .map_err(|_| CliError::usage("the auditor panicked"))??;
                t.checked += snaps;
                r.map(|_| ())
            })?;
            t.ops += ops.load(Relaxed);
            for p in problems.into_inner().unwrap_or_default() {
                t.problem(p);
            }
            store.close()?;
            return check(dir, &HashSet::new(), t);
        }
        let mut rng = Rng::new(self.seed ^ 0xba4c);
        let mut acked = HashSet::new();
        let mut round = 0u64;
        while Instant::now() < deadline {
            round += 1;
            let args = self.child_args(&["--bank"]);
            let lines =
                super::kill_round(dir, &args, self.seed, round, round, &mut rng, deadline, t)?;
            for line in lines {
                match line.split_once(' ') {
                    Some(("A", id)) => match u64::from_str_radix(id, 16) {
                        Ok(id) => {
                            acked.insert(id);
                            t.ops += 1;
                        }
                        Err(_) => t.problem(format!("child protocol: {line}")),
                    },
                    Some(("P", p)) => t.problem(format!("child: {p}")),
                    _ => {}
                }
            }
            check(dir, &acked, t)?;
        }
        Ok(())
    }

    /// The child of `--bank --kill`: transfers until killed, each acknowledged on stdout.
    /// Transfer ids: the child's round (`--version-base`) in the top 24 bits, the lane in
    /// the next 8, a count below.
    pub(super) fn bank_child(&self, g: &Global) -> Result<Exit, CliError> {
        let store = Store::open(g.dir(), options(SyncPolicy::EveryWrite))?;
        let stop_at = Instant::now() + Duration::from_secs(self.duration.max(1) * 2 + 10);
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| -> Result<(), CliError> {
            let reader = s.spawn(|| audit(&store, &stop, &|p| emit(&format!("P {p}\n"))));
            let r = on_lanes(self.threads, |lane| {
                let mut rng = Rng::new(self.lane_seed(lane));
                for n in 0u64.. {
                    if Instant::now() >= stop_at {
                        break;
                    }
                    let id = self.version_base << 40 | lane << 32 | n;
                    transfer(&store, &mut rng, id)?;
                    emit(&format!("A {id:016x}\n"));
                }
                Ok(())
            });
            stop.store(true, Relaxed);
            reader
                .join()
                .map_err(|_| CliError::usage("the auditor panicked"))??;
            r.map(|_| ())
        })?;
        Ok(Exit::Success)
    }
}
