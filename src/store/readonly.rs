//! Read-only handles ([`Store::open_read_only`]): a store another process is writing,
//! read without writing anything, and [`Store::refresh`] to catch up with it.
//!
//! No lock is taken (the writer's `LOCK` is not even opened), no file is created, removed,
//! truncated or rewritten. A handle reads the manifest, opens the tables it names (a table
//! handle opened from it is never retired, so its `Drop` removes nothing), replays the logs
//! at or past the manifest's log number into a memtable of its own, and reads the manifest
//! again: when it changed meanwhile (a flush or compaction of the writer's), the work is
//! done again, at most [`MAX_TRIES`] times. The same happens when a file the listing or the
//! manifest named is gone before it was opened (the writer deleted it after a newer
//! manifest). What was opened stays readable after the writer deletes it (open
//! descriptors and maps outlive the name).
//!
//! A log is replayed up to its last whole record: an incomplete tail (the writer's record
//! in flight) is left for the next refresh, which reads the log on from the end of the last
//! whole record; nothing past a damaged record is read. A record is a whole batch (or a
//! group of whole batches), checked by its CRC, so no torn batch is ever applied.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, RwLock};

use super::global_save::load_checkpoint;
use super::tree::{Tree, TreeState, DEFAULT_SLOT};
use super::{Bg, Imm, Inner, Options, State, Store, Writer};
use crate::counters::Sharded;
use crate::error::{Error, Result};
use crate::filename::{numbered_files, wal_path, FileName, Numbered};
use crate::filter::FilterKind;
use crate::lifetime::Lifetime;
use crate::manifest::{Manifest, MAX_LEVELS};
use crate::memtable::Memtable;
use crate::table::files::TableFiles;
use crate::table::BlockCache;
use crate::version::{SetState, SharedManifest, TableHandle, Version, VersionSet};
use crate::wal::{replay_ops_in, KeyspaceIds, WAL_HEADER_LEN};

/// How often opening or refreshing starts over (the manifest changed under it, or a file it
/// named was deleted) before it gives up with an error.
pub const MAX_TRIES: usize = 20;

/// What a read-only handle has read of the writer's files.
pub(crate) struct LogView {
    /// The manifest's bytes as last read.
    manifest: Vec<u8>,
    log_number: u64,
    /// Each log replayed, and the end of its last whole record.
    logs: Vec<(u64, u64)>,
    /// The log whose operations (and only those) the memtable holds, if one does.
    mem_log: Option<u64>,
    /// The logs whose operations the immutable memtable holds.
    imm_logs: Vec<u64>,
}

type Ops = Vec<crate::wal::OwnedOp>;

/// What a refresh has read so far: each log and where its read stopped, and the table set
/// (whose handles are kept for the tables still named).
type Since<'a> = Option<(&'a [(u64, u64)], &'a Arc<Version>)>;

/// What one read of a log found.
struct LogRead {
    n: u64,
    /// The end of its last whole record.
    end: u64,
    /// Operations past where the read started.
    ops: Ops,
}

/// One consistent read of the writer's files.
struct Read1 {
    manifest_bytes: Vec<u8>,
    manifest: Manifest,
    version: Version,
    /// The live logs, oldest first, each read from its offset in the `since` of
    /// [`read_all`] (else from its start).
    logs: Vec<LogRead>,
    last_seq: u64,
}

/// Why a try failed: start over, or give up.
enum Retry {
    Again(Error),
    Fail(Error),
}

impl From<Error> for Retry {
    fn from(e: Error) -> Retry {
        match &e {
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                Retry::Again(e)
            }
            _ => Retry::Fail(e),
        }
    }
}

