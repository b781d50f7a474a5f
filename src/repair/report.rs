//! What [`repair`](super::repair) reports: what it kept, what it could not use, what it
//! moved into `lost/`.

use std::fmt;
use std::path::PathBuf;

use crate::filter::FilterKind;
use crate::verify::VerifyReport;

/// What [`repair`](super::repair) did.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct RepairReport {
    /// False when the store needed no repair (nothing was written or moved).
    pub needed: bool,
    /// What was kept or rebuilt, in the order it was done.
    pub kept: Vec<Kept>,
    /// What could not be used, with file and offset.
    pub dropped: Vec<Dropped>,
    /// Files renamed into `lost/`: (from, to).
    pub moved: Vec<(PathBuf, PathBuf)>,
    /// The full checksum pass over the repaired store (over the intact one when nothing was
    /// needed).
    pub verify: VerifyReport,
}

impl RepairReport {
    /// True when repair found damage and kept nothing: no table, no log record.
    pub fn saved_nothing(&self) -> bool {
        self.needed
            && !self.kept.iter().any(|k| match k {
                Kept::Table { entries, .. } => *entries > 0,
                Kept::Log { records, .. } => *records > 0,
                Kept::Filter { .. } => false,
            })
    }
}

/// Something [`repair`](super::repair) kept.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kept {
    /// A table, as it was or (`from` set) rewritten from the blocks of a damaged one.
    Table {
        /// The table file now named by the manifest.
        file: PathBuf,
        /// Its level.
        level: u32,
        /// Its entries.
        entries: u64,
        /// The damaged table it was rewritten from, if it was.
        from: Option<PathBuf>,
    },
    /// A table's filter, as it was or (`rebuilt`) built anew from the table's keys.
    Filter {
        /// The filter file.
        file: PathBuf,
        /// Its kind.
        kind: FilterKind,
        /// True when it was built by repair.
        rebuilt: bool,
    },
    /// Log records: a log kept as it was, or (`from` non-empty) a new log holding every
    /// record that checked out in `from`, in order.
    Log {
        /// The log file.
        file: PathBuf,
        /// Records it holds.
        records: u64,
        /// The damaged logs salvaged into it, oldest first.
        from: Vec<PathBuf>,
    },
}

/// Something [`repair`](super::repair) could not use.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Dropped {
    /// The file.
    pub file: PathBuf,
    /// Offset of the first byte not used.
    pub offset: u64,
    /// Bytes not used, when known (`None`: from `offset` on, or the whole file).
    pub len: Option<u64>,
    /// What was wrong (for a data block, also the keys it may have held).
    pub reason: String,
    /// For a dropped data block: the keys it may have held.
    pub keys_between: Option<KeyGap>,
}

/// The keys strictly between two bounds: the last good key before a dropped block and the
/// first good key after it (`None`: no bound on that side).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeyGap {
    /// The lower bound (exclusive).
    pub after: Option<Vec<u8>>,
    /// The upper bound (exclusive).
    pub before: Option<Vec<u8>>,
}

impl KeyGap {
    /// Whether `key` lies strictly between the bounds.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.after.as_deref().is_none_or(|a| a < key)
            && self.before.as_deref().is_none_or(|b| key < b)
    }
}

impl fmt::Display for Kept {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kept::Table {
                file,
                level,
                entries,
                from,
            } => {
                write!(f, "kept {}: L{level}, {entries} entries", file.display())?;
                if let Some(from) = from {
                    write!(f, " (the good blocks of {})", from.display())?;
                }
                Ok(())
            }
            Kept::Filter {
                file,
                kind,
                rebuilt,
            } => {
                let how = if *rebuilt { "rebuilt" } else { "kept" };
                write!(f, "{how} {}: {} filter", file.display(), kind.name())
            }
            Kept::Log {
                file,
                records,
                from,
            } => {
                write!(f, "kept {}: {records} log records", file.display())?;
                if !from.is_empty() {
                    let names: Vec<String> = from.iter().map(|p| p.display().to_string()).collect();
                    write!(f, " (salvaged from {})", names.join(", "))?;
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for Dropped {
    /// `dropped DIR/000004.sst: offset 4096: 4000 bytes: REASON`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dropped {}: offset {}", self.file.display(), self.offset)?;
        if let Some(len) = self.len {
            write!(f, ": {len} bytes")?;
        }
        write!(f, ": {}", self.reason)
    }
}
