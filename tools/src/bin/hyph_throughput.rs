//! Hyphenates the whole built-in word list (466,551 words) several times on one thread and
//! prints the best time per word, patterns only and with the in-memory exception list, by
//! wall time and by the thread's CPU time (which other processes on a busy machine do not
//! inflate, though their cache traffic still does).
//!
//! ```text
//! cargo run --release -p filterstore-tools --bin hyph_throughput -- [PASSES] [patterns|exceptions|both] [wall]
//! ```
//!
//! For profiling, `wall` reads no clock but `std::time::Instant`, so the program runs under
//! `valgrind --tool=callgrind` (the thread CPU clock is read through the vDSO, which valgrind
//! does not support) and `perf record`. For instruction counts of the hyphenation alone:
//! `valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*hyphenate_all*'
//! target/release/hyph_throughput 1 exceptions wall`

use std::time::Instant;

use filterstore_cli::hyph::{
    ExceptionLookup, Hyphenator, MemoryExceptions, NoExceptions, WordList,
};

/// CPU time of the calling thread, in seconds.
fn thread_cpu_seconds() -> f64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// One pass over the list; returns the hyphens inserted and the exception lookups made.
#[inline(never)]
fn hyphenate_all(
    h: &Hyphenator,
    words: &WordList,
    lookup: &dyn ExceptionLookup,
    out: &mut String,
) -> filterstore::Result<(u64, u64)> {
    let (mut hyphens, mut lookups) = (0u64, 0u64);
    for w in words.iter() {
        out.clear();
        let o = h.hyphenate_into(w, lookup, out)?;
        hyphens += o.hyphens as u64;
        lookups += o.lookups as u64;
    }
    Ok((hyphens, lookups))
}

fn main() -> filterstore::Result<()> {
    let mut args = std::env::args().skip(1);
    let passes: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(15)
        .max(1);
    let mode = args.next().unwrap_or_else(|| "both".to_string());
    let cpu_clock = args.next().as_deref() != Some("wall");
    let t = Instant::now();
    let h = Hyphenator::en_us()?;
    let compile = t.elapsed();
    let exceptions = MemoryExceptions::en_us()?;
    let words = WordList::builtin()?;
    println!("{:?}, compiled in {compile:.2?}", h.patterns());
    let mut runs: Vec<(&str, &dyn ExceptionLookup)> = Vec::new();
    if mode != "exceptions" {
        runs.push(("patterns only", &NoExceptions));
    }
    if mode != "patterns" {
        runs.push(("in-memory exceptions", &exceptions));
    }
    let cpu = || if cpu_clock { thread_cpu_seconds() } else { 0.0 };
    let mut out = String::new();
    for (name, lookup) in runs {
        let (mut best, mut best_cpu) = (f64::MAX, f64::MAX);
        let (mut hyphens, mut lookups) = (0u64, 0u64);
        for _ in 0..passes {
            let t = Instant::now();
            let c = cpu();
            (hyphens, lookups) = hyphenate_all(&h, &words, lookup, &mut out)?;
            std::hint::black_box(&out);
            best_cpu = best_cpu.min(cpu() - c);
            best = best.min(t.elapsed().as_secs_f64());
        }
        let n = words.len() as f64;
        let thread = if cpu_clock {
            format!(
                "; thread CPU {:.1} ms = {:.1} ns/word = {:.2} M words/s",
                best_cpu * 1e3,
                best_cpu * 1e9 / n,
                n / best_cpu / 1e6
            )
        } else {
            String::new()
        };
        println!(
            "{name}: {} words, {hyphens} hyphens, {lookups} exception lookups; best of {passes}: wall {:.1} ms = {:.1} ns/word = {:.2} M words/s{thread}",
            words.len(),
            best * 1e3,
            best * 1e9 / n,
            n / best / 1e6,
        );
    }
    Ok(())
}