fn read_manifest(dir: &Path) -> Result<(Vec<u8>, Manifest)> {
    let path = FileName::Manifest.path(dir);
    let bytes = std::fs::read(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            Error::InvalidArgument(format!("no store at {}", dir.display()))
        }
        _ => Error::io(&path, e),
    })?;
    let m = Manifest::decode(&bytes).map_err(|e| e.in_file(&path, 0))?;
    super::tree::refuse_keyspaces(dir, &m)?;
    Ok((bytes, m))
}

/// Reads log `n` from `from` (a record boundary; 0 for the whole file): its operations, the
/// end of its last whole record and its last sequence number.
fn read_log(
    dir: &Path,
    (n, from): (u64, u64),
    ids: KeyspaceIds,
    ops: &mut Ops,
) -> Result<(u64, Option<u64>, u64)> {
    let path = wal_path(dir, n);
    let mut f = File::open(&path).map_err(|e| Error::io(&path, e))?;
    let mut bytes = Vec::new();
    let skip = if from > WAL_HEADER_LEN as u64 {
        // The header, then the records past `from`: replayed as a log of their own.
        let mut header = [0u8; WAL_HEADER_LEN];
        f.read_exact(&mut header).map_err(|e| Error::io(&path, e))?;
        bytes.extend_from_slice(&header);
        f.seek(SeekFrom::Start(from))
            .map_err(|e| Error::io(&path, e))?;
        from - WAL_HEADER_LEN as u64
    } else {
        0
    };
    f.read_to_end(&mut bytes).map_err(|e| Error::io(&path, e))?;
    let end = replay_ops_in(&bytes, ids, |op| ops.push(op)).map_err(|e| e.in_file(&path, skip))?;
    let valid = if end.valid_len == 0 {
        from
    } else {
        end.valid_len + skip
    };
    Ok((valid.max(from), end.last_seq, end.records))
}

impl Store {
    /// Opens the store in `dir` read-only, while another process (or handle) may be
    /// writing it: nothing is written, no lock is taken (see docs/engine.md, "Read-only
    /// handles"). It sees the writes of the manifest and logs as they are now;
    /// [`Store::refresh`] catches up later. Writes, flushes, compactions and checkpoints
    /// return [`Error::ReadOnly`]. Writes a writer holds in its user-space buffer
    /// ([`SyncPolicy::Buffered`](crate::SyncPolicy::Buffered)) are not in the log yet and
    /// so not visible.
    pub fn open_read_only(dir: impl AsRef<Path>) -> Result<Store> {
        Store::open_read_only_with(dir, Options::default().read_only(true))
    }

