//! Hyphenates the built-in word list (466,551 words) PASSES times on one thread, without any
//! timer beyond `std::time::Instant`, so it runs under `valgrind --tool=callgrind` and
//! `perf record` (the throughput example reads the thread CPU clock through the vDSO, which
//! valgrind does not support).
//!
//! `cargo run --release --example hyph_profile [PASSES] [patterns|exceptions]`
//!
//! For instruction counts of the hyphenation alone:
//! `valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*hyphenate_all*'
//! target/release/examples/hyph_profile 1 exceptions`

use std::time::Instant;

use filterstore_cli::hyph::{
    ExceptionLookup, Hyphenator, MemoryExceptions, NoExceptions, WordList,
};

/// One pass over the list; returns the hyphens inserted.
#[inline(never)]
fn hyphenate_all(
    h: &Hyphenator,
    words: &WordList,
    lookup: &dyn ExceptionLookup,
    out: &mut String,
) -> filterstore::Result<u64> {
    let mut hyphens = 0u64;
    for w in words.iter() {
        out.clear();
        hyphens += h.hyphenate_into(w, lookup, out)?.hyphens as u64;
    }
    Ok(hyphens)
}

fn main() -> filterstore::Result<()> {
    let mut args = std::env::args().skip(1);
    let passes: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(10)
        .max(1);
    let mode = args.next().unwrap_or_else(|| "exceptions".to_string());
    let t = Instant::now();
    let h = Hyphenator::en_us()?;
    let compile = t.elapsed();
    let exceptions = MemoryExceptions::en_us()?;
    let words = WordList::builtin()?;
    let lookup: &dyn ExceptionLookup = if mode == "patterns" {
        &NoExceptions
    } else {
        &exceptions
    };
    let mut out = String::new();
    let mut best = f64::MAX;
    let mut hyphens = 0;
    for _ in 0..passes {
        let t = Instant::now();
        hyphens = hyphenate_all(&h, &words, lookup, &mut out)?;
        std::hint::black_box(&out);
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!("{:?}, compiled in {compile:.2?}", h.patterns());
    println!(
        "{mode}: {} words, {hyphens} hyphens; best of {passes}: {:.1} ns/word",
        words.len(),
        best * 1e9 / words.len() as f64
    );
    Ok(())
}
