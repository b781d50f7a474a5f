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
//! the current rayon pool and hands the filter the key hashes computed at insert time.
//!
//! **Key order** is kept as sorted runs of `(first eight key bytes big-endian, slot number)`,
//! built when a scan or the seal asks for it, never by a put. Keys are never removed, so the
//! order of the slots already sorted never changes: a scan sorts only the keys added since
//! the last one into a new run, and merges the newest run into the one before it while that
//! one is at most [`RUN_RATIO`] times larger. Run sizes therefore fall geometrically (at most
//! log₄ n + 1 runs), a key is moved O(log n) times over the memtable's life, and a scan right
//! after one put sorts one key and, amortised, merges O(log n) entries, where re-merging the
//! whole order would cost O(n). Each run is an immutable `Arc`'d vector: a scan's copy of
//! the order is a clone of one `Arc`. Sealing merges the runs into one.
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
//! kept: a scan started later sees the newer version anyway.
//!
//! Why not a skip list (RocksDB's and fjall's memtable, with a sequence number in every
//! key): its insert walks a tower of pointers, a cache miss per level, and its get a search
//! of O(log n) misses, where this memtable's put and get are one hash probe. The runs give
//! scans ordered access at a cost paid by scans, amortised over the keys they sort, and
//! snapshots cost a put nothing unless a scan is open while it overwrites a key.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use hashbrown::hash_table::{Entry, HashTable};

use crate::codec::prefix8;
use crate::hash::key_hash;
use crate::table::SortedEntries;

/// Bytes per arena chunk (a larger entry gets a chunk of its own size).
const CHUNK: usize = 1 << 20;
/// Value length (the low 31 bits of `vlen`) of a tombstone.
const TOMBSTONE: u32 = u32::MAX >> 1;
/// `vlen` flag: the value is preceded in the arena by a link to the version it replaced.
const OLDER: u32 = 1 << 31;
/// Bytes of that link: the older version's value position (u64) and `vlen` (u32), little-endian.
const OLDER_LEN: usize = 12;
/// Sorts of at least this many slots run on the rayon pool.
const PAR_SORT_MIN: usize = 1 << 15;
/// The newest run is merged into the one before it while that one holds at most this many
/// times as many keys.
pub(crate) const RUN_RATIO: usize = 4;
/// A cursor stops filling a buffer once it holds this many bytes (and at least one entry).
const FILL_BYTES: usize = 64 << 10;

/// One arena chunk, in an anonymous memory map: dropping a sealed memtable gives its
/// memory back to the operating system at once (heap buffers of this size are often kept by
/// the allocator, which shows as resident memory the store does not use). A plain heap
/// buffer if the map cannot be made.
#[derive(Debug)]
struct Chunk {
    buf: ChunkBuf,
    len: usize,
}

#[derive(Debug)]
enum ChunkBuf {
    Map(memmap2::MmapMut),
    Heap(Box<[u8]>),
}

impl Chunk {
    fn new(capacity: usize) -> Chunk {
        let buf = match memmap2::MmapMut::map_anon(capacity) {
            Ok(m) => ChunkBuf::Map(m),
            Err(_) => ChunkBuf::Heap(vec![0u8; capacity].into_boxed_slice()),
        };
        Chunk { buf, len: 0 }
    }

    fn full(&self) -> &[u8] {
        match &self.buf {
            ChunkBuf::Map(m) => m,
            ChunkBuf::Heap(b) => b,
        }
    }

    fn spare(&self) -> usize {
        self.full().len() - self.len
    }

    fn push(&mut self, bytes: &[u8]) {
        let end = self.len + bytes.len();
        let dst = match &mut self.buf {
            ChunkBuf::Map(m) => &mut m[self.len..end],
            ChunkBuf::Heap(b) => &mut b[self.len..end],
        };
        dst.copy_from_slice(bytes);
        self.len = end;
    }

    fn bytes(&self) -> &[u8] {
        &self.full()[..self.len]
    }
}

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

/// `(prefix, slot number)` pairs sorted by key: the prefix inline decides most comparisons
/// without touching the slots or the arena.
type Run = Arc<Vec<(u64, u32)>>;

