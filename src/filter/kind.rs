//! The kinds of filter a table can carry: their tags on disk, names, and layout versions.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// The kinds of filter a table can carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FilterKind {
    /// No filter: every lookup reads the table.
    None,
    /// Classic Bloom filter over one bit array (thesis ch. 3).
    Bloom,
    /// Cache-line blocked Bloom filter: all probes of a key in one 64-byte line.
    BlockedBloom,
    /// Cuckoo filter with partial-key cuckoo hashing (thesis ch. 4), 4 slots per bucket.
    Cuckoo,
    /// Binary fuse filter (Graf & Lemire 2022): static, 3 slots per key, 8/16/32-bit
    /// fingerprints; the smallest and fastest to query, built once per immutable table.
    BinaryFuse,
    /// No per-table filter: one key-to-run filter for the whole store
    /// ([`crate::filter::global`]), one probe per lookup however many runs there are. A
    /// store policy, never the kind of a filter block (see `docs/global-filter.md`).
    Global,
}

impl FilterKind {
    /// All kinds, in the order the benchmark reports them.
    pub const ALL: [FilterKind; 5] = [
        FilterKind::None,
        FilterKind::Bloom,
        FilterKind::BlockedBloom,
        FilterKind::Cuckoo,
        FilterKind::BinaryFuse,
    ];

    /// The tag byte stored on disk. Tags are never reused.
    pub fn tag(self) -> u8 {
        match self {
            FilterKind::None => 0,
            FilterKind::Bloom => 1,
            FilterKind::BlockedBloom => 2,
            FilterKind::Cuckoo => 3,
            FilterKind::BinaryFuse => 4,
            FilterKind::Global => 5,
        }
    }

    /// The kind with on-disk tag `tag`, if any.
    pub fn from_tag(tag: u8) -> Option<FilterKind> {
        FilterKind::ALL
            .into_iter()
            .chain([FilterKind::Global])
            .find(|k| k.tag() == tag)
    }

    /// The kind of filter block a table of a store under this kind gets: `None` for
    /// [`FilterKind::Global`] (the store's one filter covers every table), else the kind.
    pub fn per_table(self) -> FilterKind {
        match self {
            FilterKind::Global => FilterKind::None,
            k => k,
        }
    }

    /// The layout versions a reader accepts for this kind, oldest first; builders write the
    /// last. Blocked-bloom version 2 derives its probes with 32-bit multiplications (one SIMD
    /// instruction for eight probes); cuckoo version 2 derives the alternate bucket with one
    /// multiplication instead of a mixer; version 1 blocks of both are still read.
    pub fn versions(self) -> &'static [u8] {
        match self {
            FilterKind::None | FilterKind::Global => &[],
            FilterKind::Bloom | FilterKind::BinaryFuse => &[1],
            FilterKind::BlockedBloom | FilterKind::Cuckoo => &[1, 2],
        }
    }

    /// The layout version builders write for this kind (0 for `None`, which has no block).
    pub fn version(self) -> u8 {
        self.versions().last().copied().unwrap_or(0)
    }

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            FilterKind::None => "none",
            FilterKind::Bloom => "bloom",
            FilterKind::BlockedBloom => "blocked-bloom",
            FilterKind::Cuckoo => "cuckoo",
            FilterKind::BinaryFuse => "binary-fuse",
            FilterKind::Global => "global",
        }
    }
}

impl fmt::Display for FilterKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FilterKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let all = || FilterKind::ALL.into_iter().chain([FilterKind::Global]);
        all().find(|k| k.name() == s).ok_or_else(|| {
            let valid: Vec<&str> = all().map(|k| k.name()).collect();
            Error::InvalidArgument(format!(
                "unknown filter kind {s:?}; valid kinds: {}",
                valid.join(", ")
            ))
        })
    }
}

/// Checks that a target false-positive rate is usable: strictly between 0 and 1.
pub fn check_fpr(fpr: f64) -> Result<()> {
    if fpr.is_finite() && fpr > 0.0 && fpr < 1.0 {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "false-positive rate {fpr} must be strictly between 0 and 1"
        )))
    }
}
