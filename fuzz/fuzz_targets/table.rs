#![no_main]
#[path = "../harness.rs"]
mod harness;

use std::sync::OnceLock;

// Table files are opened by path: each input is written to one scratch file (on a RAM file
// system when there is one).
static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let dir = DIR.get_or_init(|| {
        tempfile::tempdir_in("/dev/shm")
            .or_else(|_| tempfile::tempdir())
            .expect("scratch directory")
    });
    harness::table(data, &dir.path().join("000001.sst"));
});
