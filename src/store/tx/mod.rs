//! Optimistic serializable transactions: a [`Transaction`] reads a [`Snapshot`] overlaid
//! with its own buffered writes and records what it read; its commit is checked by the
//! group-commit leader, under the writer lock, against the keys written by every commit
//! numbered after its snapshot (the conflict window, `window.rs`), and written as one
//! batch when nothing it read changed. See docs/engine.md, "Transactions".
//!
//! ```text
//! transaction() ─► Registry::begin (counted, then its snapshot taken) ─► get/scan: own
//!   writes first, else the snapshot (the key or range noted) ─► put/delete: buffered
//! commit() ─► one batch with a TxCheck ─► leader: Window::admit (reads, ranges against
//!   keys written after the snapshot) ─► numbered, logged, applied, its keys recorded
//!   ─► or left out of the group: Error::Conflict / Error::TransactionTooOld
//! ```

mod scan;
mod window;

use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

pub use self::scan::TransactionScan;
pub(crate) use self::window::{Registry, TxCheck, Window};
use super::live::{owned_range, prefix_range};
use super::{Snapshot, Store, WriteOptions};
use crate::error::{Error, Result};
use crate::wal::WriteBatch;
use crate::Slice;

/// An optimistic, serializable transaction (see [`Store::transaction`]).
///
/// It reads the store as of the snapshot it began at, overlaid with its own writes
/// (read-your-writes, in scans too, both ways), and buffers its writes. Its
/// [`commit`](Self::commit) writes them as one atomic batch, unless a key it read (present
/// or absent) or a range it scanned was written by another commit since its snapshot:
/// then it writes nothing and fails with [`Error::Conflict`]. Dropping it (or
/// [`rollback`](Self::rollback)) discards it.
///
/// It owns what it needs (a handle of the store and its snapshot): `Send`, `'static`, and
/// it keeps the store open while it lives, as a [`Store`] clone does.
pub struct Transaction {
    store: Store,
    opts: WriteOptions,
    /// What it reads and writes in the keyspace it began on.
    own: Part,
    /// What it reads and writes in other keyspaces of the store (the `*_in` methods), in
    /// the order it first named them.
    others: Vec<(Store, Part)>,
    /// Keys read from a snapshot (not from its own writes), in any keyspace: conflicts are
    /// found by user key across keyspaces.
    reads: Vec<Vec<u8>>,
    /// Ranges scanned, in any keyspace.
    ranges: Vec<window::KeyRange>,
}

/// A transaction's view of one keyspace: the snapshot it reads there, and its buffered
/// writes.
pub(in crate::store) struct Part {
    /// The keyspace at the transaction's snapshot (taken on first read for another
    /// keyspace: a keyspace only written needs none).
    snap: Option<Snapshot>,
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// Ranges it deleted (`start..end`), in order. A write it made before one, inside it,
    /// left `writes` then; one made after is in `writes`, and wins over every range.
    deleted: Vec<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("seq", &self.seq())
            .field("keyspaces", &(1 + self.others.len()))
            .field("writes", &self.own.writes.len())
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Begins a transaction at a snapshot of the store as it is now; its commit is durable
    /// as the store's [`SyncPolicy`](super::SyncPolicy) says.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let store = filterstore::Store::open(dir.path(), Default::default())?;
    /// store.put("alice", "100")?;
    /// let mut tx = store.transaction();
    /// let a: u64 = std::str::from_utf8(&tx.get("alice")?.unwrap()).unwrap().parse().unwrap();
    /// tx.put("alice", (a - 30).to_string());
    /// tx.put("bob", "30");
    /// assert_eq!(tx.get("bob")?.unwrap(), b"30"); // its own write
    /// assert_eq!(store.get("bob")?, None); // not committed yet
    /// tx.commit()?; // Err(Error::Conflict) had another commit written "alice" since
    /// assert_eq!(store.get("alice")?.unwrap(), b"70");
    /// # Ok::<(), filterstore::Error>(())
    /// ```
    pub fn transaction(&self) -> Transaction {
        self.transaction_opt(&WriteOptions::default())
    }

