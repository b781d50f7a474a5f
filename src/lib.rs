//! filterstore: a persistent LSM key-value store whose sorted tables are fronted by
//! memory-mapped approximate-membership filters (Bloom, blocked Bloom, cuckoo, binary fuse).
//!
//! ```
//! use filterstore::{Options, Store};
//! # fn main() -> filterstore::Result<()> {
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path(), Options::default())?;
//! store.put(b"apple", b"red")?;
//! store.flush()?; // seal into a table fronted by a filter
//! assert_eq!(store.get(b"apple")?.unwrap(), b"red");
//! assert_eq!(store.get(b"pear")?, None); // almost surely answered by the filter alone
//! let stats = store.stats();
//! assert_eq!(stats.tables.len(), 1);
//! # Ok(()) }
//! ```
//!
//! # Unsafe code
//!
//! The crate denies `unsafe` except at these sites, each with a SAFETY comment:
//! - `mmap.rs`: mapping filter and table files read-only (they are never modified after
//!   they are renamed into place);
//! - `memtable/arena.rs`: writing the memtable's chunks through a raw pointer while values
//!   read from them are shared (bytes below a chunk's length are never written again);
//! - `slice.rs`: a [`Slice`] is a union of its inline bytes and a shared `Bytes`, told
//!   apart by one word, so that moving one never splits a load across smaller stores;
//! - `filter/simd.rs`: the AVX2 and AVX-512 query kernels and their unaligned loads, the
//!   SSE prefetch hint that batched lookups issue ahead of their filter queries (and the
//!   global filter's batches ahead of their buckets), and
//!   `filter/mod.rs`: the call through a kernel pointer, chosen only after the CPU was
//!   checked for its instructions;
//! - `filter/blocked.rs`, in its tests only: calls through the kernels `filter/simd.rs`
//!   returned for this CPU, checked against the scalar query.
#![warn(missing_docs)]
#![deny(unsafe_code)]

mod cache;
pub(crate) mod codec;
mod compaction;
pub(crate) mod counters;
mod error;
pub mod expiry;
#[cfg(feature = "parquet")]
pub mod export;
pub mod filename;
pub mod filter;
mod global_index;
pub mod hash;
#[cfg(feature = "parquet")]
pub mod import;
pub mod io;
// The on-disk decoders are public only with `internals`, for tests and fuzz targets.
#[cfg(feature = "internals")]
pub mod lifetime;
#[cfg(not(feature = "internals"))]
mod lifetime;
// The on-disk decoders are public only with `internals`, for tests and fuzz targets.
#[cfg(feature = "internals")]
pub mod manifest;
#[cfg(not(feature = "internals"))]
mod manifest;
pub(crate) mod memtable;
mod merge;
mod mmap;
pub mod repair;
mod scan;
mod slice;
pub mod store;
// The range tombstones file's decoder is public only with `internals`, for tests and fuzz
// targets.
#[cfg(feature = "internals")]
pub mod tombstone;
#[cfg(not(feature = "internals"))]
mod tombstone;
// The on-disk decoders are public only with `internals`, for tests and fuzz targets.
#[cfg(feature = "internals")]
pub mod table;
#[cfg(not(feature = "internals"))]
mod table;
pub mod verify;
mod version;
// The on-disk decoders are public only with `internals`, for tests and fuzz targets.
#[cfg(feature = "internals")]
pub mod wal;
#[cfg(not(feature = "internals"))]
mod wal;

/// The largest key and value accepted, in bytes (defined beside the codecs that bound them).
pub use codec::{MAX_KEY_LEN, MAX_VALUE_LEN};
pub use error::{ChecksumMismatch, Error, Result};
pub use filter::alloc::FilterPolicy;
pub use filter::choice::AllocationChoice;
pub use filter::{Filter, FilterKind};
pub use repair::repair;
pub use slice::Slice;
pub use store::{
    AllocationModel, FilterCheck, Keyspace, KeyspaceOptions, KeyspaceStats, LevelStats,
    LifecycleStats, Lifetime, Options, PinnedReader, RangeBuildStats, Reader, RunModel, Scan,
    Snapshot, SnapshotStats, Stats, Store, SyncPolicy, TableStats, Transaction, TransactionScan,
    WriteOptions,
};
pub use table::Compression;
pub use wal::WriteBatch;

/// The README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