/// The sorted runs of the first `covered` slots, largest (oldest) first; their keys are
/// disjoint.
#[derive(Debug, Default)]
struct Order {
    covered: usize,
    runs: Arc<Vec<Run>>,
}

/// The memtable. Not synchronized: the store keeps it under its state lock (`&mut self` to
/// insert, `&self` to read; the runs have their own small lock, and the count of open scans
/// is shared with them).
#[derive(Debug, Default)]
pub struct Memtable {
    chunks: Vec<Chunk>,
    slots: Vec<Slot>,
    index: HashTable<u32>,
    order: Mutex<Order>,
    arena_bytes: usize,
    /// Cursors of scans open on this memtable while it takes writes (see the module docs).
    readers: Arc<AtomicUsize>,
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
        self.arena_bytes
            + self.slots.capacity() * std::mem::size_of::<Slot>()
            + self.index.capacity() * (std::mem::size_of::<u32>() + 1)
    }

    fn bytes(&self, at: u64, len: u32) -> &[u8] {
        let (chunk, off) = ((at >> 32) as usize, at as u32 as usize);
        &self.chunks[chunk].bytes()[off..off + len as usize]
    }

    fn key(&self, s: &Slot) -> &[u8] {
        self.bytes(s.key_at, s.klen)
    }

    /// The version written at `at` with length field `vlen` (`None`: a tombstone).
    fn version(&self, at: u64, vlen: u32) -> Option<&[u8]> {
        let len = vlen & !OLDER;
        (len != TOMBSTONE).then(|| self.bytes(at, len))
    }

    fn value(&self, s: &Slot) -> Option<&[u8]> {
        self.version(s.val_at, s.vlen)
    }

    /// The version that the one at `at` (whose `vlen` has [`OLDER`]) replaced: its
    /// position and `vlen`, from the link just before it.
    fn older(&self, at: u64) -> (u64, u32) {
        let link = self.bytes(at - OLDER_LEN as u64, OLDER_LEN as u32);
        let (pos, vlen) = link.split_at(8);
        (
            u64::from_le_bytes(pos.try_into().unwrap_or_default()),
            u32::from_le_bytes(vlen.try_into().unwrap_or_default()),
        )
    }

    /// The arena position the next write will start at or after.
    fn end_pos(&self) -> u64 {
        self.chunks
            .last()
            .map_or(0, |c| ((self.chunks.len() as u64 - 1) << 32) | c.len as u64)
    }

    /// Appends `parts` contiguously to the arena and returns the position of the first.
    fn append(&mut self, parts: &[&[u8]]) -> u64 {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let fits = self.chunks.last().is_some_and(|c| c.spare() >= len);
        if !fits {
            self.chunks.push(Chunk::new(CHUNK.max(len)));
        }
        let chunk = self.chunks.len() - 1;
        let c = &mut self.chunks[chunk];
        let at = ((chunk as u64) << 32) | c.len as u64;
        for p in parts {
            c.push(p);
        }
        self.arena_bytes += len;
        at
    }

    /// Stores `value` (`None`: a tombstone) under `key`, replacing what it held.
    pub fn insert(&mut self, key: &[u8], value: Option<&[u8]>) {
        self.insert_hashed(key, key_hash(key), value)
    }

    /// [`Memtable::insert`] with the key's precomputed [`key_hash`].
    pub fn insert_hashed(&mut self, key: &[u8], hash: u64, value: Option<&[u8]>) {
        debug_assert_eq!(hash, key_hash(key));
        assert!(
            key.len() < u32::MAX as usize && value.is_none_or(|v| v.len() < TOMBSTONE as usize),
            "entry too large for the memtable"
        );
        let vlen = value.map_or(TOMBSTONE, |v| v.len() as u32);
        let v = value.unwrap_or(&[]);
        // Every write appends at least one byte after its value's position, so that write
        // positions are distinct and increasing (see the module docs, "Snapshots").
        let pad: &[u8] = if v.is_empty() { &[0] } else { &[] };
        let found = {
            let (slots, chunks) = (&self.slots, &self.chunks);
            let eq = |&i: &u32| {
                let s = &slots[i as usize];
                let (c, o) = ((s.key_at >> 32) as usize, s.key_at as u32 as usize);
                s.hash == hash && chunks[c].bytes()[o..o + s.klen as usize] == *key
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
                    let at = self.append(&[&link, v, pad]);
                    (at + OLDER_LEN as u64, vlen | OLDER)
                } else {
                    (self.append(&[v, pad]), vlen)
                };
                let s = &mut self.slots[i as usize];
                s.val_at = val_at;
                s.vlen = vlen;
            }
            None => {
                let key_at = self.append(&[key, v, pad]);
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
        self.get_hashed(key, key_hash(key))
    }

    /// [`Memtable::get`] with the key's precomputed [`key_hash`].
    pub fn get_hashed(&self, key: &[u8], hash: u64) -> Option<Option<&[u8]>> {
        let i = self.index.find(hash, |&i| {
            let s = &self.slots[i as usize];
            s.hash == hash && self.key(s) == key
        })?;
        Some(self.value(&self.slots[*i as usize]))
    }

    fn cmp_slots(&self, a: &(u64, u32), b: &(u64, u32)) -> Ordering {
        a.0.cmp(&b.0).then_with(|| {
            let (sa, sb) = (&self.slots[a.1 as usize], &self.slots[b.1 as usize]);
            self.key(sa).cmp(self.key(sb))
        })
    }

    /// Merges two runs into one (their keys are distinct, so the order never ties).
    fn merge(&self, a: &[(u64, u32)], b: &[(u64, u32)]) -> Vec<(u64, u32)> {
        let mut m = Vec::with_capacity(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            if self.cmp_slots(&a[i], &b[j]) == Ordering::Less {
                m.push(a[i]);
                i += 1;
            } else {
                m.push(b[j]);
                j += 1;
            }
        }
        m.extend_from_slice(&a[i..]);
        m.extend_from_slice(&b[j..]);
        m
    }

    /// Sorts the slots added since the order was last extended into a new run, and merges
    /// runs as the module docs say.
    fn extend_order(&self, o: &mut Order) {
        let n = self.slots.len();
        if o.covered == n {
            return;
        }
        let pair = |i: usize| (self.slots[i].prefix, i as u32);
        let fresh: Vec<(u64, u32)> = if n - o.covered >= PAR_SORT_MIN {
            use rayon::prelude::*;
            (o.covered..n).into_par_iter().map(pair).collect()
        } else {
            (o.covered..n).map(pair).collect()
        };
        let fresh = sort_by_prefix(fresh, |a, b| self.cmp_slots(a, b));
        let mut runs: Vec<Run> = o.runs.as_ref().clone();
        runs.push(Arc::new(fresh));
        while let [.., a, b] = runs.as_slice() {
            if a.len() > RUN_RATIO * b.len() {
                break;
            }
            let merged = self.merge(a, b);
            runs.truncate(runs.len() - 2);
            runs.push(Arc::new(merged));
        }
        o.runs = Arc::new(runs);
        o.covered = n;
    }

    fn lock_order(&self) -> std::sync::MutexGuard<'_, Order> {
        self.order.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The sorted runs of every key (extended for keys added since the last call).
    fn runs(&self) -> Arc<Vec<Run>> {
        let mut o = self.lock_order();
        self.extend_order(&mut o);
        o.runs.clone()
    }

    /// Every key in one sorted run (the runs merged, newest first, and kept merged).
    fn merged(&self) -> Run {
        let mut o = self.lock_order();
        self.extend_order(&mut o);
        if o.runs.len() > 1 {
            let mut runs = o.runs.iter().rev();
            let mut acc: Vec<(u64, u32)> = runs.next().map(|r| r.to_vec()).unwrap_or_default();
            for r in runs {
                acc = self.merge(r, &acc);
            }
            o.runs = Arc::new(vec![Arc::new(acc)]);
        }
        o.runs.first().cloned().unwrap_or_default()
    }

    /// Index of the first pair of `run` whose key is >= `bound` (> `bound` with `after`).
    fn seek_run(&self, run: &[(u64, u32)], bound: &[u8], after: bool) -> usize {
        let p = prefix8(bound);
        run.partition_point(|&(q, s)| {
            q < p
                || (q == p && {
                    let k = self.key(&self.slots[s as usize]);
                    k < bound || (after && k == bound)
                })
        })
    }

    /// A cursor over the entries from `start` on, as they are at this moment (see the module
    /// docs, "Snapshots"). `live`: the memtable still takes writes, so the cursor counts as
    /// an open scan until it is released or dropped, and overwrites keep the versions it
    /// may need. The cursor must only be filled from this memtable.
    pub(crate) fn cursor(&self, start: Bound<&[u8]>, live: bool) -> MemCursor {
        let runs = self.runs();
        let pos = runs
            .iter()
            .map(|r| match start {
                Bound::Included(s) => self.seek_run(r, s, false),
                Bound::Excluded(s) => self.seek_run(r, s, true),
                Bound::Unbounded => 0,
            })
            .collect();
        let reader = live.then(|| {
            self.readers.fetch_add(1, Relaxed);
            ReaderGuard(self.readers.clone())
        });
        MemCursor {
            runs,
            pos,
            snap: if live { self.end_pos() } else { u64::MAX },
            reader,
        }
    }

    /// Number of sorted runs (for tests of the merge policy).
    #[cfg(test)]
    fn run_count(&self) -> usize {
        self.lock_order().runs.len()
    }

    /// Every entry in key order, read in place (for sealing); the order is sorted on the
    /// current rayon pool if it is not cached yet.
    pub fn sorted(&self) -> Sorted<'_> {
        Sorted {
            mem: self,
            order: self.merged(),
        }
    }

    /// The key hash of every entry, in no particular order (for the filter at sealing).
    pub fn hashes(&self) -> Vec<u64> {
        use rayon::prelude::*;
        self.slots.par_iter().map(|s| s.hash).collect()
    }
}

