//! Snapshots: the store as it was at one point of the commit order, held without copying.
//!
//! ```text
//! Snapshot ─► Pinned ─┬─ seq               the last commit it sees (every one at or below it)
//!   (Arc, Clone)      └─ trees: [Tree]     one per tree (keyspaces will add more)
//!                          ├─ mem: MemView  the memtable that took writes, and the arena
//!                          │                position they had reached (later versions are
//!                          │                walked back from, later keys skipped)
//!                          ├─ imm           the memtable being sealed, if any
//!                          └─ version       the table set (Arc<Version>)
//! ```
//! Taking one costs a read lock of the store's state and a few reference counts: no flush,
//! no copy. It holds what a scan takes at its start (`read.rs`, `scan.rs`), without
//! iterating: while it lives, the memtable it saw links the versions that overwrites and
//! deletes replace (12 bytes each, `memtable/mod.rs`, "Snapshots"), and the memtables and
//! table files of its moment stay readable (a table's files are removed only once no
//! version names them: `table/files.rs`). Dropping the last clone releases them.
//!
//! **Under the global filter** (which follows the live tree) a snapshot reads through the
//! filter of its table set until a change that relabels or removes filter entries (a
//! compaction, an L0 merge, a trivial move) is published after it: `Tree::global_removals`
//! counts those. From then on its lookups read its tables without a filter (every L0 table
//! whose range holds the key, then one table per level, until the key is found), as the
//! tables have no filters of their own. Before that, flushes only add entries (of runs the
//! snapshot does not hold, which its lookups skip), so its filter still names every run of
//! its tables that holds a key. See docs/engine.md, "Snapshots".

use std::collections::{BTreeMap, HashSet};
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use super::live::{owned_range, prefix_range, range_is_empty, LiveMem};
use super::{Inner, State, Store};
use crate::error::Result;
use crate::expiry::Now;
use crate::hash::key_hash;
use crate::memtable::{Memtable, ReaderGuard};
use crate::scan::Scan;
use crate::scan::{MemSource, ScanInput};
use crate::version::{Batch, Version};
use crate::Slice;

/// The store as of one point in its commit order (see [`Store::snapshot`]).
///
/// `Clone` (clones share one snapshot), `Send + Sync + 'static`: keep it in a struct, move it
/// to another thread. Dropping the last clone releases the memtables and tables it holds.
#[derive(Clone)]
pub struct Snapshot {
    pub(super) pinned: Arc<Pinned>,
    /// The store's other keyspaces at the same instant, by id (a store's snapshot only;
    /// `None` when it has none).
    pub(super) keyspaces: Option<Arc<Vec<(u32, Snapshot)>>>,
}

/// What a snapshot holds (shared by its clones).
pub(super) struct Pinned {
    pub(super) inner: Arc<Inner>,
    /// Its number in the store's registry of open snapshots.
    id: u64,
    /// The last commit it sees.
    seq: u64,
    /// `Tree::global_removals` when it was taken.
    removals: u64,
    /// The store's one tree (keyspaces will add more).
    tree: Tree,
    /// When it was taken (Unix milliseconds, the store's clock): it judges expiry at this
    /// time, however long it lives.
    now: u64,
}

/// One tree as a snapshot sees it.
struct Tree {
    /// The memtable that took writes, when it held entries.
    mem: Option<MemView>,
    /// The memtable being sealed, if any.
    imm: Option<Arc<Memtable>>,
    version: Arc<Version>,
    /// Under the global filter, once a change published after the snapshot relabelled or
    /// removed filter entries: its table set without the filter (made when first needed).
    unfiltered: OnceLock<Arc<Version>>,
}

