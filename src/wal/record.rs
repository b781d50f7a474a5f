//! One WAL record's bytes: encoding a batch, checking a record's header and payload CRCs,
//! decoding its operations.

use crate::codec::{le_u32, put_varint, Cursor};
use crate::codec::{MAX_KEY_LEN, MAX_VALUE_LEN};
use crate::error::{Error, Result};

use super::{MAX_RECORD_LEN, RECORD_HEADER_LEN};

/// Where a record header's fields sit: payload length at 0, then the payload CRC, then the
/// CRC of the bytes before it.
pub(super) const PAYLOAD_CRC_AT: usize = 4;
pub(super) const HEADER_CRC_AT: usize = 8;

const OP_PUT: u8 = 1;
const OP_DELETE: u8 = 2;

/// `crc32fast::hash` without its CPU feature detection on every call (about 40 instructions,
/// twice per write): a hasher made once, with the detection, is cloned.
fn crc32(bytes: &[u8]) -> u32 {
    static HASHER: std::sync::OnceLock<crc32fast::Hasher> = std::sync::OnceLock::new();
    let mut h = HASHER.get_or_init(crc32fast::Hasher::new).clone();
    h.update(bytes);
    h.finalize()
}

/// Encodes operations as one WAL record (header included) into `out` (cleared first).
pub(crate) fn encode_record<'a>(
    out: &mut Vec<u8>,
    count: usize,
    ops: impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)>,
) -> Result<()> {
    out.clear();
    out.extend_from_slice(&[0u8; RECORD_HEADER_LEN]);
    put_varint(out, count as u64);
    for (k, v) in ops {
        out.push(if v.is_some() { OP_PUT } else { OP_DELETE });
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
    let crc = crc32(&out[RECORD_HEADER_LEN..]);
    out[..PAYLOAD_CRC_AT].copy_from_slice(&(len as u32).to_le_bytes());
    out[PAYLOAD_CRC_AT..HEADER_CRC_AT].copy_from_slice(&crc.to_le_bytes());
    let header_crc = crc32(&out[..HEADER_CRC_AT]);
    out[HEADER_CRC_AT..RECORD_HEADER_LEN].copy_from_slice(&header_crc.to_le_bytes());
    Ok(())
}

/// The exact payload length [`encode_record`] gives `ops` (checked against
/// [`MAX_RECORD_LEN`] before a write is queued, so that encoding it cannot fail later).
pub(crate) fn payload_len<'a>(ops: impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)>) -> usize {
    let varint_len = |v: usize| (usize::BITS - (v | 1).leading_zeros()).div_ceil(7) as usize;
    let mut count = 0;
    let mut len = 0;
    for (k, v) in ops {
        count += 1;
        len += 1 + varint_len(k.len()) + k.len();
        if let Some(v) = v {
            len += varint_len(v.len()) + v.len();
        }
    }
    varint_len(count) + len
}

/// Calls `f` with each operation of a record made by [`encode_record`] (header included),
/// borrowing the keys and values from it. An error (and no call after it) when the record
/// does not decode.
pub(crate) fn for_each_op<'a>(
    record: &'a [u8],
    mut f: impl FnMut(&'a [u8], Option<&'a [u8]>),
) -> Result<()> {
    let payload = record.get(RECORD_HEADER_LEN..).unwrap_or_default();
    let mut c = Cursor::new(payload, RECORD_HEADER_LEN as u64);
    let count = c.len(payload.len(), "batch count")?;
    for _ in 0..count {
        let op = c.u8("op tag")?;
        let klen = c.len(MAX_KEY_LEN, "key length")?;
        let key = c.bytes(klen, "key")?;
        match op {
            OP_PUT => {
                let vlen = c.len(MAX_VALUE_LEN, "value length")?;
                f(key, Some(c.bytes(vlen, "value")?));
            }
            OP_DELETE => f(key, None),
            t => return Err(c.err(format!("unknown WAL op tag {t}"))),
        }
    }
    if !c.is_empty() {
        return Err(c.err("trailing bytes in WAL record"));
    }
    Ok(())
}

/// Decodes a checked record's payload (`base`: its file offset), calling `apply` for each
/// operation once the whole payload decoded.
pub(super) fn decode_batch(
    payload: &[u8],
    base: u64,
    apply: &mut impl FnMut(Vec<u8>, Option<Vec<u8>>),
) -> Result<()> {
    let mut c = Cursor::new(payload, base);
    let count = c.len(payload.len(), "batch count")?;
    let mut ops = Vec::with_capacity(count);
    for _ in 0..count {
        let op = c.u8("op tag")?;
        let klen = c.len(MAX_KEY_LEN, "key length")?;
        let key = c.bytes(klen, "key")?.to_vec();
        match op {
            OP_PUT => {
                let vlen = c.len(MAX_VALUE_LEN, "value length")?;
                ops.push((key, Some(c.bytes(vlen, "value")?.to_vec())));
            }
            OP_DELETE => ops.push((key, None)),
            t => return Err(c.err(format!("unknown WAL op tag {t}"))),
        }
    }
    if !c.is_empty() {
        return Err(c.err("trailing bytes in WAL record"));
    }
    // Applied only once the whole record decoded: a batch is all or nothing.
    for (k, v) in ops {
        apply(k, v);
    }
    Ok(())
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