/// Counts an open scan of a memtable that takes writes, until dropped.
#[derive(Debug)]
struct ReaderGuard(Arc<AtomicUsize>);

impl Drop for ReaderGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

/// A scan's position in one memtable, and the snapshot it reads (see the module docs):
/// [`fill`](Self::fill) copies the next entries, in key order, into an [`EntryBuf`].
#[derive(Debug)]
pub(crate) struct MemCursor {
    runs: Arc<Vec<Run>>,
    /// The next position in each run.
    pos: Vec<usize>,
    /// Arena position writes had reached when the cursor was made (`u64::MAX`: the
    /// memtable takes no more writes, every version is visible).
    snap: u64,
    reader: Option<ReaderGuard>,
}

impl MemCursor {
    /// Replaces `out`'s entries with the next ones, in key order, as the snapshot saw them
    /// (tombstones included): up to `max` entries or about [`FILL_BYTES`] (at least one).
    /// `mem` must be the memtable the cursor was made from. Returns false once the cursor
    /// has nothing left after these.
    pub(crate) fn fill(&mut self, mem: &Memtable, out: &mut EntryBuf, max: usize) -> bool {
        out.clear();
        loop {
            // The run whose next key is the smallest (the runs' keys are disjoint).
            let mut best: Option<(usize, (u64, u32))> = None;
            for (r, run) in self.runs.iter().enumerate() {
                if let Some(&p) = run.get(self.pos[r]) {
                    if best.is_none_or(|(_, b)| mem.cmp_slots(&p, &b) == Ordering::Less) {
                        best = Some((r, p));
                    }
                }
            }
            let Some((r, (_, slot))) = best else {
                self.release();
                return false;
            };
            if out.len() >= max.max(1) || out.bytes.len() >= FILL_BYTES {
                return true;
            }
            self.pos[r] += 1;
            let s = &mem.slots[slot as usize];
            let (mut at, mut vlen) = (s.val_at, s.vlen);
            // Back to the newest version written before the snapshot. Every version this
            // cursor may need is linked: overwrites link while `reader` is held.
            while at >= self.snap && vlen & OLDER != 0 {
                (at, vlen) = mem.older(at);
            }
            debug_assert!(at < self.snap, "a version a scan needs was not linked");
            out.push(mem.key(s), mem.version(at, vlen));
        }
    }

