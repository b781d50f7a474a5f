#![no_main]
//! Reverse scans over a damaged table: they err or read the right entries, never panic
//! (`fuzz/reverse.rs` says the input's layout).
#[path = "../reverse.rs"]
mod reverse;

use std::sync::OnceLock;

use filterstore::Compression;

static TEMPLATES: OnceLock<Vec<reverse::Template>> = OnceLock::new();
static SCRATCH: OnceLock<tempfile::TempDir> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let templates = TEMPLATES.get_or_init(|| {
        [Compression::None, Compression::Lz4, Compression::Zstd]
            .into_iter()
            .filter(|c| c.is_available())
            .map(reverse::template)
            .collect()
    });
    let scratch = SCRATCH.get_or_init(|| {
        tempfile::tempdir_in("/dev/shm")
            .or_else(|_| tempfile::tempdir())
            .expect("scratch directory")
    });
    reverse::reverse_damaged(templates, data, &scratch.path().join("store"));
});
