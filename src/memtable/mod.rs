//! The memtable: the newest writes, in memory, until they are sealed into a table.
//!
//! ```text
//! arena:  | key | value | key | value | older | value | ... |   1 MiB chunks, append-only, never moved
//! slots:  | hash | prefix | key at | klen | value at | vlen |     one per distinct key, insertion order
//! index:  hash table of slot numbers (hashbrown), keyed by the slot's xxh3 key hash
//! runs:   | (prefix, slot) sorted: 4,100 | 700 | 96 | 9 |        key order, built on demand
//! ```
//! A put costs one hash-table probe and one append (no allocation per entry, no tree walk);
//! an overwrite appends only the new value; a get is one probe. Sealing sorts in parallel on
//! the current rayon pool, hands the filter the key hashes computed at insert time and the
//! range filter the keys in insertion order (the arena's order: one stream of memory).
//!
//! **Key order** is kept as sorted runs of `(first eight key bytes big-endian, slot number)`,
//! built when a scan or the seal asks for it, never by a put. Keys are never removed, so the
//! order of the slots already sorted never changes: a scan sorts only the keys added since
//! the last one into a new run, and merges the newest run into the one before it while that
//! one is at most [`RUN_RATIO`](order::RUN_RATIO) times larger. Run sizes therefore fall
//! geometrically (at most log₄ n + 1 runs), a key is moved O(log n) times over the
//! memtable's life, and a scan right after one put sorts one key and, amortised, merges
//! O(log n) entries, where re-merging the whole order would cost O(n). Each run is an
//! immutable `Arc`'d vector: a scan's copy of the order is a clone of one `Arc`. Sealing
//! merges the runs into one.
//!
//! **Snapshots.** A scan reads the memtable as it was when the scan started, while writes go
//! on (the scan takes the store's lock only for the moment it copies its next few entries
//! into its own buffer, see `scan.rs`). A [`MemCursor`] keeps the runs of that moment (keys
//! added later are only in runs it never sees) and the arena position writes had reached.
//! Every write appends at least one byte, so positions are distinct and increasing: a
//! version is older than the scan exactly when its value lies below that position. An
//! overwrite or delete replaces the slot's value in place; while any scan of this memtable
//! is open (`readers`), it first appends a 12-byte link to the version it replaces, so the
//! scan walks back from a newer version to the one it must see. With no scan open nothing is
//! kept: a scan started later sees the newer version anyway. A store snapshot registers as
//! a reader and keeps a position ([`snapshot_pos`](Memtable::snapshot_pos)); its scans'
//! cursors (`cursor_at`) are made later, from runs that may hold keys written after it, and
//! skip every key whose first write lies at or past the position. A backward cursor
//! ([`MemCursor::back`]) shares its forward one's runs and position, so a scan reads the
//! same snapshot from either end.
//!
//! Why not a skip list (RocksDB's and fjall's memtable, with a sequence number in every
//! key): its insert walks a tower of pointers, a cache miss per level, and its get a search
//! of O(log n) misses, where this memtable's put and get are one hash probe. The runs give
//! scans ordered access at a cost paid by scans, amortised over the keys they sort, and
//! snapshots cost a put nothing unless a scan is open while it overwrites a key.
//!
//! The files by job: `arena` holds the bytes, `order` the sorted runs (with `sort`, the
//! parallel sort of new keys), `cursor` the scans; this file the map from key to slot.

mod arena;
mod cursor;
mod order;
mod ranges;
mod sort;

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use hashbrown::hash_table::{Entry, HashTable};

use crate::codec::prefix8;
use crate::expiry::Now;
use crate::hash::key_hash;
use crate::table::SortedEntries;
use crate::Slice;

use arena::Arena;
pub(crate) use cursor::{EntryBuf, MemCursor, ReaderGuard};
use order::{Order, Run};
pub(crate) use ranges::MemRange;

/// Value length (the low 31 bits of `vlen`) of a tombstone.
const TOMBSTONE: u32 = u32::MAX >> 1;
/// `vlen` flag (not of a tombstone): the value is preceded in the arena by its 8-byte
/// `expires_at` (little-endian), and its length is the low 30 bits.
const EXPIRES: u32 = 1 << 30;
/// `vlen` flag: the value is preceded in the arena by a link to the version it replaced.
const OLDER: u32 = 1 << 31;
/// Bytes of that link: the older version's value position (u64) and `vlen` (u32), little-endian.
const OLDER_LEN: usize = 12;

