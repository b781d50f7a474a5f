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

use crate::codec::{put_varint, Cursor};
use crate::error::{Error, Result};

/// Entries between restart points.
pub const RESTART_INTERVAL: usize = 16;

/// Length of the common prefix of `a` and `b`, eight bytes at a time.
#[inline]
pub fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let x = u64::from_le_bytes(a[i..i + 8].try_into().unwrap_or([0; 8]));
        let y = u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
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

/// Builds one block.
#[derive(Debug, Default)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    last_key: Vec<u8>,
    count: usize,
}

impl BlockBuilder {
    /// Adds an entry; keys must arrive in strictly increasing order.
    pub fn add(&mut self, key: &[u8], value: Option<&[u8]>) {
        debug_assert!(self.count == 0 || key > self.last_key.as_slice());
        let shared = if self.count.is_multiple_of(RESTART_INTERVAL) {
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

    /// Size of the block if finished now.
    pub fn estimated_len(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// Number of entries added.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when no entry was added.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The last key added.
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Finishes the block and resets the builder.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        for r in &self.restarts {
            out.extend_from_slice(&r.to_le_bytes());
        }
        out.extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
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
        let r =
            u32::from_le_bytes([bytes[n - 4], bytes[n - 3], bytes[n - 2], bytes[n - 1]]) as usize;
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

    fn restart(&self, i: usize) -> u32 {
        let b = &self.restarts[4 * i..4 * i + 4];
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }

    fn restart_count(&self) -> usize {
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
        let mut c = Cursor::new(&self.data[off..], self.base + off as u64);
        let shared = c.varint("shared length")?;
        if shared != 0 {
            return Err(c.err("restart entry shares a prefix"));
        }
        let unshared = c.len(self.data.len(), "key length")?;
        c.varint("value tag")?;
        c.bytes(unshared, "key")
    }

    /// Looks `key` up: `None` when the block does not hold it, `Some(None)` for a tombstone.
    pub fn get(&self, key: &[u8]) -> Result<Option<Option<Vec<u8>>>> {
        // Last restart whose key is <= key.
        let (mut lo, mut hi) = (0usize, self.restart_count());
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            match self.restart_key(mid)?.cmp(key) {
                Ordering::Greater => hi = mid,
                _ => lo = mid,
            }
        }
        if self.restart_count() == 0 {
            return Ok(None);
        }
        // Scan one restart interval in place: the key is rebuilt in a reused buffer and only
        // the matching value is copied out.
        let start = self.restart(lo) as usize;
        let mut c = Cursor::new(&self.data[start..], self.base + start as u64);
        let mut cur: Vec<u8> = Vec::with_capacity(key.len() + 16);
        while !c.is_empty() {
            let at = c.offset();
            let shared = c.len(cur.len(), "shared key length")?;
            let unshared = c.len(c.remaining(), "key length")?;
            let vtag = c.varint("value tag")?;
            cur.truncate(shared);
            cur.extend_from_slice(c.bytes(unshared, "key")?);
            let vlen = if vtag == 0 {
                0
            } else {
                usize::try_from(vtag - 1)
                    .map_err(|_| Error::corrupt(at, "value length overflows"))?
            };
            let value = c.bytes(vlen, "value")?;
            match cur.as_slice().cmp(key) {
                Ordering::Less => continue,
                Ordering::Equal => return Ok(Some((vtag != 0).then(|| value.to_vec()))),
                Ordering::Greater => return Ok(None),
            }
        }
        Ok(None)
    }
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