    /// [`Store::open_read_only`] with `opts` (its block cache and mapped reads; the filter
    /// options are the store's own).
    pub fn open_read_only_with(dir: impl AsRef<Path>, mut opts: Options) -> Result<Store> {
        opts.read_only = true;
        let dir = dir.as_ref().to_path_buf();
        let block_cache = BlockCache::new(opts.block_cache_bytes).map(Arc::new);
        let global_counters = Arc::new(Sharded::default());
        let r = read_all(&dir, &opts, &block_cache, &global_counters, None)?;
        let policy = r.manifest.policy;
        let (kind, fpr) = (policy.kind(), policy.fpr());
        let mut cursors = vec![None; MAX_LEVELS];
        for (l, k) in &r.manifest.cursors {
            if let Some(c) = cursors.get_mut(*l as usize) {
                *c = Some(k.clone());
            }
        }
        let (mem, imm, mem_log, imm_logs) = layout(&r.logs);
        let version = Arc::new(r.version);
        let versions = VersionSet::new(
            dir.clone(),
            opts.fs.clone(),
            SetState::new(
                version.clone(),
                r.manifest.log_number,
                policy,
                cursors,
                (policy, kind, fpr),
            ),
            (
                0,
                SharedManifest::new(r.manifest.clone(), r.manifest.next_file),
            ),
            block_cache.clone(),
        );
        let view = LogView {
            manifest: r.manifest_bytes,
            log_number: r.manifest.log_number,
            logs: r.logs.iter().map(|l| (l.n, l.end)).collect(),
            mem_log,
            imm_logs,
        };
        let inner = Arc::new(Inner {
            dir,
            fs: opts.fs.clone(),
            _lock: None,
            state: Arc::new(RwLock::new(State {
                trees: vec![TreeState {
                    id: Some(0),
                    log_number: r.manifest.log_number,
                    mem,
                    mem_frozen: Arc::default(),
                    imm,
                    current: version,
                }],
                seq: r.last_seq,
            })),
            epoch: Arc::default(),
            commit: Arc::default(),
            last_seq: Arc::new(AtomicU64::new(r.last_seq)),
            snapshots: Arc::default(),
            txs: Arc::default(),
            writer: Arc::new(Mutex::new(Writer::default())),
            spaces: Mutex::default(),
            manifest: SharedManifest::new(r.manifest.clone(), r.manifest.next_file),
            logs: Arc::default(),
            tree: Tree::new(
                (DEFAULT_SLOT, 0, String::new()),
                versions,
                global_counters,
                opts.range_filter_bits,
            ),
            bg: Arc::new(Mutex::new(Bg::default())),
            bg_cv: Arc::new(Condvar::new()),
            block_cache,
            poisoned: Arc::new(AtomicBool::new(false)),
            shutdown: Arc::new(AtomicBool::new(true)),
            counters: Arc::default(),
            lifetime_base: Lifetime::default(),
            lifetime_problem: Arc::default(),
            dropped_at_open: Vec::new(),
            read_only: Some(Mutex::new(view)),
            opts,
        });
        Ok(Store::from_parts(inner, Vec::new()))
    }

    /// Whether this handle is read-only ([`Store::open_read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only.is_some()
    }

    /// Catches a read-only handle up with the writer: every write that was in the logs
    /// (written to the OS by the writer, whatever its sync policy) or in a table when the
    /// call began is visible when it returns. It re-reads the manifest; when that changed,
    /// opens the new tables (keeping the ones it has) and, when the writer let logs go,
    /// replays the live logs anew; else it reads the logs on from where it stopped. On a
    /// writer's handle it does nothing.
    pub fn refresh(&self) -> Result<()> {
        let inner = &self.inner;
        let Some(view) = &inner.read_only else {
            return Ok(());
        };
        let mut view = view.lock().unwrap_or_else(|p| p.into_inner());
        let cache = inner.block_cache.clone();
        let read = |offsets: &[(u64, u64)]| {
            let v = inner.current();
            read_all(
                &inner.dir,
                &inner.opts,
                &cache,
                &inner.tree.global_counters,
                Some((offsets, &v)),
            )
        };
        let r = read(&view.logs)?;
        let (plan, r) = match plan(&view, &r) {
            Plan::Rebuild => (Plan::Fresh, read(&[])?),
            p => (p, r),
        };
        let version = Arc::new(r.version);
        inner
            .tree
            .versions
            .adopt_current(version.clone(), r.manifest.log_number);
        let insert = |mem: &mut Memtable, ops: &Ops| {
            for op in ops {
                mem.apply(op.as_op());
            }
        };
        {
            let mut guard = inner.state_mut();
            let st = guard.tree_mut(DEFAULT_SLOT);
            match plan {
                Plan::Append { drop_imm } => {
                    if let Some(l) = r.logs.last() {
                        insert(&mut st.mem, &l.ops);
                    }
                    if drop_imm {
                        st.imm = None;
                        view.imm_logs.clear();
                    }
                }
                Plan::Shift => {
                    // The memtable's log is no longer the newest: it becomes the immutable
                    // one, as a writer's switch makes it, and the newest log a new memtable.
                    let [older, newest] = &r.logs[..] else {
                        unreachable!("a shift has two logs")
                    };
                    insert(&mut st.mem, &older.ops);
                    let mut mem = Memtable::new();
                    insert(&mut mem, &newest.ops);
                    let old = Arc::new(std::mem::replace(&mut st.mem, mem));
                    let _ = std::mem::take(&mut st.mem_frozen).set(old.clone());
                    st.imm = Some(Arc::new(imm_of(old, older.n)));
                    view.mem_log = Some(newest.n);
                    view.imm_logs = vec![older.n];
                }
                Plan::Fresh | Plan::Rebuild => {
                    let (mem, imm, mem_log, imm_logs) = layout(&r.logs);
                    let old = Arc::new(std::mem::replace(&mut st.mem, mem));
                    // Scans that started on the old memtable read it from here on.
                    let _ = std::mem::take(&mut st.mem_frozen).set(old);
                    st.imm = imm;
                    view.mem_log = mem_log;
                    view.imm_logs = imm_logs;
                }
            }
            st.current = version;
            guard.seq = guard.seq.max(r.last_seq);
        }
        inner.last_seq.fetch_max(r.last_seq, SeqCst);
        view.manifest = r.manifest_bytes;
        view.log_number = r.manifest.log_number;
        view.logs = r.logs.iter().map(|l| (l.n, l.end)).collect();
        Ok(())
    }
}

