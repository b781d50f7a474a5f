//! Durable puts/s from several threads: every write synced (`SyncPolicy::EveryWrite`), against
//! 1 write in K synced (`WriteOptions::sync`, the others not), on a fresh store each run.
//!
//! ```text
//! cargo run --release --example sync_mix -- [--threads 4] [--synced-every 10] [--ops 20000]
//!     [--runs 3] [--dir DIR] [--only all|mix]
//! ```
//! Prints, per run, the puts/s of each mode and, at the end, the medians and their ratio.
//! `DIR` (default: a temporary directory in the current one, not `/tmp`, which may be a
//! memory file system where an fsync costs nothing) must be on the disk to measure.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use filterstore::{Options, Store, SyncPolicy};

struct Args {
    threads: u64,
    synced_every: u64,
    ops: u64,
    runs: usize,
    dir: Option<PathBuf>,
    only: Option<String>,
}

fn args() -> Args {
    let mut a = Args {
        threads: 4,
        synced_every: 10,
        ops: 20_000,
        runs: 3,
        dir: None,
        only: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--threads" => a.threads = v.parse().expect("--threads"),
            "--synced-every" => a.synced_every = v.parse().expect("--synced-every"),
            "--ops" => a.ops = v.parse().expect("--ops"),
            "--runs" => a.runs = v.parse().expect("--runs"),
            "--dir" => a.dir = Some(v.into()),
            "--only" => a.only = Some(v),
            _ => panic!("unknown flag {flag}"),
        }
    }
    a
}

/// Puts/s of `ops` puts of 16-byte keys and 100-byte values from `threads` threads;
/// `synced_every`: `None` for every write synced by the store's policy, `Some(k)` for one in
/// k synced by its `WriteOptions`.
fn run(dir: &std::path::Path, threads: u64, ops: u64, synced_every: Option<u64>) -> f64 {
    let mut opts = Options::default();
    opts.sync = match synced_every {
        None => SyncPolicy::EveryWrite,
        Some(_) => SyncPolicy::OnFlush,
    };
    let store = Arc::new(Store::open(dir, opts).unwrap());
    let per = ops / threads;
    let t = Instant::now();
    std::thread::scope(|s| {
        for th in 0..threads {
            let store = store.clone();
            s.spawn(move || {
                let value = [7u8; 100];
                for i in 0..per {
                    let key = ((th << 40) | i).to_be_bytes();
                    let mut k = [0u8; 16];
                    k[..8].copy_from_slice(&key);
                    match synced_every {
                        None => store.put(k, value).unwrap(),
                        // MIX BEGIN
                        Some(every) => {
                            let synced = i % every == every - 1;
                            let wo = filterstore::WriteOptions::default().sync(synced);
                            store.put_opt(k, value, &wo).unwrap()
                        } // MIX END
                    }
                }
            });
        }
    });
    let secs = t.elapsed().as_secs_f64();
    drop(store);
    (per * threads) as f64 / secs
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let a = args();
    let root = match &a.dir {
        Some(d) => {
            std::fs::create_dir_all(d).unwrap();
            tempfile::tempdir_in(d).unwrap()
        }
        None => tempfile::tempdir_in(".").unwrap(),
    };
    let (mut all, mut mix) = (Vec::new(), Vec::new());
    for r in 0..a.runs {
        // Alternate the order, so that neither mode always runs on a warmer disk.
        let modes: [Option<u64>; 2] = if r % 2 == 0 {
            [None, Some(a.synced_every)]
        } else {
            [Some(a.synced_every), None]
        };
        for m in modes {
            let want = match m {
                None => "all",
                Some(_) => "mix",
            };
            if a.only.as_deref().is_some_and(|o| o != want) {
                continue;
            }
            let dir = root.path().join(format!("{r}-{want}"));
            let ps = run(&dir, a.threads, a.ops, m);
            println!("run {r} {want}: {ps:.0} puts/s");
            match m {
                None => all.push(ps),
                Some(_) => mix.push(ps),
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    let (ma, mm) = (
        (!all.is_empty()).then(|| median(all)),
        (!mix.is_empty()).then(|| median(mix)),
    );
    if let Some(ma) = ma {
        println!(
            "all synced (EveryWrite), {} threads: median {ma:.0} puts/s",
            a.threads
        );
    }
    if let Some(mm) = mm {
        println!(
            "1 in {} synced, {} threads: median {mm:.0} puts/s",
            a.synced_every, a.threads
        );
    }
    if let (Some(ma), Some(mm)) = (ma, mm) {
        println!("ratio mix / all: {:.2}×", mm / ma);
    }
}
