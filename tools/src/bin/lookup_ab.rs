//! Times present-key lookups of two stores in one process, alternating short rounds between
//! them so that a shared, noisy machine slows both alike; prints the median round of each and
//! their ratio, in wall time and in the thread's CPU time (which time spent preempted by other
//! processes does not inflate), and each store's block reads, cache hits per lookup and index
//! memory.
//!
//! ```text
//! cargo run --release -p filterstore-tools --bin lookup_ab -- cache|compression [keys] [rounds] [dir] [cache MiB]
//! cargo run --release -p filterstore-tools --bin lookup_ab -- dirs DIR_A DIR_B [rounds]
//! ```
//!
//! - `cache`: the same table files (random 100-byte values, raw blocks) opened with the
//!   block cache off (A) and on (B: the default 32 MiB, or `cache MiB`).
//! - `compression`: half-compressible 100-byte values (random printable bytes, repeated:
//!   db_bench's compression_ratio 0.5; with `FILTERSTORE_AB_RANDOM=1` random bytes, which do
//!   not compress) written with `Compression::None` (A) and `Compression::Lz4` (B), both with
//!   the default block cache; also prints the disk bytes of each.
//!
//!   In these two modes both stores hold `keys` keys (1,000,000 by default, as the
//!   side-by-side harness) in tables of the default size after a full compaction; each round
//!   (50 by default) looks up 20,000 present keys drawn at random, through a `Reader`, the
//!   same keys for A and B: uniformly, or with `FILTERSTORE_AB_ZIPF=1` by YCSB's scrambled
//!   Zipfian (θ = 0.99).
//! - `dirs`: two existing store directories, e.g. the same keys written by two builds of the
//!   engine: the side-by-side harness keeps what it loads with `--dir D` (the store is
//!   `D/ours/load`), so `peers --engines ours --n 1000000 --dir D load present` with each
//!   build gives two stores to compare (the `present` run lets the idle drain merge L0 first;
//!   copy a directory to compare a store with itself). Both are opened as the harness opens
//!   them (Bloom filters at 10 bits/key, default block cache and compression) and looked up
//!   with `Store::get`, each round (20 by default, after 2 to warm the caches) 50,000 keys
//!   drawn uniformly from `DIR_A`'s keys, the same keys for A and B.

use std::path::Path;
use std::time::Instant;

use filterstore::hash::mix64;
use filterstore::{Compression, FilterKind, Options, Store, SyncPolicy};

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&mix64(i ^ 0x5eed).to_be_bytes());
    k[8..].copy_from_slice(&mix64(i.wrapping_add(77)).to_be_bytes());
    k
}

fn value(i: u64, half: bool, v: &mut [u8; 100]) {
    let mut x = i;
    let random = if half { 50 } else { 100 };
    for b in v.iter_mut().take(random) {
        x = mix64(x.wrapping_add(0x9e37_79b9_7f4a_7c15));
        *b = if half { b' ' + (x % 95) as u8 } else { x as u8 };
    }
    for j in random..100 {
        v[j] = v[j - random];
    }
}

/// YCSB's Zipfian generator (Gray et al., "Quickly generating billion-record synthetic
/// databases"), θ = 0.99, its ranks scrambled by a hash as YCSB's ScrambledZipfian does.
struct Zipf {
    n: f64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

impl Zipf {
    fn new(n: u64) -> Zipf {
        let theta = 0.99;
        let zeta = |m: u64| (1..=m).map(|i| 1.0 / (i as f64).powf(theta)).sum::<f64>();
        let (zetan, zeta2) = (zeta(n), zeta(2));
        Zipf {
            n: n as f64,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan),
        }
    }

