//! A table's range tombstones file (`NNNNNN.rdel`, format.md "Range tombstones"), named by
//! the table's manifest record (table property 2), written whole and fsynced beside it.
//!
//! ```text
//! | "FSRT" | version u8 = 1 | 0 0 0 | count varint | tombstone × count | crc32 u32 |
//! tombstone: | start_len varint | start | end_len varint | end |     start < end, sorted
//! ```

use std::path::Path;

use super::RangeTombstone;
use crate::codec::{le_u32, put_varint, Cursor, MAX_KEY_LEN};
use crate::error::{Error, Result};
use crate::io::Fs;

/// The file's magic.
pub(crate) const MAGIC: &[u8; 4] = b"FSRT";
/// The one version this code writes and reads.
pub(crate) const VERSION: u8 = 1;
/// Bytes of the header (magic, version, three reserved zero bytes).
const HEADER_LEN: usize = 8;
/// The longest end key: one byte past the longest key, so that a range can run past every
/// key ([`key_space_end`](super::key_space_end)).
pub(crate) const MAX_END_LEN: usize = MAX_KEY_LEN + 1;

/// The bytes of a file holding `tombstones` (sorted by start, each `start < end`).
pub fn encode(tombstones: &[RangeTombstone]) -> Vec<u8> {
    let mut b = Vec::with_capacity(
        16 + tombstones
            .iter()
            .map(|t| t.start.len() + t.end.len() + 4)
            .sum::<usize>(),
    );
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&[VERSION, 0, 0, 0]);
    put_varint(&mut b, tombstones.len() as u64);
    for t in tombstones {
        put_varint(&mut b, t.start.len() as u64);
        b.extend_from_slice(&t.start);
        put_varint(&mut b, t.end.len() as u64);
        b.extend_from_slice(&t.end);
    }
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

/// Decodes a file's bytes, checking everything: magic, version, reserved bytes, CRC, every
/// length against the bytes left, `start < end`, sorted starts, no trailing bytes. An error
/// names the offset (the caller adds the file).
pub fn decode(bytes: &[u8]) -> Result<Vec<RangeTombstone>> {
    if bytes.len() < HEADER_LEN + 1 + 4 {
        return Err(Error::corrupt(
            0,
            format!(
                "range tombstones file of {} bytes is too short",
                bytes.len()
            ),
        ));
    }
    if &bytes[..4] != MAGIC {
        return Err(Error::corrupt(0, "bad range tombstones magic"));
    }
    if bytes[4] != VERSION {
        return Err(Error::Unsupported {
            file: std::path::PathBuf::new(),
            offset: 4,
            reason: format!(
                "range tombstones version {} (written by a newer version of filterstore?)",
                bytes[4]
            ),
        });
    }
    if bytes[5..8] != [0, 0, 0] {
        return Err(Error::corrupt(
            5,
            "non-zero reserved bytes in the range tombstones header",
        ));
    }
    let body_end = bytes.len() - 4;
    crate::codec::check_crc(
        &bytes[..body_end],
        le_u32(bytes, body_end),
        body_end as u64,
        "range tombstones",
    )?;
    let body = &bytes[HEADER_LEN..body_end];
    let mut c = Cursor::new(body, HEADER_LEN as u64);
    // Each tombstone takes at least 3 bytes (two lengths and a one-byte end).
    let count = c.len(body.len() / 3, "range tombstone count")?;
    let mut out: Vec<RangeTombstone> = Vec::with_capacity(count);
    for _ in 0..count {
        let at = c.offset();
        let n = c.len(MAX_KEY_LEN, "range tombstone start length")?;
        let start = c.bytes(n, "range tombstone start")?.to_vec();
        let n = c.len(MAX_END_LEN, "range tombstone end length")?;
        let end = c.bytes(n, "range tombstone end")?.to_vec();
        if start >= end {
            return Err(Error::corrupt(
                at,
                "range tombstone whose start is not below its end",
            ));
        }
        if out.last().is_some_and(|p| p.start > start) {
            return Err(Error::corrupt(at, "range tombstones out of order"));
        }
        out.push(RangeTombstone { start, end });
    }
    if !c.is_empty() {
        return Err(c.err("trailing bytes in the range tombstones file"));
    }
    Ok(out)
}

/// Writes `tombstones` to `path`, fsynced; returns the file's length.
pub(crate) fn write(fs: &dyn Fs, path: &Path, tombstones: &[RangeTombstone]) -> Result<u64> {
    let bytes = encode(tombstones);
    let io = |e| Error::io(path, e);
    let mut f = fs.create(path).map_err(io)?;
    f.write_all(&bytes).map_err(io)?;
    f.sync().map_err(io)?;
    Ok(bytes.len() as u64)
}

/// Reads and checks the file at `path`; an error names the file and the offset.
pub fn read(path: &Path) -> Result<Vec<RangeTombstone>> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    decode(&bytes).map_err(|e| e.in_file(path, 0))
}
