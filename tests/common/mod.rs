//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod model;

use std::sync::Arc;

use filterstore::io::FaultFs;
use filterstore::{Options, SyncPolicy};

/// Options for the power-cut tests: every write synced, through the fault-injecting file
/// system `fs`, with small memtables and an early compaction so that seals and compactions
/// add sync points.
pub fn power_cut_options(fs: &FaultFs) -> Options {
    let mut o = Options::default()
        .sync(SyncPolicy::EveryWrite)
        .memtable_bytes(2 << 10)
        .compaction_trigger(Some(2));
    o.fs = Arc::new(fs.clone());
    o
}

/// Power cuts at every sync point of a run of `steps` durable steps. `run(dir, fs)` takes the
/// steps in `dir` through `fs`, stopping at the first error, and returns the state after
/// each acknowledged step (the first entry: before any) and how many were acknowledged. It
/// runs once on a clean file system (every step acknowledged, which counts the sync points),
/// then once per sync point with the power cut there; `read(cut, image)` opens the crash
/// image left by that cut and reads its state, which must be one of the run's states: every
/// acknowledged step, and at most the one in flight. Returns the sync points checked.
pub fn at_every_power_cut<S: PartialEq + std::fmt::Debug>(
    tmp: &std::path::Path,
    steps: usize,
    run: impl Fn(&std::path::Path, &FaultFs) -> (Vec<S>, usize),
    mut read: impl FnMut(u64, &std::path::Path) -> S,
) -> u64 {
    let clean = FaultFs::new();
    let (states, acked) = run(&tmp.join("clean"), &clean);
    assert_eq!(acked, steps, "a clean run acknowledges every step");
    let total_syncs = clean.syncs();
    for cut in 0..total_syncs + 1 {
        let fs = FaultFs::new();
        fs.cut_power_at_sync(cut);
        let (_, acked) = run(&tmp.join(format!("live{cut}")), &fs);
        let img = tmp.join(format!("img{cut}"));
        std::fs::create_dir(&img).unwrap();
        fs.crash_image(&img, fs.pending_dir_ops()).unwrap();
        let got = read(cut, &img);
        let at = states
            .iter()
            .position(|s| *s == got)
            .unwrap_or_else(|| panic!("cut {cut}: an image between steps: {got:?}"));
        assert!(
            at == acked || at == acked + 1,
            "cut {cut}: {acked} steps acknowledged, the image holds {at}"
        );
    }
    println!("power cuts: {} sync points checked", total_syncs + 1);
    total_syncs + 1
}

/// A small deterministic PRNG (xorshift64*), so failures replay from their seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max as u64 + 1) as usize;
        (0..n).map(|_| self.next() as u8).collect()
    }
}

#[allow(unused_imports)]
pub use filterstore::io::NoSyncFs;

/// Two threads that look keys up while a test goes on writing, flushing and compacting:
/// each reads `key(i)` for random `i < count` (seeded from `seed`) and checks its value is
/// `i`'s little-endian bytes, until [`stop`](Self::stop) and at least `min_reads` reads.
pub struct StableReaders {
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl StableReaders {
    pub fn spawn(
        store: &std::sync::Arc<filterstore::Store>,
        key: fn(u64) -> Vec<u8>,
        count: u64,
        seed: u64,
        min_reads: u64,
    ) -> Self {
        use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let threads = (0..2u64)
            .map(|r| {
                let (store, done) = (store.clone(), done.clone());
                std::thread::spawn(move || {
                    let mut rng = Rng::new(seed + r);
                    let mut reads = 0u64;
                    while !done.load(Relaxed) || reads < min_reads {
                        let i = rng.below(count);
                        let got = store.get(key(i)).unwrap().map(Vec::from);
                        assert_eq!(got, Some(i.to_le_bytes().to_vec()), "stable key {i}");
                        reads += 1;
                    }
                })
            })
            .collect();
        StableReaders { done, threads }
    }

    /// Stops the readers and waits for them; a reader's failed check fails the caller.
    pub fn stop(self) {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
    }
}

/// The checkpoints a test takes of `store` beside `threads` writers: writer `t` calls
/// `write(t, i)` for i = 0, 1, … (at most `limit`; a write is acknowledged when it
/// returns) until the `count`-th checkpoint is taken, each into `dir/cp{n}` once `step`
/// more writes in all have been acknowledged. Returns each checkpoint's directory with the
/// writers' acknowledged counts just before it was taken, and their final counts.
pub fn checkpoints_beside_writers(
    store: &filterstore::Store,
    dir: &std::path::Path,
    threads: u64,
    (limit, count, step): (u64, u64, u64),
    write: impl Fn(u64, u64) + Send + Sync + 'static,
) -> (Vec<(std::path::PathBuf, Vec<u64>)>, Vec<u64>) {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..threads).map(|_| AtomicU64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let write = Arc::new(write);
    let writers: Vec<_> = (0..threads)
        .map(|t| {
            let (acked, stop, write) = (acked.clone(), stop.clone(), write.clone());
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(SeqCst) && i < limit {
                    write(t, i);
                    i += 1;
                    acked[t as usize].store(i, SeqCst);
                }
            })
        })
        .collect();
    let counts = || acked.iter().map(|a| a.load(SeqCst)).collect::<Vec<u64>>();
    let mut checkpoints = Vec::new();
    for n in 0..count {
        while counts().iter().sum::<u64>() < step * (n + 1) {
            std::thread::yield_now();
        }
        let before = counts();
        let dest = dir.join(format!("cp{n}"));
        store.checkpoint(&dest).unwrap();
        checkpoints.push((dest, before));
    }
    stop.store(true, SeqCst);
    for w in writers {
        w.join().unwrap();
    }
    (checkpoints, counts())
}

/// A power cut at every sync point of `Store::checkpoint`: for k = 0, 1, … a fresh source
/// from `source(dir)` (its store under `dir/store`, through the returned `FaultFs`) has its
/// power cut at its k-th sync from now while it checkpoints into `dir/cp`, and `check` is
/// called on every crash image of the tree (one per count of directory entries applied)
/// with a name for it, returning whether the image holds a whole checkpoint; until a
/// checkpoint finishes before any cut. Returns (sync points, images, whole checkpoints).
pub fn checkpoint_power_cuts<S>(
    scratch: impl Fn() -> tempfile::TempDir,
    source: impl Fn(&std::path::Path) -> (filterstore::Store, FaultFs, S),
    mut check: impl FnMut(&std::path::Path, &S, &str) -> bool,
) -> (u64, u64, u64) {
    let (mut images, mut whole) = (0, 0);
    for k in 0.. {
        let tmp = scratch();
        let (store, fs, model) = source(tmp.path());
        fs.cut_power_at_sync(fs.syncs() + k);
        if store.checkpoint(tmp.path().join("cp")).is_ok() {
            assert!(k > 3, "a checkpoint has more sync points than {k}");
            return (k, images, whole);
        }
        for applied in 0..=fs.pending_dir_ops() {
            let img = tempfile::tempdir().unwrap();
            fs.crash_image_tree(tmp.path(), img.path(), applied)
                .unwrap();
            let what = format!("cut at sync {k}, {applied} entries applied");
            whole += u64::from(check(img.path(), &model, &what));
            images += 1;
        }
        drop(store);
    }
    unreachable!()
}
