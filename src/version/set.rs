//! The table-set layer: the one way the set of tables changes ([`VersionSet::log_and_apply`],
//! as leveldb's `VersionSet::LogAndApply`), and the rule for when a table's files go.
//!
//! An edit ([`VersionEdit`]) says what changes: tables that leave and join (a flush adds an
//! L0 table; a compaction removes its inputs and adds its outputs; a trivial move removes a
//! table and adds it one level down, files untouched), tables that take the place of the
//! table of the same number (a refilter's new filter, a global filter's run ids), a new log
//! number, a compaction cursor, a filter policy, a global filter to look up through. Applying
//! it, under the version-set lock, in this order:
//!
//! 1. the next [`Version`] is computed (the current one with the edit applied), and the files
//!    of the edit's tables are marked kept ([`TableFile::keep`](crate::table::files::TableFile::keep)): from here on a manifest may
//!    name them;
//! 2. the directory is fsynced (the new files' entries become durable), then the manifest
//!    naming the next version is written to a temporary file, fsynced and renamed over
//!    `MANIFEST`, and the directory fsynced again ([`Manifest::store`]);
//! 3. the next version is published: readers take it from then on;
//! 4. the files the previous version named and the next does not are retired
//!    ([`TableFile::retire`](crate::table::files::TableFile::retire)); the handles that left give their counters to [`Retired`] and
//!    their blocks leave the block cache.
//!
//! **Deletion rule.** A table's file is removed only when no [`Version`] (nor table handle)
//! that names it is alive: each handle holds its files through an `Arc<TableFile>`, shared by
//! every version that holds the handle (or a copy of it at another level, or with another
//! filter), and a retired file is removed by the `Drop` of its last `Arc`
//! (`table/files.rs`). A reader holding an old version (a scan, a `Reader`'s snapshot, a
//! global filter being grown from it) keeps reading its tables; their files go when it lets
//! the version go.
//!
//! **Crash safety.** Before step 2 the old manifest is the truth: the new files are orphans
//! the next open removes. A crash inside step 2 leaves the old or the new manifest (the
//! rename is atomic), never a mix; either names only durable files (the tables and filters
//! were fsynced when written, their directory entries at the start of step 2). After step 2
//! the new manifest is the truth: a retired file not yet removed is an orphan the next open
//! removes. A failure in step 2 is returned (the store poisons itself: the manifest on disk
//! may be either one), and the new files are kept, as the new manifest may name them.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{Edit, TableHandle, Version};
use crate::error::{Error, Result};
use crate::filter::alloc::FilterPolicy;
use crate::filter::choice::AllocationChoice;
use crate::filter::FilterKind;
use crate::global_index::GlobalIndex;
use crate::io::Fs;
use crate::manifest::Manifest;
use crate::table::BlockCache;

/// A change to the table set (see the module documentation).
#[derive(Default)]
pub(crate) struct VersionEdit {
    /// Tables that leave, join, or take the place of the table of the same number.
    pub tables: Edit,
    /// A new log number (logs below it are no longer needed).
    pub log_number: Option<u64>,
    /// A level's new round-robin compaction cursor.
    pub cursor: Option<(usize, Vec<u8>)>,
    /// A filter policy to record for the store (and to use for this handle's new tables).
    pub policy: Option<FilterPolicy>,
    /// An allocation choice to record (`Some(None)`: none, the policy was given).
    pub choice: Option<Option<AllocationChoice>>,
    /// A new global filter for lookups to go through (`Some(None)`: none, lookups use the
    /// tables' own filters again).
    pub global: Option<Option<Arc<GlobalIndex>>>,
}

impl VersionEdit {
    /// An edit whose `tables` take the place of the tables of the same numbers.
    pub(crate) fn replacing(tables: Vec<Arc<TableHandle>>) -> VersionEdit {
        VersionEdit {
            tables: Edit {
                replace: tables,
                ..Edit::default()
            },
            ..VersionEdit::default()
        }
    }

    /// This edit, with lookups going through `global` after it (or the tables' own filters).
    pub(crate) fn with_global(mut self, global: Option<Arc<GlobalIndex>>) -> VersionEdit {
        self.global = Some(global);
        self
    }
}

