//! Mapping a file read-only: one of the crate's `unsafe` sites (all listed in `lib.rs`).

use std::fs::File;
use std::io;

use memmap2::Mmap;

/// Maps `file` read-only.
pub fn map_readonly(file: &File) -> io::Result<Mmap> {
    // SAFETY: the store maps only its own filter files and (with `Options::mmap_reads`)
    // table files. Each is written whole and fsynced before it is mapped, and is never
    // modified afterwards (refilter and compaction write new files; old files are only
    // unlinked, which leaves existing maps valid). The mapping is read-only. Another process
    // truncating or rewriting the file behind the store's back is outside the store's
    // contract (the directory is locked).
    #[allow(unsafe_code)]
    unsafe {
        Mmap::map(file)
    }
}
