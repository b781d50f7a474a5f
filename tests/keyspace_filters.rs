//! Compaction filters per keyspace (issue 38): a keyspace records the name of the filter it
//! was created with, its compactions call that filter only, and a store one of whose
//! keyspaces records a filter the options do not register refuses to open.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use common::power_cut_options;
use filterstore::expiry::{CompactionFilter, Decision};
use filterstore::io::FaultFs;
use filterstore::manifest::Manifest;
use filterstore::{Error, KeyspaceOptions, Options, Store, WriteBatch};

type Contents = BTreeMap<Vec<u8>, Vec<u8>>;

/// Removes every value whose key ends in `digit`, and notes every key it is shown.
#[derive(Debug)]
struct Drops {
    name: &'static str,
    digit: u8,
    seen: Mutex<Vec<Vec<u8>>>,
}

impl Drops {
    fn new(name: &'static str, digit: u8) -> Arc<Drops> {
        Arc::new(Drops {
            name,
            digit,
            seen: Mutex::default(),
        })
    }
    /// The first byte of every key it was shown (which keyspace's keys it saw).
    fn firsts(&self) -> Vec<u8> {
        let mut f: Vec<u8> = self.seen.lock().unwrap().iter().map(|k| k[0]).collect();
        f.dedup();
        f
    }
}

impl CompactionFilter for Drops {
    fn name(&self) -> &str {
        self.name
    }
    fn filter(&self, _level: usize, key: &[u8], _value: &[u8]) -> Decision {
        self.seen.lock().unwrap().push(key.to_vec());
        if key.last() == Some(&self.digit) {
            Decision::Remove
        } else {
            Decision::Keep
        }
    }
}

fn dyn_filter(f: &Arc<Drops>) -> Arc<dyn CompactionFilter> {
    f.clone()
}

fn contents(store: &Store) -> Contents {
    store
        .scan::<&[u8]>(..)
        .map(Result::unwrap)
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect()
}

/// 100 keys `{prefix}000` … `{prefix}099`, in two tables.
fn fill(store: &Store, prefix: char) -> Contents {
    let mut m = Contents::new();
    for half in [0..50, 50..100] {
        for i in half {
            let k = format!("{prefix}{i:03}").into_bytes();
            store.put(&k, b"v").unwrap();
            m.insert(k, b"v".to_vec());
        }
        store.flush().unwrap();
    }
    m
}

/// `m` without the keys ending in `digit`.
fn without(m: &Contents, digit: u8) -> Contents {
    let mut m = m.clone();
    m.retain(|k, _| k.last() != Some(&digit));
    m
}

