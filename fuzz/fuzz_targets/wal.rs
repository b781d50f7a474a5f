#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = filterstore::wal::replay_bytes(data, |_, _| {});
});
