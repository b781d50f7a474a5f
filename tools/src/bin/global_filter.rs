//! The global key-to-run filter (`filter::global`, layout fixed16) measured: bits per key,
//! false-positive rate against theory, cache lines per query, the load at the first stashed
//! entry, query time for absent and present keys against the per-table probes it replaces,
//! insert / relabel / remove throughput in random order and as sorted batches, and a
//! checkpoint (encode, decode) against a rebuild from the keys.
//!
//! ```text
//! taskset -c 1 cargo run --release -p filterstore-tools --bin global_filter -- [drained] [N ...]   (default 1000000)
//! ```
//!
//! The tree modelled has two levels: 88 % of the keys in L2, 10 % in L1 and 2 % in two L0
//! tables, or with `drained` (L0 merged, as after the idle drain) 88 % in L2 and 12 % in L1. Times are thread CPU time (the machine is shared: wall time also counts
//! the time other processes held the core), medians of 5 rounds of 2²⁰ queries that
//! alternate the filter and the baseline. The baseline is what the store does today for
//! that tree: a blocked-bloom filter at ε = 1 % per run, probed for every run whose range
//! holds the key (all four for an absent key; L0, L1 then L2 for a present one, stopping at
//! the first "maybe").

use std::sync::OnceLock;

use filterstore::filter::global::{GlobalFilter, Layout, MergeKey, RunId, RunSet};
use filterstore::filter::{self, Filter, FilterKind};
use filterstore::hash::mix64;

const ROUNDS: usize = 5;
/// True for the drained tree (no L0 keys).
static DRAINED: OnceLock<bool> = OnceLock::new();

fn drained() -> bool {
    DRAINED.get().copied().unwrap_or(false)
}
const QUERIES: usize = 1 << 20;

/// Seconds of CPU this thread has used.
fn cpu() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn level(n: u8) -> RunId {
    RunId::level(n).unwrap()
}

/// Which run key i is in: 0 = L2 (88 %), 1 = L1 (10 %, 12 % when drained), 2 and 3 = the
/// two L0 tables.
fn run_slot(i: u64) -> usize {
    match mix64(i ^ 0x5eed) % 100 {
        0..=87 => 0,
        88..=97 => 1,
        _ if drained() => 1,
        x => 2 + (x as usize % 2),
    }
}

fn key(i: u64) -> u64 {
    mix64(i)
}

fn absent(i: u64) -> u64 {
    mix64(i | 1 << 62)
}

/// The layouts measured (fixed16, the only one).
fn layouts() -> Vec<Layout> {
    vec![Layout::Fixed16]
}

/// A filter of `layout` sized for `capacity` holding keys 0..n, inserted one by one in key
/// order (random in hash order); returns it with the run of each slot and the CPU time.
fn fill(layout: &Layout, capacity: u64, n: u64) -> (GlobalFilter, [RunId; 4], f64) {
    let f = GlobalFilter::new(layout.clone(), capacity).unwrap();
    let c;
    let runs;
    {
        let mut w = f.writer();
        runs = [
            level(2),
            level(1),
            w.new_l0_run().unwrap(),
            w.new_l0_run().unwrap(),
        ];
        let t = cpu();
        for i in 0..n {
            w.insert(key(i), runs[run_slot(i)]);
        }
        c = cpu() - t;
    }
    (f, runs, c)
}

fn main() {
    let _ = DRAINED.set(std::env::args().any(|a| a == "drained"));
    let ns: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let ns = if ns.is_empty() { vec![1_000_000] } else { ns };
    for n in ns {
        measure(n);
    }
}

