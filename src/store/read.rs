//! The read path: point lookups (memtable, immutable memtable, then the table set of
//! `version/`), long-lived [`Reader`]s, and the start of range scans (`scan.rs`).

use std::cell::RefCell;
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

use super::live::{owned_range, prefix_range, range_is_empty, LiveMem};
use super::{Inner, Store};
use crate::error::Result;
use crate::expiry::Now;
use crate::hash::key_hash;
pub use crate::scan::Scan;
use crate::scan::{MemSource, ScanInput};
use crate::version::{Batch, Version};
use crate::Slice;

impl Store {
    /// Looks `key` up (anything that is bytes: `&[u8]`, `Vec<u8>`, `&str`, arrays).
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Slice>> {
        let key = key.as_ref();
        self.get_with_hash(key, key_hash(key))
    }

    /// Looks `key` up with its precomputed [`key_hash`] (hash once, probe every table).
    ///
    /// `hash` must be `key_hash(key)`: the memtable's index and the filters are searched
    /// with it, so any other value can miss a key that is there.
    pub fn get_with_hash(&self, key: &[u8], hash: u64) -> Result<Option<Slice>> {
        self.inner.get_with_hash(key, hash)
    }

    /// Looks up every key of `keys`: the values, in the order of `keys`, exactly as a loop
    /// of [`get`](Self::get) would return them, and counted in [`Stats`](super::Stats) as
    /// that loop would be (one lookup per key, and the same filter answers and block reads).
    /// Duplicate keys are looked up, and counted, once per occurrence.
    ///
    /// Faster than the loop, in the spirit of RocksDB's `MultiGet`: the keys are hashed
    /// once, the memtables searched under one lock, then each table is probed for all the
    /// keys still unanswered that its range holds: its filter asked for them all with their
    /// cache misses overlapped, then its data blocks read for the keys the filter may hold.
    /// A key found in a newer table, or hidden there by a tombstone, is not looked up in
    /// older ones. All keys are read from one snapshot of the store. On an error (a damaged
    /// block) no values are returned.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let store = filterstore::Store::open(dir.path(), Default::default())?;
    /// store.put(b"apple", b"red")?;
    /// store.put(b"kiwi", b"green")?;
    /// store.flush()?;
    /// store.delete(b"kiwi")?;
    /// let keys: [&[u8]; 4] = [b"apple", b"kiwi", b"pear", b"apple"];
    /// let values = store.multi_get(&keys)?;
    /// let red = Some(filterstore::Slice::from("red"));
    /// assert_eq!(values, [red.clone(), None, None, red.clone()]);
    /// // Anything that derefs to bytes will do: `Vec<u8>`, `String`, arrays.
    /// assert_eq!(store.multi_get(&[b"apple".to_vec()])?, [red]);
    /// assert_eq!(store.stats().lookups, 5);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Slice>>> {
        self.inner.multi_get(keys)
    }

    /// A reader for many lookups from one thread: it keeps the table set it last saw and
    /// checks with one atomic load per lookup that nothing changed, instead of taking the
    /// store's lock for each [`get`](Self::get). Lookups see every write that completed
    /// before them, as with `get`. While the memtables hold entries, a reader's lookups take
    /// the same path as `get`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let store = filterstore::Store::open(dir.path(), Default::default())?;
    /// store.put(b"apple", b"red")?;
    /// store.flush()?;
    /// let reader = store.reader();
    /// assert_eq!(reader.get(b"apple")?.unwrap(), b"red");
    /// assert_eq!(reader.get(b"pear")?, None);
    /// store.delete(b"apple")?; // seen by the same reader
    /// assert_eq!(reader.get(b"apple")?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reader(&self) -> Reader {
        Reader {
            inner: self.inner.clone(),
            snap: RefCell::new(None),
        }
    }

    /// A read-only reader pinned to the store as it is now: a [`Snapshot`](super::Snapshot)
    /// with a faster path for a store whose memtables are empty (nothing is flushed: a
    /// store that holds writes in its memtables is read as the snapshot reads it). Lookups
    /// see exactly the writes that completed before this call: later writes, flushes and
    /// compactions are not seen (the pinned tables stay readable until the reader is
    /// dropped). Meant for stores that are no longer written, such as the hyphenation
    /// dictionary: with empty memtables a lookup takes no lock and makes no check of the
    /// store's state, and a store of one table (a dictionary after its flush) is asked
    /// directly, its filter first. A filter's "maybe" still reads the table's block (through
    /// the block cache), and every lookup is counted in [`Stats`](super::Stats) as a
    /// [`get`](Self::get) would be.
    ///
    /// Lookups are counted in the pinned tables' own counters, which [`Stats`](super::Stats)
    /// reads while the store lists those tables: once a compaction has replaced a pinned
    /// table, the lookups that still reach it are no longer in `stats()`. Take a new pinned
    /// reader after writes (or use a [`Reader`]) when the counts must follow the store.
    ///
    /// With the global filter ([`FilterKind::Global`](crate::FilterKind::Global)) the reader
    /// reads as its snapshot does: through the filter until a compaction changes it, then
    /// each pinned table whose range holds the key (docs/engine.md, "Snapshots").
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let store = filterstore::Store::open(dir.path(), Default::default())?;
    /// store.put(b"apple", b"red")?;
    /// let pinned = store.pinned_reader()?; // "apple" is still in the memtable
    /// store.put(b"pear", b"green")?;       // after the pin: not seen
    /// store.flush()?;
    /// assert_eq!(pinned.get(b"apple")?.unwrap(), b"red");
    /// assert_eq!(pinned.get(b"pear")?, None);
    /// assert_eq!(store.get(b"pear")?.unwrap(), b"green");
    /// # Ok::<(), filterstore::Error>(())
    /// ```
    pub fn pinned_reader(&self) -> Result<PinnedReader> {
        let snap = self.snapshot();
        let pin = match snap.tables_only() {
            Some(v) if v.global().is_none() => match v.single_table() {
                Some(t) => Pin::One(t.clone()),
                None => Pin::Tables(v.clone()),
            },
            _ => Pin::Snapshot(snap.clone()),
        };
        Ok(PinnedReader {
            inner: self.inner.clone(),
            pin,
            now: snap.taken_at(),
        })
    }

    /// Iterates over the keys in `range`, in order, newest values only, tombstones hidden,
    /// as the store was when the scan started: writes made after that are not seen, and
    /// flushes and compactions under the scan do not disturb it. Entries are read as the
    /// iteration goes (the first comes without reading the rest), and no lock is held between
    /// items, so a thread may write while it iterates. An open scan keeps the memtables and
    /// tables of its start alive until it is dropped. Items are `Result`s: a damaged block ends
    /// the scan with its error.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let store = filterstore::Store::open(dir.path(), Default::default())?;
    /// for k in ["a", "b", "c", "d"] {
    ///     store.put(k.as_bytes(), b"v")?;
    /// }
    /// store.flush()?;
    /// store.delete(b"c")?;
    /// let scan = store.scan(b"b".as_slice()..b"z".as_slice());
    /// store.put(b"e", b"v")?; // after the scan started: not seen by it
    /// let keys: Vec<Vec<u8>> = scan
    ///     .map(|item| item.map(|(k, _)| k.to_vec()))
    ///     .collect::<Result<_, _>>()?;
    /// assert_eq!(keys, [b"b".to_vec(), b"d".to_vec()]);
    /// # Ok::<(), filterstore::Error>(())
    /// ```
    pub fn scan<K: AsRef<[u8]>>(&self, range: impl RangeBounds<K>) -> Scan {
        let (start, end) = owned_range(range);
        self.inner.scan_bounds(start, end)
    }

    /// The first key and its value (the smallest key), as `BTreeMap::first_key_value`: the
    /// first item of a scan of everything.
    pub fn first_key_value(&self) -> Result<Option<(Slice, Slice)>> {
        self.scan::<&[u8]>(..).next().transpose()
    }

    /// The last key and its value (the largest key), as `BTreeMap::last_key_value`: the
    /// first item of a reverse scan of everything (which reads about one block per table
    /// source, from the end).
    pub fn last_key_value(&self) -> Result<Option<(Slice, Slice)>> {
        self.scan::<&[u8]>(..).next_back().transpose()
    }

    /// Iterates over the keys that start with `prefix` (a [`scan`](Self::scan) of them).
    pub fn scan_prefix(&self, prefix: impl AsRef<[u8]>) -> Scan {
        let (start, end) = prefix_range(prefix.as_ref());
        self.inner.scan_bounds(start, end)
    }
}

