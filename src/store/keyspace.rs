//! Keyspaces (issue 38): named trees in one store, each with its own memtable, levels,
//! tables, filters and options, sharing the store's log and group commit, block cache,
//! background threads and manifest (docs/engine.md, "Keyspaces"; format.md, "Keyspaces").
//!
//! A keyspace's handle is a [`Store`] whose `Inner` is the keyspace's own: one built by
//! [`Inner::sibling`], sharing every store-wide part (state lock, writer, commit queue,
//! background coordination, counters, manifest) with the store's `Inner` and owning only its
//! [`Tree`]. The store's `Inner` lists the siblings (`Inner::spaces`); the background
//! threads visit them all.

use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, MutexGuard};

use super::global_save::built_global;
use super::options::{check_policy, check_range_bits};
use super::{Inner, State, Store, Writer};
use crate::error::{Error, Result};
use crate::filename::{wal_path, FileName};
use crate::filter::alloc::FilterPolicy;
use crate::filter::{check_fpr, FilterKind};
use crate::manifest::{KeyspaceRecord, MAX_NAME_BYTES};
use crate::memtable::Memtable;
use crate::table::Compression;
use crate::version::Version;
use crate::wal::WriteBatch;

/// Logs the store keeps before it flushes the keyspace holding the oldest one (RocksDB's
/// rule; only with keyspaces besides the default one, whose one tree never holds more
/// than two): once the seals this calls for are done, at most one more is left.
pub(super) const MAX_LOGS: usize = 3;

/// The options of a keyspace, chosen when it is created and recorded in the manifest
/// (format.md, "Keyspaces"). Each `None` takes the store's: its recorded filter policy, and
/// the [`Options`](super::Options) it was opened with for compression and range filters.
/// Asked again for a keyspace that exists, [`Store::keyspace_with`] returns it with its
/// recorded options: the ones given are ignored (as fjall's `keyspace` does).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct KeyspaceOptions {
    /// The filter kind of its tables ([`FilterKind::Global`]: one global filter for the
    /// keyspace's tree, checkpointed as `GLOBALFILTER-ID`).
    pub filter: Option<FilterKind>,
    /// The false positive rate of its tables' filters.
    pub fpr: Option<f64>,
    /// Its whole filter policy (overrides `filter` and `fpr`).
    pub policy: Option<FilterPolicy>,
    /// How its tables' data blocks are compressed.
    pub compression: Option<Compression>,
    /// Bits per key of its tables' range filters (0: none).
    pub range_filter_bits: Option<f64>,
    /// The name of its compaction filter, one registered in
    /// [`Options::compaction_filters`](super::Options::compaction_filters): recorded, and
    /// needed at every later open. `None`: none (the store's
    /// [`Options::compaction_filter`](super::Options::compaction_filter) is the default
    /// keyspace's only).
    pub compaction_filter: Option<String>,
}

impl KeyspaceOptions {
    /// Sets [`KeyspaceOptions::filter`].
    pub fn filter(mut self, kind: FilterKind) -> Self {
        self.filter = Some(kind);
        self
    }
    /// Sets [`KeyspaceOptions::fpr`].
    pub fn fpr(mut self, fpr: f64) -> Self {
        self.fpr = Some(fpr);
        self
    }
    /// Sets [`KeyspaceOptions::policy`].
    pub fn policy(mut self, policy: FilterPolicy) -> Self {
        self.policy = Some(policy);
        self
    }
    /// Sets [`KeyspaceOptions::compression`].
    pub fn compression(mut self, c: Compression) -> Self {
        self.compression = Some(c);
        self
    }
    /// Sets [`KeyspaceOptions::range_filter_bits`].
    pub fn range_filter_bits(mut self, bits: f64) -> Self {
        self.range_filter_bits = Some(bits);
        self
    }
    /// Sets [`KeyspaceOptions::compaction_filter`] (a registered filter's name).
    pub fn compaction_filter(mut self, name: impl Into<String>) -> Self {
        self.compaction_filter = Some(name.into());
        self
    }
}

