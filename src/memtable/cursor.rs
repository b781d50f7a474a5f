//! Scans of a memtable: a cursor over the snapshot of the moment it was made, copying
//! entries out into a reusable buffer (see the module docs of `memtable`, "Snapshots").

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use super::order::Run;
use super::{Memtable, OLDER};

/// A cursor stops filling a buffer once it holds this many bytes (and at least one entry).
const FILL_BYTES: usize = 64 << 10;

impl Memtable {
    /// A cursor over the entries from `start` on, as they are at this moment (see the module
    /// docs, "Snapshots"). `live`: the memtable still takes writes, so the cursor counts as
    /// an open scan until it is released or dropped, and overwrites keep the versions it
    /// may need. The cursor must only be filled from this memtable.
    pub(crate) fn cursor(&self, start: Bound<&[u8]>, live: bool) -> MemCursor {
        let snap = if live { self.arena.end_pos() } else { u64::MAX };
        self.cursor_at(start, snap, live)
    }

    /// The arena position writes have reached: a snapshot of this moment sees exactly the
    /// versions below it ([`get_at`](Self::get_at), [`cursor_at`](Self::cursor_at)).
    pub(crate) fn snapshot_pos(&self) -> u64 {
        self.arena.end_pos()
    }

    /// Registers a reader of versions older than the memtable's newest: until the guard is
    /// dropped, overwrites and deletes link the version they replace (see the module docs).
    pub(crate) fn reader(&self) -> ReaderGuard {
        self.readers.fetch_add(1, Relaxed);
        ReaderGuard(self.readers.clone())
    }

    /// A cursor over the entries from `start` on as they were when writes had reached
    /// position `snap` ([`snapshot_pos`](Self::snapshot_pos), taken while a reader was
    /// registered): keys written later are skipped, versions written later walked back
    /// from. `live`: the cursor registers as a reader itself.
    pub(crate) fn cursor_at(&self, start: Bound<&[u8]>, snap: u64, live: bool) -> MemCursor {
        let runs = self.runs();
        let pos = runs
            .iter()
            .map(|r| match start {
                Bound::Included(s) => self.seek_run(r, s, false),
                Bound::Excluded(s) => self.seek_run(r, s, true),
                Bound::Unbounded => 0,
            })
            .collect();
        MemCursor {
            runs,
            pos,
            snap,
            reader: live.then(|| self.reader()),
            rev: false,
            now: 0,
        }
    }
}

/// A registered reader of a memtable (see [`Memtable::reader`]).
#[derive(Debug)]
pub(crate) struct ReaderGuard(Arc<AtomicUsize>);

impl Drop for ReaderGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

/// A scan's position in one memtable, and the snapshot it reads (see the module docs):
/// [`fill`](Self::fill) copies the next entries, in key order, into an [`EntryBuf`].
#[derive(Debug)]
pub(crate) struct MemCursor {
    runs: Arc<Vec<Run>>,
    /// The next position in each run.
    pos: Vec<usize>,
    /// Arena position writes had reached when the cursor was made (`u64::MAX`: the
    /// memtable takes no more writes, every version is visible).
    snap: u64,
    reader: Option<ReaderGuard>,
    /// Backward: each run's position is one past its next entry.
    rev: bool,
    /// The time expiry is judged at (0: nothing is expired).
    now: u64,
}

impl MemCursor {
    /// This cursor, judging expiry at `now` (Unix milliseconds): an entry expired by then
    /// is handed out as a tombstone. Without it, nothing reads as expired.
    pub(crate) fn at_time(mut self, now: u64) -> MemCursor {
        self.now = now;
        self
    }

    /// A backward cursor over the same snapshot, not yet positioned: it holds nothing until
    /// [`seek_back`](Self::seek_back) (a scan's back end, made with its front, costs an
    /// `Arc` and no search until it is used).
    pub(crate) fn back(&self) -> MemCursor {
        let reader = self.reader.as_ref().map(|g| {
            g.0.fetch_add(1, Relaxed);
            ReaderGuard(g.0.clone())
        });
        MemCursor {
            runs: self.runs.clone(),
            pos: Vec::new(),
            snap: self.snap,
            reader,
            rev: true,
            now: self.now,
        }
    }

