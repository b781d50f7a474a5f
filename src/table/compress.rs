//! Data-block compression (table format 4): each data block is stored raw or compressed,
//! chosen per block when the table is written, and names its codec in a trailer byte.
//!
//! ```text
//! | payload | codec u8 | crc32(payload ‖ codec) u32 |
//!   codec 0 (none): payload = the block (entries, restart array, restart count)
//!   codec 1 (lz4):  payload = | raw_len u32 | LZ4 block format |, decompressing to raw_len bytes
//!   codec 2 (zstd): payload = | raw_len u32 | one zstd frame |, decompressing to raw_len bytes
//!   codec 3 (lz4 of the split form): payload = | raw_len u32 | LZ4 block format |,
//!                   decompressing to raw_len bytes of the block's split form (see `split.rs`)
//! ```
//! The LZ4 writer makes codec 3; codec 1 is still read.
//! A block is stored compressed only when that saves at least an eighth of its bytes. A
//! reader never allocates the length a payload claims before checking it: at most
//! [`MAX_BLOCK_LEN`] (a block holds at most one entry larger than a page) and at most
//! [`LZ4_MAX_RATIO`](super::lz4::LZ4_MAX_RATIO) (LZ4) or [`ZSTD_MAX_RATIO`] (zstd) times the payload (each codec's
//! densest encoding), and the decoder must produce exactly that many bytes into a buffer of
//! exactly that length. zstd is built only with the `zstd` feature; a build without it reads
//! a zstd block as [`Error::Unsupported`], naming the block's offset.

use std::str::FromStr;

use lz4_flex::block::{compress_into_with_table, CompressTable};

use crate::error::{Error, Result};

#[cfg(feature = "zstd")]
use super::lz4::claimed;
pub use super::lz4::{lz4_into, Lz4Prefix, MAX_BLOCK_LEN};

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
    /// zstd (the reference C library, level 3): an entropy coder after the
    /// matches, so fewer bytes than LZ4 where the literals are not uniformly random, and a
    /// slower decoder. Needs the `zstd` feature; a block that does not shrink by at least an
    /// eighth is stored raw.
    Zstd,
}

impl Compression {
    /// Every choice, in the order the command line lists them (zstd also in builds without
    /// the `zstd` feature, where [`check_available`](Self::check_available) refuses it).
    pub const ALL: [Compression; 3] = [Compression::None, Compression::Lz4, Compression::Zstd];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    /// Whether this build can write (and read) blocks of this codec: zstd only with the
    /// `zstd` feature.
    pub fn is_available(self) -> bool {
        self != Compression::Zstd || cfg!(feature = "zstd")
    }

    /// [`is_available`](Self::is_available) as an error that says what to do.
    pub fn check_available(self) -> Result<()> {
        if self.is_available() {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "compression {self} needs filterstore built with the `{self}` feature \
             (cargo build --features {self})"
        )))
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
/// Codec tag of an LZ4-compressed block (read; the writer makes [`CODEC_LZ4_SPLIT`]).
pub(crate) const CODEC_LZ4: u8 = 1;
/// Codec tag of a zstd-compressed block.
pub(crate) const CODEC_ZSTD: u8 = 2;
/// The tag of an LZ4 block holding the block's split form ([`super::split`]).
pub(crate) const CODEC_LZ4_SPLIT: u8 = 3;
#[cfg(feature = "zstd")]
/// The zstd level blocks are written at: the library's default. (Negative levels leave the
/// literals uncoded, which decodes faster and stores about what LZ4 stores.)
pub const ZSTD_LEVEL: i32 = 3;
/// Bytes after a block's payload in format 4: the codec tag and the CRC.
pub(crate) const TRAILER: usize = 5;

/// zstd cannot expand its input by more than this: a frame's densest block, an RLE block,
/// spends a 3-byte header and one byte on at most 128 KiB of output. (A reader bounds a
/// zstd block more tightly, by its frame's block headers: [`zstd_frame_bound`].)
#[cfg_attr(not(feature = "zstd"), allow(dead_code))]
pub const ZSTD_MAX_RATIO: usize = (128 << 10) / 4;