impl Inner {
    pub(super) fn get_with_hash(&self, key: &[u8], hash: u64) -> Result<Option<Slice>> {
        self.counters.lookups.add(0, 1);
        self.lookup(key, hash)
    }

    /// [`get_with_hash`](Self::get_with_hash) without counting the lookup.
    fn lookup(&self, key: &[u8], hash: u64) -> Result<Option<Slice>> {
        let now = Now::lazy(&*self.opts.clock);
        loop {
            // Read before the table set (see `global.rs`): a change that removed global
            // filter entries after this lookup took its table set makes it look again.
            let removals = self.tree.global_removals.load(SeqCst);
            let (version, runs) = {
                let guard = self.read_state();
                let st = guard.tree(self.tree.slot);
                let global = st.current.global();
                // The filter's cache misses overlap the memtables' search.
                if let Some(g) = global {
                    g.prefetch(hash);
                }
                if let Some(v) = st.mem.get_hashed(key, hash, &now) {
                    return Ok(v);
                }
                // A memtable's range tombstone hides every older version (one test of an
                // empty list without any).
                if st.mem.range_covers(key, u64::MAX) {
                    return Ok(None);
                }
                if let Some(imm) = &st.imm {
                    if let Some(v) = imm.mem.get_hashed(key, hash, &now) {
                        return Ok(v);
                    }
                    if imm.mem.range_covers(key, u64::MAX) {
                        return Ok(None);
                    }
                }
                // The global filter is asked under the lock, so that a key it rules out (most
                // absent keys) costs no copy of the table set (two locked instructions).
                // The tables with filters of their own (the deepest level's) are asked
                // here too: no table is read under the lock, only filters.
                let runs = global.map(|g| g.query(hash));
                if runs.is_some_and(|r| r.is_empty()) && st.current.own_rules_out(key, hash) {
                    drop(guard);
                    if self.tree.global_removals.load(SeqCst) == removals {
                        return Ok(None);
                    }
                    continue;
                }
                (st.current.clone(), runs)
            };
            let got = match (version.global(), runs) {
                (Some(g), Some(runs)) => version.get_in_runs(g, runs, key, hash, &now)?,
                _ => version.get(key, hash, &now)?,
            };
            if version.global().is_none() || self.tree.global_removals.load(SeqCst) == removals {
                return Ok(got);
            }
        }
    }

