//! The LZ4 decoder of data blocks (codecs 1 and 3, see [`compress`](super::compress)), and
//! the bounds every codec's reader checks a payload's claimed length against. Its own
//! module so that the block formats that decode a prefix at a time (`block`, `split`) use it
//! without depending on the codec choice (`compress`), which depends on them.

use crate::error::{Error, Result};

/// The longest data block a writer produces: a block longer than a page holds a single entry
/// (three varints of at most 10 bytes, the largest key and value), and one restart offset and
/// the restart count.
pub const MAX_BLOCK_LEN: usize = 30 + crate::codec::MAX_KEY_LEN + crate::codec::MAX_VALUE_LEN + 8;

/// LZ4 cannot expand its input by more than this: its densest encoding, a long match, adds
/// one byte of input per 255 bytes of output.
pub const LZ4_MAX_RATIO: usize = 255;

/// The claimed length and the compressed body of a payload `| raw_len u32 | body |` at file
/// offset `at`, after checking the claim against [`MAX_BLOCK_LEN`] and `max_ratio` times the
/// body.
pub(crate) fn claimed(payload: &[u8], at: u64, max_ratio: usize) -> Result<(usize, &[u8])> {
    let (Some(len), Some(body)) = (payload.get(..4), payload.get(4..)) else {
        return Err(Error::corrupt(
            at,
            "compressed block shorter than its length",
        ));
    };
    let raw_len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
    let bound = MAX_BLOCK_LEN.min(body.len().saturating_mul(max_ratio));
    if raw_len == 0 || raw_len > bound {
        return Err(Error::corrupt(
            at,
            format!(
                "compressed block claims {raw_len} bytes, outside 1..={bound} for {} compressed bytes",
                body.len()
            ),
        ));
    }
    Ok((raw_len, body))
}

/// Decompresses an LZ4 payload (`| raw_len u32 | LZ4 block |`) at file offset `at` into the
/// first `raw_len` bytes of `out` (grown when shorter, never zeroed again: a reused buffer
/// costs no memset), after bounding the length it claims, with [`Lz4Prefix`]; returns
/// `raw_len`. A stream that does not fill exactly `raw_len` bytes is an error.
pub fn lz4_into(payload: &[u8], at: u64, out: &mut Vec<u8>) -> Result<usize> {
    let (mut d, raw_len) = Lz4Prefix::new(payload, at)?;
    if out.len() < raw_len {
        // Grown when shorter, never zeroed again: a reused buffer costs no memset. Grown
        // to the claimed length exactly, not doubled past it.
        out.reserve_exact(raw_len - out.len());
        out.resize(raw_len, 0);
    }
    d.fill(&mut out[..raw_len], raw_len)?;
    Ok(raw_len)
}

/// An LZ4 block (the body of a codec-1 or codec-3 payload) decoded a prefix at a time: a point
/// lookup decodes only as far as the entry it looks for (on average half the block), where
/// [`lz4_into`] decodes it all. Written here, not taken from `lz4_flex`, because that crate
/// decodes a block only whole. Every length and offset is checked against the input, the
/// output and what was decoded before; damage is an error at the payload's file offset
/// plus 4, as [`lz4_into`] reports it.
pub struct Lz4Prefix<'a> {
    body: &'a [u8],
    /// Next input byte.
    ip: usize,
    /// Output bytes decoded so far (`out[..op]`).
    op: usize,
    /// File offset of the payload (errors name `at + 4`).
    at: u64,
}

impl<'a> Lz4Prefix<'a> {
    /// A decoder of the LZ4 payload `payload` (`| raw_len u32 | LZ4 block |`) at file offset
    /// `at`, and the claimed length, checked as [`lz4_into`] checks it; `out` must then hold
    /// at least that many bytes before [`fill`](Self::fill) writes them.
    pub fn new(payload: &'a [u8], at: u64) -> Result<(Lz4Prefix<'a>, usize)> {
        let (raw_len, body) = claimed(payload, at, LZ4_MAX_RATIO)?;
        Ok((
            Lz4Prefix {
                body,
                ip: 0,
                op: 0,
                at,
            },
            raw_len,
        ))
    }

    /// Bytes of the output decoded so far.
    #[inline]
    pub fn decoded(&self) -> usize {
        self.op
    }

    fn damaged(&self, what: &str) -> Error {
        Error::corrupt(
            self.at + 4,
            format!(
                "compressed block does not decode: {what} at input byte {}",
                self.ip
            ),
        )
    }

    /// A length's extension bytes (LZ4: 255 means another byte follows).
    #[inline]
    fn more_len(&mut self, mut n: usize) -> Result<usize> {
        loop {
            let Some(&b) = self.body.get(self.ip) else {
                return Err(self.damaged("a length runs past the input"));
            };
            self.ip += 1;
            n += b as usize;
            if b != 255 {
                return Ok(n);
            }
        }
    }

    /// Decodes whole sequences into `out` (the block's `raw_len` bytes) until at least
    /// `upto` bytes (capped at `out.len()`) are decoded or the input ends. The input ending
    /// before `out` is full, or a sequence that writes past it, is an error; so is an
    /// input that goes on once `out` is full.
    pub fn fill(&mut self, out: &mut [u8], upto: usize) -> Result<()> {
        let upto = upto.min(out.len());
        let (body, mut ip, mut op) = (self.body, self.ip, self.op);
        while op < upto {
            let Some(&token) = body.get(ip) else {
                self.ip = ip;
                return Err(self.damaged("the input ends early"));
            };
            ip += 1;
            let mut lit = (token >> 4) as usize;
            if lit == 15 {
                self.ip = ip;
                lit = self.more_len(lit)?;
                ip = self.ip;
            }
            let (Some(src), Some(dst)) = (
                body.get(ip..ip.wrapping_add(lit)),
                out.get_mut(op..op.wrapping_add(lit)),
            ) else {
                self.ip = ip;
                return Err(self.damaged("literals run past the input or the block"));
            };
            dst.copy_from_slice(src);
            ip += lit;
            op += lit;
            if ip == body.len() {
                // The last sequence has literals only, and must fill the block.
                if op != out.len() {
                    self.ip = ip;
                    return Err(self.damaged("the input ends early"));
                }
                break;
            }
            let Some(o) = body.get(ip..ip + 2) else {
                self.ip = ip;
                return Err(self.damaged("a match offset runs past the input"));
            };
            let offset = u16::from_le_bytes([o[0], o[1]]) as usize;
            ip += 2;
            let mut len = (token & 15) as usize;
            if len == 15 {
                self.ip = ip;
                len = self.more_len(len)?;
                ip = self.ip;
            }
            len += 4;
            if offset == 0 || offset > op || op + len > out.len() {
                self.ip = ip;
                return Err(self.damaged("a match reaches outside the block"));
            }
            let from = op - offset;
            if offset >= len {
                out.copy_within(from..from + len, op);
            } else {
                // Overlapping: the match repeats the last `offset` bytes. Copied in chunks
                // that double: once `done` (a multiple of `offset`) bytes are written,
                // `out[from..op + done]` repeats with that period, so its first
                // `offset + done` bytes continue it.
                let mut done = 0;
                while done < len {
                    let chunk = (offset + done).min(len - done);
                    out.copy_within(from..from + chunk, op + done);
                    done += chunk;
                }
            }
            op += len;
        }
        if op == out.len() && ip != body.len() {
            self.ip = ip;
            return Err(self.damaged("input left after the block is full"));
        }
        self.ip = ip;
        self.op = op;
        Ok(())
    }
}