/// Keyspaces `a` and `b` with filters of their own, `c` with none and the default
/// keyspace with the store's [`Options::compaction_filter`]: each compaction calls its
/// keyspace's filter only, a keyspace created without one keeps everything, and after a
/// reopen each keyspace still has its own.
#[test]
fn each_keyspace_compacts_with_its_own_filter() {
    let dir = tempfile::tempdir().unwrap();
    let (fa, fb, fd) = (
        Drops::new("drop-1", b'1'),
        Drops::new("drop-2", b'2'),
        Drops::new("drop-3", b'3'),
    );
    let opts = Options::default()
        .compaction_trigger(None)
        .compaction_filter(dyn_filter(&fd))
        .register_compaction_filter(dyn_filter(&fa))
        .register_compaction_filter(dyn_filter(&fb));
    let store = Store::open(dir.path(), opts.clone()).unwrap();
    let a = store
        .keyspace_with("a", KeyspaceOptions::default().compaction_filter("drop-1"))
        .unwrap();
    let b = store
        .keyspace_with("b", KeyspaceOptions::default().compaction_filter("drop-2"))
        .unwrap();
    let c = store.keyspace("c").unwrap();
    let handles = [
        (&store, 'd'),
        (a.as_store(), 'a'),
        (b.as_store(), 'b'),
        (c.as_store(), 'c'),
    ];
    let mut model = BTreeMap::new();
    for (h, p) in handles {
        model.insert(p, fill(h, p));
    }
    for (h, p) in handles {
        h.compact().unwrap();
        let want = match p {
            'a' => without(&model[&p], b'1'),
            'b' => without(&model[&p], b'2'),
            'd' => without(&model[&p], b'3'),
            _ => model[&p].clone(),
        };
        assert_eq!(contents(h), want, "keyspace {p}");
    }
    assert_eq!(fa.firsts(), b"a", "drop-1 saw keyspace a's keys only");
    assert_eq!(fb.firsts(), b"b", "drop-2 saw keyspace b's keys only");
    assert_eq!(
        fd.firsts(),
        b"d",
        "the store's filter saw the default keyspace's only"
    );
    assert_eq!(fa.seen.lock().unwrap().len(), 100, "every value once");
    assert_eq!(a.compaction_filter().as_deref(), Some("drop-1"));
    assert_eq!(b.compaction_filter().as_deref(), Some("drop-2"));
    assert_eq!(c.compaction_filter(), None);
    drop((a, b, c));
    store.close().unwrap();
    // Reopened: each keyspace's compactions call its recorded filter again.
    let store = Store::open(dir.path(), opts).unwrap();
    let b = store.keyspace("b").unwrap();
    assert_eq!(b.compaction_filter().as_deref(), Some("drop-2"));
    b.put("b992", "v").unwrap();
    b.put("b993", "v").unwrap();
    b.flush().unwrap();
    fb.seen.lock().unwrap().clear();
    b.compact().unwrap();
    assert_eq!(b.get("b992").unwrap(), None);
    assert!(b.get("b993").unwrap().is_some());
    assert_eq!(fb.firsts(), b"b");
    assert_eq!(fa.firsts(), b"a", "drop-1 was not called for b");
}

/// The files of `dir` with their bytes (to see that a refused open wrote nothing).
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name() != "LOCK")
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

fn refusal(r: filterstore::Result<Store>) -> (String, String, String) {
    match r {
        Err(e @ Error::CompactionFilterNotRegistered { .. }) => {
            let msg = e.to_string();
            let Error::CompactionFilterNotRegistered { keyspace, filter } = e else {
                unreachable!()
            };
            (keyspace, filter, msg)
        }
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("opened"),
    }
}

