//! Hyphenation throughput over the whole built-in word list (466,551 words), one thread.
//!
//! `cargo bench --bench hyph`; criterion reports the time per pass over the list and the
//! throughput in words (elements) per second.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use filterstore_cli::hyph::{
    ExceptionLookup, Hyphenator, MemoryExceptions, NoExceptions, WordList,
};

fn pass(h: &Hyphenator, words: &WordList, lookup: &dyn ExceptionLookup, out: &mut String) -> u64 {
    let mut hyphens = 0u64;
    for w in words.iter() {
        out.clear();
        match h.hyphenate_into(w, lookup, out) {
            Ok(o) => hyphens += o.hyphens as u64,
            Err(e) => panic!("{w}: {e}"),
        }
    }
    black_box(out);
    hyphens
}

fn bench(c: &mut Criterion) {
    let h = Hyphenator::en_us().expect("built-in patterns");
    let exceptions = MemoryExceptions::en_us().expect("built-in exceptions");
    let words = WordList::builtin().expect("built-in word list");
    let mut g = c.benchmark_group("hyphenate_word_list");
    g.throughput(Throughput::Elements(words.len() as u64));
    g.sample_size(20);
    let mut out = String::new();
    g.bench_function("patterns_only", |b| {
        b.iter(|| pass(&h, &words, &NoExceptions, &mut out))
    });
    g.bench_function("memory_exceptions", |b| {
        b.iter(|| pass(&h, &words, &exceptions, &mut out))
    });
    g.finish();
    c.bench_function("compile_en_us_patterns", |b| {
        b.iter(|| Hyphenator::en_us().expect("built-in patterns"))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
