//! Snapshots and the commit sequence, checked against models: each snapshot against a clone
//! of a `BTreeMap` taken when it was, over random writes, batches, flushes, compactions,
//! refilters (to and from the global filter) and reopens, on every filter kind, block form,
//! cache setting and `mmap_reads` (scans read forward, backward and from both ends at once);
//! snapshots held across compactions that remove the files
//! they read; and sequence numbers that never go backwards across reopens and power cuts.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::model::{self, both_ways, items, key, prefixed, Model};
use common::Rng;
use filterstore::io::{FaultFs, NoSyncFs};
use filterstore::{Compression, FilterKind, Options, Snapshot, Store, SyncPolicy, WriteBatch};

/// Every filter kind (the global filter included) and no filter.
const KINDS: [FilterKind; 6] = [
    FilterKind::Bloom,
    FilterKind::BlockedBloom,
    FilterKind::Cuckoo,
    FilterKind::BinaryFuse,
    FilterKind::Global,
    FilterKind::None,
];

fn compressions() -> Vec<Compression> {
    Compression::ALL
        .into_iter()
        .filter(|c| c.is_available())
        .collect()
}

/// What a model run reads with: filter kind, block form, block cache, `mmap_reads`.
#[derive(Clone, Copy, Debug)]
struct Config {
    kind: FilterKind,
    compression: Compression,
    cache: bool,
    mmap_reads: bool,
}

/// Every configuration: filter kind × block form × cache on or off × `mmap_reads`.
fn every_config() -> Vec<Config> {
    let mut v = Vec::new();
    for kind in KINDS {
        for compression in compressions() {
            for cache in [false, true] {
                for mmap_reads in [false, true] {
                    v.push(Config {
                        kind,
                        compression,
                        cache,
                        mmap_reads,
                    });
                }
            }
        }
    }
    v
}

/// A slice of [`every_config`] for `cargo test`: 18 configurations in which every filter
/// kind meets every block form, and each kind reads with the cache both on and off and with
/// `mmap_reads` both on and off.
fn some_configs() -> Vec<Config> {
    let c = compressions();
    (0..18usize)
        .map(|i| Config {
            kind: KINDS[i % 6],
            compression: c[i / 6 % c.len()],
            cache: (i + i / 6) % 2 == 1,
            mmap_reads: (i / 2) % 2 == 1,
        })
        .collect()
}

/// Tiny memtables, tables and levels, so that flushes and every compaction kind run often;
/// the filter kind, block form, block cache and `mmap_reads` as `cfg` says.
fn opts(cfg: Config, rng: &mut Rng) -> Options {
    Options::default()
        .filter(Some(cfg.kind))
        .compression(cfg.compression)
        .block_cache_bytes(if cfg.cache { 64 << 10 } else { 0 })
        .mmap_reads(cfg.mmap_reads)
        .memtable_bytes(1024 + rng.below(4096) as usize)
        .compaction_trigger(if rng.below(4) == 0 {
            None
        } else {
            Some(2 + rng.below(3) as usize)
        })
        .table_bytes(1024 + rng.below(4096))
        .l1_bytes(4096 + rng.below(8192))
        .level_ratio(2 + rng.below(2))
        .fs(Arc::new(NoSyncFs))
}

/// Checks a snapshot against its model: lookups (one by one, batched, `contains_key`), a
/// random range and a random prefix, forward, backward and from both ends.
fn check(snap: &Snapshot, model: &Model, rng: &mut Rng, space: u64, what: &str) {
    let keys: Vec<Vec<u8>> = (0..8).map(|_| key(rng, space + 10)).collect();
    for k in &keys {
        assert_eq!(
            snap.get(k).unwrap().map(|v| v.to_vec()).as_ref(),
            model.get(k),
            "{what} get {k:?}"
        );
        assert_eq!(
            snap.contains_key(k).unwrap(),
            model.contains_key(k),
            "{what}"
        );
    }
    let want: Vec<_> = keys.iter().map(|k| model.get(k).cloned()).collect();
    let got: Vec<_> = snap
        .multi_get(&keys)
        .unwrap()
        .into_iter()
        .map(|v| v.map(|v| v.to_vec()))
        .collect();
    assert_eq!(got, want, "{what} multi_get");
    let (a, b) = (key(rng, space), key(rng, space));
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    both_ways(
        || snap.scan(lo.clone()..hi.clone()),
        &items(model, lo.clone()..hi.clone()),
        rng,
        &format!("{what} scan"),
    );
    let p = format!("k{:03}", rng.below(space / 100 + 1)).into_bytes();
    both_ways(
        || snap.scan_prefix(&p),
        &prefixed(model, &p),
        rng,
        &format!("{what} scan_prefix"),
    );
}