    /// The key index for a uniform `u` in [0, 1).
    fn next(&self, u: f64) -> u64 {
        let uz = u * self.zetan;
        let rank = if uz < 1.0 {
            0
        } else if uz < 1.0 + 0.5f64.powf(self.theta) {
            1
        } else {
            (self.n * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
        };
        mix64(rank) % self.n as u64
    }
}

fn opts(compression: Compression, cache: usize) -> Options {
    Options::default()
        .filter(FilterKind::Bloom)
        .fpr(0.0082)
        .sync(SyncPolicy::Buffered)
        .compression(compression)
        .block_cache_bytes(cache)
}

fn build(dir: &Path, n: u64, half: bool, compression: Compression) -> filterstore::Result<()> {
    if dir.exists() {
        return Ok(());
    }
    let store = Store::open(dir, opts(compression, 0))?;
    let mut v = [0u8; 100];
    for i in 0..n {
        value(i, half, &mut v);
        store.put(key(i), v)?;
    }
    store.flush()?;
    store.compact()?;
    Ok(())
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Options of a store opened as the side-by-side harness opens it (`dirs`).
fn harness_opts() -> Options {
    Options::default()
        .filter(Some(FilterKind::Bloom))
        .fpr(Some((-10.0f64 * std::f64::consts::LN_2.powi(2)).exp()))
        .sync(SyncPolicy::OnFlush)
        .compaction_trigger(Some(8))
        .create_if_missing(false)
}

/// Where each round's keys come from.
enum Keys {
    /// `key(i)` for `i < n`, uniformly or by the Zipfian.
    Generated { n: u64, zipf: Option<Zipf> },
    /// Keys listed from a store.
    Listed(Vec<Vec<u8>>),
}

/// The two stores of a mode and how they are looked up.
struct Setup {
    a: Store,
    b: Store,
    keys: Keys,
    rounds: usize,
    warmup: usize,
    per_round: usize,
    /// Through a `Reader` of each store (else `Store::get`).
    via_reader: bool,
}

/// `cache` and `compression`: two stores built (once, in `dir`) from generated keys.
fn generated(mode: &str, args: &[String], tmp: &Path) -> filterstore::Result<Setup> {
    let n: u64 = args
        .get(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let rounds: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(50);
    let root = args
        .get(3)
        .map_or_else(|| tmp.to_path_buf(), std::path::PathBuf::from);
    let cache_mib: usize = args.get(4).and_then(|a| a.parse().ok()).unwrap_or(32);
    let (a, b) = match mode {
        "cache" => {
            let d = root.join(format!("random-{n}"));
            build(&d, n, false, Compression::None)?;
            // Two copies of the same files: a store directory is opened by one handle at
            // a time.
            let d2 = root.join(format!("random-{n}-copy"));
            if !d2.exists() {
                std::fs::create_dir_all(&d2)?;
                for e in std::fs::read_dir(&d)? {
                    let p = e?.path();
                    if p.file_name().is_some_and(|f| f != "LOCK") {
                        std::fs::copy(&p, d2.join(p.file_name().unwrap_or_default()))?;
                    }
                }
            }
            println!(
                "A: block cache off; B: block cache {cache_mib} MiB ({n} keys, random values)"
            );
            (
                Store::open(&d, opts(Compression::None, 0))?,
                Store::open(&d2, opts(Compression::None, cache_mib << 20))?,
            )
        }
        _ => {
            let half = std::env::var_os("FILTERSTORE_AB_RANDOM").is_none();
            let values = if half { "half" } else { "random" };
            let (da, db) = (
                root.join(format!("{values}-none-{n}")),
                root.join(format!("{values}-lz4-{n}")),
            );
            build(&da, n, half, Compression::None)?;
            build(&db, n, half, Compression::Lz4)?;
            println!(
                "A: compression none, {} bytes on disk; B: lz4, {} bytes on disk ({:.3}×) ({n} keys, {values} values, block cache 32 MiB)",
                dir_bytes(&da),
                dir_bytes(&db),
                dir_bytes(&db) as f64 / dir_bytes(&da) as f64
            );
            let d = Options::default().block_cache_bytes;
            (
                Store::open(&da, opts(Compression::None, d))?,
                Store::open(&db, opts(Compression::Lz4, d))?,
            )
        }
    };
    let zipf = std::env::var_os("FILTERSTORE_AB_ZIPF")
        .filter(|v| !v.is_empty())
        .map(|_| Zipf::new(n));
    Ok(Setup {
        a,
        b,
        keys: Keys::Generated { n, zipf },
        rounds,
        warmup: 0,
        per_round: 20_000,
        via_reader: true,
    })
}

/// `dirs`: two existing stores, looked up with the keys of the first.
fn dirs(args: &[String]) -> filterstore::Result<Setup> {
    if args.len() < 3 {
        eprintln!("usage: lookup_ab dirs DIR_A DIR_B [rounds]");
        std::process::exit(2);
    }
    let (a, b) = (
        Store::open(&args[1], harness_opts())?,
        Store::open(&args[2], harness_opts())?,
    );
    let keys: Vec<Vec<u8>> = a
        .scan::<&[u8]>(..)
        .map(|item| item.map(|(k, _)| k.to_vec()))
        .collect::<Result<_, _>>()?;
    if keys.is_empty() {
        eprintln!("{} holds no keys", args[1]);
        std::process::exit(2);
    }
    Ok(Setup {
        a,
        b,
        keys: Keys::Listed(keys),
        rounds: args.get(3).and_then(|r| r.parse().ok()).unwrap_or(20),
        warmup: 2,
        per_round: 50_000,
        via_reader: false,
    })
}

fn main() -> filterstore::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().map_or("cache", String::as_str).to_string();
    let tmp = tempfile::tempdir()?;
    let s = match mode.as_str() {
        "cache" | "compression" => generated(&mode, &args, tmp.path())?,
        "dirs" => dirs(&args)?,
        other => {
            eprintln!("unknown mode {other}: cache, compression or dirs");
            std::process::exit(2);
        }
    };
    let stores = [&s.a, &s.b];
    let readers = [s.a.reader(), s.b.reader()];
    let before = [s.a.stats(), s.b.stats()];
    let mut x = 12345u64;
    let (mut wall, mut thread) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    let cpu = || {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        t.tv_sec as f64 * 1e9 + t.tv_nsec as f64
    };
    for r in 0..s.warmup + s.rounds {
        let keys: Vec<Vec<u8>> = (0..s.per_round)
            .map(|_| {
                x = mix64(x.wrapping_add(1));
                match &s.keys {
                    Keys::Generated { zipf: Some(z), .. } => {
                        key(z.next((x >> 11) as f64 / (1u64 << 53) as f64)).to_vec()
                    }
                    Keys::Generated { n, zipf: None } => key(x % n).to_vec(),
                    Keys::Listed(listed) => listed[(x % listed.len() as u64) as usize].clone(),
                }
            })
            .collect();
        // Alternate which goes first, so neither always runs on a warmer machine.
        let order = if r % 2 == 0 { [0, 1] } else { [1, 0] };
        for w in order {
            let (t, c0) = (Instant::now(), cpu());
            for k in &keys {
                let found = if s.via_reader {
                    readers[w].get(k)?.is_some()
                } else {
                    stores[w].get(k)?.is_some()
                };
                if !found {
                    eprintln!("store {}: a present key was not found", ["A", "B"][w]);
                    std::process::exit(3);
                }
            }
            if r >= s.warmup {
                wall[w].push(t.elapsed().as_nanos() as f64 / s.per_round as f64);
                thread[w].push((cpu() - c0) / s.per_round as f64);
            }
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for (w, name) in ["A", "B"].iter().enumerate() {
        let st = stores[w].stats();
        let gets = (st.lookups - before[w].lookups).max(1) as f64;
        println!(
            "{name}: {:.4} block reads and {:.4} cache hits per lookup, {} bytes of index in memory",
            (st.data_block_reads - before[w].data_block_reads) as f64 / gets,
            (st.block_cache_hits - before[w].block_cache_hits) as f64 / gets,
            st.tables.iter().map(|t| t.index_memory_bytes).sum::<u64>()
        );
    }
    let (ma, mb) = (median(&mut wall[0]), median(&mut wall[1]));
    let (ca, cb) = (median(&mut thread[0]), median(&mut thread[1]));
    println!(
        "median of {} rounds: A {ma:.0} ns, B {mb:.0} ns per present get; B/A {:.3} (CPU time: A {ca:.0} ns, B {cb:.0} ns, B/A {:.3})",
        s.rounds,
        mb / ma,
        cb / ca
    );
    Ok(())
}
