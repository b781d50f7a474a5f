//! Write-ahead log: one file per memtable, `NNNNNN.wal`.
//!
//! ```text
//! | "FSWL" | version u8 = 2 | 0 0 0 |  record  |  record  | ... |
//! record: | payload_len u32 | crc32(payload) u32 | crc32(previous 8 bytes) u32 | payload |
//! payload (a write batch): | count varint | op |*count
//! op: | 1 | key_len varint | key | value_len varint | value |   (put)
//!     | 2 | key_len varint | key |                              (delete)
//! ```
//! Recovery replays records in order. The first record that fails its checks ends the log;
//! the rest of the file is then scanned for a valid record (header CRC, plausible length,
//! payload CRC). None follows: the damage is a torn tail, dropped and reported in
//! [`ReplayEnd::torn_tail`]. One follows: mid-log corruption, an error naming the file and the
//! damaged record's offset. `format.md` ("Write-ahead log") has the rules and why garbage
//! cannot pass for a record.

use std::path::{Path, PathBuf};

use crate::codec::{le_u32, put_varint, Cursor};
use crate::error::{Error, Result};
use crate::io::{Fs, WritableFile};
use crate::{MAX_KEY_LEN, MAX_VALUE_LEN};

/// Magic at the start of every WAL file.
pub const WAL_MAGIC: [u8; 4] = *b"FSWL";
/// WAL format version.
pub const WAL_VERSION: u8 = 2;
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
/// Where a record header's fields sit: payload length at 0, then the payload CRC, then the
/// CRC of the bytes before it.
const PAYLOAD_CRC_AT: usize = 4;
const HEADER_CRC_AT: usize = 8;

