//! Reading a log back: replay at recovery (a torn tail dropped, anything else refused) and
//! salvage for `store repair` (every valid record kept, damage skipped).

use std::path::Path;

use crate::error::{Error, Result};

use super::record::{check_record, decode_batch, Check, KeyspaceIds, OwnedOp};
use super::resync::next_record;
use super::{
    RECORD_HEADER_LEN, RESERVED_AT, VERSION_AT, WAL_HEADER_LEN, WAL_MAGIC, WAL_VERSION,
    WAL_VERSION_2,
};

/// What replaying a WAL found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayEnd {
    /// Records applied.
    pub records: u64,
    /// Length of the intact prefix: every byte before it was applied or is the file header.
    pub valid_len: u64,
    /// The torn tail dropped after the intact prefix, if any. `None` when the log ends at a
    /// record boundary (an empty file included).
    pub torn_tail: Option<TornTail>,
    /// The log's format version (2 or 3; 0 when its header was empty or torn).
    pub version: u8,
    /// The largest commit sequence number among the records applied (version 3; `None`
    /// before version 3, whose records carry none, and when no record was applied).
    pub last_seq: Option<u64>,
}

/// A torn tail: the damaged end of a log, with no valid record after the damage, dropped at
/// replay. Whatever it held was never durable (a record is acknowledged under
/// `SyncPolicy::EveryWrite` only once it and everything before it are synced).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TornTail {
    /// File offset of the first byte dropped (the damaged record's start; equals
    /// [`ReplayEnd::valid_len`]).
    pub offset: u64,
    /// Bytes dropped: from `offset` to the end of the file.
    pub len: u64,
    /// What was wrong with the record at `offset`.
    pub reason: &'static str,
}

/// Decodes the WAL `bytes` (the whole file), calling `apply` for each operation in order.
/// Offsets in errors are file offsets; the caller adds the file name.
///
/// Zero bytes from a record boundary to the end of the file are space the writer reserved
/// ahead of its records (see [`WalWriter`](super::WalWriter)): the log ends there, and
/// nothing is torn.
///
/// A record that fails its checks ends the log: if no valid record (see
/// [`record_at`](super::record_at)) starts anywhere after the damage, the damage is a torn
/// tail, reported in [`ReplayEnd::torn_tail`]; if one does, the damage is mid-log corruption
/// and an error names the damaged record's offset (and the valid one's). Operations of the
/// records before the damage have been passed to `apply` either way.
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
pub fn replay_bytes(
    bytes: &[u8],
    mut apply: impl FnMut(Vec<u8>, Option<Vec<u8>>),
) -> Result<ReplayEnd> {
    replay_ops(bytes, |op| match op {
        OwnedOp::Put(k, v) | OwnedOp::PutExpiring(k, v, _) => apply(k, Some(v)),
        OwnedOp::Delete(k) => apply(k, None),
        // Not a key and a value: only [`replay_ops`] passes range deletions on.
        OwnedOp::DeleteRange(..) => {}
    })
}

/// [`replay_bytes`], every operation passed on whole, range deletions and expiring puts
/// (with their `expires_at`) included.
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
pub fn replay_ops(bytes: &[u8], apply: impl FnMut(OwnedOp)) -> Result<ReplayEnd> {
    replay_ops_in(bytes, KeyspaceIds::DefaultOnly, apply)
}

/// [`replay_ops`] of a store's log, its keyspace ids judged by `ids` (the manifest's): the
/// ops of dropped keyspaces are skipped, an id never allocated is corruption.
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
pub fn replay_ops_in(
    bytes: &[u8],
    ids: KeyspaceIds,
    mut apply: impl FnMut(OwnedOp),
) -> Result<ReplayEnd> {
    replay_ops_by(bytes, ids, |_, op| apply(op))
}

