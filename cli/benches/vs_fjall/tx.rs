//! `vs_fjall tx`: transactions of 2 gets and 2 puts over uniform keys from several threads,
//! filterstore `Transaction` against fjall `OptimisticTxDatabase` (see the module docs of
//! `vs_fjall.rs`).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use filterstore::store::{Options, Store, SyncPolicy};
use filterstore::table::Compression;
use filterstore_cli::bench::key16;
use fjall::{KeyspaceCreateOptions, OptimisticTxDatabase, OptimisticTxKeyspace, Readable};

use super::{median, Res, ROUNDS, VALUE_LEN};

const SEED: u64 = 42;

/// What one side of the comparison does.
trait TxEngine: Sized + Sync {
    const NAME: &'static str;
    fn open(dir: &Path) -> Res<Self>;
    /// Loads `keys` in one transaction.
    fn load(&self, keys: &[[u8; 16]], value: &[u8]) -> Res<()>;
    /// One transfer: reads `a` and `b`, writes both; `Ok(false)` on a conflict.
    fn transfer(&self, a: &[u8], b: &[u8], value: &[u8]) -> Res<bool>;
}

impl TxEngine for Store {
    const NAME: &'static str = "filterstore";

    fn open(dir: &Path) -> Res<Self> {
        let opts = Options::default()
            .sync(SyncPolicy::OnFlush)
            .compression(Compression::None);
        Ok(Store::open(dir, opts)?)
    }

    fn load(&self, keys: &[[u8; 16]], value: &[u8]) -> Res<()> {
        let mut tx = self.transaction();
        for k in keys {
            tx.put(k, value);
        }
        Ok(tx.commit()?)
    }

    fn transfer(&self, a: &[u8], b: &[u8], value: &[u8]) -> Res<bool> {
        let mut tx = self.transaction();
        std::hint::black_box(tx.get(a)?);
        std::hint::black_box(tx.get(b)?);
        tx.put(a, value);
        tx.put(b, value);
        match tx.commit() {
            Ok(()) => Ok(true),
            Err(filterstore::Error::Conflict) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

/// A fjall optimistic-transaction database with its one keyspace.
struct FjallTx {
    db: OptimisticTxDatabase,
    ks: OptimisticTxKeyspace,
}

impl TxEngine for FjallTx {
    const NAME: &'static str = "fjall";

    fn open(dir: &Path) -> Res<Self> {
        // Default journal persistence: each commit's journal write reaches the operating
        // system (`PersistMode::Buffer`), no fsync.
        let db = OptimisticTxDatabase::builder(dir).open()?;
        let ks = db.keyspace("bench", KeyspaceCreateOptions::default)?;
        Ok(FjallTx { db, ks })
    }

    fn load(&self, keys: &[[u8; 16]], value: &[u8]) -> Res<()> {
        let mut tx = self.db.write_tx()?;
        for k in keys {
            tx.insert(&self.ks, k.to_vec(), value.to_vec());
        }
        Ok(tx.commit()?.map_err(|_| "conflict while loading")?)
    }

    fn transfer(&self, a: &[u8], b: &[u8], value: &[u8]) -> Res<bool> {
        let mut tx = self.db.write_tx()?;
        std::hint::black_box(tx.get(&self.ks, a)?);
        std::hint::black_box(tx.get(&self.ks, b)?);
        tx.insert(&self.ks, a.to_vec(), value.to_vec());
        tx.insert(&self.ks, b.to_vec(), value.to_vec());
        Ok(tx.commit()?.is_ok())
    }
}

/// SplitMix64 step.
fn next(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One round on a fresh store: (commits/s, conflicts).
fn round<E: TxEngine>(n: u64, ops: u64, threads: u64, r: u64) -> Res<(f64, u64)> {
    let tmp = tempfile::tempdir()?;
    let store = E::open(tmp.path())?;
    let value = vec![7u8; VALUE_LEN];
    let keys: Vec<[u8; 16]> = (0..n).map(|i| key16(SEED, i)).collect();
    for chunk in keys.chunks(1000) {
        store.load(chunk, &value)?;
    }
    let per = (ops / threads).max(1);
    let conflicts = AtomicU64::new(0);
    let t = Instant::now();
    std::thread::scope(|s| -> Res<()> {
        let workers: Vec<_> = (0..threads)
            .map(|th| {
                let (store, keys, value, conflicts) = (&store, &keys, &value, &conflicts);
                s.spawn(move || -> Result<(), String> {
                    let mut rng = (th + 1) << 32 | r;
                    for _ in 0..per {
                        let a = next(&mut rng) % n;
                        let b = (a + 1 + next(&mut rng) % (n - 1)) % n;
                        let (ka, kb) = (&keys[a as usize], &keys[b as usize]);
                        while !store.transfer(ka, kb, value).map_err(|e| e.to_string())? {
                            conflicts.fetch_add(1, Relaxed);
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        for w in workers {
            w.join().map_err(|_| "a worker panicked")??;
        }
        Ok(())
    })?;
    let rate = (per * threads) as f64 / t.elapsed().as_secs_f64();
    Ok((rate, conflicts.load(Relaxed)))
}

pub fn main(args: &[String]) -> Res<()> {
    let nums: Vec<u64> = args
        .iter()
        .map(|a| a.replace('_', "").parse())
        .collect::<Result<_, _>>()?;
    let n = nums.first().copied().unwrap_or(1_000_000);
    let ops = nums.get(1).copied().unwrap_or(200_000);
    let threads = nums.get(2).copied().unwrap_or(4).max(1);
    if n < 2 {
        return Err("usage: vs_fjall tx [KEYS >= 2] [OPS] [THREADS]".into());
    }
    println!(
        "vs_fjall tx: {n} keys, {ops} transactions of 2 gets + 2 puts over uniform keys from \
         {threads} threads, each commit written to the log without fsync, {ROUNDS} rounds"
    );
    let (mut fs, mut fj) = (Vec::new(), Vec::new());
    for r in 0..ROUNDS as u64 {
        let order: [bool; 2] = if r % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for ours in order {
            let (rate, c) = if ours {
                round::<Store>(n, ops, threads, r)?
            } else {
                round::<FjallTx>(n, ops, threads, r)?
            };
            let name = if ours { Store::NAME } else { FjallTx::NAME };
            eprintln!("round {}: {name} {rate:.0} commits/s, {c} conflicts", r + 1);
            if ours { &mut fs } else { &mut fj }.push(rate);
        }
    }
    let (a, b) = (median(fs), median(fj));
    println!(
        "median commits/s: filterstore {a:.0}, fjall {b:.0}: filterstore/fjall {:.2}×",
        a / b
    );
    Ok(())
}
