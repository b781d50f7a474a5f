//! Times present-key lookups of two store configurations in one process, alternating short
//! rounds between them so that a shared, noisy machine slows both alike; prints the median
//! round of each and their ratio, in wall time and in the thread's CPU time (which time
//! spent preempted by other processes does not inflate).
//!
//! `cargo run --release --example lookup_ab -- cache|compression [keys] [rounds] [dir] [cache MiB]`
//!
//! - `cache`: the same table files (random 100-byte values, raw blocks) opened with the
//!   block cache off (A) and on (B: the default 32 MiB, or `cache MiB`).
//! - `compression`: half-compressible 100-byte values (random printable bytes, repeated:
//!   db_bench's compression_ratio 0.5; with `FILTERSTORE_AB_RANDOM=1` random bytes, which do
//!   not compress) written with `Compression::None` (A) and `Compression::Lz4` (B), both with
//!   the default block cache; also prints the disk bytes of each.
//!
//! Both stores hold `keys` keys (1,000,000 by default, as the side-by-side harness) in
//! tables of the default size after a full compaction; each round looks up 20,000 present
//! keys drawn at random, through a `Reader`, the same keys for A and B: uniformly, or with
//! `FILTERSTORE_AB_ZIPF=1` by YCSB's scrambled Zipfian (θ = 0.99).

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
    Options {
        filter: Some(FilterKind::Bloom),
        fpr: Some(0.0082),
        sync: SyncPolicy::Buffered,
        compression,
        block_cache_bytes: cache,
        ..Options::default()
    }
}

fn build(dir: &Path, n: u64, half: bool, compression: Compression) -> filterstore::Result<()> {
    if dir.exists() {
        return Ok(());
    }
    let store = Store::open(dir, opts(compression, 0))?;
    let mut v = [0u8; 100];
    for i in 0..n {
        value(i, half, &mut v);
        store.put(&key(i), &v)?;
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

fn main() -> filterstore::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().map_or("cache", String::as_str).to_string();
    let n: u64 = args
        .get(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let rounds: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(50);
    let tmp = tempfile::tempdir()?;
    let root = args
        .get(3)
        .map_or_else(|| tmp.path().to_path_buf(), std::path::PathBuf::from);
    let cache_mib: usize = args.get(4).and_then(|a| a.parse().ok()).unwrap_or(32);
    let (a, b) = match mode.as_str() {
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
        "compression" => {
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
        other => {
            eprintln!("unknown mode {other}: cache or compression");
            std::process::exit(2);
        }
    };
    let (ra, rb) = (a.reader(), b.reader());
    let per_round = 20_000u64;
    let mut x = 12345u64;
    let zipf = std::env::var_os("FILTERSTORE_AB_ZIPF")
        .filter(|v| !v.is_empty())
        .map(|_| Zipf::new(n));
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    let (mut ca, mut cb) = (Vec::new(), Vec::new());
    let cpu = || {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        t.tv_sec as f64 * 1e9 + t.tv_nsec as f64
    };
    for r in 0..rounds {
        let keys: Vec<[u8; 16]> = (0..per_round)
            .map(|_| {
                x = mix64(x.wrapping_add(1));
                match &zipf {
                    Some(z) => key(z.next((x >> 11) as f64 / (1u64 << 53) as f64)),
                    None => key(x % n),
                }
            })
            .collect();
        // Alternate which goes first, so neither always runs on a warmer machine.
        let order = if r % 2 == 0 { [0, 1] } else { [1, 0] };
        for which in order {
            let reader = if which == 0 { &ra } else { &rb };
            let t = Instant::now();
            let c0 = cpu();
            for k in &keys {
                if reader.get(k)?.is_none() {
                    eprintln!("a present key was not found");
                    std::process::exit(3);
                }
            }
            let ns = t.elapsed().as_nanos() as f64 / per_round as f64;
            let cpu_ns = (cpu() - c0) / per_round as f64;
            if which == 0 { &mut ta } else { &mut tb }.push(ns);
            if which == 0 { &mut ca } else { &mut cb }.push(cpu_ns);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (ma, mb) = (median(&mut ta), median(&mut tb));
    let (mca, mcb) = (median(&mut ca), median(&mut cb));
    for (name, s) in [("A", a.stats()), ("B", b.stats())] {
        println!(
            "{name}: block reads {:.4}, cache hits {:.4} per lookup",
            s.data_block_reads as f64 / s.lookups as f64,
            s.block_cache_hits as f64 / s.lookups as f64
        );
    }
    println!(
        "median of {rounds} rounds: A {ma:.0} ns, B {mb:.0} ns per present get; B/A {:.3} (CPU time: A {mca:.0} ns, B {mcb:.0} ns, B/A {:.3})",
        mb / ma,
        mcb / mca
    );
    Ok(())
}
