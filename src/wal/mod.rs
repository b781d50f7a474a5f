//! Write-ahead log: one file per memtable, `NNNNNN.wal`.
//!
//! ```text
//! | "FSWL" | version u8 = 3 | 0 0 0 |  record  |  record  | ... |
//! record: | payload_len u32 | crc32(payload) u32 | crc32(previous 8 bytes) u32 | payload |
//! payload (a write batch): | seq u64 | count varint | op |*count
//! op: | 1 | keyspace varint | key_len varint | key | value_len varint | value |   (put)
//!     | 2 | keyspace varint | key_len varint | key |                              (delete)
//!     | 3 | keyspace varint | start_len varint | start | end_len varint | end |  (delete-range)
//!     | 4 | …  put with expiry: reserved, refused as unsupported
//! ```
//! `seq` is the batch's commit sequence number; keyspace 0 is the only one written; a
//! store's replay skips the ops of dropped keyspaces and refuses ids never allocated
//! ([`KeyspaceIds`]). Version 2 logs (no `seq`, no keyspace) still replay: their records get sequence numbers in replay
//! order (`store/open.rs`).
//! Recovery replays records in order. The first record that fails its checks ends the log;
//! the rest of the file is then scanned for a valid record (header CRC, plausible length,
//! payload CRC). None follows: the damage is a torn tail, dropped and reported in
//! [`ReplayEnd::torn_tail`]. One follows: mid-log corruption, an error naming the file and the
//! damaged record's offset. Zeros from a record boundary to the end are space the writer
//! reserved ahead of its records: the log's end, not a torn tail. `format.md` ("Write-ahead
//! log") has the rules and why garbage cannot pass for a record.
//!
//! The files by job: `record` is one record's bytes (encode, check, decode), `resync` finds
//! the next valid record after damage, `writer` appends records, `replay` reads a log back
//! (recovery) or salvages what a damaged one holds (`store repair`).

mod record;
mod replay;
mod resync;
mod writer;

#[cfg(any(test, feature = "internals"))]
pub use record::record_at;
pub(crate) use record::{encode_record_in, for_each_op, for_each_op_in, payload_len, stamp_seqs};
pub use record::{KeyspaceIds, Op, OwnedOp};
// The reader's whole API is public with `internals` (tests, fuzz targets); the engine uses
// part of it.
#[cfg_attr(not(feature = "internals"), allow(unused_imports))]
pub use replay::{
    replay_bytes, replay_file, replay_file_ops, replay_file_ops_by, replay_file_ops_in, replay_ops,
    replay_ops_by, replay_ops_in, salvage_bytes, salvage_bytes_by, DroppedRange, ReplayEnd,
    Salvage, TornTail,
};
#[cfg_attr(not(feature = "internals"), allow(unused_imports))]
pub use writer::{WalWriter, WAL_BUFFER};

/// Magic at the start of every WAL file.
pub const WAL_MAGIC: [u8; 4] = *b"FSWL";
/// WAL format version written (format.md, "Write-ahead log": a commit sequence number per
/// record, a keyspace id per operation, op codes reserved for range deletion and expiry).
pub const WAL_VERSION: u8 = 3;
/// The previous version, still replayed: no sequence number, no keyspace ids.
pub const WAL_VERSION_2: u8 = 2;
/// Size of a record header (length, payload CRC, header CRC).
pub const RECORD_HEADER_LEN: usize = 12;
/// Size of the file header.
pub const WAL_HEADER_LEN: usize = 8;
/// Largest record payload accepted.
pub const MAX_RECORD_LEN: usize = 1 << 30;

/// Where the file header's fields sit: magic at 0, then the version byte, then reserved
/// zero bytes up to [`WAL_HEADER_LEN`].
const VERSION_AT: usize = 4;
const RESERVED_AT: usize = 5;

/// An atomic group of writes: all of them are applied, or (after a crash) none.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// let store = filterstore::Store::open(dir.path(), Default::default())?;
/// store.put(b"from", b"100")?;
/// let mut batch = filterstore::WriteBatch::new();
/// batch.put(b"to".to_vec(), b"100".to_vec()).delete(b"from".to_vec());
/// store.write(batch)?;
/// assert_eq!(store.get(b"from")?, None);
/// assert_eq!(store.get(b"to")?.unwrap(), b"100");
/// # Ok::<(), filterstore::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteBatch {
    /// The ops; until the batch is written, an [`OwnedOp::PutExpiring`]'s third field is
    /// its time to live in milliseconds (`Store::write_opt` makes it an `expires_at`).
    pub(crate) ops: Vec<OwnedOp>,
    /// The keyspace of each op given one (`WriteBatch::put_in`, `store/keyspace.rs`), with
    /// its store's identity; shorter than `ops` when the last ops were given none.
    pub(crate) ids: Vec<Option<(u32, usize)>>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds a put.
    pub fn put(&mut self, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> &mut Self {
        self.ops.push(OwnedOp::Put(key.into(), value.into()));
        self
    }
    /// Adds a put that expires `ttl` after the batch is written (at least a millisecond;
    /// see `docs/engine.md`, "Expiry").
    pub fn put_with_ttl(
        &mut self,
        key: impl Into<Vec<u8>>,
        value: impl Into<Vec<u8>>,
        ttl: std::time::Duration,
    ) -> &mut Self {
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        self.ops
            .push(OwnedOp::PutExpiring(key.into(), value.into(), ms));
        self
    }
    /// Adds a delete.
    pub fn delete(&mut self, key: impl Into<Vec<u8>>) -> &mut Self {
        self.ops.push(OwnedOp::Delete(key.into()));
        self
    }
    /// Adds the removal of every key `k` with `start <= k < end` (one range tombstone; a
    /// range with `start >= end` removes nothing and adds nothing).
    pub fn delete_range(
        &mut self,
        start: impl Into<Vec<u8>>,
        end: impl Into<Vec<u8>>,
    ) -> &mut Self {
        let (start, end) = (start.into(), end.into());
        if start < end {
            self.ops.push(OwnedOp::DeleteRange(start, end));
        }
        self
    }
    /// Adds the removal of every key that starts with `prefix` (one range tombstone).
    pub fn delete_prefix(&mut self, prefix: impl Into<Vec<u8>>) -> &mut Self {
        let prefix = prefix.into();
        let end =
            crate::tombstone::prefix_end(&prefix).unwrap_or_else(crate::tombstone::key_space_end);
        self.delete_range(prefix, end)
    }
    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }
    /// True when the batch holds nothing.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

#[cfg(test)]
mod tests;