/// A named keyspace of a [`Store`] ([`Store::keyspace`]): a cheap handle, `Clone + Send +
/// Sync`, with the store's read and write API on the keyspace's own tree. It keeps the
/// store open while it lives. A [`WriteBatch`] may span keyspaces
/// ([`WriteBatch::put_in`]); a store's [`Snapshot`](super::Snapshot) covers every keyspace
/// ([`Snapshot::keyspace`](super::Snapshot::keyspace)).
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// let store = filterstore::Store::open(dir.path(), Default::default())?;
/// let users = store.keyspace("users")?;
/// let by_email = store.keyspace("users-by-email")?;
/// let mut batch = filterstore::WriteBatch::new();
/// batch.put_in(&users, "u1", "ann").put_in(&by_email, "ann@example.com", "u1");
/// store.write(batch)?; // one log record: both or neither after a crash
/// assert_eq!(by_email.get("ann@example.com")?.unwrap(), "u1");
/// assert_eq!(store.get("u1")?, None); // the default keyspace is another tree
/// # Ok::<(), filterstore::Error>(())
/// ```
#[derive(Clone)]
pub struct Keyspace {
    pub(super) store: Store,
}

impl std::fmt::Debug for Keyspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyspace")
            .field("name", &self.name())
            .field("id", &self.store.inner.tree.id)
            .finish_non_exhaustive()
    }
}

impl Keyspace {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.store.inner.tree.name
    }

    /// Its id in the store (format.md, "Keyspaces"; never reused).
    pub fn id(&self) -> u32 {
        self.store.inner.tree.id
    }

    /// The name of the compaction filter it was created with, if any (recorded).
    pub fn compaction_filter(&self) -> Option<String> {
        let m = self.store.inner.manifest.lock();
        let rec = m.keyspaces.live.iter().find(|k| k.id == self.id());
        rec.and_then(|k| k.compaction_filter.clone())
    }

    /// The keyspace as a [`Store`] handle: every read and write of that handle reaches
    /// this keyspace's tree, ops of a [`WriteBatch`] not given a keyspace included.
    /// Store-wide calls ([`Store::sync`], [`Store::keyspace`], checkpoints) are the store's.
    pub fn as_store(&self) -> &Store {
        &self.store
    }

    /// See [`Store::get`].
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<crate::Slice>> {
        self.store.get(key)
    }
    /// See [`Store::multi_get`].
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<crate::Slice>>> {
        self.store.multi_get(keys)
    }
    /// Whether `key` holds a value.
    pub fn contains_key(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        Ok(self.store.get(key)?.is_some())
    }
    /// See [`Store::put`].
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.store.put(key, value)
    }
    /// See [`Store::put_opt`].
    pub fn put_opt(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        opts: &super::WriteOptions,
    ) -> Result<()> {
        self.store.put_opt(key, value, opts)
    }
    /// See [`Store::delete`].
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.store.delete(key)
    }
    /// See [`Store::delete_range`].
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        self.store.delete_range(start, end)
    }
    /// See [`Store::delete_prefix`].
    pub fn delete_prefix(&self, prefix: impl AsRef<[u8]>) -> Result<()> {
        self.store.delete_prefix(prefix)
    }
    /// Writes `batch` atomically: its ops given no keyspace go to this one (see
    /// [`Store::write`]).
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.store.write(batch)
    }
    /// See [`Store::scan`].
    pub fn scan<K: AsRef<[u8]>>(&self, range: impl std::ops::RangeBounds<K>) -> super::Scan {
        self.store.scan(range)
    }
    /// See [`Store::scan_prefix`].
    pub fn scan_prefix(&self, prefix: &[u8]) -> super::Scan {
        self.store.scan_prefix(prefix)
    }
    /// This keyspace alone as of now (see [`Store::snapshot`]; for several keyspaces at one
    /// instant take the store's and [`Snapshot::keyspace`](super::Snapshot::keyspace)).
    pub fn snapshot(&self) -> super::Snapshot {
        self.store.snapshot()
    }
    /// An optimistic transaction that begins on this keyspace (see [`Store::transaction`]):
    /// its plain methods read and write this keyspace, its `*_in` methods
    /// ([`Transaction::put_in`](super::Transaction::put_in) …) any other of the store. Its
    /// conflicts are found by user key across keyspaces, so a write of the same key in
    /// another keyspace may fail it (never the reverse).
    pub fn transaction(&self) -> super::Transaction {
        self.store.transaction()
    }
    /// Seals this keyspace's memtable into a table (see [`Store::flush`]).
    pub fn flush(&self) -> Result<()> {
        self.store.flush()
    }
    /// Merges this keyspace's tables into one run (see [`Store::compact`]).
    pub fn compact(&self) -> Result<()> {
        self.store.compact()
    }
    /// This keyspace's figures ([`KeyspaceStats`](super::KeyspaceStats)).
    pub fn stats(&self) -> super::KeyspaceStats {
        self.store.inner.keyspace_stats()
    }
}

