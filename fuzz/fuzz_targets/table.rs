#![no_main]
use filterstore::table::{Table, TableCounters};
use libfuzzer_sys::fuzz_target;

// Table files are opened by path, so each input is written to a scratch file.
fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.sst");
    std::fs::write(&path, data).unwrap();
    // Both ways of reading blocks: positioned reads and in place from a map.
    for mmap_reads in [false, true] {
        if let Ok(t) = Table::open(&path, 1, mmap_reads) {
            let c = TableCounters::default();
            for i in 0..t.block_count() {
                let _ = t.block_entries(i, &c);
            }
            let _ = t.get(b"key", &c);
            let _ = t.check_padding();
        }
    }
});
