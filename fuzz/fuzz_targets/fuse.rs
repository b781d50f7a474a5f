#![no_main]
//! The binary fuse filter, both ways. An even first byte builds a filter from the rest of
//! the input read as 8-byte key hashes (few distinct values and many duplicates when the
//! input is short or repetitive) and checks that every hash is found and the block decodes.
//! An odd first byte XORs the rest of the input over a small valid block, recomputes both
//! CRCs so the damage reaches the parameter checks, and queries whatever decodes.
use filterstore::filter::{self, Filter, FilterKind, HEADER_LEN};
use libfuzzer_sys::fuzz_target;

fn reseal(b: &mut [u8]) {
    if b.len() < HEADER_LEN {
        return;
    }
    let body = crc32fast::hash(&b[HEADER_LEN..]);
    b[56..60].copy_from_slice(&body.to_le_bytes());
    let head = crc32fast::hash(&b[..60]);
    b[60..64].copy_from_slice(&head.to_le_bytes());
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let fpr = [0.01, 0.001, 1e-6][(mode >> 1) as usize % 3];
    if mode & 1 == 0 {
        let hashes: Vec<u64> = rest
            .chunks(8)
            .map(|c| {
                let mut w = [0u8; 8];
                w[..c.len()].copy_from_slice(c);
                u64::from_le_bytes(w)
            })
            .collect();
        let block = filter::build(FilterKind::BinaryFuse, fpr, &hashes)
            .expect("build")
            .expect("a block");
        let f = Filter::decode(&block).expect("a fresh block decodes");
        for &h in &hashes {
            assert!(f.may_contain(h), "false negative for {h:#x}");
        }
    } else {
        let keys: Vec<u64> = (0..20u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
        let mut block = filter::build(FilterKind::BinaryFuse, fpr, &keys)
            .expect("build")
            .expect("a block");
        let len = block.len();
        for (i, &x) in rest.iter().enumerate() {
            if let Some(b) = block.get_mut(i % (len + 8)) {
                *b ^= x;
            }
        }
        if rest.len() > block.len() {
            block.truncate(rest.len() % (block.len() + 1));
        }
        reseal(&mut block);
        if let Ok(f) = Filter::decode(&block) {
            for h in [0u64, 1, u64::MAX, 0x9e37_79b9_7f4a_7c15] {
                f.may_contain(h);
                f.touch(h);
            }
            let _ = f.theoretical_fpr();
        }
    }
});