impl Store {
    /// The keyspace named `name`, created (empty, with the store's options) if the store
    /// has none of that name. See [`Keyspace`] and [`Store::keyspace_with`].
    pub fn keyspace(&self, name: &str) -> Result<Keyspace> {
        self.keyspace_with(name, KeyspaceOptions::default())
    }

    /// The keyspace named `name`, created with `opts` if the store has none of that name
    /// (its record durable in the manifest before this returns, so before any write can
    /// use its id). A keyspace that exists is returned with its recorded options; `opts`
    /// is then ignored. Names are 1 to 255 bytes. On a read-only handle an existing keyspace
    /// is returned (read-only too) and creating one is [`Error::ReadOnly`].
    pub fn keyspace_with(&self, name: &str, opts: KeyspaceOptions) -> Result<Keyspace> {
        let inner = &self.inner;
        if inner.tree.id != 0 {
            return Err(Error::InvalidArgument(
                "keyspaces are opened from the store, not from a keyspace".into(),
            ));
        }
        let wrap = |sib: Arc<Inner>| Keyspace {
            store: Store {
                inner: sib,
                handle: self.handle.clone(),
            },
        };
        if let Some(ks) = self.existing_keyspace(name) {
            // A read-only store's too (it creates none).
            return Ok(ks);
        }
        inner.check_writable()?;
        if name.is_empty() || name.len() > MAX_NAME_BYTES {
            return Err(Error::InvalidArgument(format!(
                "keyspace name of {} bytes (1 to {MAX_NAME_BYTES})",
                name.len()
            )));
        }
        let found = |inner: &Inner| {
            let spaces = inner.spaces.lock().unwrap_or_else(|p| p.into_inner());
            spaces.iter().find(|s| s.tree.name == name).cloned()
        };
        let recorded = inner.lock_versions().recorded;
        let policy = match opts.policy {
            Some(p) => p,
            None if opts.filter.is_none() && opts.fpr.is_none() => recorded,
            None => recorded.with_filter(
                opts.filter.unwrap_or(recorded.kind()),
                opts.fpr.unwrap_or(recorded.fpr()),
            ),
        };
        check_policy(&policy)?;
        check_fpr(policy.fpr())?;
        let compression = opts.compression.unwrap_or(inner.opts.compression);
        compression.check_available()?;
        let range_bits = opts
            .range_filter_bits
            .unwrap_or(inner.opts.range_filter_bits);
        check_range_bits(range_bits)?;
        if let Some(f) = &opts.compaction_filter {
            if inner.opts.registered_filter(f).is_none() {
                return Err(Error::InvalidArgument(format!(
                    "no compaction filter named {f:?} is registered \
                     (Options::register_compaction_filter)"
                )));
            }
        }
        // Under the global filter its tree starts with an empty one of its own.
        let empty = Version::new(Vec::new());
        let version = match policy.kind() {
            FilterKind::Global => built_global(&inner.dir, empty, Arc::default())?,
            _ => empty,
        };
        let w = inner.lock_writer();
        if let Some(s) = found(inner) {
            return Ok(wrap(s));
        }
        let mut rec = KeyspaceRecord {
            id: 0,
            name: name.to_string(),
            // It has no write in the logs before the current one.
            log_number: w.wal_number,
            policy,
            compression,
            range_bits,
            cursors: Vec::new(),
            compaction_filter: opts.compaction_filter,
        };
        let r = inner.manifest.store_with(&*inner.fs, &inner.dir, |m| {
            rec.id = m.keyspaces.next_id;
            m.keyspaces.next_id = rec
                .id
                .checked_add(1)
                .ok_or_else(|| Error::InvalidArgument("every keyspace id was used once".into()))?;
            m.keyspaces.live.push(rec.clone());
            Ok(())
        });
        inner.poison_on_err(r)?;
        let sib = inner.add_sibling(&rec, Arc::new(version), None);
        drop(w);
        Ok(wrap(sib))
    }

