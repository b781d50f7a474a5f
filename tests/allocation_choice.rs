//! The store chooses its filter allocation by its tree's shape (`filter/choice.rs`): a new
//! store without a given policy records its choice (store property 4, format.md
//! "Allocation choice"), `rebalance_auto` decides again (Monkey for an L0 backlog, uniform
//! for one table), a given policy ends the choosing; `Stats::allocation_model` predicts the
//! wasted reads the lookups then observe; `Stats::range_build` counts range filter builds.

use std::path::Path;
use std::sync::Arc;

use filterstore::hash::mix64;
use filterstore::io::NoSyncFs;
use filterstore::manifest::Manifest;
use filterstore::{FilterKind, FilterPolicy, Options, Store};

fn opts() -> Options {
    Options::default()
        .filter(FilterKind::BlockedBloom)
        .compaction_trigger(None)
        .fs(Arc::new(NoSyncFs))
}

fn key(i: u64, absent: bool) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&mix64(i).to_be_bytes());
    k[8..].copy_from_slice(&(mix64(!i) & !1 | u64::from(absent)).to_be_bytes());
    k
}

/// One big L0 table and five smaller newer ones: an L0 backlog.
fn backlog(store: &Store) {
    let mut i = 0;
    for n in [40_000u64, 4_000, 4_000, 4_000, 4_000, 4_000] {
        for _ in 0..n {
            store.put(key(i, false), b"v").unwrap();
            i += 1;
        }
        store.flush().unwrap();
    }
}

fn recorded(dir: &Path) -> Manifest {
    Manifest::load(dir).unwrap().unwrap()
}

#[test]
fn a_new_store_chooses_by_shape_and_records_why() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), opts()).unwrap();
    // Empty: uniform, recorded with the shape it saw.
    let c = store.allocation_choice().unwrap();
    assert_eq!(
        (c.allocation(), c.l0_tables, c.deeper_levels),
        ("uniform", 0, 0)
    );
    assert_eq!(recorded(dir.path()).choice, Some(c));
    backlog(&store);
    let r = store.rebalance_auto().unwrap();
    let c = store.allocation_choice().unwrap();
    assert_eq!(
        (c.allocation(), c.l0_tables, c.measured),
        ("monkey", 6, false)
    );
    assert!(c.monkey <= 0.8 * c.uniform, "{c}");
    assert!(!r.rebuilt.is_empty());
    let m = recorded(dir.path());
    assert_eq!(m.choice, Some(c));
    assert!(
        matches!(m.policy, FilterPolicy::Budget { .. }),
        "{:?}",
        m.policy
    );
    drop(store);
    // Reopened, it keeps both; a given policy ends the choosing.
    let store = Store::open(dir.path(), opts()).unwrap();
    assert_eq!(store.allocation_choice(), Some(c));
    store
        .rebalance(FilterPolicy::Uniform {
            kind: FilterKind::BlockedBloom,
            fpr: 0.01,
        })
        .unwrap();
    assert_eq!(store.allocation_choice(), None);
    assert_eq!(recorded(dir.path()).choice, None);
}

#[test]
fn one_table_stays_uniform_and_a_given_policy_records_no_choice() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), opts()).unwrap();
    for i in 0..5000 {
        store.put(key(i, false), b"v").unwrap();
    }
    store.flush().unwrap();
    store.rebalance_auto().unwrap();
    let c = store.allocation_choice().unwrap();
    assert_eq!((c.allocation(), c.l0_tables), ("uniform", 1));
    assert!((c.monkey - c.uniform).abs() < 1e-12, "{c}");
    let given = tempfile::tempdir().unwrap();
    let policy = FilterPolicy::monkey_at(FilterKind::BlockedBloom, 0.01);
    let store = Store::open(given.path(), opts().policy(Some(policy))).unwrap();
    assert_eq!(store.allocation_choice(), None);
    assert_eq!(recorded(given.path()).choice, None);
}

