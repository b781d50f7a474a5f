//! `--checkpoints --kill`: a child that puts keys, deletes ranges and makes checkpoints
//! while it writes, SIGKILLed at random; the checkpoints and the store checked after each
//! kill.
//!
//! ```text
//! parent ── spawns ─► child (DIR/store, SyncPolicy::EveryWrite):
//!   ▲                   writer:      "W id put KEY VERSION" | "W id del START END", the
//!   │                                write, then "A id" once acknowledged
//!   │                   checkpointer: "C n" (begun), store.checkpoint(DIR/checkpoints/n),
//!   │                                "D n" (done); every 20–250 ms
//!   └── SIGKILL at a random moment; then each checkpoint whose directory exists (done, or
//!       renamed into place just before the kill) must open, verify clean, and read as the
//!       store after some prefix of the writes that holds every write acknowledged before
//!       its "C" line; the store itself must read as every acknowledged write, plus or minus
//!       the one in flight, and verify clean
//! ```
//!
//! The writer is one thread, so its writes are in one order and a prefix of them is one
//! state of the model. Lines reach the parent through one pipe in the order they were
//! written: an "A" before a "C" was acknowledged before that checkpoint began.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use filterstore::{Store, SyncPolicy};

use super::emit;
use super::workload::{options, Rng, Tally};
use super::Stress;
use crate::cli::{error_chain, CliError, Exit, Global};

/// Keys `key00000 ..` the writer puts.
const KEYS: u64 = 2000;

/// The store's contents (key → value), as the model has them.
type Contents = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(i: u64) -> String {
    format!("key{i:05}")
}

/// One write of the child, as its "W" line gives it.
#[derive(Clone, Debug)]
enum Op {
    Put(String, u64),
    Del(String, String),
}

impl Op {
    fn apply(&self, m: &mut Contents) {
        match self {
            Op::Put(k, ver) => {
                m.insert(k.as_bytes().to_vec(), format!("v{ver}").into_bytes());
            }
            Op::Del(a, b) => {
                let gone: Vec<Vec<u8>> = m
                    .range(a.as_bytes().to_vec()..b.as_bytes().to_vec())
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in gone {
                    m.remove(&k);
                }
            }
        }
    }

    fn parse(words: &[&str]) -> Option<Op> {
        match words {
            ["put", k, ver] => Some(Op::Put(k.to_string(), ver.parse().ok()?)),
            ["del", a, b] => Some(Op::Del(a.to_string(), b.to_string())),
            _ => None,
        }
    }
}

fn store_dir(dir: &Path) -> PathBuf {
    dir.join("store")
}

fn checkpoints_dir(dir: &Path) -> PathBuf {
    dir.join("checkpoints")
}

/// Reads the store or checkpoint in `dir`: its contents, or why it could not be read, and
/// what `verify` found wrong.
fn read_whole(dir: &Path) -> Result<(Contents, Vec<String>), String> {
    let s = Store::open(dir, options(SyncPolicy::EveryWrite)).map_err(|e| error_chain(&e))?;
    let got = s
        .scan::<&[u8]>(..)
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<filterstore::Result<Contents>>()
        .map_err(|e| error_chain(&e))?;
    // Point reads too (through the filters and range tombstones, not the scan's path).
    for i in (0..KEYS).step_by(7) {
        let k = key(i).into_bytes();
        let v = s.get(&k).map_err(|e| error_chain(&e))?;
        if v.as_deref() != got.get(&k).map(Vec::as_slice) {
            return Err(format!("get {} disagrees with the scan", key(i)));
        }
    }
    drop(s);
    let r = filterstore::verify::verify_dir(dir).map_err(|e| error_chain(&e))?;
    Ok((got, r.problems.iter().map(|p| error_chain(p)).collect()))
}

/// What one child's lines said.
#[derive(Default)]
struct Round {
    /// Its writes in order, and how many were acknowledged.
    writes: Vec<Op>,
    acked: usize,
    /// Checkpoints begun: (name, writes acknowledged before it began, done).
    checkpoints: Vec<(String, usize, bool)>,
}

impl Round {
    fn parse(lines: &[String], t: &mut Tally) -> Round {
        let mut r = Round::default();
        for line in lines {
            let w: Vec<&str> = line.split(' ').collect();
            match w.as_slice() {
                ["W", id, op @ ..] => match (id.parse::<usize>(), Op::parse(op)) {
                    (Ok(id), Some(op)) if id == r.writes.len() => r.writes.push(op),
                    _ => t.problem(format!("child protocol: {line}")),
                },
                ["A", id] if id.parse::<usize>().ok() == Some(r.acked) => r.acked += 1,
                ["C", n] => r.checkpoints.push((n.to_string(), r.acked, false)),
                ["D", n] => match r.checkpoints.iter_mut().find(|c| c.0 == *n) {
                    Some(c) => c.2 = true,
                    None => t.problem(format!("child protocol: {line}")),
                },
                ["P", ..] => t.problem(format!("child: {}", &line[2..])),
                _ => t.problem(format!("child protocol: {line}")),
            }
        }
        r
    }

    /// Checks that `got` is the model after `from` writes or more (up to every write
    /// announced), starting from `base` (the model before this round): the number of
    /// writes it holds.
    fn prefix_of(&self, base: &Contents, got: &Contents, from: usize) -> Option<usize> {
        let mut m = base.clone();
        for (i, op) in self.writes.iter().enumerate() {
            if i >= from && m == *got {
                return Some(i);
            }
            op.apply(&mut m);
        }
        (self.writes.len() >= from && m == *got).then_some(self.writes.len())
    }
}

