//! The library's single error type.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// Every error the library returns.
///
/// `Display` is one short line; the underlying cause (if any) is reachable through
/// [`std::error::Error::source`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O error, with the file it concerned when known.
    #[error("I/O error{}", path_suffix(.path))]
    Io {
        /// The file or directory the operation concerned, if known.
        path: Option<PathBuf>,
        /// The operating-system error.
        #[source]
        source: io::Error,
    },
    /// Bytes on disk are not what the format says they must be.
    #[error("corruption in {}: offset {offset}: {reason}", file.display())]
    Corruption {
        /// The file holding the bad bytes (empty when decoding a bare buffer).
        file: PathBuf,
        /// Byte offset of the problem inside `file`.
        offset: u64,
        /// What was wrong.
        reason: String,
        /// For a failed checksum: the value stored on disk and the one computed.
        checksum: Option<ChecksumMismatch>,
    },
    /// Bytes on disk use a feature this build of the library does not include (a data
    /// block compressed with zstd, read by a build without the `zstd` feature). Not
    /// [`Error::Corruption`]: the bytes may be sound, and `repair` leaves such files alone.
    #[error("unsupported in {}: offset {offset}: {reason}", file.display())]
    Unsupported {
        /// The file holding the bytes.
        file: PathBuf,
        /// Byte offset of what is not supported inside `file`.
        offset: u64,
        /// What is not supported, and what would read it.
        reason: String,
    },
    /// Another handle (in this or another process) holds the store's lock.
    #[error("store at {} is locked by another process or handle", .0.display())]
    Locked(PathBuf),
    /// A write (a put, delete, flush, compaction, refilter or checkpoint) through a handle
    /// opened read-only ([`Store::open_read_only`](crate::Store::open_read_only)).
    #[error("store at {} is open read-only", .0.display())]
    ReadOnly(PathBuf),
    /// An argument the caller passed is out of range.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The store has a keyspace created with a compaction filter (its name recorded in the
    /// manifest) that the options it was opened with do not register
    /// ([`Options::register_compaction_filter`](crate::Options::register_compaction_filter)):
    /// a compaction of the keyspace would write what its filter would not, so the store
    /// does not open. Nothing was written.
    #[error(
        "keyspace {keyspace:?} was created with the compaction filter {filter:?}, which is \
         not registered (Options::register_compaction_filter)"
    )]
    CompactionFilterNotRegistered {
        /// The keyspace's name.
        keyspace: String,
        /// The name of its filter.
        filter: String,
    },
    /// A key or value is larger than the format allows.
    #[error("{what} of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// "key" or "value".
        what: &'static str,
        /// The length given.
        len: usize,
        /// The largest length allowed.
        max: usize,
    },
    /// A Parquet file given to import (or being exported) is not what was asked for: not
    /// Parquet, truncated, damaged, or without the wanted binary columns. It is not
    /// [`Error::Corruption`], which is about the store's own files.
    #[error("Parquet file {}: {reason}", file.display())]
    Parquet {
        /// The Parquet file.
        file: PathBuf,
        /// What was wrong.
        reason: String,
    },
    /// Memory the library needed could not be allocated: a structure sized by counts read
    /// from disk (a global filter for the entries its store's tables claim) that is larger
    /// than the allocator can give. Reported instead of aborting the process.
    #[error("cannot allocate {bytes} bytes for {what}")]
    OutOfMemory {
        /// What the memory was for.
        what: String,
        /// The bytes asked for.
        bytes: u64,
    },
    /// Something the library relies on did not hold: a benchmark or experiment whose
    /// variants disagreed, a worker thread that stopped, a thread pool that could not be
    /// built. A bug or an environment failure, reported instead of a panic.
    #[error("internal error: {0}")]
    Internal(String),
    /// A transaction's commit found that a key it read, or a range it scanned, was
    /// written by another commit after its snapshot: nothing of it was written. Taking the
    /// transaction again (a new one, reading anew) may succeed.
    #[error("transaction conflict: what it read was written by another commit since")]
    Conflict,
    /// A transaction stayed open while more than `limit` bytes of keys were written by
    /// other commits (the conflict window, docs/engine.md "Transactions"): its reads can no
    /// longer be checked, so its commit wrote nothing. A new transaction may succeed.
    #[error("transaction too old: more than {limit} bytes of keys were written since it began")]
    TransactionTooOld {
        /// The window's size in bytes.
        limit: u64,
    },
    /// An earlier write, sync or background job (a flush or compaction) failed; the store
    /// refuses writes until it is reopened. Reads keep working, and nothing acknowledged is
    /// lost: what was not yet in a table is still in the logs and comes back at the next
    /// open.
    #[error("store refuses writes after an earlier failure ({cause}); reopen it")]
    Poisoned {
        /// The failure that poisoned the store.
        cause: Arc<Error>,
    },
}

