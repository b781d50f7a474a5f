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

use super::Imm;
use crate::counters::Sharded;
use crate::memtable::Memtable;
use crate::scan::RangeCounters;
use crate::version::{Version, VersionSet};

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
