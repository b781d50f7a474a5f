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
//! assert_eq!(store.get(b"apple")?, Some(b"red".to_vec()));
//! assert_eq!(store.get(b"pear")?, None); // almost surely answered by the filter alone
//! let stats = store.stats();
//! assert_eq!(stats.tables.len(), 1);
//! # Ok(()) }
//! ```
#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod bench;
pub mod codec;
mod compaction;
pub mod counters;
pub mod error;
pub mod filter;
pub mod hash;
pub mod hyph;
pub mod io;
pub mod manifest;
pub mod memtable;
mod merge;
mod mmap;
pub mod plot;
pub mod store;
pub mod table;
pub mod verify;
mod version;
pub mod wal;

pub use error::{Error, Result};
pub use filter::{Filter, FilterKind};
pub use store::{LevelStats, Options, Reader, Scan, Stats, Store, SyncPolicy, TableStats};
pub use wal::WriteBatch;

/// Largest key accepted, in bytes.
pub const MAX_KEY_LEN: usize = 64 << 10;
/// Largest value accepted, in bytes.
pub const MAX_VALUE_LEN: usize = 64 << 20;
