//! Read-only handles ([`Store::open_read_only`]): a store another process is writing,
//! read without writing anything, and [`Store::refresh`] to catch up with it.
//!
//! No lock is taken (the writer's `LOCK` is not even opened), no file is created, removed,
//! truncated or rewritten. A handle opens the logs it finds, reads the manifest, opens the
//! tables it names (a table handle opened from it is never retired, so its `Drop` removes
//! nothing) and replays the logs some tree still needs into memtables of its own. What was
//! opened stays readable after the writer deletes it (open descriptors and maps outlive the
//! name), and the writer deletes a log only after a manifest that no longer needs it: so a
//! log the manifest needs was opened, or was made after the listing. When no tree's flushed-
//! log number is past the newest log opened, no table holds writes of a log made since, and
//! the logs read to their ends and the tables are one prefix of the commit order. Else the
//! logs made since are opened too and the manifest is read again; when it changed meanwhile,
//! or a table it named was gone before it was opened (the writer compacted it away), the
//! work is done again, at most [`MAX_TRIES`] times, pausing a little longer each time
//! (`read.rs`).
//!
//! A store with keyspaces is read tree by tree: each keyspace's tables are its own, and it
//! takes its operations of the logs at or past its own flushed-log number; a refresh adds
//! the keyspaces created since (read-only handles of them) and lets the dropped ones go.
//! Every tree's state is replaced under one state lock, so a snapshot of the reader sees one
//! instant of the writer across keyspaces.
//!
//! A log is replayed up to its last whole record: an incomplete tail (the writer's record
//! in flight) is left for the next refresh, which reads the log on from the end of the last
//! whole record; nothing past a damaged record is read. A record is a whole batch (or a
//! group of whole batches), checked by its CRC, so no torn batch is ever applied.

mod read;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, RwLock};

use self::read::{read_all, Read1, ReadFrom, TreeLog};
use super::tree::{Tree, TreeState, DEFAULT_SLOT};
use super::{Bg, Imm, Inner, Options, State, Store, Writer};
use crate::counters::Sharded;
use crate::error::Result;
use crate::lifetime::Lifetime;
use crate::manifest::MAX_LEVELS;
use crate::memtable::Memtable;
use crate::table::BlockCache;
use crate::version::{SetState, SharedManifest, TableHandle, Version, VersionSet};

/// How often opening or refreshing starts over (the manifest changed under it, or a file it
/// named was deleted) before it gives up with an error.
pub const MAX_TRIES: usize = 20;

/// What a read-only handle has read of the writer's files (a keyspace's handle has an
/// empty one: it marks the handle read-only; its store's does the reading).
#[derive(Default)]
pub(crate) struct LogView {
    /// The manifest's bytes as last read.
    manifest: Vec<u8>,
    /// Each log replayed, and the end of its last whole record.
    logs: Vec<(u64, u64)>,
    /// What each tree's memtables hold, by keyspace id.
    trees: HashMap<u32, TreeView>,
}

/// Which logs one tree's memtables hold.
#[derive(Clone, Debug, Default)]
struct TreeView {
    /// The log whose operations (and only those) the memtable holds, if one does.
    mem_log: Option<u64>,
    /// The logs whose operations the immutable memtable holds.
    imm_logs: Vec<u64>,
}

impl Store {
    /// Opens the store in `dir` read-only, while another process (or handle) may be
    /// writing it: nothing is written, no lock is taken (see docs/engine.md, "Read-only
    /// handles"). It sees the writes of the manifest and logs as they are now;
    /// [`Store::refresh`] catches up later. Each keyspace is read through
    /// [`Store::existing_keyspace`] (or [`Store::keyspace`], which creates none here).
    /// Writes, flushes, compactions and checkpoints return [`Error::ReadOnly`](crate::Error::ReadOnly). Writes a
    /// writer holds in its user-space buffer
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
        let from = ReadFrom {
            offsets: &[],
            have: &HashMap::new(),
        };
        let counters = |id: u32| match id {
            0 => global_counters.clone(),
            _ => Arc::default(),
        };
        let r = read_all(&dir, &opts, &block_cache, &counters, &from)?;
        let inner = Arc::new(root(dir, opts, &r, block_cache, global_counters));
        let fresh = r
            .versions
            .iter()
            .map(|&(id, _)| (id, Plan::Fresh))
            .collect();
        let mut view = LogView::default();
        install(&inner, &mut view, r, &fresh);
        *inner
            .read_only
            .as_ref()
            .expect("a read-only root")
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = view;
        Ok(Store::from_parts(inner, Vec::new()))
    }

    /// Whether this handle is read-only ([`Store::open_read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only.is_some()
    }

    /// Catches a read-only handle up with the writer: every write that was in the logs
    /// (written to the OS by the writer, whatever its sync policy) or in a table when the
    /// call began is visible when it returns, in every keyspace (called on a keyspace's
    /// handle, it refreshes the whole store). It re-reads the manifest; when that changed,
    /// opens the new tables (keeping the ones it has), and replays anew the live logs of
    /// each tree whose logs the writer let go in a way reading on cannot follow; else it
    /// reads the logs on from where it stopped. Keyspaces the writer created since appear,
    /// dropped ones read as empty and leave [`Store::keyspaces`]. On a writer's handle it
    /// does nothing.
    pub fn refresh(&self) -> Result<()> {
        let inner = &self.handle.inner;
        let Some(view) = &inner.read_only else {
            return Ok(());
        };
        let mut view = view.lock().unwrap_or_else(|p| p.into_inner());
        let cache = inner.block_cache.clone();
        let have: HashMap<u64, Arc<TableHandle>> = inner
            .all_trees()
            .iter()
            .flat_map(|t| {
                let v = t.current();
                v.tables()
                    .map(|h| (h.record.number, h.clone()))
                    .collect::<Vec<_>>()
            })
            .collect();
        let read = |offsets: &[(u64, u64)]| {
            let from = ReadFrom {
                offsets,
                have: &have,
            };
            // Each keyspace's global filter counts in its tree's counters (a new one's, in
            // new ones that its handle takes in `install`).
            let counters = |id: u32| {
                let trees = inner.all_trees();
                let t = trees.iter().find(|t| t.tree.id == id);
                t.map_or_else(Arc::default, |t| t.tree.global_counters.clone())
            };
            read_all(&inner.dir, &inner.opts, &cache, &counters, &from)
        };
        let r = read(&view.logs)?;
        let (plans, r) = match plans(&view, &r) {
            Some(p) => (p, r),
            None => {
                let r = read(&[])?;
                let fresh = r
                    .versions
                    .iter()
                    .map(|&(id, _)| (id, Plan::Fresh))
                    .collect();
                (fresh, r)
            }
        };
        install(inner, &mut view, r, &plans);
        Ok(())
    }
}

