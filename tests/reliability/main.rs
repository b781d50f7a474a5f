//! Reliability tests: crashes (SIGKILL), power cuts, injected I/O errors, corruption, hostile
//! bytes, torn log tails and concurrency. Each test prints what it covered.

#[path = "../common/mod.rs"]
mod common;
#[path = "../../fuzz/harness.rs"]
mod fuzz_harness;

mod checkpoint;
mod concurrency;
mod corruption;
mod crash;
mod durability;
mod faults;
mod hostile;
mod read_only;
mod repair;
mod torn;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use filterstore::Store;

/// Held by tests that spawn child processes and by tests that reopen stores in a loop: a
/// child forked while a store is dropped inherits its locked LOCK file until it execs, so a
/// reopen at that instant is (rightly) refused with `Error::Locked`.
pub static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Takes [`SERIAL`] (a failed test does not poison it for the others).
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// The value stored under `key` at `version`: any value not of this form for a key that was
/// written was never written.
pub fn value_of(key: &[u8], version: u64) -> Vec<u8> {
    let mut v = key.to_vec();
    v.extend_from_slice(format!(":{version}:").as_bytes());
    let h = filterstore::hash::key_hash(&v);
    v.extend(std::iter::repeat_n(
        b'a' + (h % 26) as u8,
        (h % 40) as usize,
    ));
    v
}

/// A scratch directory on a RAM file system when there is one (the crash tests need no real
/// durability: the kernel keeps a killed process's writes).
pub fn scratch_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(d) = tempfile::tempdir_in(shm) {
            return d;
        }
    }
    tempfile::tempdir().unwrap()
}

/// Checks the store against the states each key may be in: `must` holds the acknowledged
/// state of every key (`None` = absent); `may` the alternative a key in flight may show.
pub fn check_store(
    store: &Store,
    must: &BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    may: &BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    what: &str,
) -> u64 {
    let ok = |k: &Vec<u8>, got: Option<&Vec<u8>>| {
        let want = must.get(k).cloned().flatten();
        got == want.as_ref() || may.get(k).is_some_and(|alt| got == alt.as_ref())
    };
    let mut checked = 0;
    for k in must.keys().chain(may.keys()) {
        let got = store
            .get(k)
            .unwrap_or_else(|e| panic!("{what}: get {:?}: {e}", String::from_utf8_lossy(k)))
            .map(Vec::from);
        assert!(
            ok(k, got.as_ref()),
            "{what}: key {:?} reads {:?}, acknowledged {:?}",
            String::from_utf8_lossy(k),
            got.map(|v| String::from_utf8_lossy(&v).into_owned()),
            must.get(k)
                .cloned()
                .flatten()
                .map(|v| String::from_utf8_lossy(&v).into_owned())
        );
        checked += 1;
    }
    for e in store.scan::<&[u8]>(..) {
        let (k, v) = e.unwrap_or_else(|e| panic!("{what}: scan: {e}"));
        let (k, v) = (k.to_vec(), v.to_vec());
        assert!(
            must.contains_key(&k) || may.contains_key(&k),
            "{what}: key {:?} was never written",
            String::from_utf8_lossy(&k)
        );
        assert!(
            ok(&k, Some(&v)),
            "{what}: scan shows a wrong value for {k:?}"
        );
    }
    checked
}

/// `verify_dir` must find nothing.
pub fn assert_verified(dir: &Path, what: &str) {
    let r = filterstore::verify::verify_dir(dir).unwrap();
    assert!(r.is_intact(), "{what}: verify_dir: {:?}", r.problems);
}

/// A fresh empty directory inside `parent`.
pub fn subdir(parent: &Path, name: &str) -> PathBuf {
    let p = parent.join(name);
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).unwrap();
    p
}

/// Counts the largest single allocation made by the current thread, so decoders can be held
/// to allocations their input justifies.
pub mod alloc_probe {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        static MAX: Cell<usize> = const { Cell::new(0) };
    }

    pub struct Probe;

    // SAFETY: forwards to the system allocator; only records sizes.
    unsafe impl GlobalAlloc for Probe {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            let _ = MAX.try_with(|m| m.set(m.get().max(l.size())));
            unsafe { System.alloc(l) }
        }
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            unsafe { System.dealloc(p, l) }
        }
        unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
            let _ = MAX.try_with(|m| m.set(m.get().max(l.size())));
            unsafe { System.alloc_zeroed(l) }
        }
        unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
            let _ = MAX.try_with(|m| m.set(m.get().max(new)));
            unsafe { System.realloc(p, l, new) }
        }
    }

    /// Runs `f` and returns the largest single allocation it made on this thread.
    pub fn largest<T>(f: impl FnOnce() -> T) -> (T, usize) {
        MAX.with(|m| m.set(0));
        let r = f();
        (r, MAX.with(|m| m.get()))
    }
}

#[global_allocator]
static PROBE: alloc_probe::Probe = alloc_probe::Probe;
