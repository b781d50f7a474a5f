//! SIGKILL at random moments of a child process writing with `SyncPolicy::EveryWrite`, and
//! the directory lock across processes. The child is this test binary re-run on one test.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use filterstore::{Error, FilterKind, Options, Store, SyncPolicy, WriteBatch};

use crate::common::Rng;
use crate::{assert_verified, value_of};

const DIR_VAR: &str = "FILTERSTORE_CRASH_DIR";
const SEED_VAR: &str = "FILTERSTORE_CRASH_SEED";
const LOCK_VAR: &str = "FILTERSTORE_LOCK_DIR";

pub(crate) fn spawn_child(test: &str, vars: &[(&str, String)]) -> Child {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([test, "--exact", "--nocapture", "--test-threads", "1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (k, v) in vars {
        c.env(k, v);
    }
    c.spawn().unwrap()
}

pub(crate) fn out(line: &str) {
    // Written straight to the process's stdout (not the test harness capture) and flushed.
    let mut o = std::io::stdout().lock();
    o.write_all(line.as_bytes()).unwrap();
    o.write_all(b"\n").unwrap();
    o.flush().unwrap();
}

/// Child mode: writes until killed, printing `@<op>? args` before and `@<op> args` after each
/// operation returns. Does nothing when run as an ordinary test.
#[test]
fn child_writer() {
    let (Ok(dir), Ok(seed)) = (std::env::var(DIR_VAR), std::env::var(SEED_VAR)) else {
        return;
    };
    let seed: u64 = seed.parse().unwrap();
    let mut rng = Rng::new(seed);
    let opts = Options::default()
        .filter(Some(
            FilterKind::ALL
                .get(rng.below(FilterKind::ALL.len() as u64 + 1) as usize)
                .copied()
                .unwrap_or(FilterKind::Global),
        ))
        .memtable_bytes(1024 + rng.below(4096) as usize)
        .compaction_trigger(Some(2 + rng.below(3) as usize))
        // Tiny tables and levels, so that kills land in background flushes and in
        // compactions at every level.
        .table_bytes(1024 + rng.below(4096))
        .l1_bytes(4096 + rng.below(8192))
        .level_ratio(2 + rng.below(2))
        .sync(SyncPolicy::EveryWrite);
    out("@open?");
    let store = Store::open(&dir, opts).unwrap();
    out("@open");
    let mut mine: Vec<String> = Vec::new();
    for i in 0..2000u64 {
        let key = format!("s{seed:04}k{i:05}");
        match rng.below(100) {
            0..=69 => {
                out(&format!("@P? {key}"));
                store
                    .put(key.as_bytes(), value_of(key.as_bytes(), 1))
                    .unwrap();
                out(&format!("@P {key}"));
                mine.push(key);
            }
            70..=79 if !mine.is_empty() => {
                let k = mine.swap_remove(rng.below(mine.len() as u64) as usize);
                out(&format!("@D? {k}"));
                store.delete(k.as_bytes()).unwrap();
                out(&format!("@D {k}"));
            }
            80..=89 => {
                let keys: Vec<String> = (0..3).map(|j| format!("{key}b{j}")).collect();
                let mut b = WriteBatch::new();
                for k in &keys {
                    b.put(k.as_bytes(), value_of(k.as_bytes(), 1));
                }
                out(&format!("@B? {}", keys.join(" ")));
                store.write(b).unwrap();
                out(&format!("@B {}", keys.join(" ")));
                mine.extend(keys);
            }
            90..=93 => {
                out("@F?");
                store.flush().unwrap();
                out("@F");
            }
            94..=97 => {
                out("@C?");
                store.compact().unwrap();
                out("@C");
            }
            _ => {
                out("@R?");
                let kind = FilterKind::ALL
                    .get(rng.below(FilterKind::ALL.len() as u64 + 1) as usize)
                    .copied()
                    .unwrap_or(FilterKind::Global);
                store.refilter(kind, 0.05).unwrap();
                out("@R");
            }
        }
    }
    out("@end");
}

type Model = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// Whether `dir` holds table or filter files its manifest does not name: a flush or a
/// compaction was writing its output when the process died.
fn background_writes_in_progress(dir: &Path) -> bool {
    let Ok(Some(m)) = filterstore::manifest::Manifest::load(dir) else {
        return false;
    };
    let live: std::collections::HashSet<u64> = m
        .tables
        .iter()
        .flat_map(|t| [t.number, t.filter_file])
        .collect();
    std::fs::read_dir(dir).unwrap().any(|e| {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        match name.split_once('.') {
            Some((n, "sst" | "filter")) => n.parse::<u64>().is_ok_and(|n| !live.contains(&n)),
            _ => false,
        }
    })
}

#[test]
fn sigkill_at_random_moments_loses_no_acknowledged_write() {
    let _serial = crate::serial();
    let tmp = crate::scratch_dir();
    let dir = tmp.path().join("store");
    let mut rng = Rng::new(2024);
    let mut must = Model::new();
    let mut phases: BTreeMap<String, u64> = BTreeMap::new();
    let (iterations, mut checked, mut acked) = (300u64, 0u64, 0u64);
    let mut in_background = 0u64;
    for iter in 0..iterations {
        let mut child = spawn_child(
            "crash::child_writer",
            &[
                (DIR_VAR, dir.display().to_string()),
                (SEED_VAR, iter.to_string()),
            ],
        );
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut lines = Vec::new();
        let stop_after = 1 + rng.below(if iter % 10 == 0 { 8 } else { 200 });
        let mut line = String::new();
        while (lines.len() as u64) < stop_after {
            line.clear();
            if stdout.read_line(&mut line).unwrap() == 0 {
                break;
            }
            // The harness may print "test ... " before the child's first line.
            if let Some(at) = line.find('@') {
                lines.push(line[at..].trim_end().to_string());
            }
        }
        child.kill().unwrap(); // SIGKILL
        let mut rest = String::new();
        stdout.read_to_string(&mut rest).unwrap();
        child.wait().unwrap();
        lines.extend(
            rest.lines()
                .filter_map(|l| l.find('@').map(|at| l[at..].to_string())),
        );
        // Replay the child's log: completed operations are acknowledged; the last one
        // begun and not completed may or may not have happened.
        let mut may = Model::new();
        let mut in_flight: Option<&str> = None;
        let mut batch_in_flight: Vec<Vec<u8>> = Vec::new();
        for l in &lines {
            let (tag, args) = l.split_once(' ').unwrap_or((l.as_str(), ""));
            let keys: Vec<Vec<u8>> = args
                .split(' ')
                .filter(|s| !s.is_empty())
                .map(|s| s.as_bytes().to_vec())
                .collect();
            if let Some(op) = tag.strip_suffix('?') {
                in_flight = Some(op);
                may.clear();
                batch_in_flight.clear();
                for k in keys {
                    let v = if op == "@D" {
                        None
                    } else {
                        Some(value_of(&k, 1))
                    };
                    if op == "@B" {
                        batch_in_flight.push(k.clone());
                    }
                    may.insert(k, v);
                }
                continue;
            }
            in_flight = None;
            may.clear();
            batch_in_flight.clear();
            for k in keys {
                acked += 1;
                let v = if tag == "@D" {
                    None
                } else {
                    Some(value_of(&k, 1))
                };
                must.insert(k, v);
            }
        }
        let phase = match in_flight {
            Some("@P") => "put (may flush and compact)",
            Some("@D") => "delete (may flush and compact)",
            Some("@B") => "batch (may flush and compact)",
            Some("@F") => "flush",
            Some("@C") => "compaction",
            Some("@R") => "refilter",
            Some("@open") => "open (recovery)",
            Some(_) => "other",
            None if lines.last().is_some_and(|l| l == "@end") => "finished",
            None => "between operations",
        };
        *phases.entry(phase.to_string()).or_default() += 1;
        let what = format!("iteration {iter}, killed during {phase}");
        if background_writes_in_progress(&dir) {
            in_background += 1;
        }
        assert_verified(&dir, &what);
        let store = Store::open(&dir, Options::default()).unwrap_or_else(|e| panic!("{what}: {e}"));
        // Everything in the store must be something written; everything acknowledged must be
        // there with its value (one full scan, plus point lookups of this round's keys).
        let mut seen = Model::new();
        for e in store.scan::<&[u8]>(..) {
            let (k, v) = e.unwrap_or_else(|e| panic!("{what}: scan: {e}"));
            let (k, v) = (k.to_vec(), v.to_vec());
            seen.insert(k, Some(v));
        }
        for (k, want) in &must {
            let got = seen.get(k).cloned().flatten();
            let alt = may.get(k);
            assert!(
                got == *want || alt.is_some_and(|a| *a == got),
                "{what}: key {} is {:?}, acknowledged {:?}",
                String::from_utf8_lossy(k),
                got.is_some(),
                want.is_some()
            );
            checked += 1;
        }
        for (k, v) in &seen {
            let known = must.get(k).or_else(|| may.get(k));
            assert!(
                known.is_some_and(|w| w.as_ref() == v.as_ref())
                    || may.get(k).is_some_and(|w| w.as_ref() == v.as_ref()),
                "{what}: key {} was never written with this value",
                String::from_utf8_lossy(k)
            );
        }
        for k in may.keys().chain(
            lines
                .iter()
                .rev()
                .take(20)
                .flat_map(|l| l.split(' ').skip(1))
                .map(|s| s.as_bytes())
                .map(|s| s.to_vec())
                .collect::<Vec<_>>()
                .iter(),
        ) {
            assert_eq!(
                store.get(k).unwrap().map(Vec::from),
                seen.get(k).cloned().flatten(),
                "{what}: get disagrees with scan"
            );
        }
        // A batch is all or nothing.
        let present = batch_in_flight
            .iter()
            .filter(|k| seen.contains_key(*k))
            .count();
        assert!(
            present == 0 || present == batch_in_flight.len(),
            "{what}: torn batch"
        );
        // What recovery decided for the operation in flight is the truth from now on.
        for k in may.keys() {
            must.insert(k.clone(), seen.get(k).cloned().flatten());
        }
        drop(store);
    }
    assert!(
        acked > iterations,
        "children acknowledged only {acked} writes"
    );
    println!("{in_background} kills caught a flush or compaction writing its tables");
    assert!(
        in_background > 0,
        "no kill landed while a flush or compaction was writing"
    );
    println!(
        "SIGKILL: {iterations} kills, kill points by operation in flight {phases:?}, \
         {acked} acknowledged writes, {checked} key checks, {} keys at the end",
        must.values().filter(|v| v.is_some()).count()
    );
}

/// Child mode: holds the store open until its stdin closes.
#[test]
fn child_lock_holder() {
    let Ok(dir) = std::env::var(LOCK_VAR) else {
        return;
    };
    let store = Store::open(&dir, Options::default()).unwrap();
    store.put(b"held", b"1").unwrap();
    out("@locked");
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    drop(store);
}

fn wait_locked(child: &mut Child) {
    let mut r = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            r.read_line(&mut line).unwrap() > 0,
            "child ended before locking"
        );
        if line.trim_end().ends_with("@locked") {
            break;
        }
    }
    child.stdout = None;
    std::mem::forget(r); // keep the pipe's read end open until the child ends
}

fn assert_locked(dir: &Path) {
    match Store::open(dir, Options::default()) {
        Err(Error::Locked(_)) => {}
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("a second process opened a locked store"),
    }
}

#[test]
fn a_second_process_is_refused_while_the_first_holds_the_store() {
    let _serial = crate::serial();
    let tmp = crate::scratch_dir();
    let dir = tmp.path().join("store");
    // Released by a clean exit...
    let mut child = spawn_child(
        "crash::child_lock_holder",
        &[(LOCK_VAR, dir.display().to_string())],
    );
    wait_locked(&mut child);
    assert_locked(&dir);
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    let s = Store::open(&dir, Options::default()).unwrap();
    assert_eq!(s.get(b"held").unwrap().map(Vec::from), Some(b"1".to_vec()));
    drop(s);
    // ...and by SIGKILL.
    let mut child = spawn_child(
        "crash::child_lock_holder",
        &[(LOCK_VAR, dir.display().to_string())],
    );
    wait_locked(&mut child);
    assert_locked(&dir);
    child.kill().unwrap();
    child.wait().unwrap();
    Store::open(&dir, Options::default()).unwrap();
    println!(
        "lock: a second process was refused twice; the lock was released by exit and by SIGKILL"
    );
}
