//! Opening a store: the directory lock, the manifest and its tables, the logs replayed and
//! what they held put back (recovery), and the files no manifest names removed.

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Condvar, Mutex, RwLock};

use super::global_save::open_global;
use super::options::{check_policy, default_policy, DEFAULT_FILTER, DEFAULT_FPR};
use super::tree::{Tree, DEFAULT_SLOT};
use super::{worker, Bg, Imm, Inner, Options, State, Store, SyncPolicy, Writer};
use crate::counters::Sharded;
use crate::error::{Error, Result};
use crate::filename::{
    keyspace_global_files, number_after, numbered_files, wal_path, FileName, Numbered,
};
use crate::filter::alloc::FilterPolicy;
use crate::filter::choice::AllocationChoice;
use crate::filter::{check_fpr, FilterKind};
use crate::lifetime::Lifetime;
use crate::manifest::{Manifest, MAX_LEVELS};
use crate::memtable::Memtable;
use crate::table::files::TableFiles;
use crate::table::BlockCache;
use crate::verify::Warning;
use crate::version::{SetState, SharedManifest, TableHandle, Version, VersionEdit, VersionSet};
use crate::wal::{replay_file_ops_by, WalWriter};

/// The filter kind the store in `dir` was created with (kept in its manifest, see
/// [`Options::filter`]), read without opening the store: no lock is taken and nothing is
/// written. `Ok(None)` when `dir` holds no manifest.
///
/// ```
/// use filterstore::{store::stored_default_filter, FilterKind, Options, Store};
/// # fn main() -> filterstore::Result<()> {
/// let dir = tempfile::tempdir()?;
/// assert_eq!(stored_default_filter(dir.path())?, None);
/// let opts = Options::default().filter(FilterKind::Cuckoo);
/// drop(Store::open(dir.path(), opts)?);
/// assert_eq!(stored_default_filter(dir.path())?, Some(FilterKind::Cuckoo));
/// # Ok(()) }
/// ```
pub fn stored_default_filter(dir: &Path) -> Result<Option<FilterKind>> {
    Ok(stored_policy(dir)?.map(|p| p.kind()))
}

/// The filter policy the store in `dir` records (see [`Store::recorded_policy`]), read
/// without opening the store: no lock is taken and nothing is written. `Ok(None)` when
/// `dir` holds no manifest.
pub fn stored_policy(dir: &Path) -> Result<Option<FilterPolicy>> {
    Ok(Manifest::load(dir)?.map(|m| m.policy))
}

/// The policy a handle opened with `opts` on a store that records `recorded` uses, with its
/// kind and rate (see [`Options::policy`]).
fn handle_policy(opts: &Options, recorded: FilterPolicy) -> (FilterPolicy, FilterKind, f64) {
    let kind = opts.filter.unwrap_or(recorded.kind());
    let fpr = opts.fpr.unwrap_or(recorded.fpr());
    let policy = match opts.policy {
        Some(p) => p,
        None if opts.filter.is_none() && opts.fpr.is_none() => recorded,
        None => recorded.with_filter(kind, fpr),
    };
    (policy, kind, fpr)
}

pub(crate) fn lock_dir(dir: &Path) -> Result<File> {
    let path = FileName::Lock.path(dir);
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    // The lock belongs to the open file description, so a second open of the same directory
    // in this process is refused just like one from another process.
    match f.try_lock() {
        Ok(()) => Ok(f),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked(dir.to_path_buf())),
        Err(std::fs::TryLockError::Error(e)) => Err(Error::io(path, e)),
    }
}

