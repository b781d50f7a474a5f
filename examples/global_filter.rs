//! The global key-to-run filter (`filter::global`) measured: bits per key, false-positive
//! rate, cache lines per query, query time (absent and present keys) against the per-table
//! probes it replaces, insert / relabel / remove throughput (random order and sorted
//! batches), the load reached before the first stashed entry, and the cost of a checkpoint
//! (encode, decode) against a rebuild from the keys.
//!
//! ```text
//! taskset -c 1 cargo run --release --example global_filter -- [N ...]     (default 1000000)
//! ```
//!
//! The tree modelled is a drained two-level one (88 % of the keys in L2, 10 % in L1, 2 % in
//! two L0 tables); each layout is sized for N keys at its design load. Times are medians of 5
//! rounds of 2²⁰ queries (alternating the layouts and the baseline round by round); the
//! baseline is what the store does today for an absent key in that tree: one blocked-bloom
//! probe per run whose range holds the key (two L0 tables, L1, L2), each filter at ε = 1 %
//! over that run's keys.

use std::time::Instant;

use filterstore::filter::global::{
    CodedSpec, GlobalFilter, Layout, MergeKey, RunId, RunSet, Shares,
};
use filterstore::filter::{self, Filter, FilterKind};
use filterstore::hash::mix64;

const ROUNDS: usize = 5;
const QUERIES: usize = 1 << 20;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn level(n: u8) -> RunId {
    RunId::level(n).unwrap()
}

/// The run of key i: 88 % L2, 10 % L1, 2 % split over two L0 ids.
fn run_of(i: u64, l0: [RunId; 2]) -> RunId {
    match mix64(i ^ 0x5eed) % 100 {
        0..=87 => level(2),
        88..=97 => level(1),
        x => l0[x as usize % 2],
    }
}

fn key(i: u64) -> u64 {
    mix64(i)
}

fn absent(i: u64) -> u64 {
    mix64(i | 1 << 62)
}

fn main() {
    let ns: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let ns = if ns.is_empty() { vec![1_000_000] } else { ns };
    for n in ns {
        measure(n);
    }
}

fn layouts() -> Vec<Layout> {
    let shares = Shares {
        levels: [0.10, 0.88, 0.0, 0.0, 0.0, 0.0],
        l0: 0.02,
    };
    let spec = CodedSpec::for_fpr(0.01, &shares, 0.95);
    vec![Layout::Fixed16, Layout::Coded(spec)]
}

