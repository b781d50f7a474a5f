//! Data and index blocks: sorted entries with key-prefix compression and restart points.
//!
//! ```text
//! | entry | entry | ... | restart offset u32 |*R | R u32 |
//! entry: | shared varint | unshared varint | vtag varint | key suffix | value |
//!   vtag 0 = tombstone, vtag n > 0 = value of n − 1 bytes
//! ```
//! Every `RESTART_INTERVAL`-th entry stores its whole key (shared = 0) and its offset is listed
//! in the restart array, so a lookup binary-searches restarts and scans at most one interval.

use std::cmp::Ordering;

use crate::codec::{le_u32, le_u64, prefix8, put_varint, Cursor};
use crate::error::{Error, Result};

mod cursor;
pub use cursor::BlockCursor;

/// Entries between restart points.
pub const RESTART_INTERVAL: usize = 16;

/// Length of the common prefix of `a` and `b`, eight bytes at a time.
#[inline]
pub fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let (x, y) = (le_u64(a, i), le_u64(b, i));
        if x != y {
            return i + ((x ^ y).trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// Appends one varint, with a fast path for the one-byte case (most lengths here).
#[inline]
fn put_len(out: &mut Vec<u8>, v: usize) {
    if v < 0x80 {
        out.push(v as u8);
    } else {
        put_varint(out, v as u64);
    }
}

/// Appends one entry to `out`: `key` shares `shared` leading bytes with the previous key of
/// its block (0 at a restart point).
#[inline]
pub fn put_entry(out: &mut Vec<u8>, shared: usize, key: &[u8], value: Option<&[u8]>) {
    put_len(out, shared);
    put_len(out, key.len() - shared);
    match value {
        Some(v) => {
            put_varint(out, v.len() as u64 + 1);
            out.extend_from_slice(&key[shared..]);
            out.extend_from_slice(v);
        }
        None => {
            out.push(0);
            out.extend_from_slice(&key[shared..]);
        }
    }
}

/// [`put_entry`] of a version 5 table: a value is stored tagged, with its expiry when it
/// has one (`crate::expiry::put_tagged`).
#[inline]
pub(crate) fn put_entry_tagged(
    out: &mut Vec<u8>,
    shared: usize,
    key: &[u8],
    value: Option<&[u8]>,
    expires_at: u64,
) {
    match value {
        Some(v) => {
            put_len(out, shared);
            put_len(out, key.len() - shared);
            put_varint(
                out,
                (v.len() + crate::expiry::tag_len(expires_at)) as u64 + 1,
            );
            out.extend_from_slice(&key[shared..]);
            crate::expiry::put_tagged(out, v, expires_at);
        }
        None => put_entry(out, shared, key, None),
    }
}

/// Bytes [`put_entry_tagged`] appends for this entry.
pub(crate) fn entry_len_tagged(
    shared: usize,
    key: &[u8],
    value: Option<&[u8]>,
    expires_at: u64,
) -> usize {
    let unshared = key.len() - shared;
    let vtag = value.map_or(0, |v| v.len() + crate::expiry::tag_len(expires_at) + 1);
    varint_len(shared) + varint_len(unshared) + varint_len(vtag) + unshared + vtag.max(1) - 1
}

/// Appends a block's trailer: the restart offsets and their count (the end of every block,
/// whichever encoder wrote the entries).
pub(crate) fn put_restarts(out: &mut Vec<u8>, restarts: &[u32]) {
    for r in restarts {
        out.extend_from_slice(&r.to_le_bytes());
    }
    out.extend_from_slice(&(restarts.len() as u32).to_le_bytes());
}

/// Length of a block with `entry_bytes` of entries and `restarts` restart points.
pub(crate) fn finished_len(entry_bytes: usize, restarts: usize) -> usize {
    entry_bytes + 4 * restarts + 4
}

pub(crate) fn varint_len(v: usize) -> usize {
    (usize::BITS - (v | 1).leading_zeros()).div_ceil(7) as usize
}

/// Bytes [`put_entry`] appends for this entry.
pub(crate) fn entry_len(shared: usize, key: &[u8], value: Option<&[u8]>) -> usize {
    let unshared = key.len() - shared;
    let vtag = value.map_or(0, |v| v.len() + 1);
    varint_len(shared) + varint_len(unshared) + varint_len(vtag) + unshared + vtag.max(1) - 1
}

/// Builds one block.
#[derive(Debug)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    last_key: Vec<u8>,
    count: usize,
    interval: usize,
}

impl Default for BlockBuilder {
    fn default() -> Self {
        BlockBuilder::with_restart_interval(RESTART_INTERVAL)
    }
}

impl BlockBuilder {
    /// A builder that writes a restart point (a whole key) every `interval` entries; 1 makes
    /// every entry reachable through the restart array (version 3 index blocks).
    pub fn with_restart_interval(interval: usize) -> BlockBuilder {
        BlockBuilder {
            buf: Vec::new(),
            restarts: Vec::new(),
            last_key: Vec::new(),
            count: 0,
            interval: interval.max(1),
        }
    }

    /// Adds an entry; keys must arrive in strictly increasing order.
    pub fn add(&mut self, key: &[u8], value: Option<&[u8]>) {
        debug_assert!(self.count == 0 || key > self.last_key.as_slice());
        let shared = if self.count.is_multiple_of(self.interval) {
            self.restarts.push(self.buf.len() as u32);
            0
        } else {
            common_prefix(key, &self.last_key)
        };
        put_entry(&mut self.buf, shared, key, value);
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.count += 1;
    }

    /// Finishes the block and resets the builder.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        put_restarts(&mut out, &self.restarts);
        self.restarts.clear();
        self.last_key.clear();
        self.count = 0;
        out
    }
}