/// The most bytes the zstd frame at the start of `frame` can decode to, read from its
/// headers (RFC 8878) without decoding it: a raw or RLE block gives its size, a compressed
/// block at most the frame's largest block (its window, and never more than 128 KiB).
/// `None` when the bytes are not such a frame (bad magic, reserved bits, a block type 3, a
/// block larger than the frame allows, or headers past the end).
#[cfg_attr(not(feature = "zstd"), allow(dead_code))]
pub fn zstd_frame_bound(frame: &[u8]) -> Option<usize> {
    const MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
    const BLOCK_MAX: u64 = 128 << 10;
    if frame.get(..4)? != MAGIC {
        return None;
    }
    let fhd = *frame.get(4)?;
    if fhd & 0x08 != 0 {
        return None; // reserved bit
    }
    let single_segment = fhd & 0x20 != 0;
    let dict_bytes = [0, 1, 2, 4][usize::from(fhd & 3)];
    let fcs_bytes = match fhd >> 6 {
        0 => usize::from(single_segment),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let mut block_max = BLOCK_MAX;
    let mut pos = 5;
    if !single_segment {
        let wd = *frame.get(5)?;
        let base = 1u64 << (10 + u32::from(wd >> 3));
        block_max = block_max.min(base + base / 8 * u64::from(wd & 7));
        pos += 1;
    }
    pos += dict_bytes + fcs_bytes;
    let mut total = 0u64;
    loop {
        let h = frame.get(pos..pos + 3)?;
        let h = u32::from(h[0]) | u32::from(h[1]) << 8 | u32::from(h[2]) << 16;
        let (last, size) = (h & 1 != 0, u64::from(h >> 3));
        if size > block_max {
            return None;
        }
        let (out, stored) = match (h >> 1) & 3 {
            0 => (size, size),
            1 => (size, 1),
            2 => (block_max, size),
            _ => return None,
        };
        total += out;
        pos += 3 + stored as usize;
        if pos > frame.len() {
            return None;
        }
        if last {
            return usize::try_from(total).ok();
        }
    }
}

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
    #[cfg(feature = "zstd")]
    zstd: Option<zstd::bulk::Compressor<'static>>,
    out: Vec<u8>,
    /// The split form of the block being compressed with LZ4.
    split: Vec<u8>,
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
            #[cfg(feature = "zstd")]
            zstd: None,
            out: Vec::new(),
            split: Vec::new(),
            failures: 0,
            passed: 0,
            compressed: 0,
            attempts: 0,
        }
    }

    /// Most bytes of the next block, trailer included: [`super::BLOCK_SIZE`] while blocks
    /// compress (and for a run's first block when the table is compressed),
    /// [`super::RAW_BLOCK_SIZE`] when the table is not compressed or the last block tried
    /// was stored raw (a block stored raw costs a lookup less when it is small).
    #[inline]
    pub(crate) fn block_size(&self) -> usize {
        if self.kind == Compression::None || self.failures > 0 {
            super::RAW_BLOCK_SIZE
        } else {
            super::BLOCK_SIZE
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
        self.out.clear();
        let (n, codec) = match self.kind {
            Compression::Zstd => (self.zstd(raw, limit), CODEC_ZSTD),
            _ => {
                // LZ4 compresses the block's split form (its lengths apart from its bytes);
                // bytes that are no block (never from the table writer) as they are.
                self.split.clear();
                let (input, codec) = if super::split::split(raw, &mut self.split) {
                    (&self.split[..], CODEC_LZ4_SPLIT)
                } else {
                    (raw, CODEC_LZ4)
                };
                let table = self.table.get_or_insert_with(CompressTable::default);
                let len = lz4_flex::block::get_maximum_output_size(input.len());
                self.out.resize(4 + len, 0);
                let n = compress_into_with_table(input, &mut self.out[4..], table).ok();
                (n, codec)
            }
        };
        let claim = match codec {
            CODEC_LZ4_SPLIT => self.split.len(),
            _ => raw.len(),
        };
        match n.filter(|&n| 4 + n <= limit) {
            Some(n) => {
                self.out[..4].copy_from_slice(&(claim as u32).to_le_bytes());
                self.failures = 0;
                self.compressed += 1;
                Some((&self.out[..4 + n], codec))
            }
            None => {
                self.failures += 1;
                None
            }
        }
    }
}

