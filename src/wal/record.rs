//! One WAL record's bytes: encoding a batch, checking a record's header and payload CRCs,
//! decoding its operations.

use crate::codec::{le_u32, put_varint, Cursor};
use crate::codec::{MAX_KEY_LEN, MAX_VALUE_LEN};
use crate::error::{Error, Result};

use super::{MAX_RECORD_LEN, RECORD_HEADER_LEN, WAL_VERSION};

/// Where a record header's fields sit: payload length at 0, then the payload CRC, then the
/// CRC of the bytes before it.
pub(super) const PAYLOAD_CRC_AT: usize = 4;
pub(super) const HEADER_CRC_AT: usize = 8;

/// Op codes (format.md, "Write-ahead log").
const OP_PUT: u8 = 1;
const OP_DELETE: u8 = 2;
const OP_DELETE_RANGE: u8 = 3;
const OP_PUT_EXPIRING: u8 = 4;

/// Bytes of the commit sequence number that starts a version-3 payload.
pub(crate) const SEQ_LEN: usize = 8;

/// The default keyspace's id.
const DEFAULT_KEYSPACE: u64 = 0;

/// Which keyspace ids a replay takes (format.md, "Write-ahead log" and "Keyspaces").
#[derive(Clone, Copy, Debug)]
pub enum KeyspaceIds<'a> {
    /// Without a manifest (the decoders on their own): id 0 only; any other is
    /// [`Error::Unsupported`].
    DefaultOnly,
    /// A store's, as its manifest records them: id 0 is taken; an id below `next_id` that
    /// is not in `live` belongs to a dropped keyspace and its ops are skipped; an id at or
    /// above `next_id` was never allocated (corruption); a live keyspace's ops are taken.
    Store {
        /// The manifest's next keyspace id.
        next_id: u64,
        /// The ids of its live keyspaces.
        live: &'a [u32],
    },
    /// Every id (the store's own records, decoded again in memory).
    Any,
}

impl KeyspaceIds<'_> {
    /// Whether an op of keyspace `id` (read at file offset `at`) is taken (`true`) or
    /// skipped (`false`), or an error naming `at`.
    #[inline]
    fn take(&self, id: u64, at: u64) -> Result<bool> {
        if id == DEFAULT_KEYSPACE {
            return Ok(true);
        }
        match *self {
            KeyspaceIds::Any => Ok(true),
            KeyspaceIds::Store { next_id, .. } if id >= next_id => Err(Error::corrupt(
                at,
                format!(
                    "keyspace id {id} was never allocated (the manifest's next id is {next_id})"
                ),
            )),
            KeyspaceIds::Store { live, .. } => Ok(live.iter().any(|&k| u64::from(k) == id)),
            KeyspaceIds::DefaultOnly => Err(unsupported(
                at,
                format!("keyspace id {id}: this version reads only keyspace 0"),
            )),
        }
    }
}

/// One operation of a write batch, borrowed: what a log record holds and the memtable
/// applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op<'a> {
    /// Store a value under a key.
    Put(&'a [u8], &'a [u8]),
    /// Remove a key.
    Delete(&'a [u8]),
    /// Remove every key `k` with `start <= k < end` (op code 3): one range tombstone.
    DeleteRange(&'a [u8], &'a [u8]),
    /// Store a value under a key until `expires_at` (Unix milliseconds, never 0; op code 4).
    PutExpiring(&'a [u8], &'a [u8], u64),
}

impl<'a> From<(&'a [u8], Option<&'a [u8]>)> for Op<'a> {
    fn from((k, v): (&'a [u8], Option<&'a [u8]>)) -> Op<'a> {
        match v {
            Some(v) => Op::Put(k, v),
            None => Op::Delete(k),
        }
    }
}

impl<'a> From<&'a (&'a [u8], Option<&'a [u8]>)> for Op<'a> {
    fn from(&(k, v): &'a (&'a [u8], Option<&'a [u8]>)) -> Op<'a> {
        Op::from((k, v))
    }
}

impl<'a> From<&'a Op<'a>> for Op<'a> {
    fn from(op: &'a Op<'a>) -> Op<'a> {
        *op
    }
}

impl<'a> Op<'a> {
    /// A put that expires at `expires_at` (Unix milliseconds), a plain put when it is 0.
    pub(crate) fn put(k: &'a [u8], v: &'a [u8], expires_at: u64) -> Op<'a> {
        if expires_at == 0 {
            Op::Put(k, v)
        } else {
            Op::PutExpiring(k, v, expires_at)
        }
    }

    /// Key and value bytes it carries (a range's two keys).
    pub(crate) fn bytes(&self) -> usize {
        match self {
            Op::Put(a, b) | Op::DeleteRange(a, b) | Op::PutExpiring(a, b, _) => a.len() + b.len(),
            Op::Delete(k) => k.len(),
        }
    }

    /// The op as an owned one.
    pub fn into_owned(self) -> OwnedOp {
        match self {
            Op::Put(k, v) => OwnedOp::Put(k.to_vec(), v.to_vec()),
            Op::Delete(k) => OwnedOp::Delete(k.to_vec()),
            Op::DeleteRange(s, e) => OwnedOp::DeleteRange(s.to_vec(), e.to_vec()),
            Op::PutExpiring(k, v, exp) => OwnedOp::PutExpiring(k.to_vec(), v.to_vec(), exp),
        }
    }
}