    /// Begins a transaction whose commit is durable as `opts` says.
    pub fn transaction_opt(&self, opts: &WriteOptions) -> Transaction {
        let inner = &self.inner;
        let snap = inner.txs.begin(|| {
            let s = inner.snapshot();
            let seq = s.seq();
            (s, seq)
        });
        Transaction {
            store: self.clone(),
            opts: *opts,
            own: Part::new(Some(snap)),
            others: Vec::new(),
            reads: Vec::new(),
            ranges: Vec::new(),
        }
    }

    /// Sets `key` to `new` (`None`: deletes it) if it holds `expected` (`None`: absent),
    /// atomically. Returns `Ok(Ok(()))` when it did, `Ok(Err(current))` with the value it
    /// found otherwise. Retries by itself when another commit races it.
    pub fn compare_and_swap(
        &self,
        key: impl AsRef<[u8]>,
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<std::result::Result<(), Option<Slice>>> {
        let key = key.as_ref();
        self.retry(|tx| {
            let cur = tx.get(key)?;
            if cur.as_deref() != expected {
                return Ok(Err(cur));
            }
            match new {
                Some(v) => tx.put(key, v),
                None => tx.delete(key),
            }
            Ok(Ok(()))
        })
    }

    /// Replaces the value of `key` with `f` of it (`None`: absent; `f` returning `None`
    /// deletes it), atomically: `f` runs again on the newer value when another commit wrote
    /// the key in between. Returns the value `f` was last given (fjall's `fetch_update`).
    pub fn update<F>(&self, key: impl AsRef<[u8]>, mut f: F) -> Result<Option<Slice>>
    where
        F: FnMut(Option<&[u8]>) -> Option<Vec<u8>>,
    {
        let key = key.as_ref();
        self.retry(|tx| {
            let old = tx.get(key)?;
            match f(old.as_deref()) {
                Some(v) => tx.put(key, v),
                None => tx.delete(key),
            }
            Ok(old)
        })
    }

    /// Runs `body` in a new transaction and commits it, again while the commit conflicts.
    fn retry<T>(&self, mut body: impl FnMut(&mut Transaction) -> Result<T>) -> Result<T> {
        loop {
            let mut tx = self.transaction();
            let out = body(&mut tx)?;
            match tx.commit() {
                Err(Error::Conflict | Error::TransactionTooOld { .. }) => continue,
                r => return r.map(|()| out),
            }
        }
    }
}

impl Transaction {
    /// The commit sequence number of the snapshot it reads.
    pub fn seq(&self) -> u64 {
        self.snap().seq()
    }

    /// The snapshot it began at (of the keyspace it began on).
    fn snap(&self) -> &Snapshot {
        self.own
            .snap
            .as_ref()
            .expect("the own keyspace's snapshot is taken at the start")
    }

    /// Looks `key` up: its own write if it made one, else the snapshot's value (the key is
    /// then noted as read, present or absent).
    pub fn get(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Slice>> {
        self.own.get(key.as_ref(), &mut self.reads)
    }

    /// Whether `key` holds a value (a [`get`](Self::get) without the value).
    pub fn contains_key(&mut self, key: impl AsRef<[u8]>) -> Result<bool> {
        Ok(self.get(key)?.is_some())
    }

    /// Looks up every key of `keys` (as a loop of [`get`](Self::get) would).
    pub fn multi_get<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<Vec<Option<Slice>>> {
        self.own.multi_get(keys, &mut self.reads)
    }

    /// Iterates over `range` as the transaction sees it (its snapshot with its own writes
    /// laid over), both ways; the whole range is noted as read, however far the scan goes.
    pub fn scan<K: AsRef<[u8]>>(&mut self, range: impl RangeBounds<K>) -> TransactionScan {
        self.own.scan(owned_range(range), &mut self.ranges)
    }

    /// Iterates over the keys that start with `prefix` (a [`scan`](Self::scan) of them).
    pub fn scan_prefix(&mut self, prefix: impl AsRef<[u8]>) -> TransactionScan {
        self.own
            .scan(prefix_range(prefix.as_ref()), &mut self.ranges)
    }

    /// Buffers a put of `value` under `key` (written at the commit).
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.own.put(key.as_ref(), value.as_ref());
    }

    /// Buffers a delete of `key`.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) {
        self.own.delete(key.as_ref());
    }