/// What the version-set lock guards: the current version and what the manifest records
/// besides its tables.
pub(crate) struct SetState {
    /// The current version (the one readers were last given).
    current: Arc<Version>,
    pub log_number: u64,
    /// The store's filter policy, as its manifest records it.
    pub recorded: FilterPolicy,
    /// Each level's round-robin compaction cursor.
    pub cursors: Vec<Option<Vec<u8>>>,
    /// How this handle sizes new filters: the recorded policy, or what the handle's options
    /// chose at open, until an edit records a new one.
    pub policy: FilterPolicy,
    /// The kind and rate of this handle.
    pub kind: FilterKind,
    pub fpr: f64,
    /// The store's last allocation choice, as the manifest records it (the default
    /// keyspace's tree only: a keyspace records none).
    pub choice: Option<AllocationChoice>,
}

impl SetState {
    /// The state a store opens with.
    pub(crate) fn new(
        current: Arc<Version>,
        log_number: u64,
        recorded: FilterPolicy,
        cursors: Vec<Option<Vec<u8>>>,
        (policy, kind, fpr): (FilterPolicy, FilterKind, f64),
    ) -> SetState {
        SetState {
            current,
            log_number,
            recorded,
            cursors,
            policy,
            kind,
            fpr,
            choice: None,
        }
    }

    /// This state, with the allocation choice `choice` recorded.
    pub(crate) fn with_choice(mut self, choice: Option<AllocationChoice>) -> SetState {
        self.choice = choice;
        self
    }

    /// This handle's new tables follow `policy` from now on.
    pub(crate) fn adopt(&mut self, policy: FilterPolicy) {
        self.policy = policy;
        self.kind = policy.kind();
        self.fpr = policy.fpr();
    }
}

/// Counters of table handles that left the live set (their counts stay in the store's
/// totals).
#[derive(Default)]
pub(crate) struct Retired {
    pub negatives: AtomicU64,
    pub positives: AtomicU64,
    pub false_positives: AtomicU64,
    pub unfiltered_misses: AtomicU64,
    pub block_reads: AtomicU64,
    pub bytes_read: AtomicU64,
    pub cache_hits: AtomicU64,
    pub cache_misses: AtomicU64,
}

impl Retired {
    fn add(&self, t: &TableHandle) {
        let c = &t.counters;
        self.negatives.fetch_add(c.negatives(), Relaxed);
        self.positives.fetch_add(c.positives(), Relaxed);
        self.false_positives.fetch_add(c.false_positives(), Relaxed);
        self.unfiltered_misses
            .fetch_add(c.unfiltered_misses(), Relaxed);
        self.block_reads.fetch_add(c.block_reads(), Relaxed);
        self.bytes_read.fetch_add(c.bytes_read(), Relaxed);
        self.cache_hits.fetch_add(c.cache_hits(), Relaxed);
        self.cache_misses.fetch_add(c.cache_misses(), Relaxed);
    }
}

/// What the table sets of a store's trees (its keyspaces) share: the file numbers they hand
/// out and the manifest, which records every tree. Each tree's [`VersionSet::log_and_apply`]
/// writes the last manifest stored with its own part replaced, under this lock (taken
/// after the tree's version-set lock).
pub(crate) struct SharedManifest {
    next_file: AtomicU64,
    written: Mutex<Manifest>,
}

impl SharedManifest {
    /// The shared part of a store whose manifest on disk is `m`, handing out file numbers
    /// from `next_file`.
    pub(crate) fn new(m: Manifest, next_file: u64) -> Arc<SharedManifest> {
        Arc::new(SharedManifest {
            next_file: AtomicU64::new(next_file),
            written: Mutex::new(m),
        })
    }

