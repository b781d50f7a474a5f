//! One tree of the store: a memtable, an immutable memtable waiting to be sealed, a table
//! set and what works on it: the default keyspace's in slot 0, each other keyspace's in a
//! slot of its own (`keyspace.rs`; a dropped keyspace's slot is not reused).
//!
//! ```text
//! Inner ─┬─ state: RwLock<State> ─┬─ seq                    store-wide: one commit order
//!  (the  │                        └─ trees: [TreeState]     by slot: memtables, table set
//! store's)─ tree: Tree (slot 0)  ── versions, compaction and global-filter locks,
//!        │                           range-filter bits, range-probe counters
//!        ├─ spaces: [Inner]       ── one per keyspace: its own Tree, the rest shared
//!        └─ writer, commit queue, bg, counters, block cache, manifest   store-wide
//! ```
//!
//! Every tree's memtable state lives under the one state lock, so that a snapshot (or a
//! group commit that inserts into several trees) sees, or makes, one instant across them
//! all; what only one tree's workers touch (its table set, the locks of its compaction and
//! global filter) lives in its [`Tree`].

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};

use super::{Imm, Inner};
use crate::counters::Sharded;
use crate::manifest::{KeyspaceRecord, MAX_LEVELS};
use crate::memtable::Memtable;
use crate::scan::RangeCounters;
use crate::version::{SetState, Version, VersionSet};

/// The slot of the default keyspace's tree in [`State::trees`](super::State).
pub(crate) const DEFAULT_SLOT: usize = 0;

/// One tree's memtables and live table set, under the store's state lock.
pub(crate) struct TreeState {
    /// Its keyspace's id (`None`: the keyspace was dropped; the slot is not reused).
    pub(super) id: Option<u32>,
    pub(super) mem: Memtable,
    /// Set to `mem` when it is made immutable: scans that started on it read it from here
    /// (see `scan.rs`). A new memtable gets a new slot.
    pub(super) mem_frozen: Arc<OnceLock<Arc<Memtable>>>,
    pub(super) imm: Option<Arc<Imm>>,
    pub(super) current: Arc<Version>,
    /// Its flushed-log number (as its table set's): logs below it hold none of its writes
    /// that are not in its tables.
    pub(super) log_number: u64,
}

impl TreeState {
    /// A tree with empty memtables over the table set `current`.
    pub(super) fn new(id: u32, current: Arc<Version>) -> TreeState {
        TreeState {
            id: Some(id),
            mem: Memtable::new(),
            mem_frozen: Arc::default(),
            imm: None,
            current,
            log_number: 0,
        }
    }
}

/// What belongs to one tree outside the state lock.
pub(crate) struct Tree {
    /// Its memtables' place in [`State::trees`](super::State).
    pub(super) slot: usize,
    /// Its keyspace's id (0: the default keyspace).
    pub(super) id: u32,
    /// Its keyspace's name ("" for the default keyspace).
    pub(super) name: String,
    /// Set once the keyspace is dropped: its handles' writes fail from then on.
    pub(super) dropped: std::sync::atomic::AtomicBool,
    /// The table set (`version/set.rs`): the one way tables join and leave.
    pub(super) versions: VersionSet,
    /// Held by whoever compacts or refilters the tree: one at a time.
    pub(super) compaction: Mutex<()>,
    /// Held by a flush from the choice of its table's filter to its publish, and by whoever
    /// replaces the global filter (`global.rs`). Taken after `compaction`.
    pub(super) global_lock: Mutex<()>,
    /// Held by a compaction or trivial move while it changes the global filter and publishes
    /// its tables, and by whoever grows the filter (`global.rs`): a growth waits for that
    /// window, not for a whole compaction. Taken after `compaction`, before `global_lock`.
    pub(super) global_change: Mutex<()>,
    /// Bumped after a change published tables whose entries it relabelled or removed in
    /// the global filter (`global.rs`).
    pub(super) global_removals: AtomicU64,
    /// What the global filter's lookups did (shared by every global filter this handle
    /// builds for the tree).
    pub(super) global_counters: Arc<Sharded<8>>,
    /// Bits per key of the range filters of the tree's new tables (an `f64`'s bits):
    /// [`Options::range_filter_bits`](super::Options::range_filter_bits) until
    /// `refilter_ranges` sets another.
    pub(super) range_bits: AtomicU64,
    /// What scans' range filter probes found (see [`Stats`](super::Stats)).
    pub(super) range_counters: Arc<RangeCounters>,
}

impl Tree {
    /// The tree in `slot` over the table set `versions`, its global filter counting into
    /// `global_counters`, its new tables' range filters at `range_bits` bits per key.
    pub(super) fn new(
        (slot, id, name): (usize, u32, String),
        versions: VersionSet,
        global_counters: Arc<Sharded<8>>,
        range_bits: f64,
    ) -> Tree {
        Tree {
            slot,
            id,
            name,
            dropped: Default::default(),
            versions,
            compaction: Mutex::new(()),
            global_lock: Mutex::new(()),
            global_change: Mutex::new(()),
            global_removals: AtomicU64::new(0),
            global_counters,
            range_bits: AtomicU64::new(range_bits.to_bits()),
            range_counters: Arc::default(),
        }
    }
}