impl Store {
    /// Opens (or creates) the store in `dir`, replaying its logs, and starts its background
    /// threads.
    ///
    /// Recovered writes do not stay in the old logs: they are written into one new log (or,
    /// when they fill half a memtable, sealed into an L0 table) and the old logs are removed,
    /// so however often a store is opened it keeps at most two logs.
    pub fn open(dir: impl AsRef<Path>, opts: Options) -> Result<Store> {
        if opts.read_only {
            return Store::open_read_only_with(dir, opts);
        }
        opts.check()?;
        let dir = dir.as_ref().to_path_buf();
        match fs::metadata(&dir) {
            Ok(m) if !m.is_dir() => {
                return Err(Error::InvalidArgument(format!(
                    "{} exists and is not a directory",
                    dir.display()
                )))
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && opts.create_if_missing => {
                fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
            }
            Err(e) => return Err(Error::io(&dir, e)),
        }
        let lock = lock_dir(&dir)?;
        let fs = opts.fs.clone();
        let files = numbered_files(&dir)?;
        let manifest = match Manifest::load(&dir)? {
            Some(m) => m,
            None => {
                if files
                    .iter()
                    .any(|(_, k)| matches!(k, Some(Numbered::Table | Numbered::Wal)))
                {
                    return Err(Error::corrupt(0, "data files present but no MANIFEST")
                        .in_file(FileName::Manifest.path(&dir), 0));
                }
                if !opts.create_if_missing {
                    return Err(Error::InvalidArgument(format!(
                        "no store at {}",
                        dir.display()
                    )));
                }
                let policy = opts.policy.unwrap_or_else(|| {
                    default_policy(
                        opts.filter.unwrap_or(DEFAULT_FILTER),
                        opts.fpr.unwrap_or(DEFAULT_FPR),
                    )
                });
                // Without a given policy the store chooses its allocation by its shape (an
                // empty tree: uniform), again at each `rebalance_auto`.
                let choice = opts
                    .policy
                    .is_none()
                    .then(|| AllocationChoice::decide(&[], 0, None, &policy))
                    .flatten();
                let m = Manifest {
                    next_file: 1,
                    log_number: 0,
                    policy,
                    tables: Vec::new(),
                    cursors: Vec::new(),
                    last_seq: 0,
                    keyspaces: Default::default(),
                    choice,
                };
                m.store(&*fs, &dir)?;
                m
            }
        };
        opts.check_keyspace_filters(&manifest.keyspaces)?;
        let (policy, kind, fpr) = handle_policy(&opts, manifest.policy);
        check_policy(&policy)?;
        check_fpr(fpr)?;
        // Never reuse a number that a file (even an orphan) already has.
        let next_file = manifest.next_file.max(number_after(&dir, &files)?);

        let block_cache = BlockCache::new(opts.block_cache_bytes).map(Arc::new);
        // Each tree's table set: the default keyspace's (id 0), then each live keyspace's.
        let ids: Vec<u32> = std::iter::once(0)
            .chain(manifest.keyspaces.live.iter().map(|k| k.id))
            .collect();
        let mut versions = Vec::with_capacity(ids.len());
        for &id in &ids {
            let mut handles = Vec::new();
            for r in manifest.tables.iter().filter(|t| t.keyspace == id) {
                handles.push(Arc::new(TableHandle::open(
                    &dir,
                    r.clone(),
                    TableFiles::named(&fs, &dir, r),
                    opts.mmap_reads,
                    block_cache.as_ref(),
                )?));
            }
            let version = Version::new(handles);
            if let Some((level, a, b)) = version.check_sorted() {
                return Err(Error::corrupt(
                    0,
                    format!("tables {a} and {b} of level {level} of keyspace {id} overlap"),
                )
                .in_file(FileName::Manifest.path(&dir), 0));
            }
            versions.push(version);
        }
        let mut version = versions.remove(0);
        let global_counters = Arc::new(Sharded::default());
        if kind == FilterKind::Global {
            // Built from the tables' keys: the tables are the filter's durable truth.
            version = open_global(&dir, 0, version, global_counters.clone())?;
        }
        // A named keyspace under the global filter likewise, from its own checkpoint
        // (`GLOBALFILTER-ID`), its lookups counting in counters of its own.
        for (rec, v) in manifest.keyspaces.live.iter().zip(versions.iter_mut()) {
            if rec.policy.kind() == FilterKind::Global {
                let taken = std::mem::replace(v, Version::new(Vec::new()));
                let counters = Arc::new(Sharded::default());
                *v = open_global(&dir, rec.id, taken, counters)?;
            }
        }
        // Each tree's memtable, and the log number below which its writes are in tables.
        let mut mems: Vec<Memtable> = ids.iter().map(|_| Memtable::new()).collect();
        let flushed: Vec<u64> = manifest.log_numbers().collect();
        let min_log = flushed.iter().copied().min().unwrap_or(0);
        let mut replayed = Vec::new();
        let mut dropped_at_open = Vec::new();
        // The last commit sequence number: the manifest's, raised by the logs' records
        // (version 3 records carry theirs; version 2 records are numbered in replay order).
        let mut seq = manifest.last_seq;
        let live_ids: Vec<u32> = manifest.keyspaces.live.iter().map(|k| k.id).collect();
        for (n, kind) in &files {
            if *kind == Some(Numbered::Wal) && *n >= min_log {
                let path = wal_path(&dir, *n);
                let judge = super::tree::keyspace_ids(&manifest, &live_ids);
                let end = replay_file_ops_by(&path, judge, |id, op| {
                    // A tree takes the logs it has not flushed (ids are live here).
                    let Some(i) = ids.iter().position(|&k| k == id) else {
                        return;
                    };
                    if *n >= flushed[i] {
                        mems[i].apply(op.as_op());
                    }
                })?;
                seq = match end.last_seq {
                    Some(last) => seq.max(last),
                    None => seq.saturating_add(end.records),
                };
                if let Some(tail) = end.torn_tail {
                    dropped_at_open.push(Warning::torn_tail(path, tail));
                }
                replayed.push(*n);
            }
        }
        // Remove what no manifest names: unfinished outputs and obsolete logs.
        let live: HashSet<u64> = manifest
            .tables
            .iter()
            .flat_map(|t| {
                [
                    t.number,
                    t.filter_file,
                    t.range.map_or(0, |r| r.file),
                    t.range_tombstones.unwrap_or(0),
                    t.key_hashes.unwrap_or(0),
                ]
            })
            .collect();
        for &(n, kind) in &files {
            let Some(kind) = kind else { continue };
            let dead = match kind {
                Numbered::Wal => n < min_log,
                k => k.per_table() && !live.contains(&n),
            };
            if dead {
                let _ = fs.remove(&kind.path(&dir, n));
            }
        }
        let _ = fs.remove(&FileName::ManifestTmp.path(&dir));
        let _ = fs.remove(&FileName::CountersTmp.path(&dir));
        let _ = fs.remove(&FileName::GlobalFilterTmp.path(&dir));
        // A named keyspace's checkpoint being written, one of a keyspace dropped (its
        // removal cut short by a crash), or one of a keyspace no longer under the global
        // filter (a refilter switched it away): never loaded, removed. Likewise the default
        // keyspace's.
        let global_ids: Vec<u32> = (manifest.keyspaces.live.iter())
            .filter(|k| k.policy.kind() == FilterKind::Global)
            .map(|k| k.id)
            .collect();
        for (id, f) in keyspace_global_files(&dir) {
            if matches!(f, FileName::KeyspaceGlobalFilterTmp(_)) || !global_ids.contains(&id) {
                let _ = fs.remove(&f.path(&dir));
            }
        }
        if kind != FilterKind::Global {
            let _ = fs.remove(&FileName::GlobalFilter.path(&dir));
        }
        let (lifetime_base, lifetime_problem) = match crate::lifetime::load(&dir) {
            Ok(l) => (l.unwrap_or_default(), None),
            Err(e) => (Lifetime::default(), Some(e.to_string())),
        };

        let mut cursors = vec![None; MAX_LEVELS];
        for (l, k) in &manifest.cursors {
            if let Some(c) = cursors.get_mut(*l as usize) {
                *c = Some(k.clone());
            }
        }
        let version = Arc::new(version);
        let shared = SharedManifest::new(manifest.clone(), next_file);
        let set = VersionSet::new(
            dir.clone(),
            fs.clone(),
            SetState::new(
                version.clone(),
                manifest.log_number,
                manifest.policy,
                cursors,
                (policy, kind, fpr),
            )
            .with_choice(manifest.choice),
            (0, shared.clone()),
            block_cache.clone(),
        );
        let inner = Arc::new(Inner {
            dir,
            fs,
            _lock: Some(lock),
            state: Arc::new(RwLock::new(State::new(version, seq))),
            epoch: Arc::default(),
            commit: Arc::default(),
            last_seq: Arc::new(AtomicU64::new(seq)),
            snapshots: Arc::default(),
            txs: Arc::default(),
            writer: Arc::new(Mutex::new(Writer::default())),
            tree: Tree::new(
                (DEFAULT_SLOT, 0, String::new()),
                set,
                global_counters,
                opts.range_filter_bits,
            ),
            spaces: Mutex::default(),
            manifest: shared,
            logs: Arc::default(),
            bg: Arc::new(Mutex::new(Bg::default())),
            bg_cv: Arc::new(Condvar::new()),
            block_cache,
            poisoned: Arc::new(AtomicBool::new(false)),
            shutdown: Arc::new(AtomicBool::new(false)),
            counters: Arc::default(),
            lifetime_base,
            lifetime_problem: Arc::new(Mutex::new(lifetime_problem)),
            dropped_at_open,
            read_only: None,
            opts,
        });
        inner.state_mut().tree_mut(DEFAULT_SLOT).log_number = manifest.log_number;
        for (rec, v) in manifest.keyspaces.live.iter().zip(versions) {
            inner.add_sibling(rec, Arc::new(v), None);
        }
        inner.recover(mems, &replayed, seq > manifest.last_seq)?;
        let threads = worker::spawn(&inner)?;
        inner.want_compaction();
        Ok(Store::from_parts(inner, threads))
    }
}

impl Inner {
    /// Puts what the logs held back into the store (see [`Store::open`]). `seq_moved`: the
    /// logs raised the last commit sequence number above the manifest's.
    fn recover(&self, mut mems: Vec<Memtable>, replayed: &[u64], seq_moved: bool) -> Result<()> {
        if mems.iter().all(Memtable::is_empty) {
            // The logs held no write: nothing to keep but their sequence numbers.
            if seq_moved {
                self.log_and_apply(VersionEdit::default())?;
            }
            for &n in replayed {
                let _ = self.fs.remove(&wal_path(&self.dir, n));
            }
            return Ok(());
        }
        if mems.len() == 1 && mems[0].approximate_bytes() >= self.opts.memtable_bytes / 2 {
            // Enough for a table of its own: seal it now, behind every replayed log. (With
            // keyspaces, every tree's writes are copied into one new log instead.)
            let log = replayed.last().copied().unwrap_or(0);
            let imm = Imm {
                mem: Arc::new(mems.remove(0)),
                log,
                wal: Mutex::new(None),
                seq: 0,
            };
            self.seal(&imm)?;
            for &n in replayed {
                let _ = self.fs.remove(&wal_path(&self.dir, n));
            }
            return Ok(());
        }
        // Few writes: copy them into one new log, make it durable, then drop the old ones.
        let n = self.alloc_file()?;
        let mut wal = WalWriter::create(&*self.fs, &wal_path(&self.dir, n))?;
        wal.set_buffered(self.opts.sync == SyncPolicy::Buffered);
        let mut record = Vec::new();
        // Each record holds the recovered writes' last state of some keys: all carry the last
        // sequence number recovered.
        let seq = self.last_seq.load(std::sync::atomic::Ordering::SeqCst);
        let ids: Vec<u32> = {
            let st = self.read_state();
            st.trees.iter().map(|t| t.id.unwrap_or(0)).collect()
        };
        for (mem, &id) in mems.iter().zip(&ids) {
            copy_into(&mut wal, &mut record, seq, id, mem)?;
        }
        wal.sync()?;
        self.fs
            .sync_dir(&self.dir)
            .map_err(|e| Error::io(&self.dir, e))?;
        if mems.len() == 1 {
            let edit = VersionEdit {
                log_number: Some(n),
                ..VersionEdit::default()
            };
            self.log_and_apply(edit)?;
        } else {
            // Every tree's writes are in the new log: one manifest lets the old ones go.
            let r = self.manifest.store_with(&*self.fs, &self.dir, |m| {
                m.log_number = n;
                m.last_seq = m.last_seq.max(seq);
                m.keyspaces.live.iter_mut().for_each(|k| k.log_number = n);
                Ok(())
            });
            self.poison_on_err(r)?;
            self.lock_versions().log_number = n;
            for s in self.root_spaces().iter() {
                s.lock_versions().log_number = n;
            }
        }
        self.lock_logs().push(n);
        for &old in replayed {
            let _ = self.fs.remove(&wal_path(&self.dir, old));
        }
        let mut w = self.lock_writer();
        self.commit.durable.new_log(wal.sync_handle());
        w.wal = Some(wal);
        w.wal_number = n;
        w.wal_dir_synced = true;
        drop(w);
        let mut st = self.state_mut();
        for (slot, mem) in mems.into_iter().enumerate() {
            let t = st.tree_mut(slot);
            t.mem = mem;
            t.log_number = n;
        }
        Ok(())
    }
}

/// Appends the writes of `mem` (keyspace `id`'s) to `wal` as records numbered `seq`, in
/// `record`: its range tombstones first (the entries kept after them are the ones they did
/// not hide; the values they hid are not copied), then its entries in records of about
/// 1 MiB, each holding the last state of some keys.
fn copy_into(
    wal: &mut WalWriter,
    record: &mut Vec<u8>,
    seq: u64,
    id: u32,
    mem: &Memtable,
) -> Result<()> {
    use crate::wal::{encode_record_in, Op};
    let ranges: Vec<(u32, Op<'_>)> = mem
        .ranges_at(u64::MAX)
        .map(|r| (id, Op::DeleteRange(&r.start, &r.end)))
        .collect();
    if !ranges.is_empty() {
        encode_record_in(record, seq, ranges.len(), ranges.into_iter())?;
        wal.append(record, false)?;
    }
    let sorted = mem.sorted();
    let mut at = 0;
    use crate::table::SortedEntries;
    while at < sorted.len() {
        let mut end = at;
        let mut bytes = 0;
        while end < sorted.len() && (end == at || bytes < 1 << 20) {
            let (k, v) = sorted.entry(end);
            bytes += k.len() + v.map_or(0, <[u8]>::len);
            end += 1;
        }
        let entries = (at..end).map(|i| match sorted.entry(i) {
            (k, Some(v)) => (id, Op::put(k, v, sorted.expires(i))),
            (k, None) => (id, Op::Delete(k)),
        });
        encode_record_in(record, seq, end - at, entries)?;
        wal.append(record, false)?;
        at = end;
    }
    Ok(())
}
