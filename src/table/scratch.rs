//! Each thread's scratch buffers for reading data blocks: reused from read to read, and given
//! back after a read that grew one past [`KEEP`] bytes.

use std::cell::RefCell;
use std::thread::LocalKey;

/// Most bytes of capacity a thread's scratch buffer keeps between uses: 64 KiB, 16 of the
/// largest ordinary blocks ([`BLOCK_SIZE`](super::BLOCK_SIZE), 4 KiB before compression; its
/// split form and the block rebuilt from it are as long). A block is longer only when it
/// holds one entry longer than a page, and a read of it copies and checksums that many bytes
/// anyway: an allocation for it costs little beside that, and a thread that once read a
/// 64 MiB value does not keep 64 MiB per buffer for the rest of its life.
pub(crate) const KEEP: usize = 64 << 10;

/// Runs `f` with this thread's buffer `key` (borrowed for the call; `f` must not take it
/// again), then gives the buffer's memory back if it is now larger than [`KEEP`] bytes.
#[inline]
pub(crate) fn with<R>(
    key: &'static LocalKey<RefCell<Vec<u8>>>,
    f: impl FnOnce(&mut Vec<u8>) -> R,
) -> R {
    key.with(|cell| {
        let mut buf = cell.borrow_mut();
        let r = f(&mut buf);
        if buf.capacity() > KEEP {
            *buf = Vec::new();
        }
        r
    })
}

/// Bytes of capacity this thread's buffer `key` holds.
#[cfg(test)]
pub(crate) fn held(key: &'static LocalKey<RefCell<Vec<u8>>>) -> usize {
    key.with(|cell| cell.borrow().capacity())
}
