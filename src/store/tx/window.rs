//! The conflict window: the keys written by recent commits, with the sequence number of the
//! last commit that wrote each, kept while an open transaction may need them, and the
//! registry of open transactions that says how far back that is.
//!
//! The window lives in the writer's state (`Writer::window`) and is read and changed only
//! by the group-commit leader under the writer lock: a transaction's check and its commit
//! are one step of the commit order, with no lock of their own. See docs/engine.md,
//! "Transactions".

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{Error, Result};

/// Bytes counted per window entry beyond its key: a map node's share, a queue slot, the
/// `Arc` header.
const ENTRY_OVERHEAD: usize = 64;

/// A range a transaction scanned, as its bounds.
pub(crate) type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// What the leader checks before it commits a transaction's writes: the commit sequence
/// number of its snapshot, the keys it read there (present or absent) and the ranges it
/// scanned. The leader leaves its verdict here.
#[derive(Debug)]
pub(crate) struct TxCheck {
    pub(crate) snapshot: u64,
    pub(crate) reads: Vec<Vec<u8>>,
    pub(crate) ranges: Vec<KeyRange>,
    /// The window's limit ([`Options::transaction_window_bytes`](crate::Options)), for the
    /// error.
    limit: usize,
    verdict: AtomicU8,
}

const PENDING: u8 = 0;
const CONFLICT: u8 = 1;
const TOO_OLD: u8 = 2;

impl TxCheck {
    pub(crate) fn new(
        snapshot: u64,
        reads: Vec<Vec<u8>>,
        ranges: Vec<KeyRange>,
        limit: usize,
    ) -> Self {
        TxCheck {
            snapshot,
            reads,
            ranges,
            limit,
            verdict: AtomicU8::new(PENDING),
        }
    }

    /// `Ok` unless the leader refused the transaction.
    pub(crate) fn outcome(&self) -> Result<()> {
        match self.verdict.load(SeqCst) {
            CONFLICT => Err(Error::Conflict),
            TOO_OLD => Err(Error::TransactionTooOld {
                limit: self.limit as u64,
            }),
            _ => Ok(()),
        }
    }
}

/// A range deleted by the commit numbered `.0`: every key `.1 <= k < .2`.
type Deleted = (u64, Box<[u8]>, Box<[u8]>);

/// Keys and deleted ranges written since some commit (each counted with
/// [`ENTRY_OVERHEAD`] bytes more): every write numbered above `complete_from` is here (while
/// transactions are open; with none open it is kept empty).
#[derive(Default)]
pub(crate) struct Window {
    /// Each key with the number of the last commit that wrote it.
    keys: BTreeMap<Arc<[u8]>, u64>,
    /// The same entries in commit order, for pruning from the oldest.
    order: VecDeque<(u64, Arc<[u8]>)>,
    /// Ranges deleted (`delete_range`: every key `start <= k < end`), in commit order, with
    /// their commit's number. Few: each is checked against every read.
    deleted: VecDeque<Deleted>,
    bytes: usize,
    /// The window holds every write numbered above this.
    complete_from: u64,
}

impl Window {
    /// Records that the commit numbered `seq` wrote `key`.
    pub(crate) fn record(&mut self, key: &[u8], seq: u64) {
        let k: Arc<[u8]> = Arc::from(key);
        self.bytes += k.len() + ENTRY_OVERHEAD;
        self.keys.insert(k.clone(), seq);
        self.order.push_back((seq, k));
    }

    /// Records what `op`, in the commit numbered `seq`, wrote.
    pub(crate) fn record_op(&mut self, op: crate::wal::Op<'_>, seq: u64) {
        match op {
            crate::wal::Op::Put(k, _)
            | crate::wal::Op::PutExpiring(k, ..)
            | crate::wal::Op::Delete(k) => self.record(k, seq),
            crate::wal::Op::DeleteRange(a, b) => {
                self.bytes += a.len() + b.len() + ENTRY_OVERHEAD;
                self.deleted.push_back((seq, a.into(), b.into()));
            }
        }
    }

    /// Checks `tx` against every write recorded after its snapshot; on success the caller
    /// records its writes. Sets and returns the verdict.
    pub(crate) fn admit(&self, tx: &TxCheck) -> bool {
        let verdict = if tx.snapshot < self.complete_from {
            TOO_OLD
        } else if self.conflicts(tx) {
            CONFLICT
        } else {
            PENDING
        };
        tx.verdict.store(verdict, SeqCst);
        verdict == PENDING
    }

