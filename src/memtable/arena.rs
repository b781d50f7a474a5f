//! The memtable's arena: keys and values appended to 1 MiB chunks that never move, each
//! entry addressed by its position (chunk << 32 | offset).
//!
//! A chunk is shared (a [`Bytes`] over the whole chunk, made once when the chunk is), so a
//! `get` returns a value as a view of its chunk ([`Arena::share`]) that stays valid after
//! the memtable is sealed and dropped: the chunk's memory is unmapped only when the last
//! view of it drops.

#![allow(unsafe_code)]

use bytes::Bytes;

use crate::Slice;

/// Bytes per arena chunk (a larger entry gets a chunk of its own size).
pub(super) const CHUNK: usize = 1 << 20;

/// A chunk's memory, in an anonymous memory map: dropping a sealed memtable (and every
/// value read from it) gives it back to the operating system at once (heap buffers of this
/// size are often kept by the allocator, which shows as resident memory the store does not
/// use). A plain heap buffer if the map cannot be made. Owned by the chunk's [`Bytes`].
struct ChunkMem {
    _buf: ChunkBuf,
    ptr: *mut u8,
    cap: usize,
}

enum ChunkBuf {
    Map(#[allow(dead_code)] memmap2::MmapMut),
    Heap(#[allow(dead_code)] Box<[u8]>),
}

// SAFETY: `ptr` points into `_buf`, which `ChunkMem` owns (and which does not move when
// `ChunkMem` moves: a mapping or a heap allocation); the bytes are only read through
// shared views of ranges no one writes any more (see `Chunk`).
unsafe impl Send for ChunkMem {}
// SAFETY: as for `Send`.
unsafe impl Sync for ChunkMem {}

impl AsRef<[u8]> for ChunkMem {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `ptr..ptr + cap` is the owned buffer. Called once, by `Bytes::from_owner`
        // when the chunk is made, before anything is written to it (see `Chunk`).
        unsafe { std::slice::from_raw_parts(self.ptr, self.cap) }
    }
}

/// One arena chunk: `len` bytes written, below which nothing is ever written again.
///
/// Safety argument for sharing it while it takes writes: the chunk's memory belongs to
/// `shared` (a `Bytes` over all `cap` bytes, made once, before any write). Writes go through
/// `ptr` (a raw pointer, never a `&mut [u8]` over the chunk), only to `len..` and only by
/// `push`, which takes `&mut self`: the memtable's single writer, under the store's state
/// lock. Reads (`bytes`, `share`) make references and views only of bytes below `len`,
/// written before and never written again; a view (`Slice`) outlives the lock, but covers
/// only such bytes. So no reference to a byte ever overlaps a write to it.
struct Chunk {
    shared: Bytes,
    ptr: *mut u8,
    cap: usize,
    len: usize,
}

// SAFETY: see `ChunkMem`; writes need `&mut Chunk`.
unsafe impl Send for Chunk {}
// SAFETY: `&Chunk` only reads bytes below `len`, never written again.
unsafe impl Sync for Chunk {}

impl std::fmt::Debug for Chunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chunk")
            .field("cap", &self.cap)
            .field("len", &self.len)
            .finish()
    }
}

impl Chunk {
    fn new(capacity: usize) -> Chunk {
        let mut buf = match memmap2::MmapMut::map_anon(capacity) {
            Ok(m) => ChunkBuf::Map(m),
            Err(_) => ChunkBuf::Heap(vec![0u8; capacity].into_boxed_slice()),
        };
        let ptr = match &mut buf {
            ChunkBuf::Map(m) => m.as_mut_ptr(),
            ChunkBuf::Heap(b) => b.as_mut_ptr(),
        };
        let shared = Bytes::from_owner(ChunkMem {
            _buf: buf,
            ptr,
            cap: capacity,
        });
        Chunk {
            shared,
            ptr,
            cap: capacity,
            len: 0,
        }
    }

    fn spare(&self) -> usize {
        self.cap - self.len
    }

    fn push(&mut self, bytes: &[u8]) {
        assert!(bytes.len() <= self.spare(), "arena chunk overflow");
        // SAFETY: `len + bytes.len() <= cap`: inside the chunk's buffer, at or past `len`,
        // where no reference or view reaches (see `Chunk`); `bytes` is another buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.add(self.len), bytes.len());
        }
        self.len += bytes.len();
    }

    #[inline]
    fn bytes(&self) -> &[u8] {
        // SAFETY: the first `len` bytes, written and never written again (see `Chunk`).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// Append-only storage of keys, values and version links.
#[derive(Debug, Default)]
pub(super) struct Arena {
    chunks: Vec<Chunk>,
    /// Bytes appended.
    len: usize,
}

impl Arena {
    /// Bytes appended so far.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The `len` bytes at position `at`.
    #[inline]
    pub(super) fn get(&self, at: u64, len: u32) -> &[u8] {
        let (chunk, off) = ((at >> 32) as usize, at as u32 as usize);
        &self.chunks[chunk].bytes()[off..off + len as usize]
    }

    /// The `len` bytes at position `at` as a [`Slice`]: inline when short (a copy), else a
    /// view of their chunk (a refcount, no allocation; keeps the chunk alive).
    #[inline]
    pub(super) fn share(&self, at: u64, len: u32) -> Slice {
        let (chunk, off) = ((at >> 32) as usize, at as u32 as usize);
        let c = &self.chunks[chunk];
        let end = off + len as usize;
        assert!(end <= c.len, "arena read past what was written");
        Slice::share(&c.shared, off..end)
    }

    /// The position the next append will start at or after.
    pub(super) fn end_pos(&self) -> u64 {
        self.chunks
            .last()
            .map_or(0, |c| ((self.chunks.len() as u64 - 1) << 32) | c.len as u64)
    }

    /// Appends `parts` contiguously and returns the position of the first.
    pub(super) fn append(&mut self, parts: &[&[u8]]) -> u64 {
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
        self.len += len;
        at
    }
}