    pub(super) fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Slice>>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        self.counters.lookups.add(0, keys.len() as u64);
        self.multi_lookup(keys)
    }

    /// [`multi_get`](Self::multi_get) of a non-empty `keys` without counting the lookups.
    fn multi_lookup<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Slice>>> {
        let now = Now::lazy(&*self.opts.clock);
        loop {
            let removals = self.tree.global_removals.load(SeqCst);
            let mut batch = Batch::new(keys);
            let version = {
                let st = self.read_state();
                let st = st.tree(self.tree.slot);
                if !st.mem.is_empty() {
                    let mem = &st.mem;
                    batch.answer_from(|k, h| {
                        let v = mem.get_hashed(k, h, &now);
                        v.or_else(|| mem.range_covers(k, u64::MAX).then_some(None))
                    });
                }
                if let Some(imm) = &st.imm {
                    let mem = &imm.mem;
                    batch.answer_from(|k, h| {
                        let v = mem.get_hashed(k, h, &now);
                        v.or_else(|| mem.range_covers(k, u64::MAX).then_some(None))
                    });
                }
                st.current.clone()
            };
            version.multi_get(&mut batch, &now)?;
            if version.global().is_none() || self.tree.global_removals.load(SeqCst) == removals {
                return Ok(batch.into_values());
            }
        }
    }

    /// A scan of `start..end` as the store is now (see `scan.rs`).
    pub(crate) fn scan_bounds(&self, start: Bound<Vec<u8>>, end: Bound<Vec<u8>>) -> Scan {
        if range_is_empty(&start, &end) {
            // BTreeMap-style ranges panic when inverted; there is nothing to return.
            return Scan::empty();
        }
        let from = start.as_ref().map(Vec::as_slice);
        let mut mems = Vec::new();
        let now = self.opts.clock.now_millis();
        let version = {
            let st = self.read_state();
            let st = st.tree(self.tree.slot);
            if !st.mem.is_empty() {
                let live = LiveMem {
                    state: self.state.clone(),
                    slot: self.tree.slot,
                    frozen: st.mem_frozen.clone(),
                };
                mems.push(MemSource::live(&st.mem, from, Arc::new(live), now));
            }
            if let Some(imm) = &st.imm {
                mems.push(MemSource::frozen(imm.mem.clone(), from, now));
            }
            st.current.clone()
        };
        let input = ScanInput {
            mems,
            version,
            ranges: self.tree.range_counters.clone(),
            now,
        };
        Scan::new(input, start, end)
    }
}