    /// Buffers the removal of every key from `start` up to `end` (not included), as
    /// [`Store::delete_range`] does: committed as one range tombstone in the transaction's
    /// one log record. Its own reads and scans see the range empty at once, but for the
    /// writes it makes afterwards; other transactions that read a key in the range or
    /// scanned over it since their snapshot conflict with it.
    pub fn delete_range(&mut self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) {
        self.own.delete_range(start.as_ref(), end.as_ref());
    }

    /// Buffers the removal of every key that starts with `prefix` (a
    /// [`delete_range`](Self::delete_range) of them).
    pub fn delete_prefix(&mut self, prefix: impl AsRef<[u8]>) {
        let prefix = prefix.as_ref();
        let end =
            crate::tombstone::prefix_end(prefix).unwrap_or_else(crate::tombstone::key_space_end);
        self.delete_range(prefix, end);
    }

    /// Whether `ks` (a keyspace's handle) is of the keyspace the transaction began on.
    fn is_own(&self, ks: &Store) -> bool {
        same(&self.store, ks)
    }

    /// Its part for the keyspace of handle `ks` (made empty when first named).
    pub(in crate::store) fn part(&mut self, ks: &Store) -> &mut Part {
        if self.is_own(ks) {
            return &mut self.own;
        }
        let at = match self.others.iter().position(|(k, _)| same(k, ks)) {
            Some(at) => at,
            None => {
                self.others.push((ks.clone(), Part::new(None)));
                self.others.len() - 1
            }
        };
        &mut self.others[at].1
    }

    /// [`part`](Self::part), with the keyspace's snapshot at the transaction's instant.
    fn read_part(&mut self, ks: &Store) -> Result<&mut Part> {
        let snap = self.snap().clone();
        let part = self.part(ks);
        if part.snap.is_none() {
            part.snap = Some(snap.keyspace_of(ks)?);
        }
        Ok(part)
    }

    /// [`get`](Self::get) in the keyspace of handle `ks` (`Transaction::get_in`).
    pub(in crate::store) fn get_at(&mut self, ks: &Store, key: &[u8]) -> Result<Option<Slice>> {
        let mut reads = std::mem::take(&mut self.reads);
        let r = (self.read_part(ks)).and_then(|p| p.get(key, &mut reads));
        self.reads = reads;
        r
    }

    /// A scan of `range` in the keyspace of handle `ks` (`Transaction::scan_in`).
    pub(in crate::store) fn scan_at(
        &mut self,
        ks: &Store,
        range: (Bound<Vec<u8>>, Bound<Vec<u8>>),
    ) -> Result<TransactionScan> {
        let mut ranges = std::mem::take(&mut self.ranges);
        let r = (self.read_part(ks)).map(|p| p.scan(range, &mut ranges));
        self.ranges = ranges;
        r
    }

    /// Commits: writes its buffered writes as one atomic batch, durable as its write
    /// options say, unless a key it read or a range it scanned was written by another
    /// commit after its snapshot ([`Error::Conflict`]) or it stayed open too long
    /// ([`Error::TransactionTooOld`]); then nothing is written. A transaction that wrote
    /// nothing commits at once.
    pub fn commit(mut self) -> Result<()> {
        let parts = std::iter::once(&self.own).chain(self.others.iter().map(|(_, p)| p));
        if parts.clone().all(Part::is_empty) {
            return Ok(());
        }
        // In each keyspace its range deletions first: each of its writes came after every
        // deletion over it (one before it left `writes`). A put expires as a plain put
        // written with the transaction's write options would (`WriteOptions::ttl`, else the
        // store's default time to live), counted from now.
        let mut batch = WriteBatch::new();
        self.own.move_into(&mut batch, None);
        for (ks, part) in &mut self.others {
            part.move_into(&mut batch, Some(ks));
        }
        let check = Arc::new(TxCheck::new(
            self.seq(),
            std::mem::take(&mut self.reads),
            std::mem::take(&mut self.ranges),
            self.store.inner.opts.transaction_window_bytes,
        ));
        self.store.write_checked(batch, &self.opts, Some(&check))
    }

    /// Discards the transaction (as dropping it does).
    pub fn rollback(self) {}
}

impl Drop for Transaction {
    fn drop(&mut self) {
        self.store.inner.txs.end(self.seq());
    }
}

/// Whether two handles are of the same keyspace of the same store.
fn same(a: &Store, b: &Store) -> bool {
    let (a, b) = (&a.inner, &b.inner);
    a.tree.id == b.tree.id && Arc::ptr_eq(&a.manifest, &b.manifest)
}