/// The store's `Inner` of a read-only handle over the read `r`: its default keyspace's
/// table set, no memtable content yet (see [`install`]).
fn root(
    dir: PathBuf,
    opts: Options,
    r: &Read1,
    block_cache: Option<Arc<BlockCache>>,
    global_counters: Arc<Sharded<8>>,
) -> Inner {
    let policy = r.manifest.policy;
    let (kind, fpr) = (policy.kind(), policy.fpr());
    let mut cursors = vec![None; MAX_LEVELS];
    for (l, k) in &r.manifest.cursors {
        if let Some(c) = cursors.get_mut(*l as usize) {
            *c = Some(k.clone());
        }
    }
    let version = Arc::new(Version::new(Vec::new()));
    let log_number = r.manifest.log_number;
    let shared = SharedManifest::new(r.manifest.clone(), r.manifest.next_file);
    let versions = VersionSet::new(
        dir.clone(),
        opts.fs.clone(),
        SetState::new(
            version.clone(),
            log_number,
            policy,
            cursors,
            (policy, kind, fpr),
        ),
        (0, shared.clone()),
        block_cache.clone(),
    );
    let mut tree = TreeState::new(0, version);
    tree.log_number = log_number;
    Inner {
        dir,
        fs: opts.fs.clone(),
        _lock: None,
        state: Arc::new(RwLock::new(State {
            trees: vec![tree],
            seq: r.last_seq,
        })),
        epoch: Arc::default(),
        commit: Arc::default(),
        last_seq: Arc::new(AtomicU64::new(r.last_seq)),
        snapshots: Arc::default(),
        txs: Arc::default(),
        writer: Arc::new(Mutex::new(Writer::default())),
        spaces: Mutex::default(),
        manifest: shared,
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
        read_only: Some(Mutex::new(LogView::default())),
        opts,
    }
}

/// Each tree's plan for the read `r` against what the handle read before (`view`): `None`
/// when some tree needs every live log read again whole (then every tree starts afresh
/// from such a read), or a keyspace is new to the handle.
fn plans(view: &LogView, r: &Read1) -> Option<HashMap<u32, Plan>> {
    let known = |n: u64| view.logs.iter().any(|l| l.0 == n);
    let mut plans = HashMap::new();
    for &(id, _) in &r.versions {
        let tv = view.trees.get(&id)?;
        let log_number = r.log_number(id)?;
        match plan(tv, &known, &r.tree_logs(id, log_number)) {
            Plan::Rebuild => return None,
            p => plans.insert(id, p),
        };
    }
    Some(plans)
}

