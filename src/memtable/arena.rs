//! The memtable's arena: keys and values appended to 1 MiB chunks that never move, each
//! entry addressed by its position (chunk << 32 | offset).

/// Bytes per arena chunk (a larger entry gets a chunk of its own size).
pub(super) const CHUNK: usize = 1 << 20;

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
