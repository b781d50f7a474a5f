//! Data-block compression (table format 4): each data block is stored raw or compressed,
//! chosen per block when the table is written, and names its codec in a trailer byte.
//!
//! ```text
//! | payload | codec u8 | crc32(payload ‖ codec) u32 |
//!   codec 0 (none): payload = the block (entries, restart array, restart count)
//!   codec 1 (lz4):  payload = | raw_len u32 | LZ4 block format |, decompressing to raw_len bytes
//! ```
//! A block is stored compressed only when that saves at least an eighth of its bytes. A
//! reader never allocates the length a payload claims before checking it: at most
//! [`MAX_BLOCK_LEN`] (a block holds at most one entry larger than a page) and at most
//! [`LZ4_MAX_RATIO`] times the payload (LZ4's densest encoding), and the decoder must produce
//! exactly that many bytes.

use std::str::FromStr;

use lz4_flex::block::{compress_into_with_table, decompress_into, CompressTable};

use crate::error::{Error, Result};

/// How the data blocks of new tables are compressed ([`Options::compression`]).
///
/// [`Options::compression`]: crate::Options::compression
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Compression {
    /// Every block stored as it is.
    None,
    /// LZ4 (block format, `lz4_flex`): fast to decompress; a block that does not shrink by
    /// at least an eighth is stored raw.
    #[default]
    Lz4,
}

impl Compression {
    /// Every choice, in the order the command line lists them.
    pub const ALL: [Compression; 2] = [Compression::None, Compression::Lz4];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
        }
    }
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Compression {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Compression::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| {
                let valid: Vec<&str> = Compression::ALL.iter().map(|c| c.name()).collect();
                Error::InvalidArgument(format!(
                    "unknown compression {s:?}; valid choices: {}",
                    valid.join(", ")
                ))
            })
    }
}

/// Codec tag of a block stored as it is.
pub(crate) const CODEC_NONE: u8 = 0;
/// Codec tag of an LZ4-compressed block.
pub(crate) const CODEC_LZ4: u8 = 1;
/// Bytes after a block's payload in format 4: the codec tag and the CRC.
pub(crate) const TRAILER: usize = 5;

/// The longest data block a writer produces: a block longer than a page holds a single entry
/// (three varints of at most 10 bytes, the largest key and value), and one restart offset and
/// the restart count.
pub const MAX_BLOCK_LEN: usize = 30 + crate::MAX_KEY_LEN + crate::MAX_VALUE_LEN + 8;

/// LZ4 cannot expand its input by more than this: its densest encoding, a long match, adds
/// one byte of input per 255 bytes of output.
pub const LZ4_MAX_RATIO: usize = 255;

/// Consecutive blocks of a run that do not compress before the writer stops trying every
/// block and tries only every [`SAMPLE_EVERY`]th (so incompressible data costs a few attempts
/// per run, not one per block).
const GIVE_UP_AFTER: u32 = 8;
/// While not trying every block: one attempt per this many blocks; a success resumes trying
/// every block.
const SAMPLE_EVERY: u32 = 32;

/// Compresses the blocks of one run (see [`encode_part`](super::writer::encode_part)).
/// Whether a block is tried depends only on the blocks before it in the run, so the bytes
/// written do not depend on the thread count.
pub(crate) struct Compressor {
    kind: Compression,
    table: Option<CompressTable>,
    out: Vec<u8>,
    /// Consecutive blocks tried that did not shrink enough.
    failures: u32,
    /// Blocks passed over since the last attempt, while sampling.
    passed: u32,
    /// Blocks compressed (for tests and reports).
    pub(crate) compressed: u64,
    /// Blocks given to an attempt.
    pub(crate) attempts: u64,
}

impl Compressor {
    pub(crate) fn new(kind: Compression) -> Compressor {
        Compressor {
            kind,
            table: None,
            out: Vec::new(),
            failures: 0,
            passed: 0,
            compressed: 0,
            attempts: 0,
        }
    }

