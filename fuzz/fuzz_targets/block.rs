#![no_main]
use filterstore::table::block::Block;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte picks a probe key length; the rest is the block.
    let Some((&n, bytes)) = data.split_first() else { return };
    if let Ok(b) = Block::new(bytes, 0) {
        for e in b.iter() {
            if e.is_err() {
                break;
            }
        }
        let key = &bytes[..(n as usize).min(bytes.len())];
        let _ = b.get(key);
    }
});