impl Part {
    fn new(snap: Option<Snapshot>) -> Part {
        Part {
            snap,
            writes: BTreeMap::new(),
            deleted: Vec::new(),
        }
    }

    fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.deleted.is_empty()
    }

    /// The snapshot it reads (taken by `Transaction::read_part` before any read).
    fn snap(&self) -> &Snapshot {
        self.snap
            .as_ref()
            .expect("a part is given its snapshot before it is read")
    }

    fn get(&self, key: &[u8], reads: &mut Vec<Vec<u8>>) -> Result<Option<Slice>> {
        if let Some(v) = self.writes.get(key) {
            return Ok(v.as_deref().map(Slice::from));
        }
        if self.in_deleted(key) {
            return Ok(None);
        }
        reads.push(key.to_vec());
        self.snap().get(key)
    }

    fn multi_get<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        reads: &mut Vec<Vec<u8>>,
    ) -> Result<Vec<Option<Slice>>> {
        let missing: Vec<&[u8]> = keys
            .iter()
            .map(AsRef::as_ref)
            .filter(|k| !self.writes.contains_key(*k) && !self.in_deleted(k))
            .collect();
        let mut found = self.snap().multi_get(&missing)?.into_iter();
        reads.extend(missing.iter().map(|k| k.to_vec()));
        Ok(keys
            .iter()
            .map(|k| match self.writes.get(k.as_ref()) {
                Some(v) => v.as_deref().map(Slice::from),
                None if self.in_deleted(k.as_ref()) => None,
                None => found.next().flatten(),
            })
            .collect())
    }

    fn scan(
        &self,
        range: (Bound<Vec<u8>>, Bound<Vec<u8>>),
        ranges: &mut Vec<window::KeyRange>,
    ) -> TransactionScan {
        let base = self.snap().scan::<Vec<u8>>(range.clone());
        let own = if super::live::range_is_empty(&range.0, &range.1) {
            Vec::new()
        } else {
            self.writes
                .range::<Vec<u8>, _>(range.clone())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        ranges.push(range);
        if self.deleted.is_empty() {
            return TransactionScan::new(base, own);
        }
        // The snapshot's keys under its own range deletions are gone (its writes after
        // them come from `own`).
        let deleted = self.deleted.clone();
        let base = base.filter(move |item| match item {
            Ok((k, _)) => !deleted.iter().any(|(a, b)| a[..] <= k[..] && k[..] < b[..]),
            Err(_) => true,
        });
        TransactionScan::new(base, own)
    }

    /// Whether one of its own range deletions holds `key`.
    fn in_deleted(&self, key: &[u8]) -> bool {
        self.deleted
            .iter()
            .any(|(a, b)| a.as_slice() <= key && key < b.as_slice())
    }

    pub(in crate::store) fn put(&mut self, key: &[u8], value: &[u8]) {
        self.writes.insert(key.to_vec(), Some(value.to_vec()));
    }

    pub(in crate::store) fn delete(&mut self, key: &[u8]) {
        self.writes.insert(key.to_vec(), None);
    }

    pub(in crate::store) fn delete_range(&mut self, start: &[u8], end: &[u8]) {
        if start >= end {
            return;
        }
        let inside: Vec<Vec<u8>> = self
            .writes
            .range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)))
            .map(|(k, _)| k.clone())
            .collect();
        for k in inside {
            self.writes.remove(&k);
        }
        self.deleted.push((start.to_vec(), end.to_vec()));
    }

    /// Moves its writes into `batch`, in keyspace `ks` (`None`: the keyspace of the handle
    /// that writes the batch): its range deletions, then its puts and deletes.
    fn move_into(&mut self, batch: &mut WriteBatch, ks: Option<&Store>) {
        for (a, b) in std::mem::take(&mut self.deleted) {
            let n = batch.len();
            batch.delete_range(a, b);
            if let Some(ks) = ks.filter(|_| batch.len() > n) {
                batch.tag_last_with(ks);
            }
        }
        for (k, v) in std::mem::take(&mut self.writes) {
            match v {
                Some(v) => batch.put(k, v),
                None => batch.delete(k),
            };
            if let Some(ks) = ks {
                batch.tag_last_with(ks);
            }
        }
    }
}

#[cfg(test)]
mod tests;