    /// The names of the store's keyspaces besides the default one, by creation order.
    pub fn keyspaces(&self) -> Vec<String> {
        let spaces = self.inner.root_spaces();
        spaces.iter().map(|s| s.tree.name.clone()).collect()
    }

    /// The keyspace named `name`, if the store has one (none is created).
    pub fn existing_keyspace(&self, name: &str) -> Option<Keyspace> {
        let s = self.inner.root_spaces();
        let sib = s.iter().find(|s| s.tree.name == name)?.clone();
        Some(Keyspace {
            store: Store {
                inner: sib,
                handle: self.handle.clone(),
            },
        })
    }

    /// Removes the keyspace named `name` and its files. Its record leaves the manifest
    /// first (one durable step: a crash before it leaves the keyspace whole, after it
    /// none of it; its files are then orphans the next open removes, and replay skips its
    /// log records); its files go once no scan or snapshot reads them. Its id is never
    /// reused: a keyspace created later under the same name is a new, empty one. Handles
    /// to it read nothing and refuse writes from then on.
    pub fn drop_keyspace(&self, name: &str) -> Result<()> {
        let inner = &self.inner;
        inner.check_writable()?;
        let w = inner.lock_writer();
        let Some(sib) = inner
            .root_spaces()
            .iter()
            .find(|s| s.tree.name == name)
            .cloned()
        else {
            return Err(Error::InvalidArgument(format!(
                "no keyspace named {name:?}"
            )));
        };
        let (id, slot) = (sib.tree.id, sib.tree.slot);
        sib.tree.dropped.store(true, SeqCst);
        // No compaction of it runs from here on, and its memtable waiting to be sealed is
        // (its tree must not change after its record is gone).
        let _c = sib.lock_compaction();
        inner.wait_for_imm_slot(slot)?;
        // Nor a growth of its global filter: one finishing between the record's removal
        // and the tree's emptying would write the tree into the manifest again (an error).
        let _m = sib.lock_global_change();
        let _g = sib.lock_global();
        let r = inner.manifest.store_with(&*inner.fs, &inner.dir, |m| {
            m.keyspaces.live.retain(|k| k.id != id);
            m.tables.retain(|t| t.keyspace != id);
            Ok(())
        });
        inner.poison_on_err(r)?;
        // Its global filter's checkpoint, if any (one left by a crash here is removed at
        // open: its id is no live keyspace's).
        let (file, tmp) = FileName::global_filter(id);
        let _ = inner.fs.remove(&file.path(&inner.dir));
        let _ = inner.fs.remove(&tmp.path(&inner.dir));
        {
            let mut st = inner.state_mut();
            let t = st.tree_mut(slot);
            t.id = None;
            let mem = Arc::new(std::mem::replace(&mut t.mem, Memtable::new()));
            let _ = std::mem::take(&mut t.mem_frozen).set(mem);
            t.current = Arc::new(Version::new(Vec::new()));
        }
        inner
            .spaces
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|s| !Arc::ptr_eq(s, &sib));
        sib.tree.versions.retire_all();
        drop(w);
        inner.remove_obsolete_logs();
        Ok(())
    }
}

impl Inner {
    /// The other keyspaces' handles (of the store's `Inner`; empty on a keyspace's).
    pub(super) fn root_spaces(&self) -> MutexGuard<'_, Vec<Arc<Inner>>> {
        self.spaces.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every tree's handle: this one, then the other keyspaces'.
    pub(super) fn all_trees(self: &Arc<Inner>) -> Vec<Arc<Inner>> {
        let mut all = vec![self.clone()];
        all.extend(self.root_spaces().iter().cloned());
        all
    }

