//! The frame of every 64-byte filter header, checked in one place: a point filter block
//! (`format.md`, "Filter block"), a range filter block ("Range filter block") and a global
//! filter's checkpoint ("Global filter") all start with a 64-byte header that begins with a
//! 4-byte magic and ends with the body's length (u64 at 48), the body's CRC-32 (at 56) and
//! the CRC-32 of the header's first 60 bytes (at 60); the body follows the header.
//!
//! A decoder calls [`check_head`] first (length, magic, header CRC: the fields it then reads
//! are the ones written), checks its own fields, then calls [`check_body`] (the body's
//! length and CRC).

use crate::codec::{le_u32, le_u64};
use crate::error::{Error, Result};

/// Size of the header; the body starts here.
pub const HEADER_LEN: usize = 64;
/// Offset of the body's length.
pub(crate) const BODY_LEN: usize = 48;
/// Offset of the body's CRC-32.
pub(crate) const BODY_CRC: usize = 56;
/// Offset of the header's CRC-32 (of the 60 bytes before it).
pub(crate) const HEADER_CRC: usize = 60;

/// Which kind of block a frame is, for its magic and its errors.
pub(crate) struct Frame {
    /// The magic the block starts with.
    pub magic: [u8; 4],
    /// The block in errors about its length ("filter block").
    pub block: &'static str,
    /// The block's name in errors about its parts ("filter": "filter header", "filter
    /// body").
    pub name: &'static str,
}

/// Checks that `bytes` start with a whole header of kind `f`: 64 bytes, the magic, the
/// header's CRC. Returns the header. Offsets in errors are from the start of `bytes`.
pub(crate) fn check_head<'a>(bytes: &'a [u8], f: &Frame) -> Result<&'a [u8]> {
    let head = bytes.get(..HEADER_LEN).ok_or_else(|| short(bytes, f))?;
    if head[..4] != f.magic {
        return Err(Error::corrupt(0, format!("bad {} magic", f.name)));
    }
    let stored = le_u32(head, HEADER_CRC);
    let crc = crc32fast::hash(&head[..HEADER_CRC]);
    if stored != crc {
        return Err(Error::checksum(
            HEADER_CRC as u64,
            &format!("{} header", f.name),
            stored,
            crc,
        ));
    }
    Ok(head)
}

/// Checks the body of `bytes` (whose head [`check_head`] accepted): its length is the
/// header's, and its CRC. Returns the body.
pub(crate) fn check_body<'a>(bytes: &'a [u8], f: &Frame) -> Result<&'a [u8]> {
    let (head, body) = bytes
        .split_at_checked(HEADER_LEN)
        .ok_or_else(|| short(bytes, f))?;
    let body_len = le_u64(head, BODY_LEN);
    if body_len != body.len() as u64 {
        return Err(Error::corrupt(
            BODY_LEN as u64,
            format!(
                "{} body length {body_len} but {} bytes follow the header",
                f.name,
                body.len()
            ),
        ));
    }
    let stored = le_u32(head, BODY_CRC);
    let crc = crc32fast::hash(body);
    if stored != crc {
        return Err(Error::checksum(
            HEADER_LEN as u64,
            &format!("{} body", f.name),
            stored,
            crc,
        ));
    }
    Ok(body)
}

/// The error for `bytes` too short to hold a header.
fn short(bytes: &[u8], f: &Frame) -> Error {
    Error::corrupt(
        0,
        format!(
            "{} of {} bytes is shorter than its 64-byte header",
            f.block,
            bytes.len()
        ),
    )
}