#[test]
fn the_model_predicts_what_absent_lookups_waste() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), opts()).unwrap();
    backlog(&store);
    store
        .refilter_to(FilterPolicy::Uniform {
            kind: FilterKind::BlockedBloom,
            fpr: 0.01,
        })
        .unwrap();
    drop(store);
    // Lookups since open against probes since the filters were installed: reopen.
    let store = Store::open(dir.path(), opts()).unwrap();
    let lookups = 40_000;
    for i in 0..lookups {
        assert_eq!(store.get(key(i, true)).unwrap(), None);
    }
    let m = store.stats().allocation_model.unwrap();
    assert!(m.choice.measured);
    assert_eq!(m.runs.len(), 6);
    // Every absent key inside the tables' ranges reaches nearly every run.
    assert!(m.runs.iter().all(|r| r.reach > 0.9), "{:?}", m.runs);
    // Uniform at 1 %: about 6 × 0.01 = 0.06 wasted reads per lookup; 2,400 of them, σ ≈ 50.
    let ratio = m.observed_ratio().unwrap();
    let own = store.stats().predicted_absent_reads();
    assert!(
        (0.9..1.1).contains(&ratio),
        "observed {:?} vs {} (own {own:?})",
        m.observed,
        m.predicted()
    );
}

#[test]
fn range_filter_builds_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    // Built when written (not deferred: `tests/range_deferred.rs`).
    let store = Store::open(dir.path(), opts().deferred_range_filters(None)).unwrap();
    assert_eq!(store.stats().range_build.built, 0);
    backlog(&store);
    let b = store.stats().range_build;
    assert_eq!(b.built, 6, "one per sealed table");
    assert!(b.nanos > 0);
    store.compact().unwrap();
    let after = store.stats();
    let outputs = after.tables.len() as u64;
    assert_eq!(
        after.range_build.built,
        6 + outputs,
        "one per compaction output"
    );
    assert_eq!(store.refilter_ranges(12.0).unwrap() as u64, outputs);
    assert_eq!(store.stats().range_build.built, 6 + 2 * outputs);
    // Without range filters nothing is built.
    let none = tempfile::tempdir().unwrap();
    let store = Store::open(
        none.path(),
        opts().range_filter_bits(0.0).deferred_range_filters(None),
    )
    .unwrap();
    backlog(&store);
    assert_eq!(store.stats().range_build, Default::default());
}

/// `tests/fixtures/manifest-v3-choice.bin` (made from format.md, "Allocation choice", by
/// `scripts/make-choice-fixture.py`, not by the writer) decodes to what the script wrote,
/// the encoder reproduces it byte for byte, and a bad flag or prediction is refused at its
/// offset.
#[test]
fn the_choice_fixture_decodes_and_reencodes() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/manifest-v3-choice.bin");
    let bytes = std::fs::read(&path).unwrap();
    let m = Manifest::decode(&bytes).unwrap();
    let c = m.choice.unwrap();
    assert_eq!((c.l0_tables, c.deeper_levels, c.measured), (2, 1, true));
    assert_eq!((c.uniform, c.monkey), (0.025, 0.0125));
    assert_eq!(c.allocation(), "monkey");
    assert_eq!(m.encode(), bytes, "the encoder writes what format.md says");
    // The choice is the manifest's last 22 bytes; the CRC covers the body (offset 16 on).
    let at = bytes.len() - 22;
    let refused = |patch: &dyn Fn(&mut Vec<u8>)| {
        let mut b = bytes.clone();
        patch(&mut b);
        let crc = crc32fast::hash(&b[16..]);
        b[12..16].copy_from_slice(&crc.to_le_bytes());
        Manifest::decode(&b).unwrap_err().to_string()
    };
    let e = refused(&|b| b[at + 5] = 2);
    assert!(
        e.contains("reach flag 2") && e.contains(&format!("offset {}", at + 5)),
        "{e}"
    );
    let e = refused(&|b| b[at + 6..at + 14].copy_from_slice(&f64::NAN.to_le_bytes()));
    assert!(
        e.contains("prediction") && e.contains(&format!("offset {}", at + 6)),
        "{e}"
    );
    let e = refused(&|b| b[at + 14..].copy_from_slice(&4.0f64.to_le_bytes()));
    assert!(e.contains("0 to 3 wasted reads"), "{e}");
}
