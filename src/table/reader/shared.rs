//! A data block's bytes, shared: by the block cache, the cursors and lookups that read it,
//! and the values ([`Slice`]s) read from it.

use std::sync::Arc;

use bytes::Bytes;
use memmap2::Mmap;

use crate::Slice;

/// A data block's verified bytes (entries and restart array, decompressed), shared by the
/// block cache, the lookups and scans that hold it and the values read from it
/// ([`share`](Self::share)). Cheap to clone (a refcount): a copy on the heap (read with
/// `pread`, or decompressed), made shared once when it is made, or a view of the table's
/// map (`mmap_reads`, a block stored raw), checked to lie inside the map when made.
#[derive(Clone)]
pub(crate) struct BlockBytes(Bytes);

impl BlockBytes {
    /// A heap copy of `data`, shared from the start (so that neither the block cache's
    /// clone nor a value's view of it allocates).
    pub(super) fn copied(data: &[u8]) -> BlockBytes {
        BlockBytes(Bytes::from_owner(data.to_vec()))
    }

    /// The bytes `owner` holds, shared (a block is a [`slice`](Self::slice) of them).
    pub(super) fn owned<T: AsRef<[u8]> + Send + 'static>(owner: T) -> BlockBytes {
        BlockBytes(Bytes::from_owner(owner))
    }

    /// A whole table file's map, shared (a mapped block is a [`slice`](Self::slice) of it).
    pub(super) fn mapped(map: Arc<Mmap>) -> BlockBytes {
        BlockBytes(Bytes::from_owner(MapOwner(map)))
    }

    /// `self[range]`, sharing these bytes (a refcount). Panics when `range` is outside.
    pub(super) fn slice(&self, range: std::ops::Range<usize>) -> BlockBytes {
        BlockBytes(self.0.slice(range))
    }

    /// `self[range]` as a [`Slice`] (inline when short, else a view of this block: a
    /// refcount). Panics when `range` is outside the block.
    #[inline]
    pub(crate) fn share(&self, range: std::ops::Range<usize>) -> Slice {
        Slice::share(&self.0, range)
    }

    /// [`share`](Self::share) of `part`, a subslice of this block's bytes (or of a copy
    /// of them at `copy`, the same bytes at another address).
    #[inline]
    pub(crate) fn share_part(&self, part: &[u8], copy: &[u8]) -> Slice {
        let at = part.as_ptr() as usize - copy.as_ptr() as usize;
        self.share(at..at + part.len())
    }
}

impl std::ops::Deref for BlockBytes {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for BlockBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BlockBytes({} bytes)", self.len())
    }
}

/// A table's map as the owner of a [`Bytes`] (a mapped block shares it).
struct MapOwner(Arc<Mmap>);

impl AsRef<[u8]> for MapOwner {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}