impl super::State {
    /// The state of a store whose one tree has empty memtables over `current`.
    pub(super) fn new(current: Arc<Version>, seq: u64) -> super::State {
        super::State {
            trees: vec![TreeState::new(0, current)],
            seq,
        }
    }

    /// The memtables and table set of the tree in `slot`.
    #[inline]
    pub(super) fn tree(&self, slot: usize) -> &TreeState {
        &self.trees[slot]
    }

    pub(super) fn tree_mut(&mut self, slot: usize) -> &mut TreeState {
        &mut self.trees[slot]
    }

    /// The slot of keyspace `id`'s tree (`None`: dropped).
    #[inline]
    pub(super) fn slot_of(&self, id: u32) -> Option<usize> {
        if id == 0 {
            return Some(DEFAULT_SLOT);
        }
        self.trees.iter().position(|t| t.id == Some(id))
    }

    /// Applies a committed op of keyspace `id` to its tree's memtable (an op of a keyspace
    /// dropped meanwhile goes nowhere, as its replay would).
    #[inline]
    pub(super) fn apply(&mut self, id: u32, op: crate::wal::Op<'_>) {
        if let Some(slot) = self.slot_of(id) {
            self.trees[slot].mem.apply(op);
        }
    }
}

impl Inner {
    /// Builds the handle of keyspace `rec` over the table set `version`, gives it a slot
    /// (its memtables empty, its logs flushed up to `rec.log_number`) and lists it. Its
    /// global filter counts in `counters` (`None`: those of `version`'s filter, or new).
    pub(super) fn add_sibling(
        &self,
        rec: &KeyspaceRecord,
        version: Arc<Version>,
        counters: Option<Arc<Sharded<8>>>,
    ) -> Arc<Inner> {
        let counters = counters.unwrap_or_else(|| {
            let g = version.global();
            g.map_or_else(Arc::default, |g| g.counters().clone())
        });
        let slot = {
            let mut st = self.state_mut();
            let mut t = TreeState::new(rec.id, version.clone());
            t.log_number = rec.log_number;
            st.trees.push(t);
            st.trees.len() - 1
        };
        let sib = Arc::new(self.sibling(slot, rec, version, counters));
        self.root_spaces().push(sib.clone());
        sib
    }

    /// The handle of keyspace `rec`'s tree in `slot` over `version`, its global filter
    /// counting in `counters`, sharing every store-wide part with this one.
    fn sibling(
        &self,
        slot: usize,
        rec: &KeyspaceRecord,
        version: Arc<Version>,
        counters: Arc<Sharded<8>>,
    ) -> Inner {
        let mut cursors = vec![None; MAX_LEVELS];
        for (l, k) in &rec.cursors {
            if let Some(c) = cursors.get_mut(*l as usize) {
                *c = Some(k.clone());
            }
        }
        let p = rec.policy;
        let versions = VersionSet::new(
            self.dir.clone(),
            self.fs.clone(),
            SetState::new(version, rec.log_number, p, cursors, (p, p.kind(), p.fpr())),
            (rec.id, self.manifest.clone()),
            self.block_cache.clone(),
        );
        let mut opts = self.opts.clone();
        opts.compression = rec.compression;
        opts.range_filter_bits = rec.range_bits;
        opts.policy = Some(p);
        opts.filter = Some(p.kind());
        opts.fpr = Some(p.fpr());
        // Its own filter, not the default keyspace's (a read-only handle, which never
        // compacts, may lack it).
        opts.compaction_filter = (rec.compaction_filter.as_deref())
            .and_then(|f| self.opts.registered_filter(f).cloned());
        Inner {
            dir: self.dir.clone(),
            fs: self.fs.clone(),
            opts,
            _lock: None,
            state: self.state.clone(),
            epoch: self.epoch.clone(),
            writer: self.writer.clone(),
            commit: self.commit.clone(),
            last_seq: self.last_seq.clone(),
            snapshots: self.snapshots.clone(),
            txs: self.txs.clone(),
            tree: Tree::new(
                (slot, rec.id, rec.name.clone()),
                versions,
                counters,
                rec.range_bits,
            ),
            spaces: Mutex::default(),
            manifest: self.manifest.clone(),
            logs: self.logs.clone(),
            bg: self.bg.clone(),
            bg_cv: self.bg_cv.clone(),
            block_cache: self.block_cache.clone(),
            poisoned: self.poisoned.clone(),
            shutdown: self.shutdown.clone(),
            counters: self.counters.clone(),
            lifetime_base: self.lifetime_base,
            lifetime_problem: self.lifetime_problem.clone(),
            dropped_at_open: Vec::new(),
            // A read-only store's keyspaces are read-only (the store's handle reads for them).
            read_only: self.read_only.as_ref().map(|_| Mutex::default()),
        }
    }
}

/// How a replay of the store's logs judges keyspace ids (format.md, "Keyspaces"): by the
/// manifest `m`'s next id and its live keyspaces' ids `live`.
pub(super) fn keyspace_ids<'a>(
    m: &crate::manifest::Manifest,
    live: &'a [u32],
) -> crate::wal::KeyspaceIds<'a> {
    crate::wal::KeyspaceIds::Store {
        next_id: u64::from(m.keyspaces.next_id),
        live,
    }
}
