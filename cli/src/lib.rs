//! The showcase of filterstore, used by the `store` command line (`cli/src/main.rs`), this
//! crate's tests and benches, and the measurement programs of `tools/`: the filter benchmark
//! (`bench`, `store bench`), the Parquet export benchmark (`bench_export`, `store bench
//! export`) and the hyphenation dictionary (`hyph`, `store hyphenate`). The engine never
//! imports them; they reach the library through its public API (and `hash`, `filter`).
//!
//! # Unsafe code
//!
//! The crate denies `unsafe` except in `hyph/patterns/matcher.rs`: the SSE2 pattern window of
//! the hyphenator (SSE2 is part of the x86-64 baseline), with a SAFETY comment.
#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod bench;
#[cfg(feature = "parquet")]
pub mod bench_export;
pub mod hyph;
pub(crate) mod plot;