/// A memtable that took writes when the snapshot was taken: read under the store's state
/// lock, or, once it was made immutable, from the slot the switch filled, as it was at
/// arena position `pos`.
struct MemView {
    state: Arc<RwLock<State>>,
    /// Its tree's slot in the state.
    slot: usize,
    frozen: Arc<OnceLock<Arc<Memtable>>>,
    pos: u64,
    /// Keeps overwrites linking the versions they replace while the snapshot lives.
    _reader: ReaderGuard,
}

impl MemView {
    /// Calls `f` with the memtable (under the state lock while it may take writes).
    fn with<R>(&self, f: impl FnOnce(&Memtable) -> R) -> R {
        if let Some(m) = self.frozen.get() {
            return f(m);
        }
        let st = self.state.read().unwrap_or_else(|p| p.into_inner());
        match self.frozen.get() {
            Some(m) => f(m),
            None => f(&st.tree(self.slot).mem),
        }
    }
}

/// The open snapshots of a store, for [`SnapshotStats`].
#[derive(Default)]
pub(super) struct Registry {
    open: Mutex<BTreeMap<u64, Entry>>,
    next: AtomicU64,
}

struct Entry {
    taken: Instant,
    version: Arc<Version>,
    /// Bytes of the memtables it holds (when it was taken).
    mem_bytes: u64,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Entry>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Open snapshots and what they keep alive ([`Stats::snapshots`](super::Stats::snapshots)).
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct SnapshotStats {
    /// Snapshots open now (clones of one count once).
    pub open: u64,
    /// How long ago the oldest of them was taken.
    pub oldest_age: Option<Duration>,
    /// Tables that only snapshots keep: no longer in the store's table set; their files
    /// stay in the directory until the last version naming them is dropped.
    pub pinned_tables: u64,
    /// Bytes of those tables' files (table, filter and range filter): disk space freed
    /// when the snapshots holding them are dropped.
    pub pinned_table_bytes: u64,
    /// Bytes of the memtables the snapshots hold, as they were when taken (a memtable
    /// sealed since stays in memory until they are dropped).
    pub memtable_bytes: u64,
}

impl Store {
    /// A snapshot of the store as it is now: it sees every write acknowledged before this
    /// call, and exactly the writes whose commit sequence number is at most
    /// [`Snapshot::seq`] (a [`WriteBatch`](crate::WriteBatch) whole or not at all), whatever
    /// is written, flushed, compacted or refiltered afterwards.
    ///
    /// Cheap: no flush, no copy of the memtable. While it lives it keeps the memtables and
    /// tables of its moment (in memory, and on disk: the files of tables a compaction
    /// replaced stay until it drops), and overwrites of keys in the memtable it saw cost 12 bytes
    /// more each; [`Stats::snapshots`](super::Stats::snapshots) reports what it keeps.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let store = filterstore::Store::open(dir.path(), Default::default())?;
    /// store.put(b"balance/alice", b"100")?;
    /// store.put(b"balance/bob", b"0")?;
    /// let snap = store.snapshot();
    /// let mut transfer = filterstore::WriteBatch::new();
    /// transfer.put(b"balance/alice".to_vec(), b"60".to_vec());
    /// transfer.put(b"balance/bob".to_vec(), b"40".to_vec());
    /// store.write(transfer)?;
    /// store.flush()?;
    /// store.compact()?;
    /// // The snapshot still reads both balances from before the transfer.
    /// assert_eq!(snap.get(b"balance/alice")?.unwrap(), b"100");
    /// let all: Vec<_> = snap.scan_prefix(b"balance/").collect::<Result<_, _>>()?;
    /// assert_eq!((&*all[1].0, &*all[1].1), (&b"balance/bob"[..], &b"0"[..]));
    /// assert_eq!(store.last_seq(), snap.seq() + 1);
    /// # Ok::<(), filterstore::Error>(())
    /// ```
    pub fn snapshot(&self) -> Snapshot {
        self.inner.snapshot()
    }