#[derive(Clone, Copy, Debug)]
struct Slot {
    /// `key_hash(key)`: the index's hash and the filter's key hash.
    hash: u64,
    /// The first eight key bytes, big-endian, zero-padded: orders most keys alone.
    prefix: u64,
    /// Arena position of the key (chunk << 32 | offset); the value follows it when it was
    /// written with the key.
    key_at: u64,
    /// Arena position of the current value.
    val_at: u64,
    klen: u32,
    /// Value length (or [`TOMBSTONE`]) in the low 31 bits; [`OLDER`] when a link precedes it.
    vlen: u32,
}

/// The memtable. Not synchronized: the store keeps it under its state lock (`&mut self` to
/// insert, `&self` to read; the runs have their own small lock, and the count of open scans
/// is shared with them).
#[derive(Debug, Default)]
pub struct Memtable {
    arena: Arena,
    slots: Vec<Slot>,
    index: HashTable<u32>,
    order: Mutex<Order>,
    /// Cursors of scans open on this memtable while it takes writes (see the module docs).
    readers: Arc<AtomicUsize>,
    /// Puts with an expiry inserted (overwritten ones included).
    expiring: usize,
    /// Range tombstones, in write order (`ranges.rs`).
    ranges: Vec<MemRange>,
    /// Bytes they hold.
    range_bytes: usize,
}

impl Memtable {
    /// An empty memtable.
    pub fn new() -> Memtable {
        Memtable::default()
    }

    /// An empty memtable with room for `entries` keys before its slot array or index grows
    /// (a growth rehashes and copies every entry inside one `put`).
    pub fn with_capacity(entries: usize) -> Memtable {
        Memtable {
            slots: Vec::with_capacity(entries),
            index: HashTable::with_capacity(entries),
            ..Memtable::default()
        }
    }

    /// Distinct keys held (tombstones included).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Bytes held: arena (overwritten values and their links included), slots and index.
    pub fn approximate_bytes(&self) -> usize {
        self.arena.len()
            + self.range_bytes
            + self.slots.capacity() * std::mem::size_of::<Slot>()
            + self.index.capacity() * (std::mem::size_of::<u32>() + 1)
    }

    fn key(&self, s: &Slot) -> &[u8] {
        self.arena.get(s.key_at, s.klen)
    }

    /// The version written at `at` with length field `vlen` (`None`: a tombstone), without
    /// its expiry.
    fn version(&self, at: u64, vlen: u32) -> Option<&[u8]> {
        let len = vlen & !OLDER;
        if len == TOMBSTONE {
            None
        } else if len & EXPIRES != 0 {
            Some(self.arena.get(at + 8, len & !EXPIRES))
        } else {
            Some(self.arena.get(at, len))
        }
    }

    /// `expires_at` of the version at `at` with length field `vlen` (0: never).
    fn expiry(&self, at: u64, vlen: u32) -> u64 {
        let len = vlen & !OLDER;
        if len != TOMBSTONE && len & EXPIRES != 0 {
            let b = self.arena.get(at, 8);
            u64::from_le_bytes(b.try_into().unwrap_or_default())
        } else {
            0
        }
    }

    /// The version as a read at `now` sees it: an expired one as a tombstone.
    #[cfg(test)]
    fn version_at(&self, at: u64, vlen: u32, now: &Now) -> Option<&[u8]> {
        if vlen & !OLDER & EXPIRES != 0 && now.expired(self.expiry(at, vlen)) {
            return None;
        }
        self.version(at, vlen)
    }

    /// Whether a put with an expiry was inserted (its table is then written in the layout
    /// that stores expiries: format.md, "Table", version 5).
    pub(crate) fn has_expiring(&self) -> bool {
        self.expiring > 0
    }

    fn value(&self, s: &Slot) -> Option<&[u8]> {
        self.version(s.val_at, s.vlen)
    }

    /// [`version_at`](Self::version_at) as a [`Slice`]: inline when short, else a view of
    /// its arena chunk (no allocation, no copy; keeps the chunk alive after this memtable
    /// drops).
    #[inline]
    fn shared_version_at(&self, at: u64, vlen: u32, now: &Now) -> Option<Slice> {
        let len = vlen & !OLDER;
        if len == TOMBSTONE {
            None
        } else if len & EXPIRES != 0 {
            if now.expired(self.expiry(at, vlen)) {
                return None;
            }
            Some(self.arena.share(at + 8, len & !EXPIRES))
        } else {
            Some(self.arena.share(at, len))
        }
    }