    /// Positions a backward cursor after the last entry at or before `end` (`mem` as for
    /// [`fill`](Self::fill)).
    pub(crate) fn seek_back(&mut self, mem: &Memtable, end: Bound<&[u8]>) {
        self.pos = self
            .runs
            .iter()
            .map(|r| match end {
                Bound::Included(e) => mem.seek_run(r, e, true),
                Bound::Excluded(e) => mem.seek_run(r, e, false),
                Bound::Unbounded => r.len(),
            })
            .collect();
    }

    /// Replaces `out`'s entries with the next ones, in key order, as the snapshot saw them
    /// (tombstones included): up to `max` entries or about [`FILL_BYTES`] (at least one).
    /// `mem` must be the memtable the cursor was made from. Returns false once the cursor
    /// has nothing left after these.
    pub(crate) fn fill(&mut self, mem: &Memtable, out: &mut EntryBuf, max: usize) -> bool {
        out.clear();
        loop {
            // The run whose next key is the smallest, or backward the largest (the runs'
            // keys are disjoint).
            let mut best: Option<(usize, (u64, u32))> = None;
            let want = if self.rev {
                Ordering::Greater
            } else {
                Ordering::Less
            };
            for (r, run) in self.runs.iter().enumerate() {
                let Some(&at) = self.pos.get(r) else {
                    continue;
                };
                let next = if self.rev {
                    at.checked_sub(1)
                } else {
                    Some(at)
                };
                if let Some(&p) = next.and_then(|i| run.get(i)) {
                    if best.is_none_or(|(_, b)| mem.cmp_slots(&p, &b) == want) {
                        best = Some((r, p));
                    }
                }
            }
            let Some((r, (_, slot))) = best else {
                self.release();
                return false;
            };
            if out.len() >= max.max(1) || out.bytes.len() >= FILL_BYTES {
                return true;
            }
            if self.rev {
                self.pos[r] -= 1;
            } else {
                self.pos[r] += 1;
            }
            let s = &mem.slots[slot as usize];
            if s.key_at >= self.snap {
                // Written after the snapshot (a cursor of a snapshot taken before it).
                continue;
            }
            let (mut at, mut vlen) = (s.val_at, s.vlen);
            // Back to the newest version written before the snapshot. Every version this
            // cursor may need is linked: overwrites link while `reader` is held.
            while at >= self.snap && vlen & OLDER != 0 {
                (at, vlen) = mem.older(at);
            }
            debug_assert!(at < self.snap, "a version a scan needs was not linked");
            let key = mem.key(s);
            if mem.covered(key, at, self.snap) {
                // Hidden by a range tombstone of this memtable: a tombstone to the merge.
                out.push(key, None);
            } else if crate::expiry::expired_at(mem.expiry(at, vlen), self.now) {
                out.push(key, None);
            } else {
                out.push(key, mem.version(at, vlen));
            }
        }
    }

    /// The arena position of its snapshot (`u64::MAX`: every version).
    pub(crate) fn snap(&self) -> u64 {
        self.snap
    }

    /// The memtable takes no more writes (it was made immutable), or the cursor is done:
    /// overwrites need not keep versions for it any more.
    pub(crate) fn release(&mut self) {
        self.reader = None;
    }
}

/// Entries copied out of a memtable: keys and values in one buffer, reused from fill to
/// fill, so copying allocates nothing once it has grown.
#[derive(Debug, Default)]
pub(crate) struct EntryBuf {
    bytes: Vec<u8>,
    /// Per entry: where its key starts, where its key ends (and its value starts), where its
    /// value ends, and whether it is a tombstone.
    entries: Vec<(usize, usize, usize, bool)>,
}

impl EntryBuf {
    fn clear(&mut self) {
        self.bytes.clear();
        self.entries.clear();
    }

    fn push(&mut self, key: &[u8], value: Option<&[u8]>) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(key);
        let key_end = self.bytes.len();
        self.bytes.extend_from_slice(value.unwrap_or_default());
        self.entries
            .push((start, key_end, self.bytes.len(), value.is_none()));
    }

    /// Entries held.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Key of entry `i`.
    #[inline]
    pub(crate) fn key(&self, i: usize) -> &[u8] {
        let (s, k, _, _) = self.entries[i];
        &self.bytes[s..k]
    }

    /// Value of entry `i` (`None`: a tombstone).
    #[inline]
    pub(crate) fn value(&self, i: usize) -> Option<&[u8]> {
        let (_, k, e, tomb) = self.entries[i];
        (!tomb).then(|| &self.bytes[k..e])
    }
}
