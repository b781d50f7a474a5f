//! Little helpers to encode and decode integers; decoding is checked and never panics.

use byteorder::{ByteOrder, LittleEndian};

use crate::error::{Error, Result};

/// Largest key accepted, in bytes.
pub const MAX_KEY_LEN: usize = 64 << 10;
/// Largest value accepted, in bytes.
pub const MAX_VALUE_LEN: usize = 64 << 20;

/// Appends `v` as a LEB128 varint.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The first 8 bytes of `key`, zero-padded, as a big-endian number. `prefix8(a) <
/// prefix8(b)` implies `a < b` (the first differing byte decides, and a zero pad stands for
/// a key that ended first), so a range check needs a byte comparison only on equal prefixes.
#[inline]
pub(crate) fn prefix8(key: &[u8]) -> u64 {
    if let Some(b) = key.first_chunk::<8>() {
        return u64::from_be_bytes(*b);
    }
    // Shorter keys: two or three overlapping loads, no loop (short keys are common, e.g.
    // the hyphenation dictionary's words). Byte j belongs at bits 56 - 8j.
    let n = key.len();
    if n >= 4 {
        let word = |i: usize| {
            u64::from(u32::from_be_bytes([
                key[i],
                key[i + 1],
                key[i + 2],
                key[i + 3],
            ]))
        };
        (word(0) << 32) | (word(n - 4) << (64 - 8 * n))
    } else if n > 0 {
        let byte = |j: usize| u64::from(key[j]) << (56 - 8 * j);
        byte(0) | byte(n / 2) | byte(n - 1)
    } else {
        0
    }
}

/// The little-endian u64 at `at`, or 0 when `b` is too short (callers check lengths
/// first; this never panics).
#[inline]
pub(crate) fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    if let Some(s) = at.checked_add(8).and_then(|end| b.get(at..end)) {
        w.copy_from_slice(s);
    }
    u64::from_le_bytes(w)
}

/// The little-endian u32 at `at`, or 0 when `b` is too short.
#[inline]
pub(crate) fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    if let Some(s) = at.checked_add(4).and_then(|end| b.get(at..end)) {
        w.copy_from_slice(s);
    }
    u32::from_le_bytes(w)
}

/// A checked cursor over a byte slice. Every read that would run past the end returns a
/// corruption error whose offset is `base + position`.
#[derive(Clone, Debug)]
pub struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    base: u64,
}

impl<'a> Cursor<'a> {
    /// A cursor over `buf`, which sits at offset `base` of its file.
    pub fn new(buf: &'a [u8], base: u64) -> Self {
        Cursor { buf, pos: 0, base }
    }

    /// The file offset of the next byte.
    #[inline]
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Bytes left.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// True when every byte was consumed.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// A corruption error at the current position.
    pub fn err(&self, reason: impl std::fmt::Display) -> Error {
        Error::corrupt(self.offset(), reason)
    }

    /// The next `n` bytes.
    #[inline]
    pub fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        match end {
            Some(end) => {
                let s = &self.buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(self.err(format!("{what}: need {n} bytes, {} left", self.remaining()))),
        }
    }

    /// One byte.
    #[inline]
    pub fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.bytes(1, what)?[0])
    }

    /// A little-endian u32.
    #[inline]
    pub fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(LittleEndian::read_u32(self.bytes(4, what)?))
    }

    /// A little-endian u64.
    #[inline]
    pub fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(LittleEndian::read_u64(self.bytes(8, what)?))
    }

    /// A little-endian f64.
    pub fn f64(&mut self, what: &str) -> Result<f64> {
        Ok(f64::from_bits(self.u64(what)?))
    }

    /// A LEB128 varint of at most 10 bytes.
    #[inline]
    pub fn varint(&mut self, what: &str) -> Result<u64> {
        // Fast path: most lengths in blocks fit one byte.
        if let Some(&b) = self.buf.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(b as u64);
            }
        }
        self.varint_slow(what)
    }

    #[cold]
    fn varint_slow(&mut self, what: &str) -> Result<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.u8(what)?;
            v |= ((b & 0x7f) as u64) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.err(format!("{what}: varint longer than 10 bytes")))
    }

    /// A varint that must fit `usize` and be at most `max`.
    #[inline]
    pub fn len(&mut self, max: usize, what: &str) -> Result<usize> {
        let at = self.offset();
        let v = self.varint(what)?;
        if v > max as u64 {
            return Err(Error::corrupt(
                at,
                format!("{what}: length {v} exceeds {max}"),
            ));
        }
        Ok(v as usize)
    }
}

/// Checks `crc32(data) == stored`, reporting a mismatch at `offset`.
pub fn check_crc(data: &[u8], stored: u32, offset: u64, what: &str) -> Result<()> {
    let actual = crc32fast::hash(data);
    if actual == stored {
        Ok(())
    } else {
        Err(Error::checksum(offset, what, stored, actual))
    }
}

#[cfg(test)]
mod tests {
    use super::{le_u32, le_u64};

    /// An offset near `usize::MAX` (a wrapped offset from disk bytes) reads as 0. Without the
    /// checked end `at + 8` overflows: a panic in a build with overflow checks (`cargo test`
    /// without `--release`, or a debug build of an embedding program).
    #[test]
    fn reads_at_offsets_that_would_overflow_are_zero() {
        let b = [0xffu8; 16];
        for at in [usize::MAX, usize::MAX - 3, usize::MAX - 7] {
            assert_eq!(le_u64(&b, at), 0);
            assert_eq!(le_u32(&b, at), 0);
        }
        assert_eq!(le_u64(&b, 8), u64::MAX);
        assert_eq!(le_u32(&b, 12), u32::MAX);
        assert_eq!(le_u64(&b, 9), 0);
    }
}