impl Compressor {
    /// Compresses `raw` with zstd into `self.out[4..]`, giving up past `limit` bytes
    /// (`None`: it does not shrink enough, or the context could not be made).
    #[cfg(feature = "zstd")]
    fn zstd(&mut self, raw: &[u8], limit: usize) -> Option<usize> {
        if self.zstd.is_none() {
            let mut c = zstd::bulk::Compressor::new(ZSTD_LEVEL).ok()?;
            // The block's length is in the payload already: no content size in the frame.
            c.set_parameter(zstd::zstd_safe::CParameter::ContentSizeFlag(false))
                .ok()?;
            self.zstd = Some(c);
        }
        let c = self.zstd.as_mut()?;
        // A frame longer than `limit - 4` is of no use: the buffer's end stops it there.
        self.out.resize(limit.max(4), 0);
        c.compress_to_buffer(raw, &mut self.out[4..]).ok()
    }

    /// Without the `zstd` feature every block is stored raw (`Options` refuses zstd first).
    #[cfg(not(feature = "zstd"))]
    fn zstd(&mut self, _raw: &[u8], _limit: usize) -> Option<usize> {
        None
    }
}

thread_local! {
    /// Each thread's buffer for the split form of a block (codec 3) before it is rebuilt.
    pub(crate) static SPLIT_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
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
        CODEC_ZSTD => {
            let n = zstd_into(payload, at, buf)?;
            Ok(&buf[..n])
        }
        CODEC_LZ4_SPLIT => super::scratch::with(&SPLIT_BUF, |split| {
            let n = lz4_into(payload, at, split)?;
            super::split::unsplit(&split[..n], at, buf)?;
            Ok(&buf[..])
        }),
        other => Err(Error::corrupt(
            at + payload.len() as u64,
            format!("unknown block codec {other}"),
        )),
    }
}

/// Decompresses a zstd payload (`| raw_len u32 | zstd frame |`) at file offset `at` into the
/// first `raw_len` bytes of `out` (see [`lz4_into`]), after checking `raw_len` against
/// [`MAX_BLOCK_LEN`] and what the frame's headers allow ([`zstd_frame_bound`]); returns
/// `raw_len`. The decoder writes
/// into a buffer of exactly `raw_len` bytes, so a frame that decodes to more is an error,
/// whatever its header claims. In a build without the `zstd` feature:
/// [`Error::Unsupported`].
pub fn zstd_into(payload: &[u8], at: u64, out: &mut Vec<u8>) -> Result<usize> {
    #[cfg(feature = "zstd")]
    {
        thread_local! {
            /// Each thread's zstd decoding context (made once: a context is ~100 KB).
            static DCTX: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
                const { std::cell::RefCell::new(None) };
        }
        let (raw_len, body) = claimed(payload, at, ZSTD_MAX_RATIO)?;
        match zstd_frame_bound(body) {
            Some(b) if raw_len <= b => {}
            Some(b) => {
                return Err(Error::corrupt(
                    at,
                    format!("compressed block claims {raw_len} bytes, its zstd frame at most {b}"),
                ))
            }
            None => return Err(Error::corrupt(at + 4, "compressed block is no zstd frame")),
        }
        if out.len() < raw_len {
            out.resize(raw_len, 0);
        }
        let got = DCTX.with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.is_none() {
                *slot = Some(zstd::bulk::Decompressor::new()?);
            }
            match slot.as_mut() {
                Some(d) => d.decompress_to_buffer(body, &mut out[..raw_len]),
                None => Err(std::io::Error::other("no zstd context")),
            }
        });
        decoded(got, raw_len, at)
    }
    #[cfg(not(feature = "zstd"))]
    {
        let _ = (payload, out);
        Err(Error::Unsupported {
            file: std::path::PathBuf::new(),
            offset: at,
            reason: "data block compressed with zstd, which this build of filterstore does \
                     not include (build it with the `zstd` feature)"
                .to_string(),
        })
    }
}