fn measure(n: u64) {
    println!("== {n} keys ==");
    let mut filters = Vec::new();
    for layout in layouts() {
        let f = GlobalFilter::new(layout.clone(), n).unwrap();
        let (l0, first_stash, t_insert) = {
            let mut w = f.writer();
            let l0 = [w.new_l0_run().unwrap(), w.new_l0_run().unwrap()];
            let mut first_stash = None;
            let t = Instant::now();
            for i in 0..n {
                if !w.insert(key(i), run_of(i, l0)) && first_stash.is_none() {
                    first_stash = Some(w.load());
                }
            }
            (l0, first_stash, t.elapsed().as_secs_f64())
        };
        let s = f.writer().stats();
        let bits = (s.memory_bytes * 8) as f64 / n as f64;
        let table_bits = (f.buckets() as f64 * 4.0 * 0.0 + s.memory_bytes as f64) * 8.0 / n as f64;
        let _ = table_bits;
        let fpr_probes = 2_000_000u64;
        let fp = (0..fpr_probes)
            .filter(|&i| f.may_contain(absent(i)))
            .count();
        let lines: f64 = (0..100_000u64)
            .map(|i| f.lines_touched(absent(i)) as f64)
            .sum::<f64>()
            / 100_000.0;
        if let Layout::Coded(spec) = &layout {
            println!(
                "coded spec: {}-bit buckets ({} per line), widths L1..L6 {:?} L0 {}",
                spec.bucket_bits,
                spec.per_line(),
                &spec.widths[..6],
                spec.widths[6]
            );
        }
        println!(
            "{:8} load {:.3} (first stash at {}), stashed {}, {:.2} bits/key (all memory), FPR {:.3} % (theory {:.3} %), {:.2} lines/query, inserts {:.0} ns/key (random order)",
            layout.name(),
            s.load,
            first_stash.map_or("never".to_string(), |l| format!("{l:.3}")),
            s.stashed,
            bits,
            fp as f64 * 100.0 / fpr_probes as f64,
            f.theoretical_fpr() * 100.0,
            lines,
            t_insert * 1e9 / n as f64
        );
        filters.push((layout, f, l0));
    }

    // The baseline: blocked-bloom filters per run, ε = 1 %.
    let (_, _, l0) = &filters[0];
    let mut per_run: Vec<Vec<u64>> = vec![Vec::new(); 4];
    for i in 0..n {
        let slot = match run_of(i, *l0) {
            r if r == level(2) => 0,
            r if r == level(1) => 1,
            r if r == l0[0] => 2,
            _ => 3,
        };
        per_run[slot].push(key(i));
    }
    let blocks: Vec<Vec<u8>> = per_run
        .iter()
        .map(|k| {
            filter::build(FilterKind::BlockedBloom, 0.01, k)
                .unwrap()
                .unwrap()
        })
        .collect();
    let tables: Vec<Filter> = blocks.iter().map(|b| Filter::decode(b).unwrap()).collect();
    let bloom_bits: f64 = blocks.iter().map(|b| b.len() as f64 * 8.0).sum::<f64>() / n as f64;
    let absent_q: Vec<u64> = (0..QUERIES as u64).map(|i| absent(i + 7)).collect();
    let present_q: Vec<u64> = (0..QUERIES as u64).map(|i| key(mix64(i) % n)).collect();

    // Query timing: alternate the variants within each round.
    let mut t_abs = vec![Vec::new(); filters.len() + 1];
    let mut t_pre = vec![Vec::new(); filters.len() + 1];
    for _ in 0..ROUNDS {
        for (k, (_, f, _)) in filters.iter().enumerate() {
            let s = Instant::now();
            let c = absent_q.iter().filter(|&&h| f.may_contain(h)).count();
            std::hint::black_box(c);
            t_abs[k].push(s.elapsed().as_secs_f64() * 1e9 / QUERIES as f64);
            let s = Instant::now();
            let c: u32 = present_q
                .iter()
                .map(|&h| f.query(h).0)
                .fold(0, |a, b| a ^ b);
            std::hint::black_box(c);
            t_pre[k].push(s.elapsed().as_secs_f64() * 1e9 / QUERIES as f64);
        }
        let b = filters.len();
        let s = Instant::now();
        let c = absent_q
            .iter()
            .filter(|&&h| tables.iter().any(|t| t.may_contain(h)))
            .count();
        std::hint::black_box(c);
        t_abs[b].push(s.elapsed().as_secs_f64() * 1e9 / QUERIES as f64);
        // Present: L0 tables and L1 before L2, stopping at the first "maybe".
        let s = Instant::now();
        let c = present_q
            .iter()
            .map(|&h| {
                [2usize, 3, 1, 0]
                    .iter()
                    .position(|&t| tables[t].may_contain(h))
                    .unwrap_or(9)
            })
            .sum::<usize>();
        std::hint::black_box(c);
        t_pre[b].push(s.elapsed().as_secs_f64() * 1e9 / QUERIES as f64);
    }
    let base_abs = median(t_abs[filters.len()].clone());
    let base_pre = median(t_pre[filters.len()].clone());
    println!(
        "baseline: 4 blocked-bloom filters at 1 %, {bloom_bits:.2} bits/key: absent {base_abs:.1} ns (4 probes), present {base_pre:.1} ns"
    );
    for (k, (layout, _, _)) in filters.iter().enumerate() {
        let a = median(t_abs[k].clone());
        let p = median(t_pre[k].clone());
        println!(
            "{:8} query: absent {a:.1} ns ({:.2}x baseline), present {p:.1} ns ({:.2}x baseline)",
            layout.name(),
            a / base_abs,
            p / base_pre
        );
    }

    // Updates: what a flush, a compaction and a trivial move do.
    for (layout, f, l0) in &filters {
        // A flushed table of n/10 new keys into a fresh L0 id, random order and sorted.
        let batch = (n / 10) as usize;
        let fresh: Vec<u64> = (0..batch as u64).map(|i| key(i + n)).collect();
        let mut w = f.writer();
        let r = w.new_l0_run().unwrap();
        let t = Instant::now();
        for &h in &fresh {
            w.insert(h, r);
        }
        let ins_random = t.elapsed().as_secs_f64() * 1e9 / batch as f64;
        let t = Instant::now();
        let mut gone = fresh.clone();
        let missing = w.remove_batch(&mut gone, r);
        assert_eq!(missing, 0);
        let rem_sorted = t.elapsed().as_secs_f64() * 1e9 / batch as f64;
        let t = Instant::now();
        let mut again = fresh.clone();
        w.insert_batch(&mut again, r);
        let ins_sorted = t.elapsed().as_secs_f64() * 1e9 / batch as f64;
        // A compaction of L0 into L1: every L0 key relabelled (random order, then back
        // sorted through merge_batch).
        let l0keys: Vec<(u64, RunId)> = (0..n)
            .filter_map(|i| {
                let r = run_of(i, *l0);
                r.is_l0().then_some((key(i), r))
            })
            .collect();
        let t = Instant::now();
        for &(h, r0) in &l0keys {
            assert!(w.relabel(h, r0, level(1)));
        }
        let rel_random = t.elapsed().as_secs_f64() * 1e9 / l0keys.len() as f64;
        let mut back: Vec<MergeKey> = l0keys
            .iter()
            .map(|&(h, r0)| MergeKey {
                hash: h,
                from: RunSet::of(level(1)),
                to: Some(r0),
            })
            .collect();
        let t = Instant::now();
        let missing = w.merge_batch(&mut back);
        assert_eq!(missing, 0);
        let rel_sorted = t.elapsed().as_secs_f64() * 1e9 / l0keys.len() as f64;
        let mut gone = fresh.clone();
        w.remove_batch(&mut gone, r);
        w.drop_l0_run(r).unwrap();
        println!(
            "{:8} updates (ns/key): insert {ins_random:.0} random, {ins_sorted:.0} sorted batch; remove {rem_sorted:.0} sorted batch; relabel {rel_random:.0} random, {rel_sorted:.0} sorted merge batch",
            layout.name()
        );
        drop(w);

        // Checkpoint against rebuild.
        let t = Instant::now();
        let bytes = f.encode(1);
        let enc = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let (g, _) = GlobalFilter::decode(&bytes).unwrap();
        let dec = t.elapsed().as_secs_f64();
        drop(g);
        let t = Instant::now();
        let h = GlobalFilter::new(layout.clone(), n).unwrap();
        {
            let mut w = h.writer();
            let ids = [w.new_l0_run().unwrap(), w.new_l0_run().unwrap()];
            let mut groups: Vec<Vec<u64>> = vec![Vec::new(); 4];
            for i in 0..n {
                let r = run_of(i, ids);
                let g = if r == level(2) {
                    0
                } else if r == level(1) {
                    1
                } else if r == ids[0] {
                    2
                } else {
                    3
                };
                groups[g].push(key(i));
            }
            for (g, mut hs) in groups.into_iter().enumerate() {
                let r = [level(2), level(1), ids[0], ids[1]][g];
                w.insert_batch(&mut hs, r);
            }
        }
        let rebuild = t.elapsed().as_secs_f64();
        println!(
            "{:8} checkpoint: {:.1} MB, encode {:.0} ms, decode (with full check) {:.0} ms; rebuild from the keys (sorted batches) {:.0} ms",
            layout.name(),
            bytes.len() as f64 / 1e6,
            enc * 1e3,
            dec * 1e3,
            rebuild * 1e3
        );
    }
}