/// A checked view of one block; `base` is its offset in the file (for error messages).
#[derive(Debug, Clone, Copy)]
pub struct Block<'a> {
    data: &'a [u8],
    restarts: &'a [u8],
    base: u64,
}

/// One decoded entry: the value is `None` for a tombstone.
pub type Entry = (Vec<u8>, Option<Vec<u8>>);

impl<'a> Block<'a> {
    /// Checks the restart array; entries are checked as they are decoded.
    pub fn new(bytes: &'a [u8], base: u64) -> Result<Block<'a>> {
        let n = bytes.len();
        if n < 4 {
            return Err(Error::corrupt(
                base,
                format!("block of {n} bytes has no restart count"),
            ));
        }
        let r = le_u32(bytes, n - 4) as usize;
        let data_end = r
            .checked_mul(4)
            .and_then(|x| x.checked_add(4))
            .and_then(|x| n.checked_sub(x))
            .ok_or_else(|| {
                Error::corrupt(
                    base + n as u64 - 4,
                    format!("restart count {r} does not fit a block of {n} bytes"),
                )
            })?;
        if r == 0 && data_end > 0 {
            return Err(Error::corrupt(
                base + n as u64 - 4,
                "non-empty block without restart points",
            ));
        }
        let block = Block {
            data: &bytes[..data_end],
            restarts: &bytes[data_end..n - 4],
            base,
        };
        let mut prev = None;
        for i in 0..r {
            let off = block.restart(i);
            if off as usize >= data_end || prev.is_some_and(|p| off <= p) {
                return Err(Error::corrupt(
                    base + (data_end + 4 * i) as u64,
                    format!("restart offset {off} out of order or past the entries"),
                ));
            }
            prev = Some(off);
        }
        Ok(block)
    }

    /// Length of the entries, before the restart array.
    pub(crate) fn entries_len(&self) -> usize {
        self.data.len()
    }

    pub(crate) fn restart(&self, i: usize) -> u32 {
        le_u32(self.restarts, 4 * i)
    }

    pub(crate) fn restart_count(&self) -> usize {
        self.restarts.len() / 4
    }

    /// Iterates over all entries.
    pub fn iter(&self) -> BlockIter<'a> {
        BlockIter {
            cursor: Cursor::new(self.data, self.base),
            key: Vec::new(),
            failed: false,
        }
    }