impl Stress {
    /// The child of `--checkpoints --kill`: writes and makes checkpoints until killed.
    pub(super) fn checkpoint_child(&self, g: &Global) -> Result<Exit, CliError> {
        let dir = g.dir();
        let store = Store::open(store_dir(&dir), options(SyncPolicy::EveryWrite))?;
        let stop_at = Instant::now() + Duration::from_secs(self.duration.max(1) * 2 + 10);
        let stop = AtomicBool::new(false);
        let round = self.version_base;
        std::thread::scope(|s| -> Result<(), CliError> {
            let cps = s.spawn(|| -> Result<(), CliError> {
                let mut rng = Rng::new(self.seed ^ 0xc4ec);
                for n in 0.. {
                    std::thread::sleep(Duration::from_millis(20 + rng.below(230)));
                    if stop.load(Relaxed) {
                        break;
                    }
                    let name = format!("{round}-{n}");
                    emit(&format!("C {name}\n"));
                    store.checkpoint(checkpoints_dir(&dir).join(&name))?;
                    emit(&format!("D {name}\n"));
                }
                Ok(())
            });
            let mut rng = Rng::new(self.seed);
            let mut r = Ok(());
            for id in 0u64.. {
                if Instant::now() >= stop_at {
                    break;
                }
                let a = rng.below(KEYS);
                let w = match rng.below(100) {
                    0..=5 => {
                        let b = a + 1 + rng.below(60);
                        emit(&format!("W {id} del {} {}\n", key(a), key(b)));
                        store.delete_range(key(a), key(b))
                    }
                    6 => {
                        // A prefix: `key0012` covers key00120 ..= key00129.
                        let p = &key(a)[..7];
                        let end = format!("{}{}", &p[..6], (p.as_bytes()[6] + 1) as char);
                        emit(&format!("W {id} del {p} {end}\n"));
                        store.delete_prefix(p)
                    }
                    _ => {
                        let ver = round << 32 | id;
                        emit(&format!("W {id} put {} {ver}\n", key(a)));
                        store.put(key(a), format!("v{ver}"))
                    }
                };
                if let Err(e) = w {
                    r = Err(e.into());
                    break;
                }
                emit(&format!("A {id}\n"));
            }
            stop.store(true, Relaxed);
            let c = cps
                .join()
                .map_err(|_| CliError::usage("the checkpoint thread panicked"))?;
            r.and(c)
        })?;
        Ok(Exit::Success)
    }

    /// `--checkpoints --kill` in `dir` (the store in `dir/store`, checkpoints in
    /// `dir/checkpoints`), until `deadline`. Returns the checkpoints checked.
    pub(super) fn checkpoint_soak(
        &self,
        dir: &Path,
        deadline: Instant,
        t: &mut Tally,
    ) -> Result<u64, CliError> {
        std::fs::create_dir_all(checkpoints_dir(dir))?;
        let mut rng = Rng::new(self.seed ^ 0xc0de);
        let mut model = Contents::new();
        let mut checked = 0;
        let mut round = 0u64;
        while Instant::now() < deadline {
            round += 1;
            let args = [
                "--checkpoints",
                "--kill",
                "--child",
                "--duration",
                &self.duration.to_string(),
            ]
            .map(String::from);
            let lines =
                super::kill_round(dir, &args, self.seed, round, round, &mut rng, deadline, t)?;
            let r = Round::parse(&lines, t);
            t.ops += r.acked as u64;
            for (name, acked, done) in &r.checkpoints {
                let cp = checkpoints_dir(dir).join(name);
                if !cp.exists() {
                    if *done {
                        t.problem(format!("checkpoint {name} is done but not there"));
                    }
                    continue;
                }
                match read_whole(&cp) {
                    Err(e) => t.problem(format!("checkpoint {name} does not open: {e}")),
                    Ok((got, problems)) => {
                        for p in problems {
                            t.problem(format!("checkpoint {name}: verify: {p}"));
                        }
                        if r.prefix_of(&model, &got, *acked).is_none() {
                            t.problem(format!(
                                "checkpoint {name} ({} keys) is no state after the {acked} \
                                 writes acknowledged before it began (or later ones)",
                                got.len()
                            ));
                        }
                        t.checked += got.len() as u64;
                        checked += 1;
                    }
                }
                std::fs::remove_dir_all(&cp)?;
            }
            // Checkpoints the kill interrupted leave temporary directories: never `dest`.
            for e in std::fs::read_dir(checkpoints_dir(dir))? {
                let p = e?.path();
                std::fs::remove_dir_all(&p)?;
            }
            let got = match read_whole(&store_dir(dir)) {
                Err(e) => {
                    t.problem(format!("the store does not open after kill {round}: {e}"));
                    break;
                }
                Ok((got, problems)) => {
                    for p in problems {
                        t.problem(format!("the store after kill {round}: verify: {p}"));
                    }
                    got
                }
            };
            t.checked += got.len() as u64;
            // Every acknowledged write, and the one in flight whole or not at all.
            match r.prefix_of(&model, &got, r.acked) {
                Some(n) if n <= r.acked + 1 => {}
                _ => t.problem(format!(
                    "after kill {round} the store ({} keys) is no state after the {} \
                     acknowledged writes (or the one in flight)",
                    got.len(),
                    r.acked
                )),
            }
            model = got;
        }
        Ok(checked)
    }
}
