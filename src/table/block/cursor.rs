//! [`BlockCursor`]: a position in one block, decoded in place, that moves forward entry by
//! entry or backward restart interval by restart interval.
//!
//! **Backward.** Keys are prefix-compressed against their predecessor, so a block can only be
//! decoded forward. A backward step decodes the restart interval it enters forward once,
//! keeping each entry's key (one buffer, [`RESTART_INTERVAL`](super::RESTART_INTERVAL) keys
//! in a block as written) and its value's place in the block, and then walks back through
//! them: each entry is decoded once either way. The buffer is bounded: an interval whose keys
//! add up to more than [`MAX_BACK_BYTES`] (bytes no writer makes) is an error, and a buffer
//! grown past [`KEEP`](crate::table::scratch::KEEP) is given back when the next interval is
//! read.

use std::cmp::Ordering;

use super::Block;
use crate::codec::MAX_KEY_LEN;
use crate::error::{Error, Result};
use crate::table::scratch::KEEP;

/// Most key bytes one restart interval may decode to when read backward: a full interval of
/// the longest keys. Only a damaged block (restart points missing, or keys that share long
/// prefixes over an interval far longer than a writer makes) comes near it.
pub(crate) const MAX_BACK_BYTES: usize = super::RESTART_INTERVAL * MAX_KEY_LEN;

/// A position in one block, decoded in place: [`seek`](Self::seek) to the first key at or
/// after a target (a binary search over the restart points, then at most one interval read
/// forward), then [`advance`](Self::advance) entry by entry. The current key is rebuilt in
/// one buffer that [`reset`](Self::reset) keeps from block to block, and the value is a
/// slice of the block's own bytes: nothing is allocated per entry. `B` holds the block's
/// bytes (entries and restart array, as [`Block::new`] takes them).
///
/// Bytes that do not decode are an error at their offset (`base` is the block's offset in
/// its file); the cursor is then invalid.
#[derive(Debug)]
pub struct BlockCursor<B> {
    bytes: B,
    /// Where the restart array starts: the entries are `bytes[..entries_len]`.
    entries_len: usize,
    base: u64,
    /// Offset of the entry after the current one.
    next: usize,
    key: Vec<u8>,
    /// The current value's place in `bytes` (`None`: a tombstone).
    value: Option<(usize, usize)>,
    valid: bool,
    /// Going backward: the entries of restart interval `back_restart`, decoded forward.
    back: Back,
}

/// Where an entry's key ends in [`Back::keys`], its value's place in the block (`None`: a
/// tombstone), and the offset of the entry after it.
type BackEntry = (usize, Option<(usize, usize)>, usize);

/// One restart interval's entries, decoded forward for a backward walk.
#[derive(Debug, Default)]
struct Back {
    /// The interval's keys, one after another.
    keys: Vec<u8>,
    /// Per entry: where its key ends in `keys`, its value's place in the block, and the
    /// offset of the entry after it.
    entries: Vec<BackEntry>,
    /// The restart interval held.
    restart: usize,
    /// The current entry of `entries`.
    at: usize,
}

impl<B: std::ops::Deref<Target = [u8]>> BlockCursor<B> {
    /// A cursor over `bytes` (checked as [`Block::new`] checks them), before its first
    /// entry: not valid until a seek.
    pub fn new(bytes: B, base: u64) -> Result<BlockCursor<B>> {
        let entries_len = Block::new(&bytes, base)?.entries_len();
        Ok(BlockCursor {
            bytes,
            entries_len,
            base,
            next: 0,
            key: Vec::new(),
            value: None,
            valid: false,
            back: Back::default(),
        })
    }

    /// Moves the cursor to another block (keeping its key buffer), before its first entry.
    pub fn reset(&mut self, bytes: B, base: u64) -> Result<()> {
        self.valid = false;
        self.entries_len = Block::new(&bytes, base)?.entries_len();
        self.bytes = bytes;
        self.base = base;
        Ok(())
    }