#[cfg(feature = "zstd")]
/// `raw_len` when a decoder's result `got` filled exactly the `raw_len` bytes the payload at
/// file offset `at` claims; a corruption error naming the offset otherwise.
fn decoded(
    got: std::result::Result<usize, impl std::fmt::Display>,
    raw_len: usize,
    at: u64,
) -> Result<usize> {
    match got {
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

    /// Blocks of many shapes: overlapping matches (runs shorter than their match), long
    /// literal and match lengths (extension bytes), incompressible and empty-ish input.
    fn lz4_shapes() -> Vec<Vec<u8>> {
        let mut v = vec![
            half_compressible(4000, 1),
            half_compressible(70_000, 2),
            vec![7u8; 4000],
            vec![7u8; 100_000],
            random(4000, 3),
            random(300, 4),
            b"abcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabc".to_vec(),
        ];
        let mut x = Vec::new();
        for i in 0..3000u32 {
            x.extend_from_slice(&(i % 7).to_le_bytes());
            x.extend_from_slice(&random(i as usize % 40, u64::from(i)));
        }
        v.push(x);
        v
    }

    /// The prefix decoder yields what `lz4_flex` yields, whole or a prefix at a time, and
    /// each fill stops after the first whole sequence that reaches the bytes asked for.
    #[test]
    fn the_prefix_decoder_agrees_with_lz4_flex() {
        for raw in lz4_shapes() {
            let mut body = vec![0u8; 4 + lz4_flex::block::get_maximum_output_size(raw.len())];
            body[..4].copy_from_slice(&(raw.len() as u32).to_le_bytes());
            let n = lz4_flex::block::compress_into(&raw, &mut body[4..]).unwrap();
            body.truncate(4 + n);
            let mut want = Vec::new();
            assert_eq!(lz4_into(&body, 0, &mut want).unwrap(), raw.len());
            assert_eq!(&want[..raw.len()], raw.as_slice());
            for step in [1usize, 17, 100, 1000, usize::MAX] {
                let (mut d, len) = Lz4Prefix::new(&body, 0).unwrap();
                assert_eq!(len, raw.len());
                let mut out = vec![0u8; len];
                while d.decoded() < len {
                    let upto = d.decoded().saturating_add(step);
                    let before = d.decoded();
                    d.fill(&mut out, upto).unwrap();
                    assert!(d.decoded() >= upto.min(len) && d.decoded() > before);
                    assert_eq!(&out[..d.decoded()], &raw[..d.decoded()], "step {step}");
                }
                assert_eq!(out, raw);
            }
        }
    }

    /// Damaged LZ4 input, truncated or with any byte changed: the prefix decoder returns an
    /// error at the payload's offset + 4 or some bytes, never panics or writes past the block.
    #[test]
    fn the_prefix_decoder_survives_damage() {
        let raw = half_compressible(3000, 9);
        let mut body = vec![0u8; 4 + lz4_flex::block::get_maximum_output_size(raw.len())];
        body[..4].copy_from_slice(&3000u32.to_le_bytes());
        let n = lz4_flex::block::compress_into(&raw, &mut body[4..]).unwrap();
        body.truncate(4 + n);
        let mut errors = 0;
        let mut check = |b: &[u8]| {
            let Ok((mut d, len)) = Lz4Prefix::new(b, 40) else {
                return;
            };
            let mut out = vec![0u8; len];
            match d.fill(&mut out, len) {
                Ok(()) => assert_eq!(d.decoded(), len),
                Err(Error::Corruption { offset, .. }) => {
                    assert_eq!(offset, 44);
                    errors += 1;
                }
                Err(e) => panic!("{e}"),
            }
        };
        for cut in 4..body.len() {
            check(&body[..cut]);
        }
        for i in 4..body.len() {
            for flip in [0x01u8, 0x10, 0x80, 0xff] {
                let mut t = body.clone();
                t[i] ^= flip;
                check(&t);
            }
        }
        let mut longer = body.clone();
        longer.push(0);
        check(&longer);
        assert!(errors > body.len(), "{errors} errors");
    }

    #[cfg(feature = "zstd")]
    #[test]
    fn zstd_round_trips_and_stores_fewer_bytes_than_lz4() {
        let mut z = Compressor::new(Compression::Zstd);
        let mut l = Compressor::new(Compression::Lz4);
        let mut buf = Vec::new();
        for (raw, shrinks) in [
            (half_compressible(4000, 1), true),
            (vec![7u8; 4000], true),
            (random(4000, 2), false),
            (vec![1u8; 10], false),
        ] {
            let s = stored(&mut z, &raw);
            assert_eq!(s.last() == Some(&CODEC_ZSTD), shrinks);
            if shrinks {
                assert!(s.len() - 1 <= raw.len() - raw.len() / 8);
            }
            assert_eq!(decode(&s, 0, &mut buf).unwrap(), raw.as_slice());
        }
        // Printable random bytes, each run of 25 repeated: the entropy coder beats LZ4.
        let raw = half_compressible(4000, 3);
        let (zs, ls) = (stored(&mut z, &raw), stored(&mut l, &raw));
        assert!(zs.len() < ls.len() * 9 / 10, "{} vs {}", zs.len(), ls.len());
    }

    #[cfg(feature = "zstd")]
    #[test]
    fn hostile_zstd_payloads_are_errors_without_large_allocations() {
        let mut buf = Vec::new();
        for claim in [0u32, u32::MAX, (MAX_BLOCK_LEN + 1) as u32] {
            let mut p = claim.to_le_bytes().to_vec();
            p.extend_from_slice(&[0x28, 0xb5, 0x2f, 0xfd, 0, 0]);
            p.push(CODEC_ZSTD);
            assert!(decode(&p, 100, &mut buf).is_err(), "{claim}");
            assert!(buf.capacity() < 1 << 20);
        }
        let raw = half_compressible(3000, 9);
        let mut c = Compressor::new(Compression::Zstd);
        let mut s = stored(&mut c, &raw);
        // A valid frame that produces fewer or more bytes than claimed.
        for claim in [2999u32, 3001, 1] {
            s[..4].copy_from_slice(&claim.to_le_bytes());
            assert!(decode(&s, 0, &mut buf).is_err(), "{claim}");
        }
        s[..4].copy_from_slice(&3000u32.to_le_bytes());
        assert_eq!(decode(&s, 0, &mut buf).unwrap(), raw.as_slice());
        // Truncations and every single-byte change: an error or some bytes, never a panic.
        for cut in 0..s.len() - 1 {
            let mut t = s[..cut].to_vec();
            t.push(CODEC_ZSTD);
            let _ = decode(&t, 0, &mut buf);
        }
        for i in 4..s.len() - 1 {
            let mut t = s.clone();
            t[i] ^= 0x5a;
            if let Ok(got) = decode(&t, 0, &mut buf) {
                assert_eq!(got.len(), 3000);
            }
        }
    }

    #[cfg(not(feature = "zstd"))]
    #[test]
    fn without_the_feature_a_zstd_block_is_unsupported_and_zstd_is_refused() {
        let mut buf = Vec::new();
        match decode(&[1, 0, 0, 0, 9, CODEC_ZSTD], 40, &mut buf) {
            Err(Error::Unsupported { offset, reason, .. }) => {
                assert_eq!(offset, 40);
                assert!(reason.contains("zstd` feature"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        assert!(Compression::Zstd.check_available().is_err());
        assert!(Compressor::new(Compression::Zstd)
            .compress(&[7; 4000])
            .is_none());
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