    /// Decodes the full key stored at restart point `i`.
    fn restart_key(&self, i: usize) -> Result<&'a [u8]> {
        let off = self.restart(i) as usize;
        let e = self.entry_at(off, usize::MAX)?;
        if e.shared != 0 {
            return Err(Error::corrupt(
                self.base + off as u64,
                "restart entry shares a prefix",
            ));
        }
        Ok(e.suffix)
    }

    /// Decodes the entry at byte `pos` of the entries, whose predecessor's key has `prev_len`
    /// bytes. The common case (three one-byte varints, everything in bounds) is decoded
    /// inline; anything else goes through the checked cursor, which names the fault.
    #[inline(always)]
    fn entry_at(&self, pos: usize, prev_len: usize) -> Result<Raw<'a>> {
        if let Some(&[s, u, t]) = self.data.get(pos..pos.saturating_add(3)) {
            let (shared, unshared) = (s as usize, u as usize);
            let key_end = pos + 3 + unshared;
            let end = key_end + (t as usize).saturating_sub(1);
            if (s | u | t) < 0x80 && shared <= prev_len && end <= self.data.len() {
                return Ok(Raw {
                    shared,
                    suffix: &self.data[pos + 3..key_end],
                    value: (t != 0).then(|| &self.data[key_end..end]),
                    end,
                });
            }
        }
        self.entry_at_slow(pos, prev_len)
    }

    #[cold]
    fn entry_at_slow(&self, pos: usize, prev_len: usize) -> Result<Raw<'a>> {
        let rest = self.data.get(pos..).unwrap_or_default();
        let mut c = Cursor::new(rest, self.base + pos as u64);
        let at = c.offset();
        let shared = c.len(prev_len, "shared key length")?;
        let unshared = c.len(c.remaining(), "key length")?;
        let vtag = c.varint("value tag")?;
        let suffix = c.bytes(unshared, "key")?;
        let value = if vtag == 0 {
            None
        } else {
            let vlen = usize::try_from(vtag - 1)
                .map_err(|_| Error::corrupt(at, "value length overflows"))?;
            Some(c.bytes(vlen, "value")?)
        };
        Ok(Raw {
            shared,
            suffix,
            value,
            end: pos + rest.len() - c.remaining(),
        })
    }

    /// Looks `key` up: `None` when the block does not hold it, `Some(None)` for a tombstone.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn get(&self, key: &[u8]) -> Result<Option<Option<Vec<u8>>>> {
        Ok(self.get_ref(key)?.map(|v| v.map(<[u8]>::to_vec)))
    }

    /// [`get`](Self::get), the value borrowed from the block's bytes.
    pub fn get_ref(&self, key: &[u8]) -> Result<Option<Option<&'a [u8]>>> {
        if self.restart_count() == 0 {
            return Ok(None);
        }
        // Last restart whose key is <= key (restart 0 when every restart key is greater).
        let (mut lo, mut hi) = (0usize, self.restart_count());
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            match lcp_cmp(self.restart_key(mid)?, key).1 {
                Ordering::Greater => hi = mid,
                _ => lo = mid,
            }
        }
        // Scan one restart interval without rebuilding keys. While the previous key is below
        // `key`, `matched` is the length of their common prefix. An entry sharing more than
        // `matched` bytes with the previous key agrees with it at byte `matched`, where the
        // previous key is below `key`: it is below `key` too and needs no comparison. Otherwise
        // its first `shared` bytes equal `key`'s, and only its suffix is compared. Both steps
        // are exact for any bytes, sorted or not.
        let mut pos = self.restart(lo) as usize;
        let (mut prev_len, mut matched) = (0usize, 0usize);
        while pos < self.data.len() {
            let e = self.entry_at(pos, prev_len)?;
            pos = e.end;
            prev_len = e.shared + e.suffix.len();
            if e.shared > matched {
                continue;
            }
            // shared <= matched <= key.len(), so the slice is in bounds.
            let (common, order) = lcp_cmp(e.suffix, key.get(e.shared..).unwrap_or_default());
            match order {
                Ordering::Less => matched = e.shared + common,
                Ordering::Equal => return Ok(Some(e.value)),
                Ordering::Greater => return Ok(None),
            }
        }
        Ok(None)
    }
}

