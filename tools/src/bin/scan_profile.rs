//! Short scans on a loaded store, in the shape of YCSB workload E, for profiling:
//! `scan_profile load DIR N` loads N keys (16 bytes, random order, 100 random bytes as values) and
//! flushes; `scan_profile scan DIR N OPS [mmap] [zipf] [rev]` reopens it (with `mmap_reads`
//! when asked) and runs OPS operations: 95 % scans of 1..=100 entries from a loaded key
//! (uniformly random, or with `zipf` YCSB's scrambled Zipfian, θ = 0.99, as in workload E;
//! with `rev` backward, the entries ending at the key, as the side-by-side `ycsb-e-rev`), 5 %
//! puts of new keys. Prints, per round of OPS, the time per operation (wall and on the CPU: the
//! machine may be shared) and per scan, and the data blocks read per scan; then the median of
//! the CPU time per operation over 5 rounds.

use std::time::Instant;

use filterstore::hash::mix64;
use filterstore::{Options, Store};

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&mix64(i ^ 42).to_be_bytes());
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

/// 100 random bytes (they do not compress, as the harness's values).
fn value(i: u64) -> Vec<u8> {
    (0..13u64)
        .flat_map(|j| mix64(i.wrapping_mul(16) + j).to_le_bytes())
        .take(100)
        .collect()
}

/// Nanoseconds this thread has run on a CPU (the machine may be shared: wall time is not).
fn cpu_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    s.split_whitespace()
        .next()
        .and_then(|x| x.parse().ok())
        .unwrap_or(0)
}

/// YCSB's Zipfian ranks (Gray et al., SIGMOD 1994), θ = 0.99: rank 0 the most popular.
struct Zipf {
    n: f64,
    zetan: f64,
    eta: f64,
}

const THETA: f64 = 0.99;

impl Zipf {
    fn new(n: u64) -> Zipf {
        let zetan: f64 = (1..=n).map(|i| 1.0 / (i as f64).powf(THETA)).sum();
        let zeta2 = 1.0 + 0.5f64.powf(THETA);
        let eta = (1.0 - (2.0 / n as f64).powf(1.0 - THETA)) / (1.0 - zeta2 / zetan);
        Zipf {
            n: n as f64,
            zetan,
            eta,
        }
    }

    /// The rank for a random `r`.
    fn rank(&self, r: u64) -> u64 {
        let u = (r >> 11) as f64 / (1u64 << 53) as f64;
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(THETA) {
            return 1;
        }
        (self.n * (self.eta * u - self.eta + 1.0).powf(1.0 / (1.0 - THETA))) as u64
    }
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let n: u64 = a[2].parse().unwrap();
    match a[0].as_str() {
        "load" => {
            let store = Store::open(&a[1], Options::default()).unwrap();
            for i in 0..n {
                store.put(key(i), value(i)).unwrap(); // key order is random: key(i) starts with a hash
            }
            store.flush().unwrap();
            let s = store.stats();
            println!(
                "loaded; levels {:?}",
                s.levels.iter().map(|l| l.tables).collect::<Vec<_>>()
            );
        }
        _ => {
            let ops: u64 = a[3].parse().unwrap();
            let mmap_reads = a[4..].iter().any(|m| m == "mmap");
            let zipf = a[4..].iter().any(|m| m == "zipf").then(|| Zipf::new(n));
            let rev = a[4..].iter().any(|m| m == "rev");
            let opts = Options::default().mmap_reads(mmap_reads);
            let store = Store::open(&a[1], opts).unwrap();
            let s = store.stats();
            println!(
                "levels {:?}",
                s.levels.iter().map(|l| l.tables).collect::<Vec<_>>()
            );
            let mut rounds = Vec::new();
            let mut next_new = 2 * n;
            for round in 0..5u64 {
                let (mut scans, mut entries, mut scan_ns) = (0u64, 0u64, 0u128);
                let before = store.stats().data_block_reads;
                let t = Instant::now();
                let cpu = cpu_ns();
                for j in 0..ops {
                    let r = mix64(j ^ (round << 40) ^ 0x5ca7);
                    if r.is_multiple_of(20) {
                        store.put(key(next_new), value(next_new)).unwrap();
                        next_new += 1;
                        continue;
                    }
                    let start = match &zipf {
                        Some(z) => key(mix64(z.rank(mix64(r ^ 0x21))) % n),
                        None => key(mix64(r) % n),
                    };
                    let limit = 1 + (r >> 32) as usize % 100;
                    let t0 = Instant::now();
                    let mut count =
                        |item: filterstore::Result<(filterstore::Slice, filterstore::Slice)>| {
                            let (k, _) = item.unwrap();
                            entries += k.len() as u64 / 16;
                        };
                    if rev {
                        let scan = store.scan::<&[u8]>(..=start.as_slice());
                        scan.rev().take(limit).for_each(&mut count);
                    } else {
                        let scan = store.scan::<&[u8]>(start.as_slice()..);
                        scan.take(limit).for_each(&mut count);
                    }
                    scan_ns += t0.elapsed().as_nanos();
                    scans += 1;
                }
                let total = t.elapsed().as_nanos() as f64;
                let cpu = (cpu_ns() - cpu) as f64;
                let reads = store.stats().data_block_reads - before;
                println!(
                    "round {round}: {:.0} ns/op ({:.0} on the CPU), {:.0} ns/scan, {:.1} entries/scan, {:.2} block reads/scan",
                    total / ops as f64,
                    cpu / ops as f64,
                    scan_ns as f64 / scans as f64,
                    entries as f64 / scans as f64,
                    reads as f64 / scans as f64
                );
                rounds.push(cpu / ops as f64);
            }
            rounds.sort_by(f64::total_cmp);
            println!("median {:.0} CPU ns/op", rounds[2]);
        }
    }
}