/// Puts the read `r` in place under one state lock, each tree by its plan in `plans`: the
/// keyspaces dropped since let go, the new ones added (read-only handles of them), every
/// tree's table set and memtables replaced; then records in `view` what was read.
fn install(inner: &Arc<Inner>, view: &mut LogView, mut r: Read1, plans: &HashMap<u32, Plan>) {
    let live = &r.manifest.keyspaces.live;
    // Dropped since: their handles read nothing from here on.
    let gone: Vec<Arc<Inner>> = {
        let mut spaces = inner.root_spaces();
        let (keep, gone) = std::mem::take(&mut *spaces)
            .into_iter()
            .partition(|s| live.iter().any(|k| k.id == s.tree.id));
        *spaces = keep;
        gone
    };
    for s in &gone {
        s.tree.dropped.store(true, SeqCst);
    }
    // Created since: empty until the state below is put in place.
    for rec in live {
        if !inner.root_spaces().iter().any(|s| s.tree.id == rec.id) {
            let read = r.versions.iter().find(|(id, _)| *id == rec.id);
            let g = read.and_then(|(_, v)| v.global());
            let counters = g.map(|g| g.counters().clone());
            inner.add_sibling(rec, Arc::new(Version::new(Vec::new())), counters);
        }
    }
    let trees = inner.all_trees();
    let mut versions: HashMap<u32, Arc<Version>> = HashMap::new();
    for (id, v) in std::mem::take(&mut r.versions) {
        versions.insert(id, Arc::new(v));
    }
    let mut next = HashMap::new();
    {
        let mut st = inner.state_mut();
        for s in &gone {
            let t = st.tree_mut(s.tree.slot);
            t.id = None;
            let mem = Arc::new(std::mem::replace(&mut t.mem, Memtable::new()));
            let _ = std::mem::take(&mut t.mem_frozen).set(mem);
            t.imm = None;
            t.current = Arc::new(Version::new(Vec::new()));
        }
        for tree in &trees {
            let id = tree.tree.id;
            let (Some(v), Some(log_number), Some(plan)) =
                (versions.get(&id), r.log_number(id), plans.get(&id))
            else {
                continue;
            };
            tree.tree.versions.adopt_current(v.clone(), log_number);
            let logs = r.tree_logs(id, log_number);
            let mut tv = view.trees.get(&id).cloned().unwrap_or_default();
            let t = st.tree_mut(tree.tree.slot);
            apply_plan(t, &mut tv, plan, &logs);
            t.current = v.clone();
            t.log_number = log_number;
            next.insert(id, tv);
        }
        st.seq = st.seq.max(r.last_seq);
    }
    inner.last_seq.fetch_max(r.last_seq, SeqCst);
    view.manifest = r.manifest_bytes;
    view.logs = r.logs.iter().map(|l| (l.n, l.end)).collect();
    view.trees = next;
}

/// Brings one tree's memtables `t` up to date with its share of the logs `logs` by `plan`,
/// and `tv` with them.
fn apply_plan(t: &mut TreeState, tv: &mut TreeView, plan: &Plan, logs: &[TreeLog<'_>]) {
    let insert = |mem: &mut Memtable, log: &TreeLog<'_>| {
        for op in &log.ops {
            mem.apply(op.as_op());
        }
    };
    match plan {
        Plan::Append { drop_imm } => {
            if let Some(l) = logs.last() {
                insert(&mut t.mem, l);
            }
            if *drop_imm {
                t.imm = None;
                tv.imm_logs.clear();
            }
        }
        Plan::Shift => {
            // The memtable's log is no longer the newest: it becomes the immutable one, as
            // a writer's switch makes it, and the newest log a new memtable.
            let [older, newest] = logs else {
                unreachable!("a shift has two logs")
            };
            insert(&mut t.mem, older);
            let mut mem = Memtable::new();
            insert(&mut mem, newest);
            let old = Arc::new(std::mem::replace(&mut t.mem, mem));
            let _ = std::mem::take(&mut t.mem_frozen).set(old.clone());
            t.imm = Some(Arc::new(imm_of(old, older.n)));
            tv.mem_log = Some(newest.n);
            tv.imm_logs = vec![older.n];
        }
        Plan::Fresh | Plan::Rebuild => {
            let (mem, imm, mem_log, imm_logs) = layout(logs);
            let old = Arc::new(std::mem::replace(&mut t.mem, mem));
            // Scans that started on the old memtable read it from here on.
            let _ = std::mem::take(&mut t.mem_frozen).set(old);
            t.imm = imm;
            tv.mem_log = mem_log;
            tv.imm_logs = imm_logs;
        }
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

fn plan(tv: &TreeView, known: &dyn Fn(u64) -> bool, logs: &[TreeLog<'_>]) -> Plan {
    let live: Vec<u64> = logs.iter().map(|l| l.n).collect();
    if !live.iter().any(|&n| known(n)) {
        return Plan::Fresh;
    }
    // Only the memtable's log may have grown: the writer appends to its newest log only.
    if logs
        .iter()
        .any(|l| known(l.n) && Some(l.n) != tv.mem_log && !l.ops.is_empty())
    {
        return Plan::Rebuild;
    }
    let Some((&newest, older)) = live.split_last() else {
        return Plan::Fresh;
    };
    if Some(newest) == tv.mem_log {
        return if older.is_empty() {
            Plan::Append { drop_imm: true }
        } else if older == tv.imm_logs {
            Plan::Append { drop_imm: false }
        } else {
            Plan::Rebuild
        };
    }
    if older.len() == 1 && Some(older[0]) == tv.mem_log && !known(newest) {
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

/// The memtables of one tree's live logs `logs` (each read whole): the newest log's, and
/// the others' together as the immutable one; with the logs each holds.
fn layout(logs: &[TreeLog<'_>]) -> (Memtable, Option<Arc<Imm>>, Option<u64>, Vec<u64>) {
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
