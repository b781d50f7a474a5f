//! Hyphenation of the whole built-in word list (466,551 words, one thread) with the exceptions
//! in memory and in the on-disk dictionary behind blocked-bloom at ε = 0.1 %, read through a
//! `PinnedReader` (what `ExceptionDict::reader` gives) and through a `Store::reader`, the three
//! passes taking turns in each round so that a busy machine slows them alike. Prints the
//! median pass of each and the medians of the per-round ratios to memory, by the thread's CPU
//! time (which other processes do not inflate, though their cache traffic still does).
//!
//! `taskset -c 1 cargo run --release -p filterstore-tools --bin hyph_dict_ab [rounds] [epsilon]`

use filterstore::FilterKind;
use filterstore_cli::hyph::{
    ExceptionDict, ExceptionLookup, ExceptionSource, Hyphenator, MemoryExceptions, WordList,
};

/// CPU time of the calling thread, in seconds.
fn thread_cpu_seconds() -> f64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    match xs.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => xs[n / 2],
        n => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
    }
}

fn main() -> filterstore::Result<()> {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(31)
        .max(1);
    let eps: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(0.001);
    let h = Hyphenator::en_us()?;
    let words = WordList::builtin()?;
    let memory = MemoryExceptions::en_us()?;
    let tmp = tempfile::tempdir()?;
    let dict = ExceptionDict::open_or_build(
        tmp.path().join("dict"),
        &ExceptionSource::en_us(),
        Some(FilterKind::BlockedBloom),
        Some(eps),
    )?;
    let pinned = dict.reader()?;
    let reader = dict.store().reader();
    let ways: [(&str, &dyn ExceptionLookup); 3] = [
        ("memory", &memory),
        ("disk, pinned reader", &pinned),
        ("disk, store reader", &reader),
    ];
    let mut out = String::with_capacity(64);
    let mut times = vec![Vec::new(); ways.len()];
    let mut hyphens = vec![0u64; ways.len()];
    for _ in 0..rounds {
        for (i, (_, lookup)) in ways.iter().enumerate() {
            let mut n = 0u64;
            let t = thread_cpu_seconds();
            for w in words.iter() {
                out.clear();
                n += h.hyphenate_into(w, *lookup, &mut out)?.hyphens as u64;
            }
            times[i].push(thread_cpu_seconds() - t);

            hyphens[i] = n;
        }
    }
    assert!(
        hyphens.iter().all(|&n| n == hyphens[0]),
        "the ways disagree: {hyphens:?}"
    );
    for (i, (name, _)) in ways.iter().enumerate() {
        let ratios: Vec<f64> = times[i].iter().zip(&times[0]).map(|(t, m)| t / m).collect();
        println!(
            "{name}: median {:.1} ms per pass of {} words, median ratio to memory {:.3} ({rounds} rounds, CPU time)",
            median(times[i].clone()) * 1e3,
            words.len(),
            median(ratios)
        );
    }
    let s = dict.stats();
    println!(
        "dictionary: blocked-bloom at {eps}, {} lookups, {} answered by the filter, {} false positives",
        s.lookups, s.filter_negatives, s.false_positives
    );
    Ok(())
}
