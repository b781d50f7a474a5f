//! How a store is opened: [`Options`], [`SyncPolicy`], and the defaults of a new store.

use std::sync::Arc;
use std::time::Duration;

use crate::compaction::plan::Shape;
use crate::error::{Error, Result};
use crate::expiry::{Clock, CompactionFilter, SystemClock};
use crate::filter::alloc::FilterPolicy;
use crate::filter::{check_fpr, FilterKind};
use crate::io::{Fs, RealFs};
use crate::manifest::{Keyspaces, MAX_BITS_PER_KEY, MAX_NAME_BYTES};
use crate::table::Compression;

/// When WAL appends are fsynced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPolicy {
    /// Every write is fsynced before it returns (the command line's choice).
    EveryWrite,
    /// Writes reach the operating system before they return (they survive a process crash)
    /// and are fsynced at `flush`, `sync` and drop (the library default).
    OnFlush,
    /// Writes collect in a 1 MiB buffer that reaches the operating system when full and at
    /// `flush`, `sync`, a memtable switch and drop: fastest for bulk loads, but a process
    /// crash can lose the unwritten buffer (up to 1 MiB of acknowledged writes). fsynced like
    /// `OnFlush`.
    Buffered,
}

/// How one write is made durable ([`Store::write_opt`](super::Store::write_opt),
/// [`put_opt`](super::Store::put_opt), [`delete_opt`](super::Store::delete_opt)).
/// `#[non_exhaustive]`: start from [`WriteOptions::default()`], which follows the store's
/// [`SyncPolicy`], and set what differs.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// use filterstore::{Options, Store, WriteOptions};
/// let store = Store::open(dir.path(), Options::default())?; // SyncPolicy::OnFlush
/// // A login must survive a power cut: fsynced before `put_opt` returns.
/// store.put_opt("login:ada", "2026-11-28", &WriteOptions::default().sync(true))?;
/// // "Last seen" need not: it reaches the operating system, fsynced later.
/// store.put("seen:ada", "12:00")?;
/// # Ok::<(), filterstore::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriteOptions {
    /// `Some(true)`: the write returns only once its record, and every record logged before
    /// it, is durable (fsynced), as every write is under [`SyncPolicy::EveryWrite`]; it
    /// joins the group commit, sharing one fsync with the synced writes around it. Writers
    /// that did not ask for an fsync never wait for one (docs/engine.md, "Durability per
    /// write"). `Some(false)`: the write returns once its record reached the operating
    /// system (or, under [`SyncPolicy::Buffered`], the log's buffer), even under
    /// `EveryWrite`. `None` (the default): the store's [`SyncPolicy`] decides.
    pub sync: Option<bool>,
    /// A time to live for the puts of this write (`put_opt`, `write_opt`: every put of the
    /// batch that has none of its own): they expire this long after the write, by the
    /// store's clock ([`Options::clock`]), and read as absent from then on. `None` (the
    /// default): [`Options::default_ttl`]. Deletes ignore it.
    pub ttl: Option<Duration>,
}

impl WriteOptions {
    /// Sets [`WriteOptions::ttl`].
    #[must_use]
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Sets [`WriteOptions::sync`]: `true` fsyncs this write before it returns, `false` does
    /// not.
    #[must_use]
    pub fn sync(mut self, sync: bool) -> Self {
        self.sync = Some(sync);
        self
    }
}

