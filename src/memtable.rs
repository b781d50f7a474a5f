//! The memtable: the newest writes, in memory, until they are sealed into a table.
//!
//! ```text
//! arena:  | key | value | key | value | ... |   1 MiB chunks, append-only, never moved
//! slots:  | hash | prefix | key at | klen | value at | vlen |   one per distinct key, insertion order
//! index:  hash table of slot numbers (hashbrown), keyed by the slot's xxh3 key hash
//! order:  slot numbers sorted by key, built on demand and extended (sort + merge) for new keys
//! ```
//! A put costs one hash-table probe and one append (no allocation per entry, no tree walk);
//! an overwrite appends only the new value. Ordered access (scans, sealing) sorts the slots on
//! demand by their first eight key bytes (big-endian, then the whole key on a tie), and keeps
//! that order: keys are never removed, so a later scan only sorts and merges the keys added
//! since. Sealing sorts in parallel on the current rayon pool and hands the filter the key
//! hashes computed at insert time.

use std::cmp::Ordering;
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, Mutex};

use hashbrown::hash_table::{Entry, HashTable};

use crate::hash::key_hash;
use crate::table::SortedEntries;

/// Bytes per arena chunk (a larger entry gets a chunk of its own size).
const CHUNK: usize = 1 << 20;
/// `vlen` of a tombstone.
const TOMBSTONE: u32 = u32::MAX;
/// Sorts of at least this many slots run on the rayon pool.
const PAR_SORT_MIN: usize = 1 << 15;

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
    /// Arena position of the value.
    val_at: u64,
    klen: u32,
    /// Value length, or [`TOMBSTONE`].
    vlen: u32,
}

/// `(prefix, slot number)` of the first `covered` slots, sorted by key: the prefix inline
/// decides most comparisons without touching the slots or the arena.
#[derive(Debug, Default)]
struct Order {
    covered: usize,
    slots: Arc<Vec<(u64, u32)>>,
}

/// The memtable. Not synchronized: the store keeps it under its state lock (`&mut self` to
/// insert, `&self` to read; the cached order has its own small lock).
#[derive(Debug, Default)]
pub struct Memtable {
    chunks: Vec<Chunk>,
    slots: Vec<Slot>,
    index: HashTable<u32>,
    order: Mutex<Order>,
    arena_bytes: usize,
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

    /// Bytes held: arena (overwritten values included), slots and index.
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

    fn value(&self, s: &Slot) -> Option<&[u8]> {
        (s.vlen != TOMBSTONE).then(|| self.bytes(s.val_at, s.vlen))
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
                let val_at = self.append(&[v]);
                let s = &mut self.slots[i as usize];
                s.val_at = val_at;
                s.vlen = vlen;
            }
            None => {
                let key_at = self.append(&[key, v]);
                self.slots.push(Slot {
                    hash,
                    prefix: crate::codec::prefix8(key),
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

    /// `(prefix, slot number)` of every key in key order (cached; extended for keys added
    /// since).
    fn order(&self) -> Arc<Vec<(u64, u32)>> {
        let mut o = self.order.lock().unwrap_or_else(|p| p.into_inner());
        let n = self.slots.len();
        if o.covered == n {
            return o.slots.clone();
        }
        let pair = |i: usize| (self.slots[i].prefix, i as u32);
        let fresh: Vec<(u64, u32)> = if n - o.covered >= PAR_SORT_MIN {
            use rayon::prelude::*;
            (o.covered..n).into_par_iter().map(pair).collect()
        } else {
            (o.covered..n).map(pair).collect()
        };
        let cmp = |a: &(u64, u32), b: &(u64, u32)| self.cmp_slots(a, b);
        let fresh = sort_by_prefix(fresh, cmp);
        let merged = if o.slots.is_empty() {
            fresh
        } else {
            let old = &o.slots;
            let mut m = Vec::with_capacity(n);
            let (mut i, mut j) = (0, 0);
            while i < old.len() && j < fresh.len() {
                // Keys are distinct, so the order never ties.
                if self.cmp_slots(&old[i], &fresh[j]) == Ordering::Less {
                    m.push(old[i]);
                    i += 1;
                } else {
                    m.push(fresh[j]);
                    j += 1;
                }
            }
            m.extend_from_slice(&old[i..]);
            m.extend_from_slice(&fresh[j..]);
            m
        };
        o.slots = Arc::new(merged);
        o.covered = n;
        o.slots.clone()
    }

    /// The entries whose keys lie in `range`, in key order.
    pub fn range<'a, R: RangeBounds<[u8]>>(&'a self, range: R) -> Range<'a> {
        let order = self.order();
        let key_at = |i: usize| self.key(&self.slots[order[i].1 as usize]);
        let start = match range.start_bound() {
            Bound::Included(s) => lower(&order, key_at, s, false),
            Bound::Excluded(s) => lower(&order, key_at, s, true),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(e) => lower(&order, key_at, e, true),
            Bound::Excluded(e) => lower(&order, key_at, e, false),
            Bound::Unbounded => order.len(),
        };
        Range {
            mem: self,
            pos: start,
            end: end.max(start),
            order,
        }
    }

    /// Every entry in key order, read in place (for sealing); the order is sorted on the
    /// current rayon pool if it is not cached yet.
    pub fn sorted(&self) -> Sorted<'_> {
        Sorted {
            mem: self,
            order: self.order(),
        }
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
    order: Arc<Vec<(u64, u32)>>,
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

/// Number of ordered positions whose key is < `bound` (or <= `bound` with `or_equal`).
fn lower<'a>(
    order: &[(u64, u32)],
    key_at: impl Fn(usize) -> &'a [u8],
    bound: &[u8],
    or_equal: bool,
) -> usize {
    let (mut lo, mut hi) = (0, order.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        let below = match key_at(mid).cmp(bound) {
            Ordering::Less => true,
            Ordering::Equal => or_equal,
            Ordering::Greater => false,
        };
        if below {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Entries of a key range in order: `(key, None)` is a tombstone.
pub struct Range<'a> {
    mem: &'a Memtable,
    order: Arc<Vec<(u64, u32)>>,
    pos: usize,
    end: usize,
}

impl<'a> Iterator for Range<'a> {
    type Item = (&'a [u8], Option<&'a [u8]>);
    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.end {
            return None;
        }
        let s = &self.mem.slots[self.order[self.pos].1 as usize];
        self.pos += 1;
        Some((self.mem.key(s), self.mem.value(s)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::block::Entry;
    use std::collections::BTreeMap;

    fn keys(m: &Memtable, r: (Bound<&[u8]>, Bound<&[u8]>)) -> Vec<Vec<u8>> {
        m.range::<(Bound<&[u8]>, Bound<&[u8]>)>(r)
            .map(|(k, _)| k.to_vec())
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
                // Scans interleaved with inserts exercise the sort + merge of the order.
                let all: Vec<_> = m.range::<std::ops::RangeFull>(..).collect();
                let want: Vec<_> = model
                    .iter()
                    .map(|(k, v)| (k.as_slice(), v.as_deref()))
                    .collect();
                assert_eq!(all, want);
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
                    let want: Vec<Vec<u8>> = model
                        .range::<[u8], _>((s, e))
                        .map(|(k, _)| k.clone())
                        .collect();
                    assert_eq!(keys(&m, (s, e)), want, "{s:?} {e:?}");
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
        let mut hashes = m.hashes();
        hashes.sort_unstable();
        let mut want: Vec<u64> = model.keys().map(|k| key_hash(k)).collect();
        want.sort_unstable();
        assert_eq!(hashes, want);
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
}