    fn conflicts(&self, tx: &TxCheck) -> bool {
        let after = |s: &u64| *s > tx.snapshot;
        // Ranges deleted after the snapshot: a read key inside one, or a scanned range that
        // overlaps one (an excluded start `a` counted as overlapping `..end` when `a < end`,
        // a false conflict only when `end` is `a` plus a zero byte).
        let deleted: Vec<(&[u8], &[u8])> = self
            .deleted
            .iter()
            .filter(|(s, _, _)| after(s))
            .map(|(_, a, b)| (&a[..], &b[..]))
            .collect();
        let in_deleted = |k: &[u8]| deleted.iter().any(|&(a, b)| a <= k && k < b);
        let overlaps = |lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>| {
            deleted.iter().any(|&(a, b)| {
                let above_lo = match lo {
                    Bound::Included(l) | Bound::Excluded(l) => l.as_slice() < b,
                    Bound::Unbounded => true,
                };
                let below_hi = match hi {
                    Bound::Included(h) => a <= h.as_slice(),
                    Bound::Excluded(h) => a < h.as_slice(),
                    Bound::Unbounded => true,
                };
                a < b && above_lo && below_hi
            })
        };
        tx.reads
            .iter()
            .any(|k| self.keys.get(k.as_slice()).is_some_and(after) || in_deleted(k))
            || tx.ranges.iter().any(|(lo, hi)| {
                if crate::store::live::range_is_empty(lo, hi) {
                    return false;
                }
                let r = (
                    lo.as_ref().map(|k| k.as_slice()),
                    hi.as_ref().map(|k| k.as_slice()),
                );
                self.keys.range::<[u8], _>(r).any(|(_, s)| after(s)) || overlaps(lo, hi)
            })
    }

    /// Drops what no open transaction needs: with none open, everything up to `last` (the
    /// last commit numbered); else every entry at or below the oldest open snapshot
    /// `oldest`; then the oldest entries while the window is over `limit` bytes.
    pub(crate) fn prune(&mut self, oldest: Option<u64>, last: u64, limit: usize) {
        let Some(oldest) = oldest else {
            if !self.order.is_empty() || !self.deleted.is_empty() {
                *self = Window::default();
            }
            self.complete_from = last;
            return;
        };
        while let Some(seq) = self.oldest_entry() {
            if seq > oldest && self.bytes <= limit {
                break;
            }
            self.pop();
        }
        self.complete_from = self.complete_from.max(oldest.min(last));
    }

    /// The commit number of the oldest entry, key or deleted range.
    fn oldest_entry(&self) -> Option<u64> {
        let k = self.order.front().map(|e| e.0);
        let d = self.deleted.front().map(|e| e.0);
        k.into_iter().chain(d).min()
    }

    /// Drops the oldest entry (a key, or a deleted range when that is older).
    fn pop(&mut self) {
        let range_first = match (self.order.front(), self.deleted.front()) {
            (Some(k), Some(d)) => d.0 < k.0,
            (None, Some(_)) => true,
            _ => false,
        };
        if range_first {
            if let Some((seq, a, b)) = self.deleted.pop_front() {
                self.bytes -= a.len() + b.len() + ENTRY_OVERHEAD;
                self.complete_from = self.complete_from.max(seq);
            }
        } else if let Some((seq, k)) = self.order.pop_front() {
            self.bytes -= k.len() + ENTRY_OVERHEAD;
            if self.keys.get(&k) == Some(&seq) {
                self.keys.remove(&k);
            }
            self.complete_from = self.complete_from.max(seq);
        }
    }

    /// Bytes the window holds (as counted against its limit).
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

/// The open transactions: how many, and their snapshots' sequence numbers.
#[derive(Default)]
pub(crate) struct Registry {
    /// Open transactions. A leader reads it under the state lock, after it made its group
    /// visible: a transaction counted here before its snapshot was taken (see
    /// [`Registry::begin`]) either sees the group or finds it in the window.
    pub(crate) active: AtomicUsize,
    /// Open transactions by snapshot sequence number (with a count of each).
    open: Mutex<BTreeMap<u64, usize>>,
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, usize>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a transaction and takes its snapshot with `take` (which returns it and
    /// its sequence number), counted before the snapshot is taken.
    pub(crate) fn begin<T>(&self, take: impl FnOnce() -> (T, u64)) -> T {
        let mut open = self.lock();
        self.active.fetch_add(1, SeqCst);
        let (snap, seq) = take();
        *open.entry(seq).or_default() += 1;
        snap
    }

    /// Unregisters the transaction whose snapshot is numbered `seq`.
    pub(crate) fn end(&self, seq: u64) {
        let mut open = self.lock();
        if let Some(n) = open.get_mut(&seq) {
            *n -= 1;
            if *n == 0 {
                open.remove(&seq);
            }
            self.active.fetch_sub(1, SeqCst);
        }
    }

    /// The oldest open transaction's snapshot, if any is open.
    pub(crate) fn oldest(&self) -> Option<u64> {
        self.lock().keys().next().copied()
    }
}