    /// The handle of the tree in `slot` (`None`: dropped).
    pub(super) fn tree_at(self: &Arc<Inner>, slot: usize) -> Option<Arc<Inner>> {
        if slot == self.tree.slot {
            return Some(self.clone());
        }
        self.root_spaces()
            .iter()
            .find(|s| s.tree.slot == slot)
            .cloned()
    }

    /// Refuses a write through the handle of a dropped keyspace.
    pub(super) fn check_live(&self) -> Result<()> {
        if self.tree.dropped.load(SeqCst) {
            return Err(Error::InvalidArgument(format!(
                "keyspace {:?} was dropped",
                self.tree.name
            )));
        }
        Ok(())
    }

    /// The keyspace id of each op of `batch` written through this handle: its own where
    /// the batch gave none. A keyspace of another store, or one dropped, is refused.
    pub(super) fn batch_ids(&self, batch: &WriteBatch) -> Result<Option<Vec<u32>>> {
        if batch.ids.iter().all(Option::is_none) {
            return Ok(None); // all in this handle's keyspace
        }
        let me = Arc::as_ptr(&self.manifest) as usize;
        let m = self.manifest.lock();
        (0..batch.ops.len())
            .map(|i| match batch.ids.get(i).copied().flatten() {
                None => Ok(self.tree.id),
                Some((_, store)) if store != me => Err(Error::InvalidArgument(
                    "a batch op names a keyspace of another store".into(),
                )),
                Some((id, _)) if m.keyspaces.live.iter().any(|k| k.id == id) => Ok(id),
                Some((id, _)) => Err(Error::InvalidArgument(format!(
                    "a batch op names keyspace {id}, which was dropped"
                ))),
            })
            .collect::<Result<Vec<u32>>>()
            .map(Some)
    }

    /// The numbers of the logs on disk (`Inner::logs`).
    pub(super) fn lock_logs(&self) -> MutexGuard<'_, Vec<u64>> {
        self.logs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Removes the logs every tree has flushed (below each keyspace's log number and the
    /// store's).
    pub(super) fn remove_obsolete_logs(&self) {
        let min = self.manifest.min_log_number();
        self.lock_logs().retain(|&n| {
            let dead = n < min;
            if dead {
                let _ = self.fs.remove(&wal_path(&self.dir, n));
            }
            !dead
        });
    }

    /// The slot of the tree whose memtable a write should switch first, if any: the largest
    /// once the memtables together reach `memtable_bytes` (one budget across keyspaces);
    /// else, with more than [`MAX_LOGS`] logs (or one more than the trees holding writes in
    /// memory, when that is more), the tree that holds the oldest (whose flushed-log number
    /// is lowest), so that logs are let go however idle a keyspace is.
    ///
    /// Each switch of a memtable holding writes starts a new log, so B busy trees hold B
    /// logs whatever is flushed: under a bound below B + 1 every write would switch the
    /// oldest (measured: `bench engine --keyspaces 4` fell from 200,000 puts/s to a few
    /// thousand, 60 flushes a second of near-empty memtables). With the bound at B + 1 the
    /// switches it asks for end once the busy trees' logs are consecutive, at most B of them.
    pub(super) fn switch_due(&self, st: &State, w: &Writer) -> Option<usize> {
        let mut total = 0;
        let mut largest = (0, 0);
        let mut oldest: Option<(u64, usize)> = None;
        let mut busy = 0;
        for (slot, t) in st.trees.iter().enumerate() {
            if t.id.is_none() {
                continue;
            }
            let b = t.mem.approximate_bytes();
            busy += usize::from(b > 0 || t.imm.is_some());
            total += b;
            if b > largest.0 {
                largest = (b, slot);
            }
            if oldest.is_none_or(|(n, _)| t.log_number < n) {
                oldest = Some((t.log_number, slot));
            }
        }
        if total >= self.opts.memtable_bytes && largest.0 > 0 {
            return Some(largest.1);
        }
        if st.trees.len() > 1 && self.lock_logs().len() > MAX_LOGS.max(busy + 1) {
            return oldest
                .filter(|&(n, _)| n < w.wal_number)
                .map(|(_, slot)| slot);
        }
        None
    }
}
