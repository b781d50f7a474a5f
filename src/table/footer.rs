//! The fixed-size footer at the end of every table file.
//!
//! ```text
//! | "FSTB" | version u32 | index_offset u64 | index_len u64 | meta_offset u64 | meta_len u64 |
//! | reserved (16 zero bytes) | crc32(bytes 0..56) u32 | "FSTE" |
//! ```

use crate::codec::{check_crc, Cursor};
use crate::error::{Error, Result};

/// Magic at the start of a table footer.
pub const TABLE_MAGIC: [u8; 4] = *b"FSTB";
/// Magic at the very end of a table file.
pub const TABLE_END_MAGIC: [u8; 4] = *b"FSTE";
/// Table format version written. Version 4 ends every data block with a codec byte (the
/// block may be compressed, see `compress.rs`) and records the data bytes before compression
/// in the meta; 3 puts a restart point at every index entry (the index is read in place);
/// 3, 2 and 1 are still read (3 and 2: the same data layout without codec bytes; 1: data
/// blocks packed back to back).
pub const TABLE_VERSION: u32 = 4;
/// Table format version written for a table that holds an entry with an expiry: version 4
/// whose every value starts with a tag (and, when it expires, its `expires_at`), and whose
/// meta records its expiring entries (format.md, "Table"). Tables without one are still
/// written as version 4, byte for byte as before.
pub const TABLE_VERSION_EXPIRING: u32 = 5;
/// Footer size.
pub const FOOTER_LEN: usize = 64;

/// Where the footer's fields sit.
const VERSION_AT: usize = 4;
const FIELDS_AT: usize = 8;
const RESERVED_AT: usize = 40;
const CRC_AT: usize = 56;
const END_MAGIC_AT: usize = 60;

/// A table footer's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footer {
    /// Format version, 1 to [`TABLE_VERSION`].
    pub version: u32,
    /// Offset of the index block.
    pub index_offset: u64,
    /// Length of the index block, without its CRC.
    pub index_len: u64,
    /// Offset of the meta section.
    pub meta_offset: u64,
    /// Length of the meta section, without its CRC.
    pub meta_len: u64,
}

/// Checks a footer read at `at` and returns its fields.
pub fn decode_footer(footer: &[u8; FOOTER_LEN], at: u64) -> Result<Footer> {
    if footer[..VERSION_AT] != TABLE_MAGIC || footer[END_MAGIC_AT..] != TABLE_END_MAGIC {
        return Err(Error::corrupt(at, "bad table footer magic"));
    }
    let mut c = Cursor::new(&footer[CRC_AT..END_MAGIC_AT], at + CRC_AT as u64);
    check_crc(
        &footer[..CRC_AT],
        c.u32("footer CRC")?,
        at + CRC_AT as u64,
        "table footer",
    )?;
    let mut c = Cursor::new(&footer[VERSION_AT..RESERVED_AT], at + VERSION_AT as u64);
    let version = c.u32("table version")?;
    if !(1..=TABLE_VERSION_EXPIRING).contains(&version) {
        return Err(Error::corrupt(
            at + VERSION_AT as u64,
            format!("unsupported table version {version}"),
        ));
    }
    let f = Footer {
        version,
        index_offset: c.u64("index offset")?,
        index_len: c.u64("index length")?,
        meta_offset: c.u64("meta offset")?,
        meta_len: c.u64("meta length")?,
    };
    if let Some(i) = footer[RESERVED_AT..CRC_AT].iter().position(|&b| b != 0) {
        return Err(Error::corrupt(
            at + (RESERVED_AT + i) as u64,
            "non-zero reserved byte in the table footer",
        ));
    }
    Ok(f)
}

/// Encodes a version-[`TABLE_VERSION`] footer.
pub(crate) fn encode_footer(f: &Footer) -> [u8; FOOTER_LEN] {
    let mut out = [0u8; FOOTER_LEN];
    out[..VERSION_AT].copy_from_slice(&TABLE_MAGIC);
    out[VERSION_AT..FIELDS_AT].copy_from_slice(&f.version.to_le_bytes());
    for (i, v) in [f.index_offset, f.index_len, f.meta_offset, f.meta_len]
        .into_iter()
        .enumerate()
    {
        let at = FIELDS_AT + 8 * i;
        out[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
    let crc = crc32fast::hash(&out[..CRC_AT]);
    out[CRC_AT..END_MAGIC_AT].copy_from_slice(&crc.to_le_bytes());
    out[END_MAGIC_AT..].copy_from_slice(&TABLE_END_MAGIC);
    out
}
