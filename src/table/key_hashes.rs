//! A table's key hashes file (`NNNNNN.khash`, format.md "Key hashes"): the 8-byte hash of
//! every entry's key ([`crate::hash::key_hash`], the hash the global filter uses), in key
//! order, written whole and fsynced beside the table by its one builder
//! (`table/files.rs`) in a store under the global filter, and named by the table's manifest
//! record (table property 4). The global filter is built, grown and pruned from these files
//! instead of the tables' data blocks (Chucky keeps the same per run).
//!
//! ```text
//! | "FSKH" | version u8 = 1 | 0 0 0 | count u64 | body crc32 u32 | header crc32 u32 |
//! | hash u64 × count |                                              little-endian
//! ```
//!
//! A reader sizes nothing by `count`: it checks that the bytes after the header are exactly
//! `8 × count`, so every hash it returns was counted in the file.

use std::io::Read;
use std::path::Path;

use crate::codec::{le_u32, le_u64};
use crate::error::{Error, Result};
use crate::io::Fs;

/// The file's magic.
pub(crate) const MAGIC: &[u8; 4] = b"FSKH";
/// The one version this code writes and reads.
pub(crate) const VERSION: u8 = 1;
/// Bytes of the header.
pub(crate) const HEADER_LEN: usize = 24;

/// Field offsets in the header.
mod off {
    pub const VERSION: usize = 4;
    pub const RESERVED: usize = 5;
    pub const COUNT: usize = 8;
    pub const BODY_CRC: usize = 16;
    pub const HEADER_CRC: usize = 20;
}

/// The bytes of a file holding `hashes` (in key order).
pub fn encode(hashes: &[u64]) -> Vec<u8> {
    let mut b = Vec::with_capacity(HEADER_LEN + 8 * hashes.len());
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&[VERSION, 0, 0, 0]);
    b.extend_from_slice(&(hashes.len() as u64).to_le_bytes());
    b.extend_from_slice(&[0; 8]);
    for h in hashes {
        b.extend_from_slice(&h.to_le_bytes());
    }
    let body_crc = crc32fast::hash(&b[HEADER_LEN..]);
    b[off::BODY_CRC..off::BODY_CRC + 4].copy_from_slice(&body_crc.to_le_bytes());
    let head_crc = crc32fast::hash(&b[..off::HEADER_CRC]);
    b[off::HEADER_CRC..HEADER_LEN].copy_from_slice(&head_crc.to_le_bytes());
    b
}

/// Checks a header (the first [`HEADER_LEN`] bytes of a file `file_len` bytes long) and
/// returns the hashes the file holds: `count`, once it is found to be exactly what the
/// bytes after the header hold. An error names the offset (the caller adds the file).
pub fn check_header(head: &[u8], file_len: u64) -> Result<u64> {
    if head.len() < HEADER_LEN || file_len < HEADER_LEN as u64 {
        return Err(Error::corrupt(
            0,
            format!("key hashes file of {file_len} bytes is too short"),
        ));
    }
    if &head[..4] != MAGIC {
        return Err(Error::corrupt(0, "bad key hashes magic"));
    }
    crate::codec::check_crc(
        &head[..off::HEADER_CRC],
        le_u32(head, off::HEADER_CRC),
        off::HEADER_CRC as u64,
        "key hashes header",
    )?;
    if head[off::VERSION] != VERSION {
        return Err(Error::Unsupported {
            file: std::path::PathBuf::new(),
            offset: off::VERSION as u64,
            reason: format!(
                "key hashes version {} (written by a newer version of filterstore?)",
                head[off::VERSION]
            ),
        });
    }
    if head[off::RESERVED..off::COUNT] != [0, 0, 0] {
        return Err(Error::corrupt(
            off::RESERVED as u64,
            "non-zero reserved bytes in the key hashes header",
        ));
    }
    let count = le_u64(head, off::COUNT);
    let body = file_len - HEADER_LEN as u64;
    if count.checked_mul(8) != Some(body) {
        return Err(Error::corrupt(
            off::COUNT as u64,
            format!("key hashes file claims {count} hashes, its body holds {body} bytes"),
        ));
    }
    Ok(count)
}