fn measure(n: u64) {
    if drained() {
        println!("== {n} keys: 88 % L2, 12 % L1 (drained) ==");
    } else {
        println!("== {n} keys: 88 % L2, 10 % L1, 2 % in two L0 tables ==");
    }
    let mut filters = Vec::new();
    for layout in layouts() {
        let (f, runs, t) = fill(&layout, n, n);
        let s = f.writer().stats();
        // The load of the first stashed entry: keep inserting into a copy.
        let copy = GlobalFilter::decode(&f.encode(0)).unwrap().0;
        let first_stash = {
            let mut w = copy.writer();
            let mut at = None;
            for i in n..n + n / 10 {
                if !w.insert(key(i), runs[run_slot(i)]) {
                    at = Some(w.load());
                    break;
                }
            }
            at
        };
        drop(copy);
        let probes = 2_000_000u64;
        let fp = (0..probes).filter(|&i| f.may_contain(absent(i))).count();
        let lines = (0..100_000u64)
            .map(|i| f.lines_touched(absent(i)) as f64)
            .sum::<f64>()
            / 1e5;
        let code = s.memory_bytes as f64 * 8.0 / n as f64;
        println!(
            "{:8} load {:.3}, stashed {}, first stash at load {}; {:.2} bits/key (table, seqlock words), FPR {:.3} % (theory {:.3} %), {:.2} lines/query; fill: {:.0} ns/key CPU",
            layout.name(),
            s.load,
            s.stashed,
            first_stash.map_or("> +10 %".into(), |l| format!("{l:.3}")),
            code,
            fp as f64 * 100.0 / probes as f64,
            f.theoretical_fpr() * 100.0,
            lines,
            t * 1e9 / n as f64
        );
        filters.push((layout, f, runs));
    }
    queries(n, &filters);
    for (layout, _, _) in &filters {
        updates(n, layout);
        checkpoint(n, layout);
    }
}

fn queries(n: u64, filters: &[(Layout, GlobalFilter, [RunId; 4])]) {
    let mut per_run: Vec<Vec<u64>> = vec![Vec::new(); 4];
    for i in 0..n {
        per_run[run_slot(i)].push(key(i));
    }
    // Runs without keys (the L0 tables of the drained tree) have no table to probe.
    let live: Vec<usize> = (0..4).filter(|&r| !per_run[r].is_empty()).collect();
    let blocks: Vec<Vec<u8>> = live
        .iter()
        .map(|&r| &per_run[r])
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
    let k = filters.len();
    let (mut t_abs, mut t_pre) = (vec![Vec::new(); k + 1], vec![Vec::new(); k + 1]);
    let per_q = |t: f64| t * 1e9 / QUERIES as f64;
    for _ in 0..ROUNDS {
        for (j, (_, f, _)) in filters.iter().enumerate() {
            let t = cpu();
            let c = absent_q.iter().filter(|&&h| f.may_contain(h)).count();
            std::hint::black_box(c);
            t_abs[j].push(per_q(cpu() - t));
            let t = cpu();
            let c = present_q.iter().fold(0u32, |a, &h| a ^ f.query(h).0);
            std::hint::black_box(c);
            t_pre[j].push(per_q(cpu() - t));
        }
        let t = cpu();
        let c = absent_q
            .iter()
            .filter(|&&h| tables.iter().any(|t| t.may_contain(h)))
            .count();
        std::hint::black_box(c);
        t_abs[k].push(per_q(cpu() - t));
        let t = cpu();
        // Newest first: the L0 tables, L1, then L2 (slot 0, the first table).
        let c = present_q
            .iter()
            .map(|&h| {
                (0..tables.len())
                    .rev()
                    .position(|t| tables[t].may_contain(h))
                    .unwrap_or(9)
            })
            .sum::<usize>();
        std::hint::black_box(c);
        t_pre[k].push(per_q(cpu() - t));
    }
    let (ba, bp) = (median(t_abs[k].clone()), median(t_pre[k].clone()));
    println!(
        "baseline  {} blocked-bloom filters at 1 % ({bloom_bits:.2} bits/key): absent {ba:.1} ns ({} probes), present {bp:.1} ns",
        tables.len(),
        tables.len()
    );
    for (j, (layout, _, _)) in filters.iter().enumerate() {
        let (a, p) = (median(t_abs[j].clone()), median(t_pre[j].clone()));
        println!(
            "{:8} query: absent {a:.1} ns ({:.2}x baseline), present {p:.1} ns ({:.2}x baseline)",
            layout.name(),
            a / ba,
            p / bp
        );
    }
}