/// How a store is opened.
///
/// `#[non_exhaustive]`: outside this crate, start from [`Options::default()`] and set what
/// differs, with the chainable setters (one per field, named after it) or by assigning the
/// public fields:
///
/// ```
/// use filterstore::{FilterKind, Options, SyncPolicy};
/// let opts = Options::default()
///     .filter(FilterKind::Cuckoo)
///     .fpr(0.001)
///     .sync(SyncPolicy::EveryWrite)
///     .compaction_trigger(None);
/// let mut same = Options::default();
/// same.filter = Some(FilterKind::Cuckoo);
/// same.fpr = Some(0.001);
/// same.sync = SyncPolicy::EveryWrite;
/// same.compaction_trigger = None;
/// assert_eq!(format!("{opts:?}"), format!("{same:?}"));
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Options {
    /// Filter kind. A new store records it in its filter policy (see [`Options::policy`]);
    /// `None` is [`DEFAULT_FILTER`]. On an existing store it is the kind of the tables this
    /// handle writes, under the store's recorded allocation (nothing is recorded); `None`
    /// keeps the store's.
    pub filter: Option<FilterKind>,
    /// Target false-positive rate. A new store records it in its filter policy; `None` is
    /// [`DEFAULT_FPR`]. Under the uniform allocation (the default) it is every new table's
    /// rate; under Monkey's it is the memory level, not any one table's rate: the budget is
    /// the bits per key `filter` costs at this rate on every table. On an existing store it
    /// applies to the tables this handle writes, like `filter`; `None` keeps the store's (for
    /// a budget, the uniform rate of equal memory).
    pub fpr: Option<f64>,
    /// How new filters are sized. `None` for a new store is [`default_policy`]: uniform,
    /// every table at `fpr`; for an existing store, the policy its manifest records, at
    /// `filter`/`fpr` when given ([`FilterPolicy::with_filter`]). Monkey's allocation is
    /// opted into here: `Some(FilterPolicy::Budget { .. })`, or [`FilterPolicy::monkey_at`]
    /// for the memory of `filter` at `fpr` on every table. `Some` is recorded when it
    /// creates the store, and on an existing store applies to this handle only
    /// (`filter`/`fpr` are then not used for new tables);
    /// [`Store::rebalance`](super::Store::rebalance),
    /// [`Store::refilter_to`](super::Store::refilter_to) and
    /// [`Store::refilter`](super::Store::refilter) record a new one. With
    /// `FilterPolicy::Budget`, a new table gets the rate its level should have under Monkey's
    /// allocation of `bits_per_key` × keys in tables (see `docs/engine.md`, "Filter memory
    /// across levels"); with `FilterPolicy::Uniform`, every table the same rate.
    pub policy: Option<FilterPolicy>,
    /// A memtable becomes immutable (and is sealed into an L0 table in the background) once
    /// it takes this many bytes of memory (keys, values, and its per-entry slot and index).
    /// At most one immutable memtable waits, so memtables take up to about twice this.
    pub memtable_bytes: usize,
    /// When WAL appends are fsynced.
    pub sync: SyncPolicy,
    /// L0 tables that start a compaction of L0 into L1; `None` turns automatic compaction
    /// off (and with it the L0 write slowdown and stop; `compact()` still works).
    pub compaction_trigger: Option<usize>,
    /// With this many L0 tables, writes are slowed down to [`Options::slowdown_bytes_per_sec`]
    /// so that compaction can catch up.
    pub l0_slowdown: usize,
    /// With this many L0 tables, writes wait until a compaction brings L0 below it.
    pub l0_stop: usize,
    /// The rate writes are held to while L0 is at or above its slowdown size.
    pub slowdown_bytes_per_sec: u64,
    /// Compaction starts a new output table once the current one holds this many bytes of
    /// keys and values.
    pub table_bytes: u64,
    /// Target size of L1; level n ≥ 2 targets `l1_bytes × level_ratio^(n−1)`.
    pub l1_bytes: u64,
    /// Each level's target size is this many times the one above it (T).
    pub level_ratio: u64,
    /// Idle L0 drain: once no write has arrived for this long while lookups keep probing L0
    /// tables (at least [`IDLE_DRAIN_PROBES`] filter probes of L0 since writes paused), L0 is
    /// merged into L1 even below [`Options::compaction_trigger`], so that an absent lookup
    /// probes one table per level instead of every L0 table as well. Costs one L0 → L1
    /// compaction per pause in writing; a store that is written and never read, or written
    /// without pauses, never pays it. `None` turns it off (as does `compaction_trigger: None`).
    pub idle_drain: Option<Duration>,
    /// Scan drain: once scans have read at least twice as many blocks from L0 tables as an
    /// L0 → L1 compaction would read (L0 and the L1 tables it overlaps), L0 is merged into L1
    /// even below [`Options::compaction_trigger`] and while writes go on. Each L0 table is
    /// one more sorted run that every scan reads a block of; past that point the scans
    /// have paid for the merge that would spare them (rent or buy: the reads spent on L0
    /// are at most about twice what merging it at the best moment would have cost). A store
    /// whose scans avoid L0, or that is never scanned, never pays it. Off with `false` (or
    /// `compaction_trigger: None`).
    pub scan_drain: bool,
    /// Create the directory and an empty store when missing.
    pub create_if_missing: bool,
    /// Read data blocks in place from a read-only map of each table file instead of with
    /// `pread` (off by default). Faster on a warm cache: no system call and no copy (about
    /// 20–30 % of a present-key `get`). Every read is still counted and its CRC checked.
    /// The price is the usual one of mapped files: an I/O error while reading a block (a
    /// failing disk, or a table file truncated behind the store's back) arrives as a `SIGBUS`
    /// that ends the process, where `pread` returns an error. The maps are advised for random
    /// access (a point lookup on a cold table reads only its block's page), so a scan of a
    /// table that is not in the page cache also reads one page at a time, without readahead.
    pub mmap_reads: bool,
    /// Bytes of the block cache: data blocks read by lookups and scans, checked and
    /// decompressed, kept for the next read of the same block (one cache per store, shared
    /// by its tables; see `docs/engine.md`, "Block cache"). 32 MiB by default; 0 turns it off
    /// (every block is read from the file each time).
    pub block_cache_bytes: usize,
    /// How the data blocks of tables written from now on (flushes and compactions) are
    /// compressed. [`Compression::Lz4`] by default: a block that does not shrink by at least
    /// an eighth is stored raw. [`Compression::Zstd`] needs the `zstd` feature (without it,
    /// `open` refuses it). Tables already written keep their blocks as they are.
    pub compression: Compression,
    /// Bits per key of the range filter written beside each table from now on (flushes and
    /// compactions; [`DEFAULT_RANGE_BITS`](crate::store::DEFAULT_RANGE_BITS), 16, by
    /// default; 0 for none): a scan skips a table whose range filter says the scan's range
    /// holds none of its keys, without reading its blocks. An empty range of ℓ key values is a false positive with probability
    /// about ℓ / 2^(bits − 2.1) per table (`docs/engine.md`, "Range filters"). Tables
    /// already written keep theirs until a compaction or `refilter_ranges` replaces them.
    pub range_filter_bits: f64,
    /// Deferred range filters: once the tree has a level below L1, new tables (seals and
    /// compaction outputs, data the next compactions merge again under a load) are written
    /// without a range filter, and the compaction thread builds the range filters tables
    /// lack once no write has arrived for this long, deepest level first (reading each
    /// table's keys back; published one table at a time, each in a manifest swap, so a
    /// crash keeps every one built). A tree of L0 and L1 only (a small store, whose tables a
    /// scan right after the writes meets) gets them when written. `None`: every table gets
    /// its range filter when written (`docs/engine.md`, "Range filters").
    pub deferred_range_filters: Option<Duration>,
    /// Open the store read-only ([`Store::open_read_only`](crate::Store::open_read_only)):
    /// no lock, nothing written; writes return [`Error::ReadOnly`](crate::Error::ReadOnly).
    /// `false` by default.
    pub read_only: bool,
    /// The most bytes of keys the transaction conflict window holds (keys written by the
    /// commits since the oldest open transaction's snapshot, 64 bytes counted per entry
    /// beyond the key): a transaction open while more than this was written fails at its
    /// commit with [`Error::TransactionTooOld`](crate::Error::TransactionTooOld).
    /// 64 MiB by default (docs/engine.md, "Transactions").
    pub transaction_window_bytes: usize,
    /// The file system writes go through (a fault-injecting one in tests).
    pub fs: Arc<dyn Fs>,
    /// Where the time comes from for expiry ([`WriteOptions::ttl`]): the system clock by
    /// default; a [`ManualClock`](crate::expiry::ManualClock) for tests and simulations.
    pub clock: Arc<dyn Clock>,
    /// Called by every compaction **of the default keyspace** for every value it writes,
    /// to keep, remove or change it (see [`CompactionFilter`]). Flushes do not call it.
    /// Not recorded: each open chooses it. A named keyspace uses the filter it was created
    /// with instead ([`compaction_filters`](Self::compaction_filters)). `None` by default.
    pub compaction_filter: Option<Arc<dyn CompactionFilter>>,
    /// The compaction filters keyspaces may be created with, each under its
    /// [`name`](CompactionFilter::name) (unique, 1 to 255 bytes;
    /// [`register_compaction_filter`](Self::register_compaction_filter)). A keyspace records
    /// the name of its filter ([`KeyspaceOptions::compaction_filter`]); a store with a
    /// keyspace whose filter is not registered here refuses to open
    /// ([`Error::CompactionFilterNotRegistered`]). Empty by default.
    ///
    /// [`KeyspaceOptions::compaction_filter`]: super::KeyspaceOptions::compaction_filter
    pub compaction_filters: Vec<Arc<dyn CompactionFilter>>,
    /// A time to live for every put that is given none ([`WriteOptions::ttl`],
    /// [`Store::put_with_ttl`](super::Store::put_with_ttl)). `None` by default: puts do not
    /// expire.
    pub default_ttl: Option<Duration>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            filter: None,
            fpr: None,
            policy: None,
            memtable_bytes: 32 << 20,
            sync: SyncPolicy::OnFlush,
            compaction_trigger: Some(8),
            l0_slowdown: 12,
            l0_stop: 20,
            slowdown_bytes_per_sec: 16 << 20,
            table_bytes: 64 << 20,
            l1_bytes: 256 << 20,
            level_ratio: 10,
            idle_drain: Some(Duration::from_secs(1)),
            scan_drain: true,
            create_if_missing: true,
            mmap_reads: false,
            block_cache_bytes: 32 << 20,
            compression: Compression::Lz4,
            range_filter_bits: DEFAULT_RANGE_BITS,
            deferred_range_filters: Some(Duration::from_millis(500)),
            read_only: false,
            transaction_window_bytes: 64 << 20,
            fs: Arc::new(RealFs),
            clock: Arc::new(SystemClock),
            compaction_filter: None,
            compaction_filters: Vec::new(),
            default_ttl: None,
        }
    }
}

