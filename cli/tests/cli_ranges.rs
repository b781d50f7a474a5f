//! `store delete-range`, `store delete --prefix` and `store compact --from --to`.

mod common;

use std::path::Path;

use common::{ok, store_dir as store};

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

#[test]
fn delete_range_and_prefix_remove_keys_and_compact_reclaims_them() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("db");
    let mut lines = String::new();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..3000 {
        // 100 pseudo-random hex digits: values that do not compress.
        let v: String = (0..100)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                char::from_digit((x >> 60) as u32, 16).unwrap()
            })
            .collect();
        lines.push_str(&format!("a{i:05}\t{v}\n"));
        lines.push_str(&format!("b{i:05}\tv\n"));
    }
    let file = t.path().join("in.tsv");
    std::fs::write(&file, lines).unwrap();
    ok(store(&d, &["load", file.to_str().unwrap()]));
    ok(store(&d, &["flush"]));
    ok(store(&d, &["delete-range", "a00100", "a02900"]));
    assert_eq!(store(&d, &["get", "a00100"]).code, 1);
    assert_eq!(store(&d, &["get", "a02899"]).code, 1);
    assert_eq!(ok(store(&d, &["get", "a02900"])).len(), 101);
    assert_eq!(ok(store(&d, &["get", "a00099"])).len(), 101);
    let scan = ok(store(&d, &["scan", "--from", "a", "--to", "b"]));
    assert_eq!(scan.lines().count(), 200);
    // START not below END: nothing removed, exit 0.
    ok(store(&d, &["delete-range", "b9", "b0"]));
    assert_eq!(ok(store(&d, &["get", "b00001"])), "v\n");
    ok(store(&d, &["delete", "--prefix", "b0001"]));
    assert_eq!(store(&d, &["get", "b00010"]).code, 1);
    assert_eq!(ok(store(&d, &["get", "b00020"])), "v\n");
    assert_eq!(
        ok(store(&d, &["scan", "--prefix", "b"])).lines().count(),
        3000 - 10
    );
    // KEY and --prefix together, or neither: usage errors.
    assert_eq!(store(&d, &["delete", "k", "--prefix", "b"]).code, 2);
    assert_eq!(store(&d, &["delete"]).code, 2);
    // --from without --to: a usage error.
    assert_eq!(store(&d, &["compact", "--from", "a"]).code, 2);
    let before = dir_bytes(&d);
    let out = ok(store(&d, &["compact", "--from", "a", "--to", "b"]));
    assert!(out.starts_with("tables: "), "{out}");
    let after = dir_bytes(&d);
    // 2,800 values of 100 bytes (280 KB) are gone.
    assert!(
        after + 200_000 < before,
        "{before} bytes before compact --from --to, {after} after"
    );
    assert_eq!(store(&d, &["get", "a01000"]).code, 1);
    let v = ok(store(&d, &["verify"]));
    assert!(v.contains("intact"), "{v}");
}