    /// The version that the one at `at` (whose `vlen` has [`OLDER`]) replaced: its
    /// position and `vlen`, from the link just before it.
    fn older(&self, at: u64) -> (u64, u32) {
        let link = self.arena.get(at - OLDER_LEN as u64, OLDER_LEN as u32);
        let (pos, vlen) = link.split_at(8);
        (
            u64::from_le_bytes(pos.try_into().unwrap_or_default()),
            u32::from_le_bytes(vlen.try_into().unwrap_or_default()),
        )
    }

    /// Stores `value` (`None`: a tombstone) under `key`, replacing what it held.
    pub fn insert(&mut self, key: &[u8], value: Option<&[u8]>) {
        self.insert_hashed(key, key_hash(key), value, 0)
    }

    /// Stores `value` (`None`: a tombstone) under `key`, expiring at `expires_at` (Unix
    /// milliseconds; 0: never, and ignored for a tombstone).
    pub(crate) fn insert_op(&mut self, key: &[u8], value: Option<&[u8]>, expires_at: u64) {
        self.insert_hashed(key, key_hash(key), value, expires_at)
    }

    /// [`Memtable::insert_op`] with the key's precomputed [`key_hash`].
    pub fn insert_hashed(&mut self, key: &[u8], hash: u64, value: Option<&[u8]>, expires_at: u64) {
        debug_assert_eq!(hash, key_hash(key));
        assert!(
            key.len() < u32::MAX as usize && value.is_none_or(|v| v.len() < EXPIRES as usize),
            "entry too large for the memtable"
        );
        let exp = if value.is_some() { expires_at } else { 0 };
        let expb = exp.to_le_bytes();
        let (vlen, exp_bytes): (u32, &[u8]) = match value {
            None => (TOMBSTONE, &[]),
            Some(v) if exp != 0 => {
                self.expiring += 1;
                (v.len() as u32 | EXPIRES, &expb)
            }
            Some(v) => (v.len() as u32, &[]),
        };
        let v = value.unwrap_or(&[]);
        // Every write appends at least one byte after its value's position, so that write
        // positions are distinct and increasing (see the module docs, "Snapshots").
        let pad: &[u8] = if v.is_empty() && exp == 0 { &[0] } else { &[] };
        let found = {
            let (slots, arena) = (&self.slots, &self.arena);
            let eq = |&i: &u32| {
                let s = &slots[i as usize];
                s.hash == hash && arena.get(s.key_at, s.klen) == key
            };
            match self.index.entry(hash, eq, |&i| slots[i as usize].hash) {
                Entry::Occupied(o) => Some(*o.get()),
                Entry::Vacant(vac) => {
                    vac.insert(slots.len() as u32);
                    None
                }
            }
        };
        match found {
            Some(i) => {
                let old = self.slots[i as usize];
                let (val_at, vlen) = if self.readers.load(Relaxed) > 0 {
                    // An open scan may need the version this write replaces: link it.
                    let mut link = [0u8; OLDER_LEN];
                    link[..8].copy_from_slice(&old.val_at.to_le_bytes());
                    link[8..].copy_from_slice(&old.vlen.to_le_bytes());
                    let at = self.arena.append(&[&link, exp_bytes, v, pad]);
                    (at + OLDER_LEN as u64, vlen | OLDER)
                } else {
                    (self.arena.append(&[exp_bytes, v, pad]), vlen)
                };
                let s = &mut self.slots[i as usize];
                s.val_at = val_at;
                s.vlen = vlen;
            }
            None => {
                let key_at = self.arena.append(&[key, exp_bytes, v, pad]);
                self.slots.push(Slot {
                    hash,
                    prefix: prefix8(key),
                    key_at,
                    val_at: key_at + key.len() as u64,
                    klen: key.len() as u32,
                    vlen,
                });
            }
        }
    }

    /// The entry for `key`: `None` when absent, `Some(None)` for a tombstone.
    #[cfg(test)]
    pub fn get(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        let hash = key_hash(key);
        let i = self.index.find(hash, |&i| {
            let s = &self.slots[i as usize];
            s.hash == hash && self.key(s) == key
        })?;
        let s = &self.slots[*i as usize];
        if self.covered(key, s.val_at, u64::MAX) {
            return Some(None);
        }
        Some(self.version_at(s.val_at, s.vlen, &Now::fixed(0)))
    }