/// How a refresh brings the memtables up to date with what it read.
#[derive(Debug, PartialEq, Eq)]
enum Plan {
    /// The newest log is the memtable's: its new operations are added (and the immutable
    /// memtable let go when its logs are).
    Append { drop_imm: bool },
    /// The memtable's log is the older of two live logs: it becomes the immutable
    /// memtable, the newer one a new memtable.
    Shift,
    /// Every live log is new to the reader (read whole): new memtables.
    Fresh,
    /// Anything else (the writer went through several states between two refreshes):
    /// every live log is read again whole.
    Rebuild,
}

fn plan(view: &LogView, r: &Read1) -> Plan {
    let known = |n: u64| view.logs.iter().any(|l| l.0 == n);
    let live: Vec<u64> = r.logs.iter().map(|l| l.n).collect();
    if !live.iter().any(|&n| known(n)) {
        return Plan::Fresh;
    }
    // Only the memtable's log may have grown: the writer appends to its newest log only.
    if r.logs
        .iter()
        .any(|l| known(l.n) && Some(l.n) != view.mem_log && !l.ops.is_empty())
    {
        return Plan::Rebuild;
    }
    let Some((&newest, older)) = live.split_last() else {
        return Plan::Fresh;
    };
    if Some(newest) == view.mem_log {
        return if older.is_empty() {
            Plan::Append { drop_imm: true }
        } else if older == view.imm_logs {
            Plan::Append { drop_imm: false }
        } else {
            Plan::Rebuild
        };
    }
    if older.len() == 1 && Some(older[0]) == view.mem_log && !known(newest) {
        return Plan::Shift;
    }
    Plan::Rebuild
}

/// An immutable memtable holding `mem`, the operations of log `log`.
fn imm_of(mem: Arc<Memtable>, log: u64) -> Imm {
    Imm {
        mem,
        log,
        wal: Mutex::new(None),
        seq: 0,
    }
}

/// The memtables of the live logs `logs` (each read whole): the newest log's, and the
/// others' together as the immutable one; with the logs each holds.
fn layout(logs: &[LogRead]) -> (Memtable, Option<Arc<Imm>>, Option<u64>, Vec<u64>) {
    let mut mem = Memtable::new();
    let Some((newest, older)) = logs.split_last() else {
        return (mem, None, None, Vec::new());
    };
    for op in &newest.ops {
        mem.apply(op.as_op());
    }
    if older.is_empty() {
        return (mem, None, Some(newest.n), Vec::new());
    }
    let mut imm = Memtable::new();
    for l in older {
        for op in &l.ops {
            imm.apply(op.as_op());
        }
    }
    let log = older[older.len() - 1].n;
    let imm = Arc::new(imm_of(Arc::new(imm), log));
    (
        mem,
        Some(imm),
        Some(newest.n),
        older.iter().map(|l| l.n).collect(),
    )
}