/// [`replay_ops_in`], each op passed with its keyspace id.
pub fn replay_ops_by(
    bytes: &[u8],
    ids: KeyspaceIds,
    mut apply: impl FnMut(u32, OwnedOp),
) -> Result<ReplayEnd> {
    let file_len = bytes.len() as u64;
    let torn = |offset: u64, records, reason, version, last_seq| ReplayEnd {
        records,
        valid_len: offset,
        torn_tail: Some(TornTail {
            offset,
            len: file_len - offset,
            reason,
        }),
        version,
        last_seq,
    };
    if bytes.is_empty() {
        // Created, then a crash before its header reached the disk: nothing to drop.
        return Ok(ReplayEnd {
            records: 0,
            valid_len: 0,
            torn_tail: None,
            version: 0,
            last_seq: None,
        });
    }
    let Some((head, _)) = bytes.split_first_chunk::<WAL_HEADER_LEN>() else {
        // A record needs more bytes than that: nothing can be lost with them.
        return Ok(torn(0, 0, "log header cut short", 0, None));
    };
    if head[..VERSION_AT] != WAL_MAGIC {
        // A header that never reached the disk (the log is created unsynced) reads as zeros
        // or garbage; it is a torn log, unless a record follows.
        return match next_record(bytes, 1, bytes.len()) {
            None => Ok(torn(0, 0, "bad log header magic", 0, None)),
            Some(next) => Err(Error::corrupt(
                0,
                format!("bad WAL magic (a valid record follows at offset {next})"),
            )),
        };
    }
    let version = head[VERSION_AT];
    if version != WAL_VERSION && version != WAL_VERSION_2 {
        // A real header of another version: its records must not be dropped unread.
        return Err(Error::corrupt(
            VERSION_AT as u64,
            format!("unsupported WAL version {}", head[VERSION_AT]),
        ));
    }
    if head[RESERVED_AT..].iter().any(|&b| b != 0) {
        // A real header (magic and version hold) with a flipped reserved bit.
        return Err(Error::corrupt(
            RESERVED_AT as u64,
            "WAL header reserved bytes are not zero",
        ));
    }
    let mut pos = WAL_HEADER_LEN;
    let mut records = 0u64;
    let mut last_seq: Option<u64> = None;
    while pos < bytes.len() {
        let (reason, resume) = match check_record(bytes, pos) {
            Check::Valid(payload) => {
                let base = (pos + RECORD_HEADER_LEN) as u64;
                let seq = decode_batch(payload, base, version, ids, &mut apply)?;
                last_seq = last_seq.max(seq);
                records += 1;
                pos += RECORD_HEADER_LEN + payload.len();
                continue;
            }
            Check::Damaged { reason, resume } => (reason, resume),
        };
        if bytes.get(pos..).is_some_and(reserved_tail) {
            break;
        }
        return match next_record(bytes, resume, bytes.len()) {
            None => Ok(torn(pos as u64, records, reason, version, last_seq)),
            Some(next) => Err(Error::corrupt(
                pos as u64,
                format!("WAL {reason} before the end of the log (a valid record follows at offset {next})"),
            )),
        };
    }
    Ok(ReplayEnd {
        records,
        valid_len: pos as u64,
        torn_tail: None,
        version,
        last_seq,
    })
}

/// What [`salvage_bytes`] kept and dropped of one log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Salvage {
    /// Records kept (each passed to the callback).
    pub records: u64,
    /// Byte ranges dropped, in file order.
    pub dropped: Vec<DroppedRange>,
}

impl Salvage {
    /// True when the only damage is a torn tail (or none): opening replays this log as it is.
    pub fn opens_as_is(&self) -> bool {
        self.dropped.len() <= 1
            && self
                .dropped
                .first()
                .is_none_or(|d| d.offset >= WAL_HEADER_LEN as u64 && d.torn_tail)
    }
}

/// Bytes of a log that [`salvage_bytes`] could not use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedRange {
    /// File offset of the first byte dropped.
    pub offset: u64,
    /// Bytes dropped.
    pub len: u64,
    /// What was wrong there.
    pub reason: String,
    /// True when no valid record follows (the range runs to the end of the file).
    pub torn_tail: bool,
}

/// Salvages what a damaged log still holds (`store repair`): every record that passes its
/// checks and decodes, before and after any damage, passed to `batch` in file order with its
/// commit sequence number (`None` in a version-2 log). Under a damaged file header each
/// record is decoded as version 3, else as version 2. Unlike
/// [`replay_bytes`], damage followed by a valid record is skipped (and reported in
/// [`Salvage::dropped`]) instead of refused, and so is a bad file header or a record whose
/// CRCs hold but whose payload does not decode. Never fails.
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
pub fn salvage_bytes(bytes: &[u8], mut batch: impl FnMut(Option<u64>, Vec<OwnedOp>)) -> Salvage {
    salvage_bytes_by(bytes, KeyspaceIds::DefaultOnly, |seq, ops| {
        batch(seq, ops.into_iter().map(|(_, op)| op).collect())
    })
}

