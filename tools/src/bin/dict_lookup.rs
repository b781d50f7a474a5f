//! Times the exception lookups alone (no hyphenation): every letters-only word of the
//! built-in list, lower-cased and hashed up front, looked up in the in-memory exceptions and
//! in the on-disk dictionary behind each filter kind (blocked-bloom, cuckoo, binary-fuse at
//! ε = 1 % and 0.1 %), through a `Reader`. Separates the lookup's own cost from its
//! interference with the pattern automaton in `store bench hyphenation`, and shows which
//! filter makes the dictionary cheapest.
//!
//! `cargo run --release -p filterstore-tools --bin dict_lookup [passes]`

use std::time::Instant;

use filterstore::FilterKind;
use filterstore_cli::hyph::{
    ExceptionDict, ExceptionLookup, ExceptionSource, MemoryExceptions, WordList,
};

fn main() -> filterstore::Result<()> {
    let passes: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10);
    let words = WordList::builtin()?;
    let keys: Vec<(Vec<u8>, u64)> = words
        .iter()
        .filter(|w| w.len() >= 5 && w.bytes().all(|b| b.is_ascii_alphabetic()))
        .map(|w| {
            let k = w.to_ascii_lowercase().into_bytes();
            let h = filterstore::hash::key_hash(&k);
            (k, h)
        })
        .collect();
    let tmp = tempfile::tempdir()?;
    let memory = MemoryExceptions::en_us()?;
    let mut dicts = Vec::new();
    for kind in [
        FilterKind::BlockedBloom,
        FilterKind::Cuckoo,
        FilterKind::BinaryFuse,
    ] {
        for eps in [0.01, 0.001] {
            let dir = tmp.path().join(format!("{kind}-{eps}"));
            let d = ExceptionDict::open_or_build(
                dir,
                &ExceptionSource::en_us(),
                Some(kind),
                Some(eps),
            )?;
            dicts.push((format!("disk, {kind} at {eps}"), d));
        }
    }
    let readers = dicts
        .iter()
        .map(|(_, d)| d.reader())
        .collect::<filterstore::Result<Vec<_>>>()?;
    let mut runs: Vec<(&str, &dyn ExceptionLookup)> = vec![("memory", &memory)];
    for ((name, _), r) in dicts.iter().zip(&readers) {
        runs.push((name, r));
    }
    for (name, lookup) in runs {
        let mut best = f64::MAX;
        let mut hits = 0;
        for _ in 0..passes {
            hits = 0;
            let t = Instant::now();
            for (k, h) in &keys {
                hits += lookup.lookup(k, *h)?.is_some() as usize;
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!(
            "{name}: {} lookups, {hits} hits, best of {passes}: {:.1} ns/lookup",
            keys.len(),
            best * 1e9 / keys.len() as f64
        );
    }
    for (name, d) in &dicts {
        let s = d.stats();
        println!(
            "{name}: {} data-block reads in all passes ({} false positives)",
            s.data_block_reads, s.false_positives
        );
    }
    Ok(())
}