/// Many lookups from one thread without the store's lock (see [`Store::reader`]).
///
/// It owns what it reads through (no borrow of the [`Store`]): keep it in a struct beside
/// the store, or move it into another thread. `Send`, not `Sync` (one per thread). A reader
/// that outlives every clone of its store reads the store as it was closed and keeps the
/// directory lock until it drops (see [`Store`]).
pub struct Reader {
    inner: Arc<Inner>,
    snap: RefCell<Option<ReadSnapshot>>,
}

struct ReadSnapshot {
    epoch: u64,
    version: Arc<Version>,
    /// No memtable entries: lookups go straight to the tables.
    tables_only: bool,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("dir", &self.inner.dir)
            .finish_non_exhaustive()
    }
}

impl Reader {
    /// Looks `key` up (see [`Store::get`]).
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Slice>> {
        let key = key.as_ref();
        self.get_with_hash(key, key_hash(key))
    }

    /// Looks `key` up with its precomputed [`key_hash`] (which `hash` must be; see
    /// [`Store::get_with_hash`]).
    pub fn get_with_hash(&self, key: &[u8], hash: u64) -> Result<Option<Slice>> {
        let inner = &*self.inner;
        // The global filter's cache misses overlap the checks below (as `Inner::lookup`
        // overlaps them with the memtables' search). A stale snapshot's filter is at worst
        // a wasted prefetch: the lookup itself asks the current snapshot's.
        if let Some(g) = self.snap.borrow().as_ref().and_then(|s| s.version.global()) {
            g.prefetch(hash);
        }
        // Before the snapshot is checked (see `Inner::lookup`): a publish before this load
        // changed the epoch, a removal after it changes the count.
        let removals = inner.tree.global_removals.load(SeqCst);
        match &*self.snapshot() {
            Some(s) if s.tables_only => {
                inner.counters.lookups.add(0, 1);
                let got = s.version.get(key, hash, &Now::lazy(&*inner.opts.clock))?;
                if s.version.global().is_none()
                    || inner.tree.global_removals.load(SeqCst) == removals
                {
                    return Ok(got);
                }
            }
            _ => return inner.get_with_hash(key, hash),
        }
        // A global filter's entries were removed under this lookup: look again.
        inner.lookup(key, hash)
    }