/// [`salvage_bytes`] of a store's log, each op passed with its keyspace id, the ids judged
/// by `ids` (a record naming an id `ids` refuses is dropped as undecodable; an op of a
/// keyspace it skips is left out).
pub fn salvage_bytes_by(
    bytes: &[u8],
    ids: KeyspaceIds,
    mut batch: impl FnMut(Option<u64>, Vec<(u32, OwnedOp)>),
) -> Salvage {
    let n = bytes.len();
    let mut out = Salvage::default();
    let drop_range = |out: &mut Salvage, from: usize, to: usize, reason: String| {
        out.dropped.push(DroppedRange {
            offset: from as u64,
            len: (to - from) as u64,
            reason,
            torn_tail: to == n,
        });
    };
    let head_version = bytes.get(..WAL_HEADER_LEN).and_then(|h| {
        (h[..VERSION_AT] == WAL_MAGIC
            && (h[VERSION_AT] == WAL_VERSION || h[VERSION_AT] == WAL_VERSION_2)
            && h[RESERVED_AT..].iter().all(|&b| b == 0))
        .then_some(h[VERSION_AT])
    });
    let head_ok = head_version.is_some();
    let pos0 = WAL_HEADER_LEN.min(n);
    if !head_ok && n > 0 {
        // The records after it are still checked one by one below.
        drop_range(&mut out, 0, pos0, "bad WAL file header".to_string());
    }
    let mut pos = pos0;
    while pos < n {
        match check_record(bytes, pos) {
            Check::Valid(payload) => {
                let end = pos + RECORD_HEADER_LEN + payload.len();
                let base = (pos + RECORD_HEADER_LEN) as u64;
                let decode = |version| {
                    let mut ops = Vec::new();
                    decode_batch(payload, base, version, ids, &mut |id, op| {
                        ops.push((id, op))
                    })
                    .map(|seq| (seq, ops))
                };
                let decoded = match head_version {
                    Some(v) => decode(v),
                    None => decode(WAL_VERSION).or_else(|e| decode(WAL_VERSION_2).map_err(|_| e)),
                };
                match decoded {
                    Ok((seq, ops)) => {
                        out.records += 1;
                        batch(seq, ops);
                    }
                    Err(e) => drop_range(&mut out, pos, end, reason_of(&e)),
                }
                pos = end;
            }
            Check::Damaged { .. } if bytes.get(pos..).is_some_and(reserved_tail) => break,
            Check::Damaged { reason, resume } => {
                let next = next_record(bytes, resume.min(n), n).unwrap_or(n);
                drop_range(&mut out, pos, next, reason.to_string());
                pos = next;
            }
        }
    }
    out
}

/// True when `rest`, what follows the last record, is all zeros: space reserved ahead of
/// the records, the log's end (zeros never pass for a record: format.md, "Write-ahead log").
fn reserved_tail(rest: &[u8]) -> bool {
    rest.iter().all(|&b| b == 0)
}

/// The reason of a corruption error, or the error's text.
fn reason_of(e: &Error) -> String {
    match e {
        Error::Corruption { reason, .. } => reason.clone(),
        other => other.to_string(),
    }
}

/// Reads and replays the WAL file at `path` (range deletions and expiry times are not
/// passed on: see
/// [`replay_file_ops`]).
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
pub fn replay_file(path: &Path, apply: impl FnMut(Vec<u8>, Option<Vec<u8>>)) -> Result<ReplayEnd> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    replay_bytes(&bytes, apply).map_err(|e| e.in_file(path, 0))
}

/// Reads and replays the WAL file at `path`, every operation passed on whole.
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
pub fn replay_file_ops(path: &Path, apply: impl FnMut(OwnedOp)) -> Result<ReplayEnd> {
    replay_file_ops_in(path, KeyspaceIds::DefaultOnly, apply)
}

/// [`replay_file_ops`] of a store's log, its keyspace ids judged by `ids` (see
/// [`replay_ops_in`]).
pub fn replay_file_ops_in(
    path: &Path,
    ids: KeyspaceIds,
    mut apply: impl FnMut(OwnedOp),
) -> Result<ReplayEnd> {
    replay_file_ops_by(path, ids, |_, op| apply(op))
}

/// [`replay_file_ops_in`], each op passed with its keyspace id.
pub fn replay_file_ops_by(
    path: &Path,
    ids: KeyspaceIds,
    apply: impl FnMut(u32, OwnedOp),
) -> Result<ReplayEnd> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    replay_ops_by(&bytes, ids, apply).map_err(|e| e.in_file(path, 0))
}
