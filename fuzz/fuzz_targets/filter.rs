#![no_main]
use filterstore::filter::Filter;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = Filter::decode(data) {
        for h in [0u64, 1, u64::MAX, 0x9e37_79b9_7f4a_7c15] {
            f.may_contain(h);
            f.touch(h);
        }
        let _ = f.theoretical_fpr();
    }
});