/// Checks a snapshot against its model in full: every key the model or the store may hold.
fn check_all(snap: &Snapshot, model: &Model, space: u64, what: &str) {
    let mut rng = Rng::new(space);
    both_ways(
        || snap.scan::<&[u8]>(..),
        &items(model, ..),
        &mut rng,
        &format!("{what} full scan"),
    );
    for i in 0..space {
        for k in [format!("k{i:05}"), format!("key{i:05}")] {
            let k = k.into_bytes();
            assert_eq!(
                snap.get(&k).unwrap().map(|v| v.to_vec()).as_ref(),
                model.get(&k),
                "{what} {k:?}"
            );
        }
    }
}

/// A snapshot can be kept anywhere and moved anywhere.
#[test]
fn a_snapshot_is_clone_send_sync_static() {
    fn check<T: Clone + Send + Sync + 'static>() {}
    check::<Snapshot>();
}

struct Held {
    snap: Snapshot,
    model: Model,
    seq: u64,
    /// The step it was taken at.
    at: usize,
}

/// What a model run did: snapshot checks, store scans checked, reopens.
#[derive(Default, Debug)]
struct Done {
    checks: u64,
    scans: u64,
    reopened: u64,
}

/// Random puts, deletes, batches, snapshots (each with a clone of the model), snapshot
/// checks, store scans (forward, backward, both ends), flushes, compactions, refilters
/// and reopens, with `cfg`'s filter kind, block form, cache and `mmap_reads`.
fn run(seed: u64, cfg: Config, steps: usize, done: &mut Done) {
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path(), opts(cfg, &mut rng)).unwrap();
    let mut model = Model::new();
    let mut seq = 0u64;
    let mut held: Vec<Held> = Vec::new();
    let space = 50 + rng.below(300);
    let at = |step: usize| format!("seed {seed} {cfg:?} step {step}");
    for step in 0..steps {
        match rng.below(100) {
            0..=34 => {
                model::put(&store, &mut model, &mut rng, space);
                seq += 1;
            }
            35..=44 => {
                model::delete(&store, &mut model, &mut rng, space);
                seq += 1;
            }
            // An empty batch commits nothing and takes no number.
            45..=49 => seq += u64::from(model::batch(&store, &mut model, &mut rng, space)),
            50..=57 => {
                let snap = store.snapshot();
                assert_eq!(snap.seq(), seq, "{}", at(step));
                held.push(Held {
                    snap,
                    model: model.clone(),
                    seq,
                    at: step,
                });
                if held.len() > 6 {
                    held.remove(rng.below(held.len() as u64) as usize);
                }
            }
            58..=75 if !held.is_empty() => {
                let h = &held[rng.below(held.len() as u64) as usize];
                let what = format!("{} snapshot of step {}", at(step), h.at);
                check(&h.snap, &h.model, &mut rng, space, &what);
                assert_eq!(h.snap.seq(), h.seq);
                // A clone reads the same, from another thread.
                let (snap, m) = (h.snap.clone(), h.model.clone());
                let what = format!("{what}, a clone");
                std::thread::spawn(move || check_all(&snap, &m, space, &what))
                    .join()
                    .unwrap();
                done.checks += 1;
            }
            76..=77 => {
                let (a, b) = (key(&mut rng, space + 10), key(&mut rng, space + 10));
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                both_ways(
                    || store.scan(lo.clone()..=hi.clone()),
                    &items(&model, lo.clone()..=hi.clone()),
                    &mut rng,
                    &format!("{} store scan", at(step)),
                );
                done.scans += 1;
            }
            78..=83 => store.flush().unwrap(),
            84..=87 => store.compact().unwrap(),
            88..=89 => {
                let kind = KINDS[rng.below(KINDS.len() as u64 - 1) as usize];
                store
                    .refilter(kind, [0.02, 0.2][rng.below(2) as usize])
                    .unwrap();
            }
            90..=91 => {
                let k = key(&mut rng, space + 10);
                let got = store.get(&k).unwrap().map(|v| v.to_vec());
                assert_eq!(got.as_ref(), model.get(&k), "{}", at(step));
            }
            92..=93 => {
                // Reopen: snapshots go first (each holds the store, its lock included);
                // checked in full on the way out.
                for h in held.drain(..) {
                    check_all(&h.snap, &h.model, space, &at(step));
                }
                assert_eq!(store.stats().snapshots.open, 0);
                drop(store);
                store = Store::open(dir.path(), opts(cfg, &mut rng)).unwrap();
                assert_eq!(
                    store.last_seq(),
                    seq,
                    "{}: the sequence after reopen",
                    at(step)
                );
                done.reopened += 1;
            }
            _ => {}
        }
        assert_eq!(store.last_seq(), seq, "{}", at(step));
    }
    assert_eq!(store.stats().snapshots.open, held.len() as u64);
    for h in held.drain(..) {
        check_all(
            &h.snap,
            &h.model,
            space,
            &format!("{} at the end", at(steps)),
        );
    }
    let mut rng = Rng::new(seed);
    both_ways(
        || store.scan::<&[u8]>(..),
        &items(&model, ..),
        &mut rng,
        &format!("{} the store at the end", at(steps)),
    );
}