    /// The memtable takes no more writes (it was made immutable), or the cursor is done:
    /// overwrites need not keep versions for it any more.
    pub(crate) fn release(&mut self) {
        self.reader = None;
    }
}

/// Entries copied out of a memtable: keys and values in one buffer, reused from fill to
/// fill, so copying allocates nothing once it has grown.
#[derive(Debug, Default)]
pub(crate) struct EntryBuf {
    bytes: Vec<u8>,
    /// Per entry: where its key starts, where its key ends (and its value starts), where its
    /// value ends, and whether it is a tombstone.
    entries: Vec<(usize, usize, usize, bool)>,
}

impl EntryBuf {
    fn clear(&mut self) {
        self.bytes.clear();
        self.entries.clear();
    }

    fn push(&mut self, key: &[u8], value: Option<&[u8]>) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(key);
        let key_end = self.bytes.len();
        self.bytes.extend_from_slice(value.unwrap_or_default());
        self.entries
            .push((start, key_end, self.bytes.len(), value.is_none()));
    }

    /// Entries held.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Key of entry `i`.
    #[inline]
    pub(crate) fn key(&self, i: usize) -> &[u8] {
        let (s, k, _, _) = self.entries[i];
        &self.bytes[s..k]
    }

    /// Value of entry `i` (`None`: a tombstone).
    #[inline]
    pub(crate) fn value(&self, i: usize) -> Option<&[u8]> {
        let (_, k, e, tomb) = self.entries[i];
        (!tomb).then(|| &self.bytes[k..e])
    }
}