/// Decodes a file's bytes, checking everything (header, length, body CRC); the hashes in
/// key order. An error names the offset (the caller adds the file).
pub fn decode(bytes: &[u8]) -> Result<Vec<u64>> {
    check_header(bytes, bytes.len() as u64)?;
    let body = &bytes[HEADER_LEN..];
    crate::codec::check_crc(
        body,
        le_u32(bytes, off::BODY_CRC),
        off::BODY_CRC as u64,
        "key hashes body",
    )?;
    Ok(body
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect())
}

/// Writes `hashes` to `path`, fsynced; returns the file's length.
pub(crate) fn write(fs: &dyn Fs, path: &Path, hashes: &[u64]) -> Result<u64> {
    let bytes = encode(hashes);
    let io = |e| Error::io(path, e);
    let mut f = fs.create(path).map_err(io)?;
    f.write_all(&bytes).map_err(io)?;
    f.sync().map_err(io)?;
    Ok(bytes.len() as u64)
}

/// Reads and checks the file at `path`; an error names the file and the offset.
pub fn read(path: &Path) -> Result<Vec<u64>> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    decode(&bytes).map_err(|e| e.in_file(path, 0))
}

/// The hashes the file at `path` holds, from its header and length only (the body is not
/// read; [`read`] checks it): what a filter built from the file is sized by.
pub fn count(path: &Path) -> Result<u64> {
    let io = |e| Error::io(path, e);
    let mut f = std::fs::File::open(path).map_err(io)?;
    let len = f.metadata().map_err(io)?.len();
    let mut head = [0u8; HEADER_LEN];
    let n = (&mut f)
        .take(HEADER_LEN as u64)
        .read(&mut head)
        .map_err(io)?;
    check_header(&head[..n], len).map_err(|e| e.in_file(path, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_every_damage() {
        for n in [0usize, 1, 7, 1000] {
            let hashes: Vec<u64> = (0..n as u64)
                .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
                .collect();
            let b = encode(&hashes);
            assert_eq!(b.len(), HEADER_LEN + 8 * n);
            assert_eq!(decode(&b).unwrap(), hashes);
            assert_eq!(check_header(&b, b.len() as u64).unwrap(), n as u64);
            // Every single-bit flip is refused (header CRC, body CRC, or a length check).
            for at in (0..b.len()).step_by(3) {
                let mut d = b.clone();
                d[at] ^= 0x10;
                assert!(decode(&d).is_err(), "flip at {at} of {n}");
            }
            // Every truncation and an extra byte.
            for cut in [0, 1, HEADER_LEN - 1, HEADER_LEN, b.len() - 1] {
                if cut < b.len() {
                    assert!(decode(&b[..cut]).is_err(), "cut at {cut} of {n}");
                }
            }
            let mut longer = b.clone();
            longer.extend_from_slice(&[0; 8]);
            assert!(decode(&longer).is_err());
        }
    }

    /// A header whose count (and CRCs) claim far more hashes than the file holds is an
    /// error at the count's offset, before anything is sized by it.
    #[test]
    fn a_claimed_count_is_checked_against_the_bytes() {
        let mut b = encode(&[1, 2, 3]);
        for claim in [4u64, u64::MAX, 1 << 61, 1 << 40] {
            b[off::COUNT..off::COUNT + 8].copy_from_slice(&claim.to_le_bytes());
            let crc = crc32fast::hash(&b[..off::HEADER_CRC]);
            b[off::HEADER_CRC..HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
            let e = decode(&b).unwrap_err();
            assert!(e.is_corruption(), "{e}");
            assert!(e.to_string().contains("claims"), "{e}");
        }
    }
}