/// Chainable setters, one per field (see the field of the same name).
macro_rules! setters {
    ($($(#[$m:meta])* $name:ident: $ty:ty => $conv:expr;)*) => {
        impl Options {
            $(
                $(#[$m])*
                #[must_use]
                pub fn $name(mut self, $name: $ty) -> Self {
                    self.$name = $conv($name);
                    self
                }
            )*
        }
    };
}

fn same<T>(t: T) -> T {
    t
}

setters! {
    /// Sets [`Options::filter`] (a kind, `Some(kind)` or `None`).
    filter: impl Into<Option<FilterKind>> => Into::into;
    /// Sets [`Options::fpr`] (a rate, `Some(rate)` or `None`).
    fpr: impl Into<Option<f64>> => Into::into;
    /// Sets [`Options::policy`] (a policy, `Some(policy)` or `None`).
    policy: impl Into<Option<FilterPolicy>> => Into::into;
    /// Sets [`Options::memtable_bytes`].
    memtable_bytes: usize => same;
    /// Sets [`Options::transaction_window_bytes`].
    transaction_window_bytes: usize => same;
    /// Sets [`Options::sync`].
    sync: SyncPolicy => same;
    /// Sets [`Options::compaction_trigger`] (`None` turns automatic compaction off).
    compaction_trigger: impl Into<Option<usize>> => Into::into;
    /// Sets [`Options::l0_slowdown`].
    l0_slowdown: usize => same;
    /// Sets [`Options::l0_stop`].
    l0_stop: usize => same;
    /// Sets [`Options::slowdown_bytes_per_sec`].
    slowdown_bytes_per_sec: u64 => same;
    /// Sets [`Options::table_bytes`].
    table_bytes: u64 => same;
    /// Sets [`Options::l1_bytes`].
    l1_bytes: u64 => same;
    /// Sets [`Options::level_ratio`].
    level_ratio: u64 => same;
    /// Sets [`Options::idle_drain`] (`None` turns it off).
    idle_drain: impl Into<Option<Duration>> => Into::into;
    /// Sets [`Options::scan_drain`].
    scan_drain: bool => same;
    /// Sets [`Options::create_if_missing`].
    create_if_missing: bool => same;
    /// Sets [`Options::mmap_reads`].
    mmap_reads: bool => same;
    /// Sets [`Options::block_cache_bytes`].
    block_cache_bytes: usize => same;
    /// Sets [`Options::compression`].
    compression: Compression => same;
    /// Sets [`Options::range_filter_bits`].
    range_filter_bits: f64 => same;
    /// Sets [`Options::deferred_range_filters`] (`None`: built when written).
    deferred_range_filters: impl Into<Option<Duration>> => Into::into;
    /// Sets [`Options::read_only`].
    read_only: bool => same;
    /// Sets [`Options::fs`].
    fs: Arc<dyn Fs> => same;
    /// Sets [`Options::clock`].
    clock: Arc<dyn Clock> => same;
    /// Sets [`Options::compaction_filter`].
    compaction_filter: impl Into<Option<Arc<dyn CompactionFilter>>> => Into::into;
    /// Sets [`Options::default_ttl`].
    default_ttl: impl Into<Option<Duration>> => Into::into;
}

impl Options {
    /// Registers `filter` under its [`name`](CompactionFilter::name) for the keyspaces that
    /// record that name ([`Options::compaction_filters`]). Register every filter a store's
    /// keyspaces were created with at each open, as RocksDB's compaction filter factories
    /// are given at each open.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use filterstore::expiry::{CompactionFilter, Decision};
    /// use filterstore::{Error, KeyspaceOptions, Options, Store};
    ///
    /// /// Drops the sessions marked ended.
    /// #[derive(Debug)]
    /// struct EndedSessions;
    /// impl CompactionFilter for EndedSessions {
    ///     fn name(&self) -> &str {
    ///         "ended-sessions"
    ///     }
    ///     fn filter(&self, _level: usize, _key: &[u8], value: &[u8]) -> Decision {
    ///         if value == b"ended" { Decision::Remove } else { Decision::Keep }
    ///     }
    /// }
    ///
    /// # let dir = tempfile::tempdir()?;
    /// let opts = || Options::default().register_compaction_filter(Arc::new(EndedSessions));
    /// let store = Store::open(dir.path(), opts())?;
    /// let sessions = store.keyspace_with(
    ///     "sessions",
    ///     KeyspaceOptions::default().compaction_filter("ended-sessions"),
    /// )?;
    /// sessions.put("s1", "ended")?;
    /// sessions.flush()?;
    /// sessions.compact()?; // the keyspace's filter runs; the default keyspace's never would
    /// assert_eq!(sessions.get("s1")?, None);
    /// drop(sessions);
    /// store.close()?;
    /// // The keyspace recorded the name: the store opens only with the filter registered.
    /// let e = Store::open(dir.path(), Options::default()).err().unwrap();
    /// assert!(matches!(e, Error::CompactionFilterNotRegistered { .. }));
    /// let store = Store::open(dir.path(), opts())?;
    /// # Ok::<(), filterstore::Error>(())
    /// ```
    #[must_use]
    pub fn register_compaction_filter(mut self, filter: Arc<dyn CompactionFilter>) -> Self {
        self.compaction_filters.push(filter);
        self
    }

    /// The registered compaction filter named `name`.
    pub(crate) fn registered_filter(&self, name: &str) -> Option<&Arc<dyn CompactionFilter>> {
        self.compaction_filters.iter().find(|f| f.name() == name)
    }

    /// Refuses to open a store one of whose `keyspaces` records a compaction filter these
    /// options do not register (a compaction of it would write what its filter forbids).
    pub(crate) fn check_keyspace_filters(&self, keyspaces: &Keyspaces) -> Result<()> {
        for k in &keyspaces.live {
            match &k.compaction_filter {
                Some(f) if self.registered_filter(f).is_none() => {
                    return Err(Error::CompactionFilterNotRegistered {
                        keyspace: k.name.clone(),
                        filter: f.clone(),
                    })
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The level tree these options describe.
    pub(crate) fn shape(&self) -> Shape {
        Shape {
            l0_trigger: self.compaction_trigger,
            l1_bytes: self.l1_bytes,
            ratio: self.level_ratio,
            l0_merge_bytes: (self.memtable_bytes as u64).saturating_mul(L0_MERGE_MEMTABLES),
        }
    }

    pub(super) fn check(&self) -> Result<()> {
        if let Some(f) = self.fpr {
            check_fpr(f)?;
        }
        if let Some(p) = &self.policy {
            check_policy(p)?;
        }
        check_range_bits(self.range_filter_bits)?;
        self.compression.check_available()?;
        for (i, f) in self.compaction_filters.iter().enumerate() {
            check_filter_name(f.name())?;
            if self.compaction_filters[..i]
                .iter()
                .any(|g| g.name() == f.name())
            {
                return Err(Error::InvalidArgument(format!(
                    "two compaction filters registered under the name {:?}",
                    f.name()
                )));
            }
        }
        let bad = |what: &str| Err(Error::InvalidArgument(what.to_string()));
        if self.compaction_trigger == Some(0) {
            return bad("compaction_trigger must be at least 1");
        }
        if self.l0_stop == 0 || self.l0_slowdown > self.l0_stop {
            return bad("l0_slowdown must not exceed l0_stop, which must be at least 1");
        }
        if self.level_ratio < 2 {
            return bad("level_ratio must be at least 2");
        }
        if self.table_bytes == 0 || self.l1_bytes == 0 || self.slowdown_bytes_per_sec == 0 {
            return bad("table_bytes, l1_bytes and slowdown_bytes_per_sec must be positive");
        }
        Ok(())
    }
}

/// L0 tables holding at most this many memtables' bytes together are merged into one L0
/// table once L0 holds half the compaction trigger's tables and no other compaction is due
/// (`compaction::plan::plan_l0_merge`; docs/engine.md, "L0 merge").
const L0_MERGE_MEMTABLES: u64 = 2;

/// Filter probes of L0 tables since writes paused that, with [`Options::idle_drain`], show
/// that lookups are paying for L0 (about 2,500 absent lookups over 4 L0 tables).
pub const IDLE_DRAIN_PROBES: u64 = 10_000;

/// Default bits per key of the range filters ([`Options::range_filter_bits`]).
pub const DEFAULT_RANGE_BITS: f64 = 16.0;

/// `bits` is 0 (no range filter) or a size the range filter builder accepts.
pub(crate) fn check_range_bits(bits: f64) -> Result<()> {
    use crate::filter::range::{MAX_BITS_PER_KEY as MAX, MIN_BITS_PER_KEY as MIN};
    if bits == 0.0 || (MIN..=MAX).contains(&bits) {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "range filter bits per key {bits} must be 0 (none) or from {MIN} to {MAX}"
    )))
}

/// A compaction filter's name as a keyspace records it: 1 to 255 bytes.
pub(super) fn check_filter_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(Error::InvalidArgument(format!(
            "compaction filter name {name:?} of {} bytes (1 to {MAX_NAME_BYTES})",
            name.len()
        )));
    }
    Ok(())
}

/// Default filter of a new store.
pub const DEFAULT_FILTER: FilterKind = FilterKind::BlockedBloom;
/// Default target false-positive rate of a new store.
pub const DEFAULT_FPR: f64 = 0.01;

/// The filter policy of a new store created with `kind` at `fpr` (the defaults, or
/// [`Options::filter`] and [`Options::fpr`]) and no [`Options::policy`]: uniform, every
/// table at `fpr`. (Monkey's allocation at the same memory, [`FilterPolicy::monkey_at`],
/// is opt-in: on the level trees compaction leaves, whose upper levels cover only part of
/// the key space, it did not save the wasted reads it should; see `docs/engine.md`.)
pub fn default_policy(kind: FilterKind, fpr: f64) -> FilterPolicy {
    FilterPolicy::Uniform { kind, fpr }
}

/// Checks a filter policy given as an option or recorded by the store: a rate strictly
/// between 0 and 1 for uniform filters (also without a filter: it is the store's rate for
/// later choices), a budget from 0 to [`MAX_BITS_PER_KEY`] bits per key.
pub(super) fn check_policy(policy: &FilterPolicy) -> Result<()> {
    match *policy {
        FilterPolicy::Uniform { fpr, .. } => check_fpr(fpr),
        FilterPolicy::Budget { bits_per_key, .. }
            if !(0.0..=MAX_BITS_PER_KEY).contains(&bits_per_key) =>
        {
            Err(Error::InvalidArgument(format!(
                "bits per key {bits_per_key} must be a number from 0 to {MAX_BITS_PER_KEY}"
            )))
        }
        FilterPolicy::Budget {
            kind: FilterKind::Global,
            ..
        } => Err(Error::InvalidArgument(
            "the global filter is one filter for the whole store: it has no per-run \
             allocation (use it with a uniform policy)"
                .into(),
        )),
        FilterPolicy::Budget { .. } => Ok(()),
    }
}
