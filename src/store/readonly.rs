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
use super::{Bg, EngineCounters, Inner, Options, State, Store, Writer};
use crate::counters::Sharded;
use crate::error::{Error, Result};
use crate::filename::{numbered_files, wal_path, FileName, Numbered};
use crate::filter::FilterKind;
use crate::lifetime::Lifetime;
use crate::manifest::{Manifest, MAX_LEVELS};
use crate::memtable::Memtable;
use crate::table::files::TableFiles;
use crate::table::BlockCache;
use crate::version::{SetState, TableHandle, Version, VersionSet};
use crate::wal::{replay_bytes, WAL_HEADER_LEN};

/// How often opening or refreshing starts over (the manifest changed under it, or a file it
/// named was deleted) before it gives up with an error.
pub const MAX_TRIES: usize = 20;

/// What a read-only handle has read of the writer's files.
pub(crate) struct LogView {
    /// The manifest's bytes as last read.
    manifest: Vec<u8>,
    log_number: u64,
    /// Each log replayed into the memtable, and the end of its last whole record.
    logs: Vec<(u64, u64)>,
}

/// One consistent read of the writer's files.
struct Read1 {
    manifest_bytes: Vec<u8>,
    manifest: Manifest,
    version: Version,
    /// Operations read from the logs (past `LogView::logs`' ends when incremental).
    ops: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    logs: Vec<(u64, u64)>,
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
    Ok((bytes, m))
}

/// Reads log `n` from `from` (a record boundary; 0 for the whole file): its operations, the
/// end of its last whole record and its last sequence number.
fn read_log(
    dir: &Path,
    n: u64,
    from: u64,
    ops: &mut Vec<(Vec<u8>, Option<Vec<u8>>)>,
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
    let end = replay_bytes(&bytes, |k, v| ops.push((k, v))).map_err(|e| e.in_file(&path, skip))?;
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
        let mut mem = Memtable::new();
        for (k, v) in &r.ops {
            mem.insert(k, v.as_deref());
        }
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
            r.manifest.next_file,
            block_cache.clone(),
        );
        let view = LogView {
            manifest: r.manifest_bytes,
            log_number: r.manifest.log_number,
            logs: r.logs,
        };
        let inner = Arc::new(Inner {
            dir,
            fs: opts.fs.clone(),
            _lock: None,
            state: Arc::new(RwLock::new(State {
                mem,
                mem_frozen: Arc::default(),
                imm: None,
                current: version,
                seq: r.last_seq,
            })),
            epoch: AtomicU64::new(0),
            commit: Default::default(),
            last_seq: AtomicU64::new(r.last_seq),
            snapshots: Default::default(),
            writer: Mutex::new(Writer {
                wal: None,
                wal_number: 0,
                wal_dir_synced: false,
                record: Vec::new(),
                group: Vec::new(),
                delay_debt_ns: 0.0,
            }),
            versions,
            compaction: Mutex::new(()),
            global_lock: Mutex::new(()),
            global_change: Mutex::new(()),
            global_removals: AtomicU64::new(0),
            global_counters,
            bg: Mutex::new(Bg::default()),
            bg_cv: Condvar::new(),
            range_bits: AtomicU64::new(opts.range_filter_bits.to_bits()),
            range_counters: Arc::default(),
            block_cache,
            poisoned: AtomicBool::new(false),
            shutdown: AtomicBool::new(true),
            counters: EngineCounters::default(),
            lifetime_base: Lifetime::default(),
            lifetime_problem: Mutex::new(None),
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
        let r = read_all(
            &inner.dir,
            &inner.opts,
            &cache,
            &inner.global_counters,
            Some((&view, &inner.current())),
        )?;
        let fresh = r.manifest.log_number != view.log_number;
        let version = Arc::new(r.version);
        inner
            .versions
            .adopt_current(version.clone(), r.manifest.log_number);
        {
            let mut st = inner.state_mut();
            if fresh {
                // The logs the memtable came from are in tables now: a new memtable.
                let mut mem = Memtable::new();
                for (k, v) in &r.ops {
                    mem.insert(k, v.as_deref());
                }
                let old = Arc::new(std::mem::replace(&mut st.mem, mem));
                // Scans that started on the old memtable read it from here on.
                let _ = std::mem::take(&mut st.mem_frozen).set(old);
            } else {
                for (k, v) in &r.ops {
                    st.mem.insert(k, v.as_deref());
                }
            }
            st.current = version;
            st.seq = st.seq.max(r.last_seq);
        }
        inner.last_seq.fetch_max(r.last_seq, SeqCst);
        view.manifest = r.manifest_bytes;
        view.log_number = r.manifest.log_number;
        view.logs = r.logs;
        Ok(())
    }
}

/// One consistent read of the store in `dir`, tried again while the writer changes it under
/// it (see the module documentation). `since`: what a refresh has read so far, and its
/// table set (whose handles are kept for the tables still named).
fn read_all(
    dir: &Path,
    opts: &Options,
    cache: &Option<Arc<BlockCache>>,
    counters: &Arc<Sharded<8>>,
    since: Option<(&LogView, &Arc<Version>)>,
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
    since: Option<(&LogView, &Arc<Version>)>,
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
    // Logs: read on from where a refresh stopped, unless the writer let them go.
    let from: HashMap<u64, u64> = match since {
        Some((view, _)) if view.log_number == manifest.log_number => {
            view.logs.iter().copied().collect()
        }
        _ => HashMap::new(),
    };
    let mut ops = Vec::new();
    let mut logs = Vec::new();
    let mut last_seq = manifest.last_seq;
    for (n, kind) in numbered_files(dir).map_err(Retry::Fail)? {
        if kind != Some(Numbered::Wal) || n < manifest.log_number {
            continue;
        }
        let start = from.get(&n).copied().unwrap_or(0);
        let (end, seq, records) = read_log(dir, n, start, &mut ops)?;
        last_seq = match seq {
            Some(s) => last_seq.max(s),
            None => last_seq.saturating_add(records),
        };
        logs.push((n, end));
    }
    let (again, _) = read_manifest(dir).map_err(Retry::Fail)?;
    if again != manifest_bytes {
        return Ok(None);
    }
    Ok(Some(Read1 {
        manifest_bytes,
        manifest,
        version,
        ops,
        logs,
        last_seq,
    }))
}