/// Looks `key` up in an LZ4-compressed block while `dec` decodes it into `out` (the
/// block's `raw_len` bytes): entries are read from the first, each decoded only once it is
/// needed, so a lookup stops decoding at the entry it was looking for (or the first one
/// past it) instead of decompressing the whole block. `Some` answer as [`Block::get`]
/// gives it for a sorted block; `None` when this scan cannot read an entry (a length that
/// is no varint, or an entry past the block's end: bytes no writer makes): the caller then
/// decodes the rest and asks [`Block::get`], whose checks name the damage.
pub(crate) fn get_decoding(
    dec: &mut super::lz4::Lz4Prefix<'_>,
    out: &mut [u8],
    key: &[u8],
) -> Result<Option<Option<Option<Vec<u8>>>>> {
    // The scan of `Block::get`'s last step, from the block's first entry (see there).
    let (mut pos, mut prev_len, mut matched) = (0usize, 0usize, 0usize);
    loop {
        let Some((shared, unshared, vtag, at)) = header_at(&out[..dec.decoded()], pos) else {
            // Not decoded yet (three varints take at most 30 bytes), or no header.
            if dec.decoded() == out.len() {
                return Ok(None);
            }
            let upto = (pos + 30).max(dec.decoded() + 1);
            dec.fill(out, upto)?;
            continue;
        };
        let key_end = at.checked_add(unshared);
        let end = key_end.and_then(|k| k.checked_add(vtag.saturating_sub(1)));
        let (Some(key_end), Some(end)) = (key_end, end) else {
            return Ok(None);
        };
        if shared > prev_len || end > out.len() {
            return Ok(None);
        }
        if end > dec.decoded() {
            dec.fill(out, end)?;
        }
        prev_len = shared + unshared;
        if shared <= matched {
            let suffix = &out[at..key_end];
            let (common, order) = lcp_cmp(suffix, key.get(shared..).unwrap_or_default());
            match order {
                Ordering::Less => matched = shared + common,
                Ordering::Equal => {
                    return Ok(Some(Some((vtag != 0).then(|| out[key_end..end].to_vec()))))
                }
                Ordering::Greater => return Ok(Some(None)),
            }
        }
        pos = end;
    }
}

/// The three lengths of the entry header at `pos` of `bytes` (shared, unshared, value tag)
/// and where its key suffix starts; `None` when `bytes` ends inside it or a varint is
/// longer than 10 bytes or overflows a `usize`. One-byte lengths take the fast path.
#[inline]
fn header_at(bytes: &[u8], pos: usize) -> Option<(usize, usize, usize, usize)> {
    if let Some(&[s, u, t]) = bytes.get(pos..pos.saturating_add(3)) {
        if (s | u | t) < 0x80 {
            return Some((s as usize, u as usize, t as usize, pos + 3));
        }
    }
    let mut at = pos;
    let (s, u, t) = (
        varint(bytes, &mut at)?,
        varint(bytes, &mut at)?,
        varint(bytes, &mut at)?,
    );
    Some((s, u, t, at))
}

/// One varint of `bytes` at `*at` (advanced past it); `None` when `bytes` ends inside it,
/// or it is longer than 10 bytes or does not fit a `usize`.
#[inline]
pub(crate) fn varint(bytes: &[u8], at: &mut usize) -> Option<usize> {
    if let Some(&b) = bytes.get(*at) {
        if b < 0x80 {
            *at += 1;
            return Some(b as usize);
        }
    }
    varint_slow(bytes, at)
}

#[cold]
fn varint_slow(bytes: &[u8], at: &mut usize) -> Option<usize> {
    let mut v = 0u64;
    for i in 0..10 {
        let b = *bytes.get(*at)?;
        *at += 1;
        if i == 9 && b > 1 {
            return None;
        }
        v |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return usize::try_from(v).ok();
        }
    }
    None
}