/// A memtable's entries in key order, by position.
pub struct Sorted<'a> {
    mem: &'a Memtable,
    order: Run,
}

impl SortedEntries for Sorted<'_> {
    fn len(&self) -> usize {
        self.order.len()
    }
    fn entry(&self, i: usize) -> (&[u8], Option<&[u8]>) {
        let s = &self.mem.slots[self.order[i].1 as usize];
        (self.mem.key(s), self.mem.value(s))
    }
    fn payload_bytes(&self) -> usize {
        self.mem.arena_bytes
    }
}

/// Sorts `(prefix, slot)` pairs into key order on the rayon pool. A large input is
/// distributed into 2,048 buckets by the 11 prefix bits below the leading bits all prefixes
/// share (so bucket order is key order): the buckets are split into one group of about
/// equal size per thread, and each thread scatters the pairs of its group into its own part
/// of the output and sorts its buckets (a few hundred pairs each, in cache).
fn sort_by_prefix(
    mut v: Vec<(u64, u32)>,
    cmp: impl Fn(&(u64, u32), &(u64, u32)) -> Ordering + Sync,
) -> Vec<(u64, u32)> {
    use rayon::prelude::*;
    const BITS: u32 = 11;
    const BUCKETS: usize = 1 << BITS;
    if v.len() < PAR_SORT_MIN {
        v.sort_unstable_by(cmp);
        return v;
    }
    let first = v[0].0;
    let differ = v.par_iter().map(|p| p.0 ^ first).reduce(|| 0, |a, b| a | b);
    if differ == 0 {
        v.par_sort_unstable_by(cmp);
        return v;
    }
    let shift = (64 - differ.leading_zeros()).saturating_sub(BITS);
    let bucket = |p: u64| ((p >> shift) as usize) & (BUCKETS - 1);
    let counts = v
        .par_chunks(PAR_SORT_MIN)
        .map(|c| {
            let mut h = vec![0usize; BUCKETS];
            for p in c {
                h[bucket(p.0)] += 1;
            }
            h
        })
        .reduce(
            || vec![0usize; BUCKETS],
            |mut a, b| {
                a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                a
            },
        );
    // Groups of whole buckets: bucket `bounds[g]..bounds[g + 1]` belong to group g.
    let groups = rayon::current_num_threads().max(1);
    let target = v.len().div_ceil(groups);
    let mut bounds = vec![0usize];
    let mut acc = 0;
    for (b, c) in counts.iter().enumerate() {
        acc += c;
        if bounds.len() < groups && acc >= target * bounds.len() {
            bounds.push(b + 1);
        }
    }
    bounds.push(BUCKETS);
    let mut out = vec![(0u64, 0u32); v.len()];
    let mut regions = Vec::with_capacity(groups);
    let mut rest = out.as_mut_slice();
    for w in bounds.windows(2) {
        let len: usize = counts[w[0]..w[1]].iter().sum();
        let (head, tail) = rest.split_at_mut(len);
        regions.push((w[0]..w[1], head));
        rest = tail;
    }
    regions.into_par_iter().for_each(|(group, region)| {
        let mut next = Vec::with_capacity(group.len());
        let mut at = 0;
        for b in group.clone() {
            next.push(at);
            at += counts[b];
        }
        let starts = next.clone();
        for p in &v {
            let b = bucket(p.0);
            if group.contains(&b) {
                region[next[b - group.start]] = *p;
                next[b - group.start] += 1;
            }
        }
        for (s, e) in starts.iter().zip(&next) {
            region[*s..*e].sort_unstable_by(&cmp);
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::block::Entry;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, VecDeque};

    /// Everything `c` yields from where it stands, filled `batch` entries at a time.
    fn drain(c: &mut MemCursor, m: &Memtable, batch: usize) -> Vec<Entry> {
        let (mut out, mut buf) = (Vec::new(), EntryBuf::default());
        loop {
            let more = c.fill(m, &mut buf, batch);
            assert!(buf.len() <= batch.max(1));
            out.extend(
                (0..buf.len()).map(|i| (buf.key(i).to_vec(), buf.value(i).map(<[u8]>::to_vec))),
            );
            if !more {
                return out;
            }
        }
    }

    /// The entries of a range, through a cursor from its start.
    fn range(m: &Memtable, s: Bound<&[u8]>, e: Bound<&[u8]>) -> Vec<Entry> {
        let mut all = drain(&mut m.cursor(s, false), m, 5);
        all.retain(|(k, _)| match e {
            Bound::Included(e) => k.as_slice() <= e,
            Bound::Excluded(e) => k.as_slice() < e,
            Bound::Unbounded => true,
        });
        all
    }

    fn model_range(
        model: &BTreeMap<Vec<u8>, Option<Vec<u8>>>,
        s: Bound<&[u8]>,
        e: Bound<&[u8]>,
    ) -> Vec<Entry> {
        model
            .range::<[u8], _>((s, e))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    #[test]
    fn matches_a_btreemap() {
        let mut m = Memtable::new();
        let mut model: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
        let mut x = 1u64;
        for step in 0..20_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Short keys sharing prefixes, some longer than 8 bytes, zero bytes included.
            let len = (x >> 60) as usize % 12;
            let key: Vec<u8> = (0..len).map(|j| ((x >> (8 * (j % 7))) as u8) % 4).collect();
            let value = (!x.is_multiple_of(5)).then(|| vec![step as u8; (x >> 20) as usize % 40]);
            m.insert(&key, value.as_deref());
            model.insert(key, value);
            if step % 997 == 0 {
                // Scans interleaved with inserts exercise the runs' sorts and merges.
                let all = range(&m, Bound::Unbounded, Bound::Unbounded);
                assert_eq!(all, model_range(&model, Bound::Unbounded, Bound::Unbounded));
            }
        }
        assert_eq!(m.len(), model.len());
        for (k, v) in &model {
            assert_eq!(m.get(k), Some(v.as_deref()));
        }
        assert_eq!(m.get(b"\x05"), None);
        let probes: [&[u8]; 6] = [
            b"",
            b"\x00",
            b"\x01\x02",
            b"\x02",
            b"\x03\x03\x03\x03\x03\x03\x03\x03\x03",
            b"\x04",
        ];
        for a in probes {
            for b in probes {
                for (s, e) in [
                    (Bound::Included(a), Bound::Excluded(b)),
                    (Bound::Excluded(a), Bound::Included(b)),
                    (Bound::Included(a), Bound::Included(b)),
                    (Bound::Unbounded, Bound::Excluded(b)),
                    (Bound::Excluded(a), Bound::Unbounded),
                ] {
                    if matches!((s, e), (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) if x > y)
                    {
                        continue;
                    }
                    assert_eq!(range(&m, s, e), model_range(&model, s, e), "{s:?} {e:?}");
                }
            }
        }
        let sorted = m.sorted();
        let want: Vec<_> = model
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_deref()))
            .collect();
        assert_eq!(
            (0..sorted.len())
                .map(|i| sorted.entry(i))
                .collect::<Vec<_>>(),
            want
        );
        assert_eq!(m.run_count(), 1, "sealing merges the runs into one");
        let mut hashes = m.hashes();
        hashes.sort_unstable();
        let mut want: Vec<u64> = model.keys().map(|k| key_hash(k)).collect();
        want.sort_unstable();
        assert_eq!(hashes, want);
    }

    /// A scan after every put: the runs stay few (their sizes fall by at least
    /// `RUN_RATIO` from one to the next) and the entries moved by merges stay O(log n) per key.
    #[test]
    fn runs_stay_few_when_every_put_is_followed_by_a_scan() {
        let mut m = Memtable::new();
        let mut x = 3u64;
        let mut most = 0;
        for n in 1..=20_000usize {
            x = crate::hash::mix64(x);
            m.insert(&x.to_be_bytes(), Some(b"v"));
            let runs = m.runs();
            for w in runs.windows(2) {
                assert!(
                    w[0].len() > RUN_RATIO * w[1].len(),
                    "{:?}",
                    runs.iter().map(|r| r.len()).collect::<Vec<_>>()
                );
            }
            assert_eq!(runs.iter().map(|r| r.len()).sum::<usize>(), n);
            most = most.max(runs.len());
        }
        // log4(20,000) = 7.1
        assert!(most <= 8, "{most} runs");
    }

    #[test]
    fn large_sorts_match_a_btreemap_on_any_pool() {
        // Above PAR_SORT_MIN the bucketed parallel sort runs: keys share a 3-byte prefix
        // (the buckets come from the bits below it), lengths 3..14 so prefixes tie.
        let build = || {
            let mut model: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
            let mut m = Memtable::new();
            let mut x = 7u64;
            for i in 0..100_000u64 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let len = 3 + (x >> 59) as usize % 12;
                let mut key = b"usr".to_vec();
                key.extend((3..len).map(|j| (x >> (4 * j)) as u8 & 0x3f));
                let value = (i % 7 != 3).then(|| i.to_le_bytes().to_vec());
                m.insert(&key, value.as_deref());
                model.insert(key, value);
            }
            (m, model)
        };
        for threads in [1, 2, 3] {
            let (m, model) = build();
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let got: Vec<Entry> = pool.install(|| {
                let s = m.sorted();
                (0..s.len())
                    .map(|i| {
                        let (k, v) = s.entry(i);
                        (k.to_vec(), v.map(<[u8]>::to_vec))
                    })
                    .collect()
            });
            let want: Vec<Entry> = model.into_iter().collect();
            assert_eq!(got, want, "{threads} threads");
        }
    }

    #[test]
    fn large_values_get_their_own_chunk() {
        let mut m = Memtable::new();
        let big = vec![9u8; 3 * CHUNK];
        m.insert(b"a", Some(b"small"));
        m.insert(b"b", Some(&big));
        m.insert(b"a", None);
        assert_eq!(m.get(b"b"), Some(Some(big.as_slice())));
        assert_eq!(m.get(b"a"), Some(None));
        assert!(m.approximate_bytes() >= 3 * CHUNK);
    }

    /// Overwrites link the replaced version only while a scan is open.
    #[test]
    fn overwrites_keep_old_versions_only_for_open_scans() {
        let mut m = Memtable::new();
        m.insert(b"k", Some(b"v1"));
        let before = m.approximate_bytes();
        m.insert(b"k", Some(b"v2"));
        assert_eq!(m.approximate_bytes() - before, 2, "no link without a scan");
        let mut c = m.cursor(Bound::Unbounded, true);
        let before = m.approximate_bytes();
        m.insert(b"k", None);
        m.insert(b"k", Some(b"v3"));
        // A tombstone (one pad byte) and a value, each after a link.
        assert_eq!(m.approximate_bytes() - before, 2 * OLDER_LEN + 1 + 2);
        assert_eq!(m.get(b"k"), Some(Some(&b"v3"[..])));
        assert_eq!(
            drain(&mut c, &m, 1),
            [(b"k".to_vec(), Some(b"v2".to_vec()))]
        );
        assert_eq!(
            m.readers.load(Relaxed),
            0,
            "a finished cursor no longer counts"
        );
        drop(c);
        assert_eq!(m.readers.load(Relaxed), 0);
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// Key number, and a value length (`None`: a delete).
        Put(u8, Option<u8>),
        /// A cursor from a key number (`None`: unbounded), after it when `true`.
        Open(Option<u8>, bool),
        /// Fill (cursor number modulo the open ones, batch size).
        Fill(usize, usize),
        /// Drop a cursor before it is done.
        Close(usize),
    }

    /// Short keys over a tiny alphabet: shared prefixes, zero bytes, the empty key, keys of
    /// 8+ bytes with equal prefixes.
    fn key_of(k: u8) -> Vec<u8> {
        let len = (k % 11) as usize;
        (0..len).map(|j| (k >> (j % 3)) & 3).collect()
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (any::<u8>(), prop::option::weighted(0.8, 0u8..20)).prop_map(|(k, v)| Op::Put(k, v)),
            1 => (prop::option::of(any::<u8>()), any::<bool>()).prop_map(|(k, x)| Op::Open(k, x)),
            3 => (any::<usize>(), 1usize..6).prop_map(|(c, n)| Op::Fill(c, n)),
            1 => any::<usize>().prop_map(Op::Close),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Cursors opened between writes yield exactly the model as it was when they opened,
        /// however the writes after that (new keys, overwrites, deletes) interleave with
        /// their fills; the runs stay sorted and few; the seal order is the model's.
        #[test]
        fn cursors_see_their_snapshot(ops in prop::collection::vec(op(), 1..300)) {
            let mut m = Memtable::new();
            let mut model: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
            let mut open: Vec<(MemCursor, VecDeque<Entry>, EntryBuf)> = Vec::new();
            for op in ops {
                match op {
                    Op::Put(k, v) => {
                        let key = key_of(k);
                        let value = v.map(|n| vec![k ^ n; n as usize]);
                        m.insert(&key, value.as_deref());
                        model.insert(key, value);
                    }
                    Op::Open(k, after) => {
                        let key = k.map(key_of);
                        let start = match (&key, after) {
                            (None, _) => Bound::Unbounded,
                            (Some(k), false) => Bound::Included(k.as_slice()),
                            (Some(k), true) => Bound::Excluded(k.as_slice()),
                        };
                        let want = model_range(&model, start, Bound::Unbounded).into();
                        open.push((m.cursor(start, true), want, EntryBuf::default()));
                    }
                    Op::Fill(i, n) if !open.is_empty() => {
                        let i = i % open.len();
                        let (c, want, buf) = &mut open[i];
                        let more = c.fill(&m, buf, n);
                        prop_assert!(buf.len() <= n);
                        for j in 0..buf.len() {
                            let got = (buf.key(j).to_vec(), buf.value(j).map(<[u8]>::to_vec));
                            prop_assert_eq!(Some(got), want.pop_front());
                        }
                        prop_assert_eq!(more, !want.is_empty());
                        if !more {
                            open.remove(i);
                        }
                    }
                    Op::Close(i) if !open.is_empty() => {
                        open.remove(i % open.len());
                    }
                    _ => {}
                }
                prop_assert_eq!(m.readers.load(Relaxed), open.len());
            }
            for (mut c, want, _) in open.drain(..) {
                prop_assert_eq!(drain(&mut c, &m, 3), Vec::from(want));
            }
            prop_assert_eq!(m.readers.load(Relaxed), 0);
            let n = m.len().max(1) as f64;
            prop_assert!(m.run_count() as f64 <= n.log(RUN_RATIO as f64).floor() + 1.0);
            let s = m.sorted();
            let sealed: Vec<Entry> = (0..s.len())
                .map(|i| { let (k, v) = s.entry(i); (k.to_vec(), v.map(<[u8]>::to_vec)) })
                .collect();
            prop_assert_eq!(sealed, model_range(&model, Bound::Unbounded, Bound::Unbounded));
        }
    }
}