    /// The payload to store for the block `raw` and its codec tag: compressed when that
    /// saves at least an eighth of the block, else `None` (store it raw, codec 0).
    pub(crate) fn compress(&mut self, raw: &[u8]) -> Option<(&[u8], u8)> {
        if self.kind == Compression::None || raw.len() < 64 || raw.len() > MAX_BLOCK_LEN {
            return None;
        }
        if self.failures >= GIVE_UP_AFTER {
            self.passed += 1;
            if self.passed < SAMPLE_EVERY {
                return None;
            }
            self.passed = 0;
        }
        self.attempts += 1;
        let limit = raw.len() - raw.len() / 8;
        let table = self.table.get_or_insert_with(CompressTable::default);
        self.out.clear();
        self.out
            .resize(4 + lz4_flex::block::get_maximum_output_size(raw.len()), 0);
        let n = compress_into_with_table(raw, &mut self.out[4..], table).ok();
        match n.filter(|&n| 4 + n <= limit) {
            Some(n) => {
                self.out[..4].copy_from_slice(&(raw.len() as u32).to_le_bytes());
                self.failures = 0;
                self.compressed += 1;
                Some((&self.out[..4 + n], CODEC_LZ4))
            }
            None => {
                self.failures += 1;
                None
            }
        }
    }
}

/// The block held by `stored`, the bytes of a format-4 data block without its CRC (payload,
/// then the codec tag; the CRC was checked), at file offset `at`: the payload itself for a
/// raw block, or the block decompressed into `buf`. Errors name the offset of what is wrong.
pub fn decode<'a>(stored: &'a [u8], at: u64, buf: &'a mut Vec<u8>) -> Result<&'a [u8]> {
    let Some((&codec, payload)) = stored.split_last() else {
        return Err(Error::corrupt(at, "data block without its codec byte"));
    };
    match codec {
        CODEC_NONE => Ok(payload),
        CODEC_LZ4 => {
            let n = lz4_into(payload, at, buf)?;
            Ok(&buf[..n])
        }
        other => Err(Error::corrupt(
            at + payload.len() as u64,
            format!("unknown block codec {other}"),
        )),
    }
}