    /// The manifest last stored (its tables are every tree's).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Manifest> {
        self.written.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stores `edit` applied to the manifest last stored (the directory fsynced first, so
    /// that the entries of files it names are durable), and keeps it as the last stored.
    /// Nothing changes when storing fails.
    pub(crate) fn store_with(
        &self,
        fs: &dyn Fs,
        dir: &std::path::Path,
        edit: impl FnOnce(&mut Manifest) -> Result<()>,
    ) -> Result<()> {
        let mut written = self.lock();
        let mut m = written.clone();
        edit(&mut m)?;
        m.next_file = self.next_file.load(SeqCst);
        fs.sync_dir(dir).map_err(|e| Error::io(dir, e))?;
        m.store(fs, dir)?;
        *written = m;
        Ok(())
    }

    /// The lowest log number any tree still needs: logs below it hold no write that is not
    /// in a table.
    pub(crate) fn min_log_number(&self) -> u64 {
        let m = self.lock();
        m.log_numbers().min().unwrap_or(m.log_number)
    }
}

/// A tree's table set: its current version, the durable state around it, and the file
/// numbers it hands out (shared with the store's other trees).
pub(crate) struct VersionSet {
    dir: PathBuf,
    fs: Arc<dyn Fs>,
    state: Mutex<SetState>,
    /// The keyspace whose tree this is (0: the default keyspace).
    keyspace: u32,
    shared: Arc<SharedManifest>,
    /// The block cache the tables read through, if any.
    cache: Option<Arc<BlockCache>>,
    /// Counters of the handles that left.
    pub retired: Retired,
}

impl VersionSet {
    /// The set of keyspace `keyspace`'s tree of a store in `dir` opened with `state`,
    /// sharing file numbers and the manifest through `shared`.
    pub(crate) fn new(
        dir: PathBuf,
        fs: Arc<dyn Fs>,
        state: SetState,
        (keyspace, shared): (u32, Arc<SharedManifest>),
        cache: Option<Arc<BlockCache>>,
    ) -> VersionSet {
        VersionSet {
            dir,
            fs,
            state: Mutex::new(state),
            keyspace,
            shared,
            cache,
            retired: Retired::default(),
        }
    }

    /// The state under the version-set lock.
    pub(crate) fn lock(&self) -> MutexGuard<'_, SetState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An unused file number; an error when none is left (the store opened with a
    /// MANIFEST whose next file number is near `u64::MAX`: numbers are never reused).
    pub(crate) fn alloc_file(&self) -> Result<u64> {
        self.shared
            .next_file
            .fetch_update(SeqCst, SeqCst, |n| n.checked_add(1))
            .map_err(|n| crate::filename::numbers_exhausted(&self.dir, n))
    }

    /// The current version and a manifest naming exactly its tables (with the log number,
    /// policy and cursors recorded now), taken together under the version-set lock: what a
    /// checkpoint copies (`store/backup.rs`). Its `last_seq` is 0: the caller sets it.
    pub(crate) fn snapshot_manifest(&self) -> (Arc<Version>, Manifest) {
        let st = self.lock();
        let v = st.current.clone();
        let keyspaces = self.shared.lock().keyspaces.clone();
        let manifest = Manifest {
            next_file: self.shared.next_file.load(SeqCst),
            log_number: st.log_number,
            last_seq: 0,
            policy: st.recorded,
            tables: v.tables().map(|t| t.record.clone()).collect(),
            cursors: st
                .cursors
                .iter()
                .enumerate()
                .filter_map(|(l, c)| c.as_ref().map(|c| (l as u32, c.clone())))
                .collect(),
            keyspaces,
            choice: st.choice,
        };
        (v, manifest)
    }

    /// A read-only handle's new table set, read from the writer's manifest
    /// (`store/readonly.rs`): nothing is written and no file retired (the writer owns them);
    /// the counters of the tables it replaces go to the retired total.
    pub(crate) fn adopt_current(&self, v: Arc<Version>, log_number: u64) {
        let mut st = self.lock();
        // Called under the state lock that publishes `v` (see `log_and_apply`).
        self.count_left(&st.current, &v);
        st.current = v;
        st.log_number = log_number;
    }