    /// The commit sequence number of the last write this store has made visible (0 before
    /// the first). Every committed batch gets the next one, in commit order; the numbers
    /// survive reopening (the logs and the manifest keep them) and never go backwards.
    pub fn last_seq(&self) -> u64 {
        self.inner.read_state().seq
    }
}

impl Inner {
    pub(super) fn snapshot(self: &Arc<Inner>) -> Snapshot {
        let sibs = self.root_spaces().clone();
        if sibs.is_empty() {
            return self.pin(&self.read_state());
        }
        // One state lock: every tree as of one commit.
        let guard = self.read_state();
        let mut snap = self.pin(&guard);
        let others = sibs.iter().map(|s| (s.tree.id, s.pin(&guard))).collect();
        snap.keyspaces = Some(Arc::new(others));
        snap
    }

    /// This tree as of the state `guard` (held by the caller).
    fn pin(self: &Arc<Inner>, guard: &State) -> Snapshot {
        let (tree, seq, removals, mem_bytes) = {
            let slot = self.tree.slot;
            let st = guard.tree(slot);
            let mem = (!st.mem.is_empty()).then(|| MemView {
                state: self.state.clone(),
                slot,
                frozen: st.mem_frozen.clone(),
                pos: st.mem.snapshot_pos(),
                _reader: st.mem.reader(),
            });
            let tree = Tree {
                mem,
                imm: st.imm.as_ref().map(|i| i.mem.clone()),
                version: st.current.clone(),
                unfiltered: OnceLock::new(),
            };
            let mem_bytes = tree.mem.as_ref().map_or(0, |_| st.mem.approximate_bytes())
                + tree.imm.as_ref().map_or(0, |m| m.approximate_bytes());
            // Under the lock: a publish that relabels filter entries after this table set
            // bumps the count only after it.
            let removals = self.tree.global_removals.load(SeqCst);
            (tree, guard.seq, removals, mem_bytes as u64)
        };
        let id = self.snapshots.next.fetch_add(1, Relaxed);
        self.snapshots.lock().insert(
            id,
            Entry {
                taken: Instant::now(),
                version: tree.version.clone(),
                mem_bytes,
            },
        );
        Snapshot {
            pinned: Arc::new(Pinned {
                inner: self.clone(),
                id,
                seq,
                removals,
                tree,
                now: self.opts.clock.now_millis(),
            }),
            keyspaces: None,
        }
    }

    /// What the open snapshots keep alive, against the live table set `live`.
    pub(super) fn snapshot_stats(&self, live: &Version) -> SnapshotStats {
        let open = self.snapshots.lock();
        let now = Instant::now();
        let live: HashSet<u64> = live.tables().map(|t| t.record.number).collect();
        let mut seen = HashSet::new();
        let mut s = SnapshotStats {
            open: open.len() as u64,
            oldest_age: open.values().next().map(|e| now.duration_since(e.taken)),
            ..SnapshotStats::default()
        };
        for e in open.values() {
            s.memtable_bytes += e.mem_bytes;
            for t in e.version.tables() {
                let n = t.record.number;
                if !live.contains(&n) && seen.insert(n) {
                    s.pinned_tables += 1;
                    s.pinned_table_bytes += t.record.file_bytes
                        + t.filter.as_ref().map_or(0, |f| f.bytes())
                        + t.range.as_ref().map_or(0, |f| f.bytes());
                }
            }
        }
        s
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        self.inner.snapshots.lock().remove(&self.id);
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("dir", &self.pinned.inner.dir)
            .field("seq", &self.pinned.seq)
            .finish_non_exhaustive()
    }
}

impl Snapshot {
    /// The commit sequence number of the last write it sees: it sees every write numbered
    /// at most this, and none after (see [`Store::last_seq`]).
    pub fn seq(&self) -> u64 {
        self.pinned.seq
    }

    /// Looks `key` up as the store was when the snapshot was taken (counted in
    /// [`Stats`](super::Stats) as a [`Store::get`] is).
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Slice>> {
        let key = key.as_ref();
        self.get_with_hash(key, key_hash(key))
    }