const OP_PUT: u8 = 1;
const OP_DELETE: u8 = 2;

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
/// assert_eq!(store.get(b"to")?, Some(b"100".to_vec()));
/// # Ok::<(), filterstore::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteBatch {
    pub(crate) ops: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds a put.
    pub fn put(&mut self, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> &mut Self {
        self.ops.push((key.into(), Some(value.into())));
        self
    }
    /// Adds a delete.
    pub fn delete(&mut self, key: impl Into<Vec<u8>>) -> &mut Self {
        self.ops.push((key.into(), None));
        self
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

/// Bytes a buffered WAL holds before handing them to the operating system.
pub const WAL_BUFFER: usize = 1 << 20;

/// Appends records to one WAL file.
pub struct WalWriter {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    /// Bytes appended so far (buffered ones included).
    pub len: u64,
    buf: Vec<u8>,
    buffered: bool,
}

impl WalWriter {
    /// Creates a new WAL file and writes its header. Nothing is fsynced: the header becomes
    /// durable with the first [`WalWriter::sync`], and the caller makes the directory entry
    /// durable before it promises any record is (so a memtable switch costs no fsync on the
    /// write path).
    pub fn create(fs: &dyn Fs, path: &Path) -> Result<WalWriter> {
        let io = |e| Error::io(path, e);
        let mut file = fs.create(path).map_err(io)?;
        let mut head = Vec::with_capacity(WAL_HEADER_LEN);
        head.extend_from_slice(&WAL_MAGIC);
        head.push(WAL_VERSION);
        head.resize(WAL_HEADER_LEN, 0);
        file.write_all(&head).map_err(io)?;
        Ok(WalWriter {
            file,
            path: path.to_path_buf(),
            len: WAL_HEADER_LEN as u64,
            buf: Vec::new(),
            buffered: false,
        })
    }

    /// With `true`, records collect in a [`WAL_BUFFER`] buffer and reach the operating system
    /// when it fills, on [`WalWriter::write_out`] and on [`WalWriter::sync`].
    pub fn set_buffered(&mut self, buffered: bool) {
        self.buffered = buffered;
    }

    /// Appends one encoded record; with `sync` it is durable when this returns.
    pub fn append(&mut self, record: &[u8], sync: bool) -> Result<()> {
        if self.buffered && !sync {
            self.buf.extend_from_slice(record);
            if self.buf.len() >= WAL_BUFFER {
                self.write_out()?;
            }
        } else {
            self.write_out()?;
            self.file
                .write_all(record)
                .map_err(|e| Error::io(&self.path, e))?;
        }
        self.len += record.len() as u64;
        if sync {
            self.sync()?;
        }
        Ok(())
    }

    /// Hands buffered records to the operating system.
    pub fn write_out(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            self.file
                .write_all(&self.buf)
                .map_err(|e| Error::io(&self.path, e))?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Writes out the buffer and fsyncs.
    pub fn sync(&mut self) -> Result<()> {
        self.write_out()?;
        self.file.sync().map_err(|e| Error::io(&self.path, e))
    }
}

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
/// A record that fails its checks ends the log: if no valid record (see [`record_at`]) starts
/// anywhere after the damage, the damage is a torn tail, reported in
/// [`ReplayEnd::torn_tail`]; if one does, the damage is mid-log corruption and an error names
/// the damaged record's offset (and the valid one's). Operations of the records before the
/// damage have been passed to `apply` either way.
pub fn replay_bytes(
    bytes: &[u8],
    mut apply: impl FnMut(Vec<u8>, Option<Vec<u8>>),
) -> Result<ReplayEnd> {
    let file_len = bytes.len() as u64;
    let torn = |offset: u64, records, reason| ReplayEnd {
        records,
        valid_len: offset,
        torn_tail: Some(TornTail {
            offset,
            len: file_len - offset,
            reason,
        }),
    };
    if bytes.is_empty() {
        // Created, then a crash before its header reached the disk: nothing to drop.
        return Ok(ReplayEnd {
            records: 0,
            valid_len: 0,
            torn_tail: None,
        });
    }
    let Some((head, _)) = bytes.split_first_chunk::<WAL_HEADER_LEN>() else {
        // A record needs more bytes than that: nothing can be lost with them.
        return Ok(torn(0, 0, "log header cut short"));
    };
    if head[..VERSION_AT] != WAL_MAGIC {
        // A header that never reached the disk (the log is created unsynced) reads as zeros
        // or garbage; it is a torn log, unless a record follows.
        return match next_record(bytes, 1, bytes.len()) {
            None => Ok(torn(0, 0, "bad log header magic")),
            Some(next) => Err(Error::corrupt(
                0,
                format!("bad WAL magic (a valid record follows at offset {next})"),
            )),
        };
    }
    if head[VERSION_AT] != WAL_VERSION {
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
    while pos < bytes.len() {
        let (reason, resume) = match check_record(bytes, pos) {
            Check::Valid(payload) => {
                decode_batch(payload, (pos + RECORD_HEADER_LEN) as u64, &mut apply)?;
                records += 1;
                pos += RECORD_HEADER_LEN + payload.len();
                continue;
            }
            Check::Damaged { reason, resume } => (reason, resume),
        };
        return match next_record(bytes, resume, bytes.len()) {
            None => Ok(torn(pos as u64, records, reason)),
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
/// checks and decodes, before and after any damage, passed to `batch` in file order. Unlike
/// [`replay_bytes`], damage followed by a valid record is skipped (and reported in
/// [`Salvage::dropped`]) instead of refused, and so is a bad file header or a record whose
/// CRCs hold but whose payload does not decode. Never fails.
pub fn salvage_bytes(
    bytes: &[u8],
    mut batch: impl FnMut(Vec<(Vec<u8>, Option<Vec<u8>>)>),
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
    let head_ok = bytes.get(..WAL_HEADER_LEN).is_some_and(|h| {
        h[..VERSION_AT] == WAL_MAGIC
            && h[VERSION_AT] == WAL_VERSION
            && h[RESERVED_AT..].iter().all(|&b| b == 0)
    });
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
                let mut ops = Vec::new();
                match decode_batch(payload, (pos + RECORD_HEADER_LEN) as u64, &mut |k, v| {
                    ops.push((k, v))
                }) {
                    Ok(()) => {
                        out.records += 1;
                        batch(ops);
                    }
                    Err(e) => drop_range(&mut out, pos, end, reason_of(&e)),
                }
                pos = end;
            }
            Check::Damaged { reason, resume } => {
                let next = next_record(bytes, resume.min(n), n).unwrap_or(n);
                drop_range(&mut out, pos, next, reason.to_string());
                pos = next;
            }
        }
    }
    out
}

/// The reason of a corruption error, or the error's text.
fn reason_of(e: &Error) -> String {
    match e {
        Error::Corruption { reason, .. } => reason.clone(),
        other => other.to_string(),
    }
}

/// What the record at an offset is.
enum Check<'a> {
    /// Header and payload CRCs hold: the payload.
    Valid(&'a [u8]),
    /// The record fails a check. `resume` is where a valid record may next start: right after
    /// the damaged record when its header holds (the header CRC vouches for the length, and
    /// the payload, user data that may hold anything, is skipped), else the next byte.
    Damaged { reason: &'static str, resume: usize },
}

/// A record header's fields: payload length and payload CRC, when its own CRC holds.
fn header(h: &[u8; RECORD_HEADER_LEN]) -> Option<(usize, u32)> {
    let stored = le_u32(h, HEADER_CRC_AT);
    (crc32fast::hash(&h[..HEADER_CRC_AT]) == stored)
        .then(|| (le_u32(h, 0) as usize, le_u32(h, PAYLOAD_CRC_AT)))
}

/// A payload length a writer can produce: every batch encodes at least its count.
fn plausible_len(len: usize) -> bool {
    (1..=MAX_RECORD_LEN).contains(&len)
}

fn check_record(bytes: &[u8], pos: usize) -> Check<'_> {
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

/// The first offset at or after `from` where a valid record starts ([`record_at`]), if any.
///
/// Linear in the bytes scanned, whatever they hold. Each offset costs a length test (one
/// 4-byte read; an offset of random bytes passes it with probability (bytes left) / 2^32,
/// 1 in 4,096 with a MiB left, and zeros never do), then for the survivors an 8-byte header
/// CRC. Payload CRCs are needed only at offsets whose header CRC holds (by chance, 1 in
/// 2^32): they are computed directly, in offset order, while their total stays within
/// `direct_budget` bytes; the candidates from there on (only crafted input has them) are
/// settled together from one pass of running CRCs over the file, each payload's CRC derived
/// from the running CRCs at its two ends in O(log len) (CRC-32 is linear:
/// `crc(a ‖ b) = crc(a)·x^(8|b|) ⊕ crc(b)` modulo its polynomial). Without that, a file of
/// back-to-back valid headers each claiming a long payload would cost quadratic time.
fn next_record(bytes: &[u8], from: usize, direct_budget: usize) -> Option<usize> {
    let n = bytes.len();
    let mut spent = 0usize;
    let mut deferred: Vec<(usize, u32, u32)> = Vec::new();
    for (i, w) in bytes.get(from..)?.windows(RECORD_HEADER_LEN).enumerate() {
        let at = from + i;
        let Some(h) = w.first_chunk::<RECORD_HEADER_LEN>() else {
            continue;
        };
        let len = le_u32(h, 0) as usize;
        if !plausible_len(len) || len > n - at - RECORD_HEADER_LEN {
            continue;
        }
        let Some((_, crc)) = header(h) else {
            continue;
        };
        let start = at + RECORD_HEADER_LEN;
        if deferred.is_empty() && spent + len <= direct_budget {
            spent += len;
            if bytes
                .get(start..start + len)
                .is_some_and(|p| crc32fast::hash(p) == crc)
            {
                return Some(at);
            }
        } else {
            deferred.push((at, len as u32, crc));
        }
    }
    settle(bytes, &deferred)
}

/// The first of `candidates` (record offset, payload length, payload CRC; in offset order)
/// whose payload CRC holds, computed from one pass of running CRCs.
fn settle(bytes: &[u8], candidates: &[(usize, u32, u32)]) -> Option<usize> {
    // Running CRC (from the first payload start) at every payload start and end.
    let mut points: Vec<usize> = candidates
        .iter()
        .flat_map(|&(at, len, _)| {
            let start = at + RECORD_HEADER_LEN;
            [start, start + len as usize]
        })
        .collect();
    points.sort_unstable();
    points.dedup();
    let &base = points.first()?;
    let mut running = Vec::with_capacity(points.len());
    let mut h = crc32fast::Hasher::new();
    let mut done = base;
    for &p in &points {
        h.update(bytes.get(done..p)?);
        running.push(h.clone().finalize());
        done = p;
    }
    let crc_at = |p: usize| points.binary_search(&p).ok().and_then(|i| running.get(i));
    candidates.iter().find_map(|&(at, len, crc)| {
        let start = at + RECORD_HEADER_LEN;
        let (&a, &b) = (crc_at(start)?, crc_at(start + len as usize)?);
        // crc(base..end) = crc(base..start)·x^(8·len) ⊕ crc(start..end)
        let mut shifted = crc32fast::Hasher::new_with_initial(a);
        shifted.combine(&crc32fast::Hasher::new_with_initial_len(0, len as u64));
        (b ^ shifted.finalize() == crc).then_some(at)
    })
}

fn decode_batch(
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

/// Reads and replays the WAL file at `path`.
pub fn replay_file(path: &Path, apply: impl FnMut(Vec<u8>, Option<Vec<u8>>)) -> Result<ReplayEnd> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    replay_bytes(&bytes, apply).map_err(|e| e.in_file(path, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// xorshift64*: deterministic, so a failure replays.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn bytes(&mut self, n: usize) -> Vec<u8> {
            (0..n).map(|_| self.next() as u8).collect()
        }
    }

    fn record(key: &[u8], value: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_record(&mut out, 1, std::iter::once((key, Some(value)))).unwrap();
        out
    }

    /// `payload_len` is the exact payload length `encode_record` writes, `for_each_op` gives
    /// back the operations it encoded, and the CRCs are `crc32fast::hash`'s, for batches with
    /// lengths across varint boundaries.
    #[test]
    fn encoded_records_decode_in_place() {
        let mut rng = Rng(0x9e37_79b9);
        for round in 0..300 {
            let n = 1 + rng.below(if round % 10 == 0 { 200 } else { 4 });
            let sizes = [0, 1, 127, 128, 300, 16_383, 16_384, 70_000];
            let ops: Vec<(Vec<u8>, Option<Vec<u8>>)> = (0..n)
                .map(|_| {
                    let klen = sizes[rng.below(6)];
                    let k = rng.bytes(klen);
                    let vlen = sizes[rng.below(8)];
                    let v = (rng.below(4) != 0).then(|| rng.bytes(vlen));
                    (k, v)
                })
                .collect();
            let refs = || ops.iter().map(|(k, v)| (k.as_slice(), v.as_deref()));
            let mut out = Vec::new();
            encode_record(&mut out, ops.len(), refs()).unwrap();
            assert_eq!(payload_len(refs()), out.len() - RECORD_HEADER_LEN);
            let payload = &out[RECORD_HEADER_LEN..];
            assert_eq!(le_u32(&out, PAYLOAD_CRC_AT), crc32fast::hash(payload));
            assert_eq!(
                le_u32(&out, HEADER_CRC_AT),
                crc32fast::hash(&out[..HEADER_CRC_AT])
            );
            let mut back = Vec::new();
            for_each_op(&out, |k, v| back.push((k.to_vec(), v.map(<[u8]>::to_vec)))).unwrap();
            assert_eq!(back, ops);
        }
        // A record cut short or with a byte too many does not decode.
        let r = record(b"k", b"v");
        assert!(for_each_op(&r[..r.len() - 1], |_, _| {}).is_err());
        let mut long = r.clone();
        long.push(0);
        assert!(for_each_op(&long, |_, _| {}).is_err());
    }

    /// A header whose own CRC holds, claiming `len` bytes with payload CRC `crc`.
    fn header_claiming(len: u32, crc: u32) -> Vec<u8> {
        let mut h = len.to_le_bytes().to_vec();
        h.extend_from_slice(&crc.to_le_bytes());
        let c = crc32fast::hash(&h);
        h.extend_from_slice(&c.to_le_bytes());
        h
    }

    #[test]
    fn settling_from_running_crcs_agrees_with_direct_crcs() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut found = 0;
        for case in 0..400 {
            // Random bytes, some valid records planted, some headers that hold but claim a
            // payload whose CRC does not, some records with one payload byte flipped.
            let len = rng.below(3000);
            let mut b = rng.bytes(len);
            for _ in 0..rng.below(4) {
                let at = rng.below(b.len() + 1);
                let len = rng.below(200);
                let v = rng.bytes(len);
                let mut r = match rng.below(3) {
                    0 => record(b"k", &v),
                    1 => header_claiming(1 + rng.below(500) as u32, rng.next() as u32),
                    _ => {
                        let mut r = record(b"key", &v);
                        let i = RECORD_HEADER_LEN + rng.below(r.len() - RECORD_HEADER_LEN);
                        r[i] ^= 1 << rng.below(8);
                        r
                    }
                };
                let tail = b.split_off(at);
                b.append(&mut r);
                b.extend(tail);
            }
            for _ in 0..5 {
                let from = rng.below(b.len() + 1);
                let direct = next_record(&b, from, usize::MAX);
                for budget in [0, 300] {
                    let settled = next_record(&b, from, budget);
                    assert_eq!(direct, settled, "case {case}, from {from}, budget {budget}");
                }
                if let Some(at) = direct {
                    assert!(at >= from && record_at(&b, at), "case {case}");
                    found += 1;
                }
            }
        }
        assert!(found > 100, "only {found} scans found a record");
    }

    #[test]
    fn crafted_headers_claiming_long_payloads_are_settled_not_rehashed() {
        // 4 MiB of valid headers back to back, each claiming a payload up to the end of the
        // file, none matching it: hashing each claimed payload would take ~10^12 byte-steps
        // (minutes); settling them takes one pass. Then the same with a valid record at the end.
        let valid = record(b"key", b"the one valid record");
        let headers = (4 << 20) / RECORD_HEADER_LEN;
        let total = headers * RECORD_HEADER_LEN + valid.len();
        for with_valid in [false, true] {
            let mut b = Vec::with_capacity(total);
            for _ in 0..headers {
                let claim = total - b.len() - RECORD_HEADER_LEN;
                b.extend(header_claiming(claim as u32, 0xdead_beef));
            }
            if with_valid {
                b.extend_from_slice(&valid);
            } else {
                b.resize(total, 0xa5);
            }
            let want = with_valid.then_some(total - valid.len());
            assert_eq!(next_record(&b, 0, b.len()), want);
            // In a log, after a record whose header is damaged.
            let mut log = b"FSWL\x02\0\0\0".to_vec();
            log.extend_from_slice(&[0xff; RECORD_HEADER_LEN]);
            log.extend_from_slice(&b);
            match replay_bytes(&log, |_, _| {}) {
                Ok(end) if !with_valid => {
                    let t = end.torn_tail.unwrap();
                    assert_eq!((t.offset, t.len), (8, (log.len() - 8) as u64));
                }
                Err(Error::Corruption {
                    offset: 8, reason, ..
                }) if with_valid => {
                    let at = log.len() - valid.len();
                    assert!(reason.contains(&format!("offset {at}")), "{reason}");
                }
                other => panic!("with_valid {with_valid}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_record_is_what_the_header_claims_and_nothing_else() {
        let r = record(b"k", b"v");
        assert!(record_at(&r, 0));
        assert!(!record_at(&r[..r.len() - 1], 0));
        for i in 0..r.len() {
            for bit in 0..8 {
                let mut d = r.clone();
                d[i] ^= 1 << bit;
                assert!(!record_at(&d, 0), "byte {i} bit {bit}");
            }
        }
        // Zeros never pass: length 0 is refused before any CRC.
        assert_eq!(next_record(&[0; 4096], 0, usize::MAX), None);
        // A length of 0 with matching CRCs (no writer makes one) is refused too.
        let mut empty = header_claiming(0, 0);
        empty.push(0);
        assert!(!record_at(&empty, 0));
    }

    #[test]
    fn salvage_keeps_every_record_around_the_damage() {
        let mut log = b"FSWL\x02\0\0\0".to_vec();
        let recs: Vec<Vec<u8>> = (0..5u8).map(|i| record(&[b'k', i], b"value")).collect();
        let mut offsets = Vec::new();
        for r in &recs {
            offsets.push(log.len());
            log.extend_from_slice(r);
        }
        for (damaged, at) in [(1usize, 0usize), (1, 5), (3, RECORD_HEADER_LEN + 2)] {
            let mut b = log.clone();
            b[offsets[damaged] + at] ^= 0x10;
            // Replay refuses: a valid record follows.
            assert!(replay_bytes(&b, |_, _| {}).is_err());
            let mut keys = Vec::new();
            let s = salvage_bytes(&b, |ops| keys.extend(ops.into_iter().map(|(k, _)| k[1])));
            let want: Vec<u8> = (0..5u8).filter(|&i| i as usize != damaged).collect();
            assert_eq!(keys, want);
            assert_eq!(s.records, 4);
            assert_eq!(s.dropped.len(), 1);
            let d = &s.dropped[0];
            assert_eq!(d.offset, offsets[damaged] as u64);
            assert_eq!(d.len, recs[damaged].len() as u64);
            assert!(!d.torn_tail && !s.opens_as_is());
        }
        // A bad file header: every record is still kept.
        let mut b = log.clone();
        b[0] = b'X';
        let s = salvage_bytes(&b, |_| {});
        assert_eq!((s.records, s.dropped.len()), (5, 1));
        // A torn tail alone: the log opens as it is.
        let mut b = log.clone();
        b.extend_from_slice(b"garbage");
        let s = salvage_bytes(&b, |_| {});
        assert!(s.opens_as_is() && s.dropped[0].torn_tail && s.records == 5);
    }

    /// The header's three reserved bytes are zero; anything else is corruption at offset 5
    /// (a flipped bit there used to pass unnoticed).
    #[test]
    fn reserved_header_bytes_must_be_zero() {
        let mut head = WAL_MAGIC.to_vec();
        head.extend_from_slice(&[WAL_VERSION, 0, 0, 0]);
        assert!(replay_bytes(&head, |_, _| {}).is_ok());
        for at in 5..WAL_HEADER_LEN {
            let mut b = head.clone();
            b[at] = 0x08;
            match replay_bytes(&b, |_, _| {}) {
                Err(Error::Corruption { offset, .. }) => assert_eq!(offset, 5),
                other => panic!("byte {at}: {other:?}"),
            }
        }
    }
}