/// The bounded slice `cargo test` runs: 18 configurations ([`some_configs`]), one seed each.
/// The full sweep is `scripts/model-sweep.sh` ([`snapshot_model_sweep`]).
#[test]
fn snapshots_match_btreemap_clones() {
    let mut done = Done::default();
    for (seed, cfg) in some_configs().into_iter().enumerate() {
        run(seed as u64, cfg, 1500, &mut done);
    }
    println!("{done:?}");
    assert!(
        done.checks > 1000 && done.reopened > 100 && done.scans > 300,
        "{done:?}"
    );
}

/// The full sweep: every configuration ([`every_config`]: filter kind × block form × cache ×
/// `mmap_reads`) with `MODEL_SWEEP_SEEDS` seeds (default 4) of `MODEL_SWEEP_STEPS` steps
/// (default 3000) each. Run by `scripts/model-sweep.sh`; ignored by `cargo test`.
#[test]
#[ignore = "long: run by scripts/model-sweep.sh"]
fn snapshot_model_sweep() {
    let env = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (seeds, steps) = (env("MODEL_SWEEP_SEEDS", 4), env("MODEL_SWEEP_STEPS", 3000));
    let first = env("MODEL_SWEEP_FIRST_SEED", 1000);
    let configs = every_config();
    // MODEL_SWEEP_CONFIG=i runs configuration i alone (its seeds as in the whole sweep).
    let only = std::env::var("MODEL_SWEEP_CONFIG")
        .ok()
        .and_then(|v| v.parse::<usize>().ok());
    let mut done = Done::default();
    for (i, cfg) in configs.iter().enumerate() {
        if only.is_some_and(|o| o != i) {
            continue;
        }
        for s in 0..seeds {
            let seed = first + i as u64 * seeds + s;
            run(seed, *cfg, steps as usize, &mut done);
        }
        eprintln!(
            "model sweep: configuration {i} of {} ({cfg:?}, seeds {}..{}), {done:?}",
            configs.len(),
            first + i as u64 * seeds,
            first + (i as u64 + 1) * seeds
        );
    }
    println!(
        "{} configurations × {seeds} seeds × {steps} steps: {done:?}",
        configs.len()
    );
}

/// The numbers of the table files in `dir`.
fn table_files(dir: &Path) -> Vec<u64> {
    let mut v: Vec<u64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            let stem = p.file_stem()?.to_str()?.parse().ok()?;
            (p.extension()? == "sst").then_some(stem)
        })
        .collect();
    v.sort();
    v
}

fn load(store: &Store, n: u32, tag: &str) -> Model {
    let mut m = Model::new();
    for i in 0..n {
        let (k, v) = (format!("key{i:05}"), format!("{tag}-{i}"));
        store.put(k.as_bytes(), v.as_bytes()).unwrap();
        m.insert(k.into_bytes(), v.into_bytes());
    }
    m
}