    /// Looks `key` up with its precomputed [`key_hash`] (which `hash` must be; see
    /// [`Store::get_with_hash`]).
    pub fn get_with_hash(&self, key: &[u8], hash: u64) -> Result<Option<Slice>> {
        self.pinned.inner.counters.lookups.add(0, 1);
        self.pinned.lookup(key, hash)
    }

    /// When the snapshot was taken, by the store's clock (Unix milliseconds): it judges
    /// expiry at this time.
    pub fn taken_at(&self) -> u64 {
        self.pinned.now
    }

    /// The table set, when the snapshot holds no memtable entries (for
    /// [`Store::pinned_reader`]'s direct paths).
    pub(super) fn tables_only(&self) -> Option<&Arc<Version>> {
        let t = &self.pinned.tree;
        (t.mem.is_none() && t.imm.is_none()).then_some(&t.version)
    }

    /// Whether `key` holds a value in the snapshot (a [`get`](Self::get) without the value).
    pub fn contains_key(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        Ok(self.get(key)?.is_some())
    }

    /// Looks up every key of `keys` in the snapshot (see [`Store::multi_get`]): the values
    /// in the order of `keys`, as a loop of [`get`](Self::get) would return and count them.
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Slice>>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        self.pinned.inner.counters.lookups.add(0, keys.len() as u64);
        self.pinned.multi_lookup(keys)
    }

    /// Iterates over the keys in `range` as the store was when the snapshot was taken, in
    /// order, newest values only, tombstones hidden (see [`Store::scan`]).
    pub fn scan<K: AsRef<[u8]>>(&self, range: impl RangeBounds<K>) -> Scan {
        let (start, end) = owned_range(range);
        self.pinned.scan_bounds(start, end)
    }

    /// Iterates over the keys that start with `prefix` (a [`scan`](Self::scan) of them).
    pub fn scan_prefix(&self, prefix: impl AsRef<[u8]>) -> Scan {
        let (start, end) = prefix_range(prefix.as_ref());
        self.pinned.scan_bounds(start, end)
    }

    /// True when the snapshot's tables are read without the global filter (a compaction or
    /// move relabelled its entries after the snapshot was taken): for tests and stats.
    #[cfg(test)]
    pub(crate) fn reads_unfiltered(&self) -> bool {
        self.pinned.tree.unfiltered.get().is_some()
    }
}

impl Pinned {
    /// [`Snapshot::get`] without counting the lookup.
    fn lookup(&self, key: &[u8], hash: u64) -> Result<Option<Slice>> {
        let t = &self.tree;
        let now = Now::fixed(self.now);
        if let Some(m) = &t.mem {
            if let Some(v) = m.with(|mem| {
                // A range tombstone the snapshot sees hides every older version.
                let v = mem.get_at(key, hash, m.pos, &now);
                v.or_else(|| mem.range_covers(key, m.pos).then_some(None))
            }) {
                return Ok(v);
            }
        }
        if let Some(imm) = &t.imm {
            if let Some(v) = imm.get_hashed(key, hash, &now) {
                return Ok(v);
            }
            if imm.range_covers(key, u64::MAX) {
                return Ok(None);
            }
        }
        if t.version.global().is_none() {
            return t.version.get(key, hash, &now);
        }
        if let Some(v) = self.through_global(|v| v.get(key, hash, &now))? {
            return Ok(v);
        }
        self.unfiltered().get(key, hash, &now)
    }