/// One operation of a write batch, owned ([`Op`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OwnedOp {
    /// Store a value under a key.
    Put(Vec<u8>, Vec<u8>),
    /// Remove a key.
    Delete(Vec<u8>),
    /// Remove every key `k` with `start <= k < end`.
    DeleteRange(Vec<u8>, Vec<u8>),
    /// Store a value under a key until `expires_at` (Unix milliseconds, never 0).
    PutExpiring(Vec<u8>, Vec<u8>, u64),
}

impl OwnedOp {
    /// The op, borrowed.
    pub fn as_op(&self) -> Op<'_> {
        match self {
            OwnedOp::Put(k, v) => Op::Put(k, v),
            OwnedOp::Delete(k) => Op::Delete(k),
            OwnedOp::DeleteRange(s, e) => Op::DeleteRange(s, e),
            OwnedOp::PutExpiring(k, v, exp) => Op::PutExpiring(k, v, *exp),
        }
    }
}

/// `crc32fast::hash` without its CPU feature detection on every call (about 40 instructions,
/// twice per write): a hasher made once, with the detection, is cloned.
fn crc32(bytes: &[u8]) -> u32 {
    static HASHER: std::sync::OnceLock<crc32fast::Hasher> = std::sync::OnceLock::new();
    let mut h = HASHER.get_or_init(crc32fast::Hasher::new).clone();
    h.update(bytes);
    h.finalize()
}

/// Encodes operations as one version-3 WAL record (header included) of commit sequence
/// number `seq` into `out` (cleared first).
#[cfg(test)]
pub(crate) fn encode_record<'a, O: Into<Op<'a>>>(
    out: &mut Vec<u8>,
    seq: u64,
    count: usize,
    ops: impl Iterator<Item = O>,
) -> Result<()> {
    encode_record_in(out, seq, count, ops.map(|op| (0, op.into())))
}

/// [`encode_record`] of operations each in its keyspace (by id).
pub(crate) fn encode_record_in<'a>(
    out: &mut Vec<u8>,
    seq: u64,
    count: usize,
    ops: impl Iterator<Item = (u32, Op<'a>)>,
) -> Result<()> {
    out.clear();
    out.extend_from_slice(&[0u8; RECORD_HEADER_LEN]);
    out.extend_from_slice(&seq.to_le_bytes());
    put_varint(out, count as u64);
    for (id, op) in ops {
        let (code, k, v, exp) = match op {
            Op::Put(k, v) => (OP_PUT, k, Some(v), 0),
            Op::Delete(k) => (OP_DELETE, k, None, 0),
            Op::DeleteRange(s, e) => (OP_DELETE_RANGE, s, Some(e), 0),
            Op::PutExpiring(k, v, exp) => (OP_PUT_EXPIRING, k, Some(v), exp),
        };
        out.push(code);
        put_varint(out, u64::from(id));
        if code == OP_PUT_EXPIRING {
            out.extend_from_slice(&exp.to_le_bytes());
        }
        put_varint(out, k.len() as u64);
        out.extend_from_slice(k);
        if let Some(v) = v {
            put_varint(out, v.len() as u64);
            out.extend_from_slice(v);
        }
    }
    let len = out.len() - RECORD_HEADER_LEN;
    if len > MAX_RECORD_LEN {
        return Err(Error::TooLarge {
            what: "write batch",
            len,
            max: MAX_RECORD_LEN,
        });
    }
    out[..PAYLOAD_CRC_AT].copy_from_slice(&(len as u32).to_le_bytes());
    seal(out);
    Ok(())
}

/// Writes the payload CRC and the header CRC of the record at the start of `record`, whose
/// length field is set.
fn seal(record: &mut [u8]) {
    let len = le_u32(record, 0) as usize;
    let crc = crc32(&record[RECORD_HEADER_LEN..RECORD_HEADER_LEN + len]);
    record[PAYLOAD_CRC_AT..HEADER_CRC_AT].copy_from_slice(&crc.to_le_bytes());
    let header_crc = crc32(&record[..HEADER_CRC_AT]);
    record[HEADER_CRC_AT..RECORD_HEADER_LEN].copy_from_slice(&header_crc.to_le_bytes());
}