/// One consistent read of the store in `dir`, tried again while the writer changes it under
/// it (see the module documentation). `since`: what a refresh has read so far, and its
/// table set (whose handles are kept for the tables still named).
fn read_all(
    dir: &Path,
    opts: &Options,
    cache: &Option<Arc<BlockCache>>,
    counters: &Arc<Sharded<8>>,
    since: Since<'_>,
) -> Result<Read1> {
    let mut last = None;
    for _ in 0..MAX_TRIES {
        match try_read(dir, opts, cache, counters, since) {
            Ok(Some(r)) => return Ok(r),
            Ok(None) => {}
            Err(Retry::Again(e)) => last = Some(e),
            Err(Retry::Fail(e)) => return Err(e),
        }
        std::thread::yield_now();
    }
    let why = last.map_or_else(
        || "the manifest kept changing".to_string(),
        |e| e.to_string(),
    );
    Err(Error::Internal(format!(
        "read-only open of {}: no consistent read in {MAX_TRIES} tries ({why})",
        dir.display()
    )))
}

/// One try: `Ok(None)` when the manifest changed under it.
fn try_read(
    dir: &Path,
    opts: &Options,
    cache: &Option<Arc<BlockCache>>,
    counters: &Arc<Sharded<8>>,
    since: Since<'_>,
) -> std::result::Result<Option<Read1>, Retry> {
    let (manifest_bytes, manifest) = read_manifest(dir).map_err(Retry::Fail)?;
    let have: HashMap<u64, &Arc<TableHandle>> = since
        .map(|(_, v)| v.tables().map(|t| (t.record.number, t)).collect())
        .unwrap_or_default();
    let mut handles = Vec::with_capacity(manifest.tables.len());
    for r in &manifest.tables {
        match have.get(&r.number) {
            Some(t) if t.record == *r => handles.push(Arc::clone(t)),
            _ => handles.push(Arc::new(TableHandle::open(
                dir,
                r.clone(),
                TableFiles::named(&opts.fs, dir, r),
                opts.mmap_reads,
                cache.as_ref(),
            )?)),
        }
    }
    let mut version = Version::new(handles);
    if manifest.policy.kind() == FilterKind::Global {
        // The writer's saved global filter, when it answers for exactly these tables (it
        // is saved at close); else lookups go to the tables' own filters or indexes.
        if let Some(v) = load_checkpoint(dir, &version, counters.clone()) {
            version = v;
        }
    }
    // Logs: each read on from where a refresh stopped.
    let from: HashMap<u64, u64> = since
        .map(|(offsets, _)| offsets.iter().copied().collect())
        .unwrap_or_default();
    let mut logs = Vec::new();
    let mut last_seq = manifest.last_seq;
    let live_ids: Vec<u32> = manifest.keyspaces.live.iter().map(|k| k.id).collect();
    let ids = super::tree::keyspace_ids(&manifest, &live_ids);
    for (n, kind) in numbered_files(dir).map_err(Retry::Fail)? {
        if kind != Some(Numbered::Wal) || n < manifest.log_number {
            continue;
        }
        let start = from.get(&n).copied().unwrap_or(0);
        let mut ops = Vec::new();
        let (end, seq, records) = read_log(dir, (n, start), ids, &mut ops)?;
        last_seq = match seq {
            Some(s) => last_seq.max(s),
            None => last_seq.saturating_add(records),
        };
        logs.push(LogRead { n, end, ops });
    }
    let (again, _) = read_manifest(dir).map_err(Retry::Fail)?;
    if again != manifest_bytes {
        return Ok(None);
    }
    Ok(Some(Read1 {
        manifest_bytes,
        manifest,
        version,
        logs,
        last_seq,
    }))
}