    /// Applies `edit` (see the module documentation for the steps and what a crash at each
    /// leaves): the manifest naming the next version is made durable, `publish` gives the
    /// next version to readers (called under the version-set lock, with a function that
    /// adds the counters of the tables leaving the set to [`retired`](Self::retired): call
    /// it under the lock that readers of the counters take with the version, so that a
    /// table's counts are in exactly one of the two and a sum never goes back), and the files
    /// no version names any more are retired. Returns the next version.
    pub(crate) fn log_and_apply(
        &self,
        edit: VersionEdit,
        last_seq: u64,
        publish: impl FnOnce(&Arc<Version>, &dyn Fn()),
    ) -> Result<Arc<Version>> {
        let mut st = self.lock();
        let old = st.current.clone();
        let mut next = old.apply(&edit.tables);
        if let Some(g) = edit.global {
            next = next.with_global(g);
        }
        let next = Arc::new(next);
        // 1. The edit's files may be named from now on.
        let joining = edit.tables.add.iter().map(|(_, t)| t);
        for t in joining.chain(&edit.tables.replace) {
            t.files.each().for_each(|f| f.keep());
        }
        let log_number = edit.log_number.unwrap_or(st.log_number);
        let mut cursors = st.cursors.clone();
        if let Some((l, c)) = edit.cursor {
            if let Some(slot) = cursors.get_mut(l) {
                *slot = Some(c);
            }
        }
        let policy = edit.policy.unwrap_or(st.recorded);
        let choice = edit.choice.unwrap_or(st.choice);
        let cursor_list: Vec<(u32, Vec<u8>)> = cursors
            .iter()
            .enumerate()
            .filter_map(|(l, c)| c.as_ref().map(|c| (l as u32, c.clone())))
            .collect();
        let id = self.keyspace;
        // 2. Durable: the new files' directory entries, then the manifest (this tree's part
        // of the one the store last stored replaced).
        self.shared.store_with(&*self.fs, &self.dir, |m| {
            m.last_seq = m.last_seq.max(last_seq);
            m.tables.retain(|t| t.keyspace != id);
            m.tables.extend(next.tables().map(|t| {
                let mut r = t.record.clone();
                r.keyspace = id;
                r
            }));
            if id == 0 {
                m.log_number = log_number;
                m.policy = policy;
                m.cursors = cursor_list;
                m.choice = choice;
                return Ok(());
            }
            let k = m.keyspaces.live.iter_mut().find(|k| k.id == id);
            let k = k.ok_or_else(|| {
                Error::Internal(format!("keyspace {id} changed after it was dropped"))
            })?;
            k.log_number = log_number;
            k.policy = policy;
            k.cursors = cursor_list;
            Ok(())
        })?;
        // 3. Published.
        st.current = next.clone();
        st.log_number = log_number;
        st.cursors = cursors;
        if let Some(p) = edit.policy {
            st.recorded = p;
            st.adopt(p);
        }
        if let Some(c) = edit.choice {
            st.choice = c;
        }
        publish(&next, &|| self.count_left(&old, &next));
        drop(st);
        self.retire_left(&old, &next);
        Ok(next)
    }

    /// Retires every file of the tree (its keyspace was dropped; the manifest no longer
    /// names them): each goes when the last version naming it is dropped.
    pub(crate) fn retire_all(&self) {
        let old = self.lock().current.clone();
        let empty = Arc::new(Version::new(Vec::new()));
        self.lock().current = empty.clone();
        self.count_left(&old, &empty);
        self.retire_left(&old, &empty);
    }

    /// Adds the counters of the tables of `old` that `next` does not hold to
    /// [`retired`](Self::retired).
    fn count_left(&self, old: &Arc<Version>, next: &Arc<Version>) {
        let live: HashSet<*const TableHandle> = next.tables().map(Arc::as_ptr).collect();
        for t in old.tables().filter(|t| !live.contains(&Arc::as_ptr(t))) {
            self.retired.add(t);
        }
    }

    /// Step 4 of `log_and_apply`: the files of `old` that `next` does not name.
    fn retire_left(&self, old: &Arc<Version>, next: &Arc<Version>) {
        // 4. Retired: what left the set. The files go when the last version naming them
        // (`old` here, or a reader's) is dropped.
        let named: HashSet<u64> = next
            .tables()
            .flat_map(|t| t.files.each().map(|f| f.number()))
            .collect();
        let live: HashSet<*const TableHandle> = next.tables().map(Arc::as_ptr).collect();
        for t in old.tables().filter(|t| !live.contains(&Arc::as_ptr(t))) {
            for f in t.files.each().filter(|f| !named.contains(&f.number())) {
                f.retire();
            }
        }
        if let Some(cache) = &self.cache {
            // Tables whose file left the set (a refilter or a move keeps the file, and with
            // it the blocks' keys). A scan still holding one reads its blocks from the file.
            let files: HashSet<u64> = next.tables().map(|t| t.record.number).collect();
            for t in old.tables().filter(|t| !files.contains(&t.record.number)) {
                cache.forget_file(t.record.number, t.table.block_count() as u64);
            }
        }
    }
}