/// Decompresses an LZ4 payload (`| raw_len u32 | LZ4 block |`) at file offset `at` into the
/// first `raw_len` bytes of `out` (grown when shorter, never zeroed again: a reused buffer
/// costs no memset), after bounding the length it claims; returns `raw_len`.
pub fn lz4_into(payload: &[u8], at: u64, out: &mut Vec<u8>) -> Result<usize> {
    let (Some(len), Some(body)) = (payload.get(..4), payload.get(4..)) else {
        return Err(Error::corrupt(
            at,
            "compressed block shorter than its length",
        ));
    };
    let raw_len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
    let bound = MAX_BLOCK_LEN.min(body.len().saturating_mul(LZ4_MAX_RATIO));
    if raw_len == 0 || raw_len > bound {
        return Err(Error::corrupt(
            at,
            format!(
                "compressed block claims {raw_len} bytes, outside 1..={bound} for {} compressed bytes",
                body.len()
            ),
        ));
    }
    if out.len() < raw_len {
        out.resize(raw_len, 0);
    }
    match decompress_into(body, &mut out[..raw_len]) {
        Ok(n) if n == raw_len => Ok(raw_len),
        Ok(n) => Err(Error::corrupt(
            at + 4,
            format!("compressed block decodes to {n} bytes, not the {raw_len} it claims"),
        )),
        Err(e) => Err(Error::corrupt(
            at + 4,
            format!("compressed block does not decode: {e}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn half_compressible(n: usize, seed: u64) -> Vec<u8> {
        let mut out = Vec::new();
        let mut x = seed;
        while out.len() < n {
            let mut piece = Vec::new();
            for _ in 0..25 {
                x = crate::hash::mix64(x.wrapping_add(1));
                piece.push(b' ' + (x % 95) as u8);
            }
            out.extend_from_slice(&piece);
            out.extend_from_slice(&piece);
        }
        out.truncate(n);
        out
    }

    fn random(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = crate::hash::mix64(x.wrapping_add(1));
                x as u8
            })
            .collect()
    }

    fn stored(c: &mut Compressor, raw: &[u8]) -> Vec<u8> {
        let mut s = match c.compress(raw) {
            Some((p, tag)) => {
                let mut s = p.to_vec();
                s.push(tag);
                s
            }
            None => {
                let mut s = raw.to_vec();
                s.push(CODEC_NONE);
                s
            }
        };
        s.shrink_to_fit();
        s
    }

    #[test]
    fn round_trip_and_the_eighth_rule() {
        let mut c = Compressor::new(Compression::Lz4);
        let mut buf = Vec::new();
        for (raw, shrinks) in [
            (half_compressible(4000, 1), true),
            (vec![7u8; 4000], true),
            (random(4000, 2), false),
            (vec![1u8; 10], false), // too short to try
        ] {
            let s = stored(&mut c, &raw);
            assert_eq!(s.last() == Some(&CODEC_LZ4), shrinks);
            if shrinks {
                assert!(s.len() - 1 <= raw.len() - raw.len() / 8);
            }
            assert_eq!(decode(&s, 0, &mut buf).unwrap(), raw.as_slice());
        }
        let mut none = Compressor::new(Compression::None);
        let raw = vec![7u8; 4000];
        assert_eq!(stored(&mut none, &raw).last(), Some(&CODEC_NONE));
    }

    #[test]
    fn incompressible_runs_are_sampled_not_tried_block_by_block() {
        let mut c = Compressor::new(Compression::Lz4);
        for i in 0..1000 {
            assert!(c.compress(&random(4000, i)).is_none());
        }
        assert_eq!(
            c.attempts,
            GIVE_UP_AFTER as u64 + (1000 - GIVE_UP_AFTER as u64) / SAMPLE_EVERY as u64
        );
        // A compressible block, once sampled, resumes block-by-block attempts.
        let mut tried = 0;
        for i in 0..100 {
            let before = c.attempts;
            c.compress(&half_compressible(4000, i));
            tried += c.attempts - before;
        }
        assert!(tried > 60, "{tried}");
    }

    #[test]
    fn hostile_payloads_are_errors_without_large_allocations() {
        let mut buf = Vec::new();
        // Claims of 0, more than the ratio allows, and more than any block.
        for claim in [0u32, 2000, u32::MAX] {
            let mut p = claim.to_le_bytes().to_vec();
            p.extend_from_slice(&[0x1f; 5]);
            p.push(CODEC_LZ4);
            assert!(decode(&p, 100, &mut buf).is_err(), "{claim}");
            assert!(buf.capacity() < 2000);
        }
        // A valid stream that produces fewer or more bytes than claimed.
        let raw = half_compressible(3000, 9);
        let mut c = Compressor::new(Compression::Lz4);
        let mut s = stored(&mut c, &raw);
        for claim in [2999u32, 3001] {
            s[..4].copy_from_slice(&claim.to_le_bytes());
            assert!(decode(&s, 0, &mut buf).is_err(), "{claim}");
        }
        // Unknown codec, empty input, truncated payloads.
        assert!(decode(&[1, 2, 3, 9], 0, &mut buf).is_err());
        assert!(decode(&[], 0, &mut buf).is_err());
        s[..4].copy_from_slice(&3000u32.to_le_bytes());
        for cut in 0..s.len() - 1 {
            let mut t = s[..cut].to_vec();
            t.push(CODEC_LZ4);
            let _ = decode(&t, 0, &mut buf);
        }
        match decode(&[1, 2, 3, 9], 40, &mut buf) {
            Err(Error::Corruption { offset, .. }) => assert_eq!(offset, 43),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn names_parse_back() {
        for c in Compression::ALL {
            assert_eq!(c.name().parse::<Compression>().unwrap(), c);
        }
        assert!("zip".parse::<Compression>().is_err());
        assert_eq!(Compression::default(), Compression::Lz4);
    }
}