/// A store whose keyspace records a filter opens only with a filter of that name
/// registered: without one (or with another, or with it only as the default keyspace's
/// filter) it is refused with an error naming the keyspace and the filter, and nothing is
/// written; registered, it opens and the keyspace compacts with it. A name not registered
/// is refused when a keyspace is created, and a keyspace asked for again keeps its
/// recorded filter.
#[test]
fn a_keyspace_opens_only_with_its_filter_registered() {
    let dir = tempfile::tempdir().unwrap();
    let (fa, fb) = (Drops::new("drop-1", b'1'), Drops::new("drop-2", b'2'));
    let with_a = || Options::default().register_compaction_filter(dyn_filter(&fa));
    let store = Store::open(dir.path(), with_a()).unwrap();
    let a = store
        .keyspace_with("a", KeyspaceOptions::default().compaction_filter("drop-1"))
        .unwrap();
    a.put("a001", "v").unwrap();
    a.flush().unwrap();
    a.put("a011", "v").unwrap(); // in the log only
    drop(a);
    store.close().unwrap();
    let before = files(dir.path());
    for opts in [
        Options::default(),
        Options::default().register_compaction_filter(dyn_filter(&fb)),
        Options::default().compaction_filter(dyn_filter(&fa)),
    ] {
        let (keyspace, filter, msg) = refusal(Store::open(dir.path(), opts));
        assert_eq!((keyspace.as_str(), filter.as_str()), ("a", "drop-1"));
        assert!(msg.contains("\"a\"") && msg.contains("\"drop-1\""), "{msg}");
        assert_eq!(files(dir.path()), before, "a refused open writes nothing");
    }
    // Two filters of one name are refused too.
    let twice = with_a().register_compaction_filter(Drops::new("drop-1", b'9'));
    let e = Store::open(dir.path(), twice).err().unwrap().to_string();
    assert!(
        e.contains("two compaction filters") && e.contains("drop-1"),
        "{e}"
    );
    let store = Store::open(dir.path(), with_a()).unwrap();
    let a = store.keyspace("a").unwrap();
    assert!(a.get("a011").unwrap().is_some(), "the log was replayed");
    a.flush().unwrap();
    a.compact().unwrap();
    assert_eq!(a.get("a001").unwrap(), None);
    assert_eq!(a.get("a011").unwrap(), None);
    // Asked for with other options, the keyspace keeps its recorded filter.
    let again = store
        .keyspace_with("a", KeyspaceOptions::default().compaction_filter("drop-2"))
        .unwrap();
    assert_eq!(again.compaction_filter().as_deref(), Some("drop-1"));
    // A name not registered is refused at creation, and nothing is recorded.
    let e = store
        .keyspace_with("z", KeyspaceOptions::default().compaction_filter("drop-2"))
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("drop-2")),
        "{e}"
    );
    assert_eq!(store.keyspaces(), ["a"]);
}

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// `tests/fixtures/manifest-v3-keyspace-filter.bin` (made from `format.md`, "Manifest",
/// "Keyspaces", by `scripts/make-keyspaces-fixture.py`, not by the writer): keyspace
/// property 1 names "by-email"'s compaction filter. It decodes to that, the encoder
/// reproduces it byte for byte; a store holding it opens only with the filter registered.
/// The fixture without the property (written before it existed) reads as no filter.
#[test]
fn the_filter_fixture_decodes_and_opens_only_with_its_filter() {
    let bytes = std::fs::read(fixture("manifest-v3-keyspace-filter.bin")).unwrap();
    let m = Manifest::decode(&bytes).unwrap();
    let filters: Vec<_> = m
        .keyspaces
        .live
        .iter()
        .map(|k| (k.name.as_str(), k.compaction_filter.as_deref()))
        .collect();
    assert_eq!(
        filters,
        [("users", None), ("by-email", Some("expire-sessions"))]
    );
    assert_eq!(m.encode(), bytes, "the encoder writes what format.md says");
    // The same manifest without the property: the fixture of before.
    let old = std::fs::read(fixture("manifest-v3-keyspaces.bin")).unwrap();
    let mut plain = m.clone();
    plain.keyspaces.live[1].compaction_filter = None;
    assert_eq!(plain.encode(), old);
    assert_eq!(Manifest::decode(&old).unwrap(), plain);
    // Opened (without the fixture's tables, whose files it lacks).
    let dir = tempfile::tempdir().unwrap();
    let mut m = m;
    m.tables.clear();
    std::fs::write(dir.path().join("MANIFEST"), m.encode()).unwrap();
    let (keyspace, filter, _) = refusal(Store::open(dir.path(), Options::default()));
    assert_eq!(
        (keyspace.as_str(), filter.as_str()),
        ("by-email", "expire-sessions")
    );
    let f = Drops::new("expire-sessions", b'0');
    let opts = Options::default().register_compaction_filter(dyn_filter(&f));
    let store = Store::open(dir.path(), opts).unwrap();
    let by_email = store.keyspace("by-email").unwrap();
    assert_eq!(
        by_email.compaction_filter().as_deref(),
        Some("expire-sessions")
    );
    assert_eq!(store.keyspace("users").unwrap().compaction_filter(), None);
}

/// Sets the manifest's checksum over its body (after the 16-byte header).
fn reseal(bytes: &mut [u8]) {
    let crc = crc32fast::hash(&bytes[16..]);
    bytes[12..16].copy_from_slice(&crc.to_le_bytes());
}