    /// [`Memtable::get`] with the key's precomputed [`key_hash`], as a read at `now` sees
    /// it (an expired entry is a tombstone). The value is a view of the arena (see
    /// [`Slice`]), or inline when short.
    pub fn get_hashed(&self, key: &[u8], hash: u64, now: &Now) -> Option<Option<Slice>> {
        let i = self.index.find(hash, |&i| {
            let s = &self.slots[i as usize];
            s.hash == hash && self.key(s) == key
        })?;
        let s = &self.slots[*i as usize];
        if self.covered(key, s.val_at, u64::MAX) {
            return Some(None);
        }
        Some(self.shared_version_at(s.val_at, s.vlen, now))
    }

    /// The entry for `key` as it was when writes had reached arena position `snap` (a
    /// [`snapshot_pos`](Self::snapshot_pos) taken while a [`reader`](Self::reader) was
    /// registered, so every version it may need is linked): `None` when the key was written
    /// only later, or not at all.
    pub(crate) fn get_at(
        &self,
        key: &[u8],
        hash: u64,
        snap: u64,
        now: &Now,
    ) -> Option<Option<Slice>> {
        let i = self.index.find(hash, |&i| {
            let s = &self.slots[i as usize];
            s.hash == hash && self.key(s) == key
        })?;
        let s = &self.slots[*i as usize];
        if s.key_at >= snap {
            return None;
        }
        let (mut at, mut vlen) = (s.val_at, s.vlen);
        while at >= snap && vlen & OLDER != 0 {
            (at, vlen) = self.older(at);
        }
        // A version the snapshot needs that was not linked: a bug, never a wrong value.
        if at < snap && self.covered(key, at, snap) {
            return Some(None);
        }
        (at < snap).then(|| self.shared_version_at(at, vlen, now))
    }

    /// Every entry in key order, read in place (for sealing); the order is sorted on the
    /// current rayon pool if it is not cached yet.
    pub fn sorted(&self) -> Sorted<'_> {
        let mut order = self.merged();
        if self.has_ranges() {
            // Values a range tombstone of this memtable hides go: a table's values are newer
            // than its own range tombstones (see `tombstone`). Point tombstones stay (they
            // hide nothing more, and a range's start key keeps the table non-empty).
            let kept: Vec<(u64, u32)> = order
                .iter()
                .filter(|&&(_, i)| {
                    let s = &self.slots[i as usize];
                    self.value(s).is_none() || !self.covered(self.key(s), s.val_at, u64::MAX)
                })
                .copied()
                .collect();
            order = Arc::new(kept);
        }
        Sorted { mem: self, order }
    }

    /// Every key (tombstones' included), in insertion order: the slots' and the arena's
    /// order, so the bytes are read as one stream (for the range filter at sealing, which
    /// takes its keys in any order; in key order, every key would be a cache and TLB miss
    /// in the arena).
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &[u8]> + Send + '_ {
        self.slots.iter().map(|s| self.key(s))
    }

    /// The key hash of every entry, in no particular order (for the filter at sealing).
    pub fn hashes(&self) -> Vec<u64> {
        use rayon::prelude::*;
        self.slots.par_iter().map(|s| s.hash).collect()
    }
}

/// A memtable's entries in key order, by position.
pub struct Sorted<'a> {
    mem: &'a Memtable,
    order: Run,
}

impl Sorted<'_> {
    /// The entries' key hashes, in key order.
    pub fn hashes(&self) -> Vec<u64> {
        use rayon::prelude::*;
        self.order
            .par_iter()
            .map(|&(_, i)| self.mem.slots[i as usize].hash)
            .collect()
    }
}

impl SortedEntries for Sorted<'_> {
    fn len(&self) -> usize {
        self.order.len()
    }
    fn entry(&self, i: usize) -> (&[u8], Option<&[u8]>) {
        let s = &self.mem.slots[self.order[i].1 as usize];
        (self.mem.key(s), self.mem.value(s))
    }
    fn expires(&self, i: usize) -> u64 {
        let s = &self.mem.slots[self.order[i].1 as usize];
        self.mem.expiry(s.val_at, s.vlen)
    }
    fn tagged(&self) -> bool {
        self.mem.has_expiring()
    }
    fn payload_bytes(&self) -> usize {
        self.mem.arena.len()
    }
}

#[cfg(test)]
mod tests;