/// Where the entry at byte `pos` of a block's entries lies: `entries` is the block's bytes up
/// to its restart array, `prev_len` the length of the previous key (0 at the first entry),
/// `base` the block's file offset for errors. For readers that keep the block and decode
/// entries one at a time (a merge's table cursor).
pub(crate) fn span_at(entries: &[u8], base: u64, pos: usize, prev_len: usize) -> Result<Span> {
    let b = Block {
        data: entries,
        restarts: &[],
        base,
    };
    let r = b.entry_at(pos, prev_len)?;
    let at = |s: &[u8]| s.as_ptr() as usize - entries.as_ptr() as usize;
    Ok(Span {
        shared: r.shared,
        suffix: at(r.suffix)..at(r.suffix) + r.suffix.len(),
        value: r.value.map(|v| at(v)..at(v) + v.len()),
        end: r.end,
    })
}

/// An entry's place in its block (see [`span_at`]).
pub(crate) struct Span {
    /// Bytes shared with the previous key.
    pub shared: usize,
    /// The rest of the key.
    pub suffix: std::ops::Range<usize>,
    /// The value (`None`: a tombstone).
    pub value: Option<std::ops::Range<usize>>,
    /// Where the next entry starts.
    pub end: usize,
}

/// One entry as stored: the key's suffix after `shared` bytes of its predecessor's key, the
/// value (`None` for a tombstone), and the offset just past the entry.
struct Raw<'a> {
    shared: usize,
    suffix: &'a [u8],
    value: Option<&'a [u8]>,
    end: usize,
}

/// Length of the common prefix of `a` and `b`, and how `a` compares with `b`
/// (lexicographically, as `<[u8]>::cmp`), comparing 8 bytes at a time.
#[inline]
pub(crate) fn lcp_cmp(a: &[u8], b: &[u8]) -> (usize, Ordering) {
    let n = a.len().min(b.len());
    let (mut a8, mut b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let mut i = 0;
    while i + 8 <= n {
        let (Some(x), Some(y)) = (a8.next(), b8.next()) else {
            break;
        };
        let (x, y) = (prefix8(x), prefix8(y));
        if x != y {
            return (i + (x ^ y).leading_zeros() as usize / 8, x.cmp(&y));
        }
        i += 8;
    }
    while i < n {
        if a[i] != b[i] {
            return (i, a[i].cmp(&b[i]));
        }
        i += 1;
    }
    (n, a.len().cmp(&b.len()))
}

/// Iterator over a block's entries; stops after the first error.
#[derive(Debug, Clone)]
pub struct BlockIter<'a> {
    cursor: Cursor<'a>,
    key: Vec<u8>,
    failed: bool,
}

impl BlockIter<'_> {
    fn decode(&mut self) -> Result<Entry> {
        let c = &mut self.cursor;
        let at = c.offset();
        let shared = c.len(self.key.len(), "shared key length")?;
        let unshared = c.len(c.remaining(), "key length")?;
        let vtag = c.varint("value tag")?;
        let suffix = c.bytes(unshared, "key")?;
        self.key.truncate(shared);
        self.key.extend_from_slice(suffix);
        let value = if vtag == 0 {
            None
        } else {
            let vlen = usize::try_from(vtag - 1)
                .map_err(|_| Error::corrupt(at, "value length overflows"))?;
            Some(c.bytes(vlen, "value")?.to_vec())
        };
        Ok((self.key.clone(), value))
    }
}