/// The two values of a failed CRC32 check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChecksumMismatch {
    /// The checksum stored on disk.
    pub stored: u32,
    /// The checksum of the bytes as read.
    pub computed: u32,
}

fn path_suffix(p: &Option<PathBuf>) -> String {
    match p {
        Some(p) => format!(" on {}", p.display()),
        None => String::new(),
    }
}

impl From<io::Error> for Error {
    fn from(source: io::Error) -> Self {
        Error::Io { path: None, source }
    }
}

impl Error {
    /// A corruption error at `offset` of a buffer whose file is not known yet.
    pub fn corrupt(offset: u64, reason: impl fmt::Display) -> Self {
        Error::Corruption {
            file: PathBuf::new(),
            offset,
            reason: reason.to_string(),
            checksum: None,
        }
    }

    /// A failed CRC32 check of `what` at `offset` of a buffer whose file is not known yet.
    pub fn checksum(offset: u64, what: &str, stored: u32, computed: u32) -> Self {
        Error::Corruption {
            file: PathBuf::new(),
            offset,
            reason: format!(
                "{what} CRC mismatch: stored {stored:#010x}, computed {computed:#010x}"
            ),
            checksum: Some(ChecksumMismatch { stored, computed }),
        }
    }

    /// Places a corruption found in a buffer into `file`, shifting its offset by `base`
    /// (the buffer's position in the file). Other errors pass through unchanged.
    pub fn in_file(self, file: impl Into<PathBuf>, base: u64) -> Self {
        match self {
            Error::Corruption {
                offset,
                reason,
                checksum,
                ..
            } => Error::Corruption {
                file: file.into(),
                offset: offset + base,
                reason,
                checksum,
            },
            Error::Unsupported { offset, reason, .. } => Error::Unsupported {
                file: file.into(),
                offset: offset + base,
                reason,
            },
            Error::Io { path: None, source } => Error::Io {
                path: Some(file.into()),
                source,
            },
            other => other,
        }
    }

    /// An I/O error about `path`.
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            path: Some(path.into()),
            source,
        }
    }

    /// A copy of this error (an I/O error's cause is copied as its OS error code when it has
    /// one, so `raw_os_error()` still says ENOSPC, else as its kind and message).
    pub(crate) fn duplicate(&self) -> Error {
        match self {
            Error::Io { path, source } => Error::Io {
                path: path.clone(),
                source: match source.raw_os_error() {
                    Some(code) => io::Error::from_raw_os_error(code),
                    None => io::Error::new(source.kind(), source.to_string()),
                },
            },
            Error::Corruption {
                file,
                offset,
                reason,
                checksum,
            } => Error::Corruption {
                file: file.clone(),
                offset: *offset,
                reason: reason.clone(),
                checksum: *checksum,
            },
            Error::Unsupported {
                file,
                offset,
                reason,
            } => Error::Unsupported {
                file: file.clone(),
                offset: *offset,
                reason: reason.clone(),
            },
            Error::Locked(p) => Error::Locked(p.clone()),
            Error::ReadOnly(p) => Error::ReadOnly(p.clone()),
            Error::InvalidArgument(s) => Error::InvalidArgument(s.clone()),
            Error::CompactionFilterNotRegistered { keyspace, filter } => {
                Error::CompactionFilterNotRegistered {
                    keyspace: keyspace.clone(),
                    filter: filter.clone(),
                }
            }
            Error::Internal(s) => Error::Internal(s.clone()),
            Error::OutOfMemory { what, bytes } => Error::OutOfMemory {
                what: what.clone(),
                bytes: *bytes,
            },
            Error::TooLarge { what, len, max } => Error::TooLarge {
                what,
                len: *len,
                max: *max,
            },
            Error::Parquet { file, reason } => Error::Parquet {
                file: file.clone(),
                reason: reason.clone(),
            },
            Error::Conflict => Error::Conflict,
            Error::TransactionTooOld { limit } => Error::TransactionTooOld { limit: *limit },
            Error::Poisoned { cause } => Error::Poisoned {
                cause: cause.clone(),
            },
        }
    }

    /// True for [`Error::Corruption`].
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