    /// Looks up every key of `keys` (see [`Store::multi_get`]): the values, in order, as a
    /// loop of [`get`](Self::get) would return and count them.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let store = filterstore::Store::open(dir.path(), Default::default())?;
    /// for (k, v) in [("fig", "purple"), ("lime", "green")] {
    ///     store.put(k.as_bytes(), v.as_bytes())?;
    /// }
    /// store.flush()?;
    /// let reader = store.reader();
    /// let values = reader.multi_get(&["lime", "plum", "fig"])?;
    /// let v = |s: &str| Some(filterstore::Slice::from(s));
    /// assert_eq!(values, [v("green"), None, v("purple")]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Slice>>> {
        let inner = &*self.inner;
        // Before the snapshot is checked, as in `get_with_hash`.
        let removals = inner.tree.global_removals.load(SeqCst);
        match &*self.snapshot() {
            Some(s) if s.tables_only && !keys.is_empty() => {
                inner.counters.lookups.add(0, keys.len() as u64);
                let mut batch = Batch::new(keys);
                s.version
                    .multi_get(&mut batch, &Now::lazy(&*inner.opts.clock))?;
                if s.version.global().is_none()
                    || inner.tree.global_removals.load(SeqCst) == removals
                {
                    return Ok(batch.into_values());
                }
            }
            _ => return inner.multi_get(keys),
        }
        // A global filter's entries were removed under these lookups: look again.
        inner.multi_lookup(keys)
    }

    /// The snapshot, taken again if the store changed since it was taken.
    #[inline]
    fn snapshot(&self) -> std::cell::RefMut<'_, Option<ReadSnapshot>> {
        let epoch = self.inner.epoch.load(std::sync::atomic::Ordering::SeqCst);
        let mut snap = self.snap.borrow_mut();
        if snap.as_ref().is_none_or(|s| s.epoch != epoch) {
            self.retake(&mut snap);
        }
        snap
    }

    /// Takes the snapshot again (out of line: once per change of the store, not per lookup).
    #[cold]
    #[inline(never)]
    fn retake(&self, snap: &mut Option<ReadSnapshot>) {
        let inner = &*self.inner;
        let st = inner.read_state();
        let st = st.tree(inner.tree.slot);
        *snap = Some(ReadSnapshot {
            epoch: inner.epoch.load(std::sync::atomic::Ordering::SeqCst),
            version: st.current.clone(),
            tables_only: st.mem.is_empty() && st.imm.is_none(),
        });
    }
}

/// A reader pinned to one table set (see [`Store::pinned_reader`]). Like a [`Reader`], it
/// owns what it reads through: it can be kept in a struct or moved into a thread.
pub struct PinnedReader {
    inner: Arc<Inner>,
    pin: Pin,
    /// When it was pinned (Unix milliseconds): expiry is judged at this time.
    now: u64,
}

enum Pin {
    /// Empty memtables, and a table set of one table: it is asked directly.
    One(Arc<crate::version::TableHandle>),
    /// Empty memtables, any other table set with the tables' own filters.
    Tables(Arc<Version>),
    /// Writes in the memtables, or the global filter: lookups go through the snapshot.
    Snapshot(super::Snapshot),
}

impl std::fmt::Debug for PinnedReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedReader")
            .field("dir", &self.inner.dir)
            .finish_non_exhaustive()
    }
}

impl PinnedReader {
    /// Looks `key` up in the pinned tables (see [`Store::pinned_reader`]).
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Slice>> {
        let key = key.as_ref();
        self.get_with_hash(key, key_hash(key))
    }

    /// Looks `key` up with its precomputed [`key_hash`] (which `hash` must be; see
    /// [`Store::get_with_hash`]).
    #[inline]
    pub fn get_with_hash(&self, key: &[u8], hash: u64) -> Result<Option<Slice>> {
        let counters = &self.inner.counters;
        match &self.pin {
            Pin::One(t) => {
                counters.lookups.add(0, 1);
                t.get(key, hash, &Now::fixed(self.now))
            }
            Pin::Tables(v) => {
                counters.lookups.add(0, 1);
                v.get(key, hash, &Now::fixed(self.now))
            }
            Pin::Snapshot(s) => s.get_with_hash(key, hash),
        }
    }
}