impl Iterator for BlockIter<'_> {
    type Item = Result<Entry>;
    fn next(&mut self) -> Option<Result<Entry>> {
        if self.failed || self.cursor.is_empty() {
            return None;
        }
        let r = self.decode();
        self.failed = r.is_err();
        Some(r)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn entry_len_is_what_put_entry_appends() {
        let mut rng = Rng(11);
        for set in adversarial_key_sets() {
            let mut prev: &[u8] = &[];
            for (i, key) in set.iter().enumerate() {
                // Values around the one- and two-byte varint limits, and tombstones.
                let value = vec![7u8; [0, 1, 126, 127, 128, 300, 20_000][i % 7]];
                let value = (rng.below(5) != 0).then_some(value.as_slice());
                let shared = if i % 3 == 0 {
                    0
                } else {
                    common_prefix(key, prev)
                };
                let mut out = vec![1, 2, 3];
                put_entry(&mut out, shared, key, value);
                assert_eq!(out.len() - 3, entry_len(shared, key, value), "entry {i}");
                prev = key;
            }
        }
    }

    /// A small deterministic generator (splitmix64) for test keys.
    pub(crate) struct Rng(pub u64);

    impl Rng {
        pub(crate) fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut x = self.0;
            x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            x ^ (x >> 31)
        }
        pub(crate) fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Sorted, distinct key sets chosen to break prefix-based searches: empty keys, keys
    /// shorter than 8 bytes, keys that are prefixes of each other, zero and 0xff bytes, long
    /// shared prefixes and runs of keys with equal first 8 bytes.
    pub(crate) fn adversarial_key_sets() -> Vec<Vec<Vec<u8>>> {
        let mut rng = Rng(7);
        let mut sets = Vec::new();
        // Short keys over a tiny alphabet (zero bytes included), the empty key among them.
        for max_len in [3u64, 9, 20] {
            let mut s: Vec<Vec<u8>> = (0..400)
                .map(|_| {
                    let n = rng.below(max_len + 1) as usize;
                    (0..n)
                        .map(|_| [0u8, 1, b'a', 0xff][rng.below(4) as usize])
                        .collect()
                })
                .collect();
            s.push(Vec::new());
            sets.push(s);
        }
        // Every prefix of one string: each key a prefix of the next.
        sets.push((0..40).map(|n| vec![b'a'; n]).collect());
        sets.push((0..40).map(|n| vec![0u8; n]).collect());
        // A long shared prefix, then decimal numbers (as real keys often are).
        sets.push(
            (0..2000)
                .map(|i| format!("user:profile:{i}").into_bytes())
                .collect(),
        );
        // Runs sharing exactly 8 bytes, with tails of 0..4 bytes.
        sets.push(
            (0..600)
                .map(|_| {
                    let mut k = vec![[0u8, 0x41, 0xff][rng.below(3) as usize]; 8];
                    k.extend((0..rng.below(5)).map(|_| rng.below(3) as u8));
                    k
                })
                .collect(),
        );
        // Keys longer than 127 bytes sharing more than 127 (two-byte length varints).
        sets.push(
            (0..300)
                .map(|i| {
                    let mut k = vec![b'k'; 150 + i % 7];
                    k.extend(format!("{}", i * 7919 % 1000).bytes());
                    k
                })
                .collect(),
        );
        // Random 16-byte keys (the benchmark's shape).
        sets.push(
            (0..3000)
                .map(|_| {
                    let mut k = rng.next().to_be_bytes().to_vec();
                    k.extend(rng.next().to_be_bytes());
                    k
                })
                .collect(),
        );
        for s in &mut sets {
            s.sort();
            s.dedup();
        }
        sets
    }

    /// Keys to look up in a set: its keys, their neighbours, and keys outside it.
    pub(crate) fn probes(keys: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut rng = Rng(11);
        let mut p = vec![Vec::new(), vec![0], vec![0xff; 30]];
        for k in keys {
            p.push(k.clone());
            for tail in [0u8, 1, 0xff] {
                let mut x = k.clone();
                x.push(tail);
                p.push(x);
            }
            if let Some((last, init)) = k.split_last() {
                p.push(init.to_vec());
                let mut x = init.to_vec();
                x.push(last.wrapping_sub(1));
                p.push(x);
            }
            let mut x = k.clone();
            x.truncate(rng.below(k.len() as u64 + 1) as usize);
            x.extend((0..rng.below(10)).map(|_| rng.below(256) as u8));
            p.push(x);
        }
        p
    }

    #[test]
    fn lcp_cmp_agrees_with_slice_comparison() {
        for set in adversarial_key_sets() {
            let p = probes(&set);
            for (i, a) in p.iter().enumerate().step_by(7) {
                for b in p.iter().skip(i % 13).step_by(11) {
                    let (l, o) = lcp_cmp(a, b);
                    let want = a.iter().zip(b).take_while(|(x, y)| x == y).count();
                    assert_eq!((l, o), (want, a.cmp(b)), "{a:?} vs {b:?}");
                    if prefix8(a) < prefix8(b) {
                        assert!(a < b, "{a:?} vs {b:?}");
                    }
                }
            }
        }
    }

    /// The cursor reads every entry as the iterator does, and a seek lands on the first key
    /// at or after (or strictly after) the probe, from where it reads on in order; `reset`
    /// moves it from block to block.
    #[test]
    fn cursor_agrees_with_iteration_and_seeks() {
        let mut reused: Option<BlockCursor<Vec<u8>>> = None;
        let mut seeks = 0;
        for set in adversarial_key_sets() {
            for chunk in [1usize, 5, 16, 17, 33, 200, usize::MAX] {
                for keys in set.chunks(chunk.min(set.len()).max(1)).take(4) {
                    let mut b = BlockBuilder::default();
                    for (i, k) in keys.iter().enumerate() {
                        let mut v: Vec<u8> = k.iter().rev().copied().collect();
                        v.resize(v.len() + i * 37 % 300, i as u8);
                        b.add(k, (i % 5 != 3).then_some(v.as_slice()));
                    }
                    let bytes = b.finish();
                    let all: Vec<Entry> = Block::new(&bytes, 0)
                        .unwrap()
                        .iter()
                        .collect::<Result<_>>()
                        .unwrap();
                    let c = match &mut reused {
                        Some(c) => {
                            c.reset(bytes, 0).unwrap();
                            c
                        }
                        None => reused.insert(BlockCursor::new(bytes, 0).unwrap()),
                    };
                    assert!(!c.valid());
                    let read = |c: &mut BlockCursor<Vec<u8>>, most: usize| {
                        let mut got = Vec::new();
                        while c.valid() && got.len() < most {
                            got.push((c.key().to_vec(), c.value().map(<[u8]>::to_vec)));
                            c.advance().unwrap();
                        }
                        got
                    };
                    c.seek_to_first().unwrap();
                    assert_eq!(read(c, usize::MAX), all);
                    for p in probes(keys) {
                        for after in [false, true] {
                            c.seek(&p, after).unwrap();
                            seeks += 1;
                            let from = all.partition_point(|e| e.0 < p || (after && e.0 == p));
                            let want = &all[from..all.len().min(from + 3)];
                            assert_eq!(read(c, 3), want, "seek {p:?} after={after}");
                        }
                    }
                    // Backward: the entries in reverse, and from a backward seek the last
                    // entries at or before the probe.
                    let back = |c: &mut BlockCursor<Vec<u8>>, most: usize| {
                        let mut got = Vec::new();
                        while c.valid() && got.len() < most {
                            got.push((c.key().to_vec(), c.value().map(<[u8]>::to_vec)));
                            c.prev().unwrap();
                        }
                        got
                    };
                    c.seek_to_last().unwrap();
                    let mut rev = all.clone();
                    rev.reverse();
                    assert_eq!(back(c, usize::MAX), rev);
                    for p in probes(keys) {
                        for before in [false, true] {
                            c.seek_back(&p, before).unwrap();
                            let to = all.partition_point(|e| e.0 < p || (!before && e.0 == p));
                            let want: Vec<Entry> = all[to.saturating_sub(3)..to]
                                .iter()
                                .rev()
                                .cloned()
                                .collect();
                            assert_eq!(back(c, 3), want, "seek_back {p:?} before={before}");
                        }
                    }
                }
            }
        }
        assert!(seeks > 10_000, "{seeks} seeks");
        let mut c = BlockCursor::new(BlockBuilder::default().finish(), 0).unwrap();
        c.seek_to_first().unwrap();
        assert!(!c.valid());
        c.seek(b"a", false).unwrap();
        assert!(!c.valid());
        c.seek_to_last().unwrap();
        assert!(!c.valid());
        c.seek_back(b"a", false).unwrap();
        assert!(!c.valid());
    }

    /// Damaged blocks read backward (every byte changed in turn, and every cut): an error
    /// or entries, never a panic; and errors are reported, not passed over.
    #[test]
    fn damaged_blocks_read_backward_are_errors() {
        let mut b = BlockBuilder::default();
        for i in 0..100u32 {
            let k = format!("key{:05}", i * 7);
            b.add(k.as_bytes(), (i % 4 != 1).then_some(&[i as u8; 9][..]));
        }
        let good = b.finish();
        let mut errors = 0;
        let mut run = |bytes: Vec<u8>| {
            let Ok(mut c) = BlockCursor::new(bytes, 0) else {
                return;
            };
            let mut r = c.seek_to_last();
            let mut n = 0;
            while r.is_ok() && c.valid() && n < 1000 {
                r = c.prev();
                n += 1;
            }
            for probe in [&b"key00350"[..], b"", b"zzz", b"key"] {
                for before in [false, true] {
                    if c.seek_back(probe, before).is_err() {
                        errors += 1;
                    }
                }
            }
            errors += usize::from(r.is_err());
        };
        for i in 0..good.len() {
            for x in [0x01u8, 0x80, 0xff] {
                let mut bad = good.clone();
                bad[i] ^= x;
                run(bad);
            }
        }
        for n in 0..good.len() {
            let mut cut = good[..n].to_vec();
            cut.extend_from_slice(&good[good.len() - 4..]);
            run(cut);
        }
        assert!(errors > 100, "{errors} errors");
    }

    /// A lookup in an LZ4 block decodes only up to the entry it finds (or the first past
    /// it), answers as `Block::get` does, and leaves undecided (to the whole decode) only
    /// what its fast scan cannot read.
    #[test]
    fn get_decoding_stops_at_the_entry_and_agrees_with_get() {
        use super::super::lz4::Lz4Prefix;
        let (mut decided, mut undecided) = (0, 0);
        for set in adversarial_key_sets() {
            for keys in set.chunks(40).take(6) {
                let mut b = BlockBuilder::default();
                for (i, k) in keys.iter().enumerate() {
                    // Short repetitive values (one-byte lengths), some of 200 bytes (two).
                    let v = vec![b'v'; if i % 11 == 4 { 200 } else { 20 + i % 30 }];
                    b.add(k, (i % 5 != 3).then_some(v.as_slice()));
                }
                let raw = b.finish();
                let block = Block::new(&raw, 0).unwrap();
                // A codec-1 payload (the writer makes codec 3: see `split.rs`).
                let mut payload = (raw.len() as u32).to_le_bytes().to_vec();
                payload.extend(lz4_flex::block::compress(&raw));
                for (j, p) in probes(keys).iter().enumerate() {
                    if keys.last().is_some_and(|last| p > last) {
                        continue; // the index sends such keys to the next block
                    }
                    let (mut dec, len) = Lz4Prefix::new(&payload, 0).unwrap();
                    let mut out = vec![0u8; len];
                    match get_decoding(&mut dec, &mut out, p).unwrap() {
                        Some(got) => {
                            decided += 1;
                            assert_eq!(got, block.get(p).unwrap(), "probe {p:?}");
                            if j > 0 && keys.first() == Some(p) && len > 1000 {
                                assert!(dec.decoded() < len / 4, "{} of {len}", dec.decoded());
                            }
                        }
                        None => undecided += 1,
                    }
                }
            }
        }
        assert!(
            undecided == 0 && decided > 10_000,
            "{decided} / {undecided}"
        );
    }

    #[test]
    fn get_agrees_with_a_linear_search() {
        for set in adversarial_key_sets() {
            // Blocks of several sizes, so restart arrays of 1 and many entries are searched.
            for chunk in [1usize, 5, 16, 17, 33, 200, usize::MAX] {
                for keys in set.chunks(chunk.min(set.len()).max(1)).take(4) {
                    let mut b = BlockBuilder::default();
                    for (i, k) in keys.iter().enumerate() {
                        // Values of 0..300 bytes: tags of one and two varint bytes.
                        let mut v: Vec<u8> = k.iter().rev().copied().collect();
                        v.resize(v.len() + i * 37 % 300, i as u8);
                        b.add(k, (i % 5 != 3).then_some(v.as_slice()));
                    }
                    let bytes = b.finish();
                    let block = Block::new(&bytes, 0).unwrap();
                    let all: Vec<Entry> = block.iter().collect::<Result<_>>().unwrap();
                    for p in probes(keys) {
                        let want = all.iter().find(|e| e.0 == p).map(|e| e.1.clone());
                        assert_eq!(block.get(&p).unwrap(), want, "probe {p:?}");
                    }
                }
            }
        }
    }
}