/// Gives the records of `records` (made by [`encode_record`], one after another) the
/// sequence numbers `first`, `first + 1`, …, their CRCs made again; returns the last one
/// given (`first - 1` when there is no record). The group commit stamps the records of
/// writers that encoded theirs before their turn came (`store/commit.rs`).
pub(crate) fn stamp_seqs(records: &mut [u8], first: u64) -> u64 {
    let mut seq = first;
    let mut at = 0;
    while let Some(r) = records.get_mut(at..) {
        if r.len() < RECORD_HEADER_LEN + SEQ_LEN {
            break;
        }
        let len = le_u32(r, 0) as usize;
        r[RECORD_HEADER_LEN..RECORD_HEADER_LEN + SEQ_LEN].copy_from_slice(&seq.to_le_bytes());
        seal(r);
        at += RECORD_HEADER_LEN + len;
        seq += 1;
    }
    seq.wrapping_sub(1)
}

/// The exact payload length [`encode_record`] gives `ops` (checked against
/// [`MAX_RECORD_LEN`] before a write is queued, so that encoding it cannot fail later).
pub(crate) fn payload_len<'a>(ops: impl Iterator<Item = (u32, Op<'a>)>) -> usize {
    let varint_len = |v: usize| (usize::BITS - (v | 1).leading_zeros()).div_ceil(7) as usize;
    let mut count = 0;
    let mut len = 0;
    for (id, op) in ops {
        len += varint_len(id as usize) - 1; // beyond the one byte counted below
        let (k, v) = match op {
            Op::Put(k, v) | Op::DeleteRange(k, v) => (k, Some(v)),
            Op::PutExpiring(k, v, _) => {
                len += 8; // its expiry
                (k, Some(v))
            }
            Op::Delete(k) => (k, None),
        };
        count += 1;
        // Tag, keyspace id (one byte: 0), key length, key.
        len += 2 + varint_len(k.len()) + k.len();
        if let Some(v) = v {
            len += varint_len(v.len()) + v.len();
        }
    }
    SEQ_LEN + varint_len(count) + len
}

/// Decodes the operations of a payload of log version `version` (2 or 3), calling `f` with
/// each, borrowed from `payload` (`base`: the payload's file offset, for errors). Returns
/// the record's commit sequence number (`None` in version 2, which has none). An error,
/// naming the offset, when it does not decode: an op code outside 1..=4, a range whose
/// start is not below its end, an expiring put at time 0, or bytes left over are
/// corruption; a keyspace id is judged by `ids` (an op of a dropped keyspace is decoded and
/// not passed to `f`). `f` may have been called for the ops before the error.
pub(super) fn decode_ops<'a>(
    payload: &'a [u8],
    base: u64,
    version: u8,
    ids: KeyspaceIds,
    mut f: impl FnMut(u32, Op<'a>),
) -> Result<Option<u64>> {
    let mut c = Cursor::new(payload, base);
    let seq = if version >= 3 {
        Some(c.u64("sequence number")?)
    } else {
        None
    };
    let count = c.len(payload.len(), "batch count")?;
    for _ in 0..count {
        let at = c.offset();
        let op = c.u8("op tag")?;
        let known = match version {
            2 => matches!(op, OP_PUT | OP_DELETE),
            _ => (OP_PUT..=OP_PUT_EXPIRING).contains(&op),
        };
        if !known {
            return Err(Error::corrupt(at, format!("unknown WAL op tag {op}")));
        }
        let mut take = true;
        let mut id = 0;
        if version >= 3 {
            let ks_at = c.offset();
            let keyspace = c.varint("keyspace id")?;
            take = ids.take(keyspace, ks_at)?;
            // Taken ids are below the manifest's next id, a u32 (or any, in memory).
            id = u32::try_from(keyspace).unwrap_or(u32::MAX);
        }
        let mut f = |op: Op<'a>| {
            if take {
                f(id, op)
            }
        };
        let mut exp = 0;
        if op == OP_PUT_EXPIRING {
            let exp_at = c.offset();
            exp = c.u64("expires_at")?;
            if exp == 0 {
                return Err(Error::corrupt(exp_at, "put with expiry at time 0"));
            }
        }
        let klen = c.len(MAX_KEY_LEN, "key length")?;
        let key = c.bytes(klen, "key")?;
        if op == OP_PUT || op == OP_PUT_EXPIRING {
            let vlen = c.len(MAX_VALUE_LEN, "value length")?;
            let value = c.bytes(vlen, "value")?;
            f(if op == OP_PUT {
                Op::Put(key, value)
            } else {
                Op::PutExpiring(key, value, exp)
            });
        } else if op == OP_DELETE_RANGE {
            let elen = c.len(crate::tombstone::file::MAX_END_LEN, "range end length")?;
            let end = c.bytes(elen, "range end")?;
            if key >= end {
                return Err(Error::corrupt(
                    at,
                    "delete-range whose start is not below its end",
                ));
            }
            f(Op::DeleteRange(key, end));
        } else {
            f(Op::Delete(key));
        }
    }
    if !c.is_empty() {
        return Err(c.err("trailing bytes in WAL record"));
    }
    Ok(seq)
}