/// A damaged or unknown keyspace property, checksum and all, is refused at open with an
/// error naming the MANIFEST and the offset of the bad bytes.
#[test]
fn a_hostile_keyspace_property_names_the_manifest_and_offset() {
    let good = std::fs::read(fixture("manifest-v3-keyspace-filter.bin")).unwrap();
    let prop = b"\x01\x0fexpire-sessions";
    let at = good.windows(prop.len()).position(|w| w == prop).unwrap();
    // (byte changed, its new value, the offset refused, what the error says)
    for (byte, value, off, what) in [
        (at, 9, at, "unknown keyspace property tag 9"),
        (at + 2, 0xff, at + 2, "not UTF-8"),
        (at + 1, 0, at + 2, "name of 0 bytes"),
    ] {
        let mut bytes = good.clone();
        bytes[byte] = value;
        reseal(&mut bytes);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("MANIFEST"), &bytes).unwrap();
        let opts = Options::default()
            .register_compaction_filter(dyn_filter(&Drops::new("expire-sessions", b'0')));
        let e = Store::open(dir.path(), opts).err().unwrap();
        let msg = e.to_string();
        assert!(e.is_corruption(), "{msg}");
        assert!(
            msg.contains("MANIFEST") && msg.contains(what),
            "{what}: {msg}"
        );
        assert!(msg.contains(&format!("offset {off}:")), "{what}: {msg}");
    }
}

/// Every keyspace's contents and recorded filter (the default one as "").
fn state(store: &Store) -> BTreeMap<String, (Option<String>, Contents)> {
    let mut m = BTreeMap::new();
    m.insert(String::new(), (None, contents(store)));
    for name in store.keyspaces() {
        let ks = store.existing_keyspace(&name).unwrap();
        m.insert(name, (ks.compaction_filter(), contents(ks.as_store())));
    }
    m
}

/// Keyspaces created with filters and written, with the power cut at every sync point in
/// turn: every image is one of the states between steps (holding every acknowledged step
/// and at most the one in flight), so a keyspace is there with its recorded filter or not
/// at all; an image holding a keyspace with a filter refuses to open without it.
#[test]
fn power_cut_while_creating_keyspaces_with_filters() {
    let tmp = tempfile::tempdir().unwrap();
    let (fa, fb) = (Drops::new("drop-1", b'1'), Drops::new("drop-2", b'2'));
    let registered = |o: Options| {
        o.register_compaction_filter(dyn_filter(&fa))
            .register_compaction_filter(dyn_filter(&fb))
    };
    const STEPS: usize = 8;
    let run = |dir: &Path, fs: &FaultFs| -> (Vec<_>, usize) {
        let mut states = Vec::new();
        let Ok(store) = Store::open(dir, registered(power_cut_options(fs))) else {
            return (states, 0);
        };
        states.push(state(&store));
        let mut acked = 0;
        for step in 0..STEPS {
            let with = |f: &str| KeyspaceOptions::default().compaction_filter(f);
            let r = match step {
                0 => store.keyspace_with("a", with("drop-1")).map(drop),
                2 => store.keyspace_with("b", with("drop-2")).map(drop),
                4 => store.keyspace("c").map(drop),
                6 => store.drop_keyspace("a"),
                _ => {
                    let mut batch = WriteBatch::new();
                    for name in store.keyspaces() {
                        let ks = store.existing_keyspace(&name).unwrap();
                        for j in 0..4 {
                            batch.put_in(&ks, format!("{name}{step}{j}"), "x".repeat(60));
                        }
                    }
                    batch.put(format!("d{step}"), "v");
                    store.write(batch)
                }
            };
            if r.is_err() {
                break;
            }
            acked += 1;
            states.push(state(&store));
        }
        (states, acked)
    };
    let mut refused = 0;
    common::at_every_power_cut(tmp.path(), STEPS, run, |cut, img| {
        let refuses = match Store::open(img, Options::default()) {
            Err(Error::CompactionFilterNotRegistered { .. }) => true,
            Err(e) => panic!("cut {cut}: {e}"),
            Ok(_) => false,
        };
        let store = Store::open(img, registered(Options::default())).unwrap();
        let got = state(&store);
        let with_filter = got.values().any(|(f, _)| f.is_some());
        assert_eq!(
            refuses, with_filter,
            "cut {cut}: refused without the filters"
        );
        refused += usize::from(refuses);
        got
    });
    assert!(refused > 0, "some images hold a keyspace with a filter");
}