/// A snapshot held while a compaction replaces every table it reads (their files removed
/// from the store) still reads them, `stats` counts what it keeps, and dropping it frees
/// them: no file of theirs is left in the directory.
#[test]
fn a_snapshot_outlives_the_compaction_that_removes_its_tables() {
    for kind in [FilterKind::BlockedBloom, FilterKind::Global] {
        for cache in [0, 1 << 20] {
            let dir = tempfile::tempdir().unwrap();
            let opts = Options::default()
                .filter(Some(kind))
                .compaction_trigger(None)
                .block_cache_bytes(cache);
            let store = Store::open(dir.path(), opts).unwrap();
            let mut old = Model::new();
            for round in 0..3 {
                old.extend(load(&store, 3000, &format!("old{round}")));
                store.flush().unwrap();
            }
            let before = table_files(dir.path());
            assert_eq!(before.len(), 3);
            let bytes: u64 = store
                .stats()
                .tables
                .iter()
                .map(|t| t.file_bytes + t.filter_bytes + t.range_filter_bytes)
                .sum();
            let snap = store.snapshot();
            assert_eq!(store.stats().snapshots.pinned_tables, 0);
            let new = load(&store, 3000, "new");
            store.flush().unwrap();
            store.compact().unwrap();
            let s = store.stats();
            assert_eq!(s.tables.len(), 1);
            assert_eq!(s.snapshots.open, 1);
            assert_eq!(s.snapshots.pinned_tables, 3, "{kind}");
            assert_eq!(s.snapshots.pinned_table_bytes, bytes, "{:?}", s.snapshots);
            assert!(s.snapshots.oldest_age.is_some());
            // The snapshot reads the replaced tables; the store the new one.
            check_all(&snap, &old, 3000, &format!("{kind} cache {cache}"));
            for (k, v) in new.iter().step_by(97) {
                assert_eq!(store.get(k).unwrap().map(Vec::from).as_ref(), Some(v));
            }
            drop(snap);
            let s = store.stats();
            assert_eq!((s.snapshots.open, s.snapshots.pinned_tables), (0, 0));
            let after = table_files(dir.path());
            assert!(
                before.iter().all(|n| !after.contains(n)),
                "{kind}: {before:?} still among {after:?}"
            );
        }
    }
}

/// A snapshot taken under per-table filters reads the same across a switch to the global
/// filter, compactions under it, and a switch back; one taken under the global filter the
/// same across compactions that relabel its entries (it then reads its tables unfiltered)
/// and a switch away.
#[test]
fn a_snapshot_reads_the_same_across_refilters_and_the_global_filter() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .filter(Some(FilterKind::Cuckoo))
        .compaction_trigger(None);
    let store = Store::open(dir.path(), opts).unwrap();
    let mut m = load(&store, 2000, "a");
    store.flush().unwrap();
    m.extend(load(&store, 1000, "b"));
    let first = (store.snapshot(), m.clone());
    store.refilter(FilterKind::Global, 0.01).unwrap();
    check_all(&first.0, &first.1, 2000, "per-table snapshot under global");
    for i in (0..2000).step_by(3) {
        store.delete(format!("key{i:05}").as_bytes()).unwrap();
        m.remove(format!("key{i:05}").as_bytes());
    }
    store.flush().unwrap();
    let second = (store.snapshot(), m.clone());
    m.extend(load(&store, 2000, "c"));
    store.flush().unwrap();
    check_all(
        &second.0,
        &second.1,
        2000,
        "global snapshot before a compaction",
    );
    store.compact().unwrap();
    for (snap, model) in [&first, &second] {
        check_all(snap, model, 2000, "after a compaction under global");
    }
    let third = (store.snapshot(), m.clone());
    store.refilter(FilterKind::BlockedBloom, 0.01).unwrap();
    load(&store, 500, "d");
    store.flush().unwrap();
    store.compact().unwrap();
    for (snap, model) in [&first, &second, &third] {
        check_all(snap, model, 2000, "after the switch back");
    }
    assert_eq!(store.stats().snapshots.open, 3);
}