/// An [`Error::Unsupported`] at `offset` of a buffer whose file is not known yet.
fn unsupported(offset: u64, reason: String) -> Error {
    Error::Unsupported {
        file: std::path::PathBuf::new(),
        offset,
        reason: format!("{reason} (written by a newer version of filterstore?)"),
    }
}

/// Calls `f` with each operation of a record made by [`encode_record`] (header included),
/// borrowing the keys and values from it. An error (and no call after it) when the record
/// does not decode.
pub(crate) fn for_each_op<'a>(record: &'a [u8], mut f: impl FnMut(Op<'a>)) -> Result<()> {
    for_each_op_in(record, |_, op| f(op))
}

/// [`for_each_op`], with each op's keyspace id (any id is taken).
pub(crate) fn for_each_op_in<'a>(record: &'a [u8], f: impl FnMut(u32, Op<'a>)) -> Result<()> {
    let payload = record.get(RECORD_HEADER_LEN..).unwrap_or_default();
    let ids = KeyspaceIds::Any;
    decode_ops(payload, RECORD_HEADER_LEN as u64, WAL_VERSION, ids, f).map(|_| ())
}

/// Decodes a checked record's payload of log version `version` (`base`: its file offset),
/// calling `apply` for each operation once the whole payload decoded; returns its sequence
/// number (`None` before version 3).
pub(super) fn decode_batch(
    payload: &[u8],
    base: u64,
    version: u8,
    ids: KeyspaceIds,
    apply: &mut impl FnMut(u32, OwnedOp),
) -> Result<Option<u64>> {
    let mut ops = Vec::new();
    let seq = decode_ops(payload, base, version, ids, |id, op| {
        ops.push((id, op.into_owned()))
    })?;
    // Applied only once the whole record decoded: a batch is all or nothing.
    for (id, op) in ops {
        apply(id, op);
    }
    Ok(seq)
}

/// What the record at an offset is.
pub(super) enum Check<'a> {
    /// Header and payload CRCs hold: the payload.
    Valid(&'a [u8]),
    /// The record fails a check. `resume` is where a valid record may next start: right after
    /// the damaged record when its header holds (the header CRC vouches for the length, and
    /// the payload, user data that may hold anything, is skipped), else the next byte.
    Damaged { reason: &'static str, resume: usize },
}

/// A record header's fields: payload length and payload CRC, when its own CRC holds.
pub(super) fn header(h: &[u8; RECORD_HEADER_LEN]) -> Option<(usize, u32)> {
    let stored = le_u32(h, HEADER_CRC_AT);
    (crc32fast::hash(&h[..HEADER_CRC_AT]) == stored)
        .then(|| (le_u32(h, 0) as usize, le_u32(h, PAYLOAD_CRC_AT)))
}

/// A payload length a writer can produce: every batch encodes at least its count.
pub(super) fn plausible_len(len: usize) -> bool {
    (1..=MAX_RECORD_LEN).contains(&len)
}

pub(super) fn check_record(bytes: &[u8], pos: usize) -> Check<'_> {
    let end_of_file = bytes.len();
    let Some(h) = bytes
        .get(pos..)
        .and_then(|r| r.first_chunk::<RECORD_HEADER_LEN>())
    else {
        return Check::Damaged {
            reason: "record header cut short by the end of the log",
            resume: end_of_file,
        };
    };
    let next_byte = pos + 1;
    let Some((len, crc)) = header(h) else {
        return Check::Damaged {
            reason: "record header CRC mismatch",
            resume: next_byte,
        };
    };
    if !plausible_len(len) {
        return Check::Damaged {
            reason: "record length out of range",
            resume: next_byte,
        };
    }
    let start = pos + RECORD_HEADER_LEN;
    let Some(payload) = bytes.get(start..start + len) else {
        // Header persisted, payload not (all of it): nothing can follow the record's end.
        return Check::Damaged {
            reason: "record cut short by the end of the log",
            resume: end_of_file,
        };
    };
    if crc32fast::hash(payload) != crc {
        return Check::Damaged {
            reason: "record payload CRC mismatch",
            resume: start + len,
        };
    }
    Check::Valid(payload)
}

/// Whether a valid record starts at `at`: header CRC, plausible length, the record inside the
/// file, payload CRC. The test the scan after a damaged record applies at each offset.
#[cfg(any(test, feature = "internals"))]
pub fn record_at(bytes: &[u8], at: usize) -> bool {
    matches!(check_record(bytes, at), Check::Valid(_))
}