    /// The block, as [`Block::new`] checked it when the cursor took it.
    fn block(&self) -> Block<'_> {
        let n = self.bytes.len();
        Block {
            data: &self.bytes[..self.entries_len],
            restarts: &self.bytes[self.entries_len..n - 4],
            base: self.base,
        }
    }

    /// True while the cursor stands on an entry.
    #[inline]
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current key (valid cursors only).
    #[inline]
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The current value, `None` for a tombstone (valid cursors only).
    #[inline]
    pub fn value(&self) -> Option<&[u8]> {
        self.value.map(|(a, b)| &self.bytes[a..b])
    }

    /// The current value's place in [`bytes`](Self::bytes) (`None`: a tombstone; valid
    /// cursors only): a scan shares it out of the block instead of copying it.
    #[inline]
    pub(crate) fn value_range(&self) -> Option<std::ops::Range<usize>> {
        self.value.map(|(a, b)| a..b)
    }

    /// The block's bytes.
    #[inline]
    pub(crate) fn bytes(&self) -> &B {
        &self.bytes
    }

    /// Decodes the entry at `pos`, after the key in `self.key`, and stands on it.
    #[inline]
    fn read_at(&mut self, pos: usize) -> Result<()> {
        self.valid = false;
        let (shared, suffix, value, end) = {
            let b = self.block();
            let e = b.entry_at(pos, self.key.len())?;
            let at = |s: &[u8]| s.as_ptr() as usize - self.bytes.as_ptr() as usize;
            let value = e.value.map(|v| (at(v), at(v) + v.len()));
            (
                e.shared,
                (at(e.suffix), at(e.suffix) + e.suffix.len()),
                value,
                e.end,
            )
        };
        self.key.truncate(shared);
        self.key.extend_from_slice(&self.bytes[suffix.0..suffix.1]);
        self.value = value;
        self.next = end;
        self.valid = true;
        Ok(())
    }

    /// Stands on the first entry (invalid for an empty block).
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.key.clear();
        self.valid = false;
        if self.entries_len == 0 {
            return Ok(());
        }
        self.read_at(0)
    }

    /// Stands on the first entry whose key is >= `target` (> `target` with `after`), or
    /// becomes invalid when the block has none.
    pub fn seek(&mut self, target: &[u8], after: bool) -> Result<()> {
        let before = |k: &[u8]| match k.cmp(target) {
            Ordering::Less => true,
            Ordering::Equal => after,
            Ordering::Greater => false,
        };
        self.key.clear();
        self.valid = false;
        let restarts = self.block().restart_count();
        if restarts == 0 {
            return Ok(());
        }
        // Restarts whose key is before the target: a prefix of the array in a sorted block
        // (in an unsorted one, the search lands somewhere and the reads below stay checked).
        let (mut lo, mut hi) = (0usize, restarts);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if before(self.block().restart_key(mid)?) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        // The last restart before the target (or the first), then forward.
        let mut pos = self.block().restart(lo.saturating_sub(1)) as usize;
        loop {
            self.read_at(pos)?;
            if !before(&self.key) {
                return Ok(());
            }
            pos = self.next;
            if pos >= self.entries_len {
                self.valid = false;
                return Ok(());
            }
        }
    }

    /// Moves to the next entry (invalid past the last one).
    pub fn advance(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        if self.next >= self.entries_len {
            self.valid = false;
            return Ok(());
        }
        self.read_at(self.next)
    }

    /// Decodes restart interval `r` into [`Back`] (see the module docs), up to the first
    /// entry whose key does not `fit` (that one and those after it are left out: a backward
    /// walk never goes forward from the entry it stands on).
    fn load_interval(&mut self, r: usize, fit: impl Fn(&[u8]) -> bool) -> Result<()> {
        self.valid = false;
        let (start, end) = {
            let b = self.block();
            let end = if r + 1 < b.restart_count() {
                b.restart(r + 1) as usize
            } else {
                b.entries_len()
            };
            (b.restart(r) as usize, end)
        };
        let back = &mut self.back;
        if back.keys.capacity() > KEEP {
            back.keys = Vec::new();
        }
        if back.entries.capacity() == 0 {
            // A cursor is made per scan and level: one allocation each for a whole
            // interval of keys up to 32 bytes, not a growth from empty at every scan.
            back.entries.reserve(super::RESTART_INTERVAL);
            back.keys.reserve(super::RESTART_INTERVAL * 32);
        }
        back.keys.clear();
        back.entries.clear();
        back.restart = r;
        // Each key is rebuilt in `keys` from its predecessor there (`prev`) and its suffix,
        // as `read_at` rebuilds `key`: one copy per entry.
        let mut prev = 0..0;
        let mut pos = start;
        while pos < end {
            let (shared, suffix, value, next) = {
                let b = self.block();
                let e = b.entry_at(pos, prev.len())?;
                let at = |s: &[u8]| s.as_ptr() as usize - self.bytes.as_ptr() as usize;
                (
                    e.shared,
                    at(e.suffix)..at(e.suffix) + e.suffix.len(),
                    e.value.map(|v| (at(v), at(v) + v.len())),
                    e.end,
                )
            };
            let keys = &mut self.back.keys;
            let at = keys.len();
            if at + shared + suffix.len() > MAX_BACK_BYTES {
                return Err(Error::corrupt(
                    self.base + pos as u64,
                    "restart interval too long to read backward",
                ));
            }
            keys.extend_from_within(prev.start..prev.start + shared);
            keys.extend_from_slice(&self.bytes[suffix]);
            if !fit(&keys[at..]) {
                keys.truncate(at);
                break;
            }
            prev = at..keys.len();
            self.back.entries.push((prev.end, value, next));
            pos = next;
        }
        Ok(())
    }

    /// Stands on entry `i` of the interval in [`Back`] (invalid when there is none).
    fn stand_back(&mut self, i: usize) {
        let Some(&(end, value, next)) = self.back.entries.get(i) else {
            self.valid = false;
            return;
        };
        let start = i
            .checked_sub(1)
            .and_then(|j| self.back.entries.get(j))
            .map_or(0, |e| e.0);
        self.key.clear();
        self.key
            .extend_from_slice(self.back.keys.get(start..end).unwrap_or_default());
        self.value = value;
        self.next = next;
        self.back.at = i;
        self.valid = true;
    }

    /// Stands on the last entry of the intervals from `r` down (invalid when they hold none).
    fn last_from(&mut self, mut r: usize) -> Result<()> {
        loop {
            self.load_interval(r, |_| true)?;
            if let Some(last) = self.back.entries.len().checked_sub(1) {
                self.stand_back(last);
                return Ok(());
            }
            let Some(p) = r.checked_sub(1) else {
                return Ok(());
            };
            r = p;
        }
    }

    /// Stands on the last entry (invalid for an empty block).
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.valid = false;
        match self.block().restart_count().checked_sub(1) {
            Some(r) => self.last_from(r),
            None => Ok(()),
        }
    }

    /// Stands on the last entry whose key is <= `target` (< `target` with `before`), or
    /// becomes invalid when the block has none.
    pub fn seek_back(&mut self, target: &[u8], before: bool) -> Result<()> {
        let fits = |k: &[u8]| match k.cmp(target) {
            Ordering::Less => true,
            Ordering::Equal => !before,
            Ordering::Greater => false,
        };
        self.valid = false;
        let restarts = self.block().restart_count();
        // Restarts whose key fits: a prefix of the array in a sorted block.
        let (mut lo, mut hi) = (0usize, restarts);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if fits(self.block().restart_key(mid)?) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let Some(r) = lo.checked_sub(1) else {
            return Ok(());
        };
        // The entries of the interval that fit (the first does, in a sorted block): the last
        // of them is the one.
        self.load_interval(r, fits)?;
        let fit = self.back.entries.len().checked_sub(1);
        match fit {
            Some(i) => self.stand_back(i),
            None => match r.checked_sub(1) {
                Some(p) => self.last_from(p)?,
                None => self.valid = false,
            },
        }
        Ok(())
    }

    /// Moves to the previous entry (invalid before the first one). Only after a backward
    /// positioning ([`seek_back`](Self::seek_back), [`seek_to_last`](Self::seek_to_last)).
    pub fn prev(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        if let Some(i) = self.back.at.checked_sub(1) {
            self.stand_back(i);
            return Ok(());
        }
        match self.back.restart.checked_sub(1) {
            Some(r) => self.last_from(r),
            None => {
                self.valid = false;
                Ok(())
            }
        }
    }
}