/// Writes the snapshot must not see, made while it is being read from another thread: a
/// batch is seen whole or not at all, and nothing after the snapshot is.
#[test]
fn a_snapshot_taken_during_batches_sees_each_batch_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default().memtable_bytes(64 << 10);
    let store = Arc::new(Store::open(dir.path(), opts).unwrap());
    let writer = {
        let store = store.clone();
        std::thread::spawn(move || {
            for round in 0..3000u32 {
                let mut b = WriteBatch::new();
                for k in 0..8 {
                    b.put(format!("k{k}").into_bytes(), round.to_be_bytes().to_vec());
                }
                store.write(b).unwrap();
            }
        })
    };
    let mut seen = 0;
    while !writer.is_finished() || seen == 0 {
        let snap = store.snapshot();
        let vals: Vec<_> = snap.scan::<&[u8]>(..).map(|r| r.unwrap().1).collect();
        // Every key from the same batch, and that batch is the snapshot's last commit.
        assert!(vals.windows(2).all(|w| w[0] == w[1]), "{vals:?}");
        if let Some(v) = vals.first() {
            let round = u32::from_be_bytes(v[..].try_into().unwrap());
            assert_eq!(snap.seq(), u64::from(round) + 1);
            assert_eq!(snap.get(b"k3").unwrap().as_ref(), Some(v));
        }
        seen += 1;
    }
    writer.join().unwrap();
    assert!(seen > 1);
}

/// The sequence goes on after a reopen with no log left: the manifest keeps it.
#[test]
fn the_sequence_survives_when_every_log_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    load(&store, 100, "v");
    store.delete(b"key00001").unwrap();
    store.flush().unwrap();
    assert_eq!(store.last_seq(), 101);
    drop(store);
    // This open removes the empty log the flush started; the next finds none.
    drop(Store::open(dir.path(), Options::default()).unwrap());
    assert_eq!(model::files_with_extension(dir.path(), "wal"), 0);
    let store = Store::open(dir.path(), Options::default()).unwrap();
    assert_eq!(store.last_seq(), 101);
    store.put(b"x", b"y").unwrap();
    assert_eq!(store.snapshot().seq(), 102);
}

/// Power cuts at every sync point of a run of durable writes, flushes and compactions:
/// after recovery the sequence is at least the last one a write was acknowledged with (it
/// never goes backwards), and the writes up to it are there.
#[test]
fn sequence_numbers_never_go_backwards_across_power_cuts() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cut = 0u64;
    let mut images = 0;
    loop {
        let fs = FaultFs::new();
        fs.cut_power_at_sync(cut);
        let live = tmp.path().join(format!("live{cut}"));
        let opts = |fs: &FaultFs| {
            Options::default()
                .sync(SyncPolicy::EveryWrite)
                .memtable_bytes(2048)
                .compaction_trigger(Some(2))
                .fs(Arc::new(fs.clone()))
        };
        let mut acked = 0u64;
        let mut acked_keys = Vec::new();
        let mut store = Store::open(&live, opts(&fs)).ok();
        for i in 0..120u32 {
            let Some(s) = &store else { break };
            let r = match i % 40 {
                39 => s.flush(),
                // A reopen after a flush: the sequence from the manifest alone.
                20 => {
                    drop(store.take());
                    store = Store::open(&live, opts(&fs)).ok();
                    match &store {
                        Some(s) => {
                            assert!(s.last_seq() >= acked, "cut {cut}: reopened backwards");
                            Ok(())
                        }
                        None => break,
                    }
                }
                _ => {
                    let k = format!("key{i:04}").into_bytes();
                    let r = s.put(&k, [7; 100]);
                    if r.is_ok() {
                        acked_keys.push(k);
                    }
                    r
                }
            };
            match (r, &store) {
                (Ok(()), Some(s)) => acked = acked.max(s.last_seq()),
                _ => break,
            }
        }
        let reached = fs.fired().is_some();
        drop(store);
        for applied in [0, usize::MAX] {
            let img = tmp.path().join(format!("image{cut}-{applied}"));
            std::fs::create_dir_all(&img).unwrap();
            fs.crash_image(&img, applied).unwrap();
            let s = Store::open(&img, Options::default()).unwrap();
            assert!(
                s.last_seq() >= acked,
                "cut {cut}: {} after recovery, {acked} acknowledged",
                s.last_seq()
            );
            for k in &acked_keys {
                assert!(s.get(k).unwrap().is_some(), "cut {cut}: {k:?} lost");
            }
            images += 1;
        }
        if !reached {
            break;
        }
        cut += 1;
    }
    println!("{cut} power cuts, {images} crash images");
    assert!(cut > 20, "only {cut} sync points");
}