    /// [`Snapshot::multi_get`] of a non-empty `keys` without counting the lookups.
    fn multi_lookup<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Slice>>> {
        let t = &self.tree;
        let now = Now::fixed(self.now);
        let batch = || {
            let mut batch = Batch::new(keys);
            if let Some(m) = &t.mem {
                m.with(|mem| {
                    batch.answer_from(|k, h| {
                        let v = mem.get_at(k, h, m.pos, &now);
                        v.or_else(|| mem.range_covers(k, m.pos).then_some(None))
                    })
                });
            }
            if let Some(imm) = &t.imm {
                batch.answer_from(|k, h| {
                    let v = imm.get_hashed(k, h, &now);
                    v.or_else(|| imm.range_covers(k, u64::MAX).then_some(None))
                });
            }
            batch
        };
        let tables = |v: &Version| {
            let mut b = batch();
            v.multi_get(&mut b, &now).map(|()| b.into_values())
        };
        if t.version.global().is_none() {
            return tables(&t.version);
        }
        if let Some(values) = self.through_global(tables)? {
            return Ok(values);
        }
        tables(&self.unfiltered())
    }

    /// Runs `f` on the snapshot's table set through its global filter while no change
    /// published since the snapshot relabelled or removed filter entries: `None` when one
    /// had (before `f`, or under it), and the tables must be read without the filter.
    ///
    /// A change under way counts too: a compaction removes the entries of the versions it
    /// consumes before it publishes and bumps the count, and those versions may be the ones
    /// the snapshot reads (a key deleted since, whose tombstone and older value a bottom
    /// compaction drops together). The announcement is read before the count: a lookup
    /// that read a changed entry finds the change still announced, or, once withdrawn, the
    /// count bumped (`global_change` bumps it first).
    fn through_global<T>(&self, f: impl FnOnce(&Version) -> Result<T>) -> Result<Option<T>> {
        let removals = &self.inner.tree.global_removals;
        let stale = || {
            self.tree.version.global().is_some_and(|g| g.is_moving())
                || removals.load(SeqCst) != self.removals
        };
        if self.tree.unfiltered.get().is_some() || stale() {
            return Ok(None);
        }
        let got = f(&self.tree.version)?;
        Ok((!stale()).then_some(got))
    }

    /// The snapshot's table set without the global filter (its tables have no filters of
    /// their own: a lookup reads each table whose range holds the key until one has it).
    fn unfiltered(&self) -> Arc<Version> {
        let t = &self.tree;
        t.unfiltered
            .get_or_init(|| Arc::new(Version::clone(&t.version).with_global(None)))
            .clone()
    }

    /// A scan of `start..end` as of the snapshot: the same [`Scan`] as a store's, its
    /// memtable sources (and the backward ones `Scan::new` makes from them) reading the
    /// memtable as it was at the snapshot's position.
    fn scan_bounds(&self, start: Bound<Vec<u8>>, end: Bound<Vec<u8>>) -> Scan {
        if range_is_empty(&start, &end) {
            return Scan::empty();
        }
        let from = start.as_ref().map(Vec::as_slice);
        let t = &self.tree;
        let mut mems = Vec::new();
        if let Some(m) = &t.mem {
            let source = match m.frozen.get() {
                Some(f) => MemSource::frozen_at(f.clone(), from, m.pos, self.now),
                None => {
                    let st = m.state.read().unwrap_or_else(|p| p.into_inner());
                    match m.frozen.get() {
                        Some(f) => MemSource::frozen_at(f.clone(), from, m.pos, self.now),
                        None => {
                            let live = LiveMem {
                                state: m.state.clone(),
                                slot: m.slot,
                                frozen: m.frozen.clone(),
                            };
                            let mem = &st.tree(m.slot).mem;
                            MemSource::live_at(mem, from, m.pos, Arc::new(live), self.now)
                        }
                    }
                }
            };
            mems.push(source);
        }
        if let Some(imm) = &t.imm {
            mems.push(MemSource::frozen(imm.clone(), from, self.now));
        }
        let input = ScanInput {
            mems,
            version: t.version.clone(),
            ranges: self.inner.tree.range_counters.clone(),
            now: self.now,
        };
        Scan::new(input, start, end)
    }
}

#[cfg(test)]
mod tests;
