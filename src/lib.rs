//! filterstore: a persistent LSM key-value store whose sorted tables are fronted by
//! memory-mapped approximate-membership filters (Bloom, blocked Bloom, cuckoo).
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod error;
pub mod filter;
pub mod hash;
pub mod hyph;

pub use error::{Error, Result};
pub use filter::{Filter, FilterKind};