/// What a flush, a compaction and a trivial move do, on a filter with 20 % headroom (sized
/// for 1.25 n, holding n keys: load about 0.76).
fn updates(n: u64, layout: &Layout) {
    let (f, runs, _) = fill(layout, n * 5 / 4, n);
    let batch = n / 10;
    let fresh: Vec<u64> = (0..batch).map(|i| key(i + n)).collect();
    let mut w = f.writer();
    let r = w.new_l0_run().unwrap();
    let per = |t: f64, k: u64| t * 1e9 / k as f64;
    // A flushed table of n/10 keys: one by one in arrival order, then as a sorted batch.
    let t = cpu();
    for &h in &fresh {
        w.insert(h, r);
    }
    let ins_random = per(cpu() - t, batch);
    let mut gone = fresh.clone();
    let t = cpu();
    assert_eq!(w.remove_batch(&mut gone, r), 0);
    let rem_sorted = per(cpu() - t, batch);
    let mut again = fresh.clone();
    let t = cpu();
    w.insert_batch(&mut again, r);
    let ins_sorted = per(cpu() - t, batch);
    // A compaction: every key of the two original L0 tables relabelled to L1 (in the
    // drained tree, every L1 key to L2), one by one; then back through a sorted merge batch.
    let (moved, target): (Vec<(u64, RunId)>, RunId) = if drained() {
        let k = (0..n).filter(|&i| run_slot(i) == 1);
        (k.map(|i| (key(i), runs[1])).collect(), level(2))
    } else {
        let k = (0..n).filter(|&i| run_slot(i) >= 2);
        (k.map(|i| (key(i), runs[run_slot(i)])).collect(), level(1))
    };
    let l0keys = moved;
    let m = l0keys.len() as u64;
    let t = cpu();
    for &(h, from) in &l0keys {
        assert!(w.relabel(h, from, target));
    }
    let rel_random = per(cpu() - t, m);
    let mut back: Vec<MergeKey> = l0keys
        .iter()
        .map(|&(h, r0)| MergeKey {
            hash: h,
            from: RunSet::of(target),
            to: Some(r0),
        })
        .collect();
    let t = cpu();
    assert_eq!(w.merge_batch(&mut back), 0);
    let rel_sorted = per(cpu() - t, m);
    let s = w.stats();
    println!(
        "{:8} updates at load {:.2} (ns/key, CPU): insert {ins_random:.0} one by one, {ins_sorted:.0} sorted batch; remove {rem_sorted:.0} sorted batch; relabel ({m} keys) {rel_random:.0} one by one, {rel_sorted:.0} sorted merge batch",
        layout.name(),
        s.load
    );
}

fn checkpoint(n: u64, layout: &Layout) {
    let (f, _, _) = fill(layout, n, n);
    let t = cpu();
    let bytes = f.encode(1);
    let enc = cpu() - t;
    let t = cpu();
    let (g, _) = GlobalFilter::decode(&bytes).unwrap();
    let dec = cpu() - t;
    drop(g);
    // A rebuild from the runs' key hashes, one sorted batch per run.
    let mut groups: Vec<Vec<u64>> = vec![Vec::new(); 4];
    for i in 0..n {
        groups[run_slot(i)].push(key(i));
    }
    let t = cpu();
    let h = GlobalFilter::new(layout.clone(), n).unwrap();
    {
        let mut w = h.writer();
        let ids = [
            level(2),
            level(1),
            w.new_l0_run().unwrap(),
            w.new_l0_run().unwrap(),
        ];
        for (g, mut hs) in groups.into_iter().enumerate() {
            if !hs.is_empty() {
                w.insert_batch(&mut hs, ids[g]);
            }
        }
    }
    let rebuild = cpu() - t;
    println!(
        "{:8} checkpoint {:.1} MB: encode {:.0} ms, decode with every check {:.0} ms; rebuild from the key hashes {:.0} ms ({:.0} ns/key) (CPU)",
        layout.name(),
        bytes.len() as f64 / 1e6,
        enc * 1e3,
        dec * 1e3,
        rebuild * 1e3,
        rebuild * 1e9 / n as f64
    );
}
