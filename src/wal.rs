//! Write-ahead log: one file per memtable, `NNNNNN.wal`.
//!
//! ```text
//! | "FSWL" | version u8 = 2 | 0 0 0 |  record  |  record  | ... |
//! record: | payload_len u32 | crc32(payload) u32 | crc32(previous 8 bytes) u32 | payload |
//! payload (a write batch): | count varint | op |*count
//! op: | 1 | key_len varint | key | value_len varint | value |   (put)
//!     | 2 | key_len varint | key |                              (delete)
//! ```
//! Recovery replays records in order. The header CRC makes a damaged length detectable, so a
//! bad record is a torn tail (dropped; replay of the file ends) only when nothing but zeros
//! follows the damaged part: a header whose CRC fails with only zeros after the header, or a
//! payload whose CRC fails with only zeros after the record (a record cut by the end of the
//! file, or padded with zeros by a crash, qualifies). Anything else is corruption, reported
//! with file and offset.

use std::path::{Path, PathBuf};

use crate::codec::{put_varint, Cursor};
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
    let crc = crc32fast::hash(&out[RECORD_HEADER_LEN..]);
    out[..4].copy_from_slice(&(len as u32).to_le_bytes());
    out[4..8].copy_from_slice(&crc.to_le_bytes());
    let header_crc = crc32fast::hash(&out[..8]);
    out[8..12].copy_from_slice(&header_crc.to_le_bytes());
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
        head.extend_from_slice(&[WAL_VERSION, 0, 0, 0]);
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
    /// Length of the intact prefix.
    pub valid_len: u64,
    /// True when a torn tail was dropped.
    pub torn_tail: bool,
}

/// Decodes the WAL `bytes` (the whole file), calling `apply` for each operation in order.
/// Offsets in errors are file offsets; the caller adds the file name.
pub fn replay_bytes(
    bytes: &[u8],
    mut apply: impl FnMut(Vec<u8>, Option<Vec<u8>>),
) -> Result<ReplayEnd> {
    let torn = |valid_len: u64, records| {
        Ok(ReplayEnd {
            records,
            valid_len,
            torn_tail: true,
        })
    };
    if bytes.len() < WAL_HEADER_LEN {
        return torn(0, 0);
    }
    if bytes[..4] != WAL_MAGIC {
        return Err(Error::corrupt(0, "bad WAL magic"));
    }
    if bytes[4] != WAL_VERSION {
        return Err(Error::corrupt(
            4,
            format!("unsupported WAL version {}", bytes[4]),
        ));
    }
    if bytes[5..WAL_HEADER_LEN].iter().any(|&b| b != 0) {
        return Err(Error::corrupt(5, "WAL header reserved bytes are not zero"));
    }
    // Damage followed by nothing but zeros is a torn (or zero-padded) tail.
    let end_of_data = bytes.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
    let mut pos = WAL_HEADER_LEN;
    let mut records = 0u64;
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        let le32 =
            |at: usize| u32::from_le_bytes([rest[at], rest[at + 1], rest[at + 2], rest[at + 3]]);
        if rest.len() < RECORD_HEADER_LEN {
            return torn(pos as u64, records);
        }
        if crc32fast::hash(&rest[..8]) != le32(8) {
            if end_of_data <= pos + RECORD_HEADER_LEN {
                return torn(pos as u64, records);
            }
            return Err(Error::corrupt(
                pos as u64,
                "WAL record header CRC mismatch before the end of the log",
            ));
        }
        let len = le32(0) as usize;
        if len > MAX_RECORD_LEN {
            return Err(Error::corrupt(
                pos as u64,
                format!("WAL record length {len} exceeds {MAX_RECORD_LEN}"),
            ));
        }
        if len > rest.len() - RECORD_HEADER_LEN {
            return torn(pos as u64, records);
        }
        let end = pos + RECORD_HEADER_LEN + len;
        let payload = &bytes[pos + RECORD_HEADER_LEN..end];
        if crc32fast::hash(payload) != le32(4) {
            if end_of_data <= end {
                return torn(pos as u64, records);
            }
            return Err(Error::corrupt(
                pos as u64,
                "WAL record CRC mismatch before the end of the log",
            ));
        }
        decode_batch(payload, (pos + RECORD_HEADER_LEN) as u64, &mut apply)?;
        records += 1;
        pos = end;
    }
    Ok(ReplayEnd {
        records,
        valid_len: pos as u64,
        torn_tail: false,
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
