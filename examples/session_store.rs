//! A session store: sessions written with a time to live, refreshed on every use, gone the
//! moment they expire, and their bytes reclaimed by compaction without a sweeper.
//!
//! `cargo run --release --example session_store` (a temporary directory). Time is a
//! `ManualClock` moved by the program, so twenty simulated minutes take a second; a real
//! service leaves `Options::clock` at its default, the system clock.

use std::sync::Arc;
use std::time::Duration;

use filterstore::expiry::ManualClock;
use filterstore::{Options, Store};

/// A session lives this long after its last use.
const TTL: Duration = Duration::from_secs(15 * 60);

fn session_key(id: u32) -> String {
    format!("session:{id:06}")
}

fn main() -> filterstore::Result<()> {
    let tmp = tempfile::tempdir()?;
    let clock = ManualClock::new(1_800_000_000_000);
    let store = Store::open(
        tmp.path(),
        Options::default()
            .clock(Arc::new(clock.clone()))
            // Small tables, so that this example's few megabytes spread over levels.
            .memtable_bytes(1 << 20)
            .table_bytes(1 << 20)
            .l1_bytes(4 << 20),
    )?;

    // Log in 20,000 users: one session each, expiring 15 minutes from now.
    for id in 0..20_000 {
        let session = format!("user={id};roles=reader;csrf={:016x}", id as u64 * 7919);
        store.put_with_ttl(session_key(id), session, TTL)?;
    }
    store.flush()?;
    println!("logged in 20000 users");

    // Ten minutes pass; the first 5,000 users come back: using a session refreshes it (the
    // same value written again with a new TTL).
    clock.advance(Duration::from_secs(10 * 60));
    for id in 0..5_000 {
        if let Some(session) = store.get(session_key(id))? {
            store.put_with_ttl(session_key(id), session, TTL)?;
        }
    }
    store.flush()?;

    // Six more minutes: the sessions not used since login have expired. Every read path
    // agrees at once: no sweep ran, nothing was deleted.
    clock.advance(Duration::from_secs(6 * 60));
    assert!(store.get(session_key(0))?.is_some(), "refreshed: alive");
    assert!(
        store.get(session_key(19_999))?.is_none(),
        "not used: expired"
    );
    let live = store.scan_prefix(b"session:").count();
    println!("16 minutes after login: {live} live sessions (the 5000 used at minute 10)");
    assert_eq!(live, 5_000);

    // Their bytes are still on disk until a compaction rewrites the tables that hold them:
    // the compaction thread does it by itself once enough of a table has expired (it looks
    // every second while tables hold expiring entries); `compact()` does it now.
    let before = table_bytes(&store);
    store.compact()?;
    let after = table_bytes(&store);
    println!("tables: {before} bytes before compaction, {after} after");
    assert!(after * 2 < before);

    // Ten more minutes and nobody came back: every session has expired, and a compaction
    // leaves no table at all.
    clock.advance(Duration::from_secs(10 * 60));
    store.compact()?;
    println!(
        "26 minutes after login: {} live sessions, {} tables",
        store.scan_prefix(b"session:").count(),
        store.stats().tables.len()
    );
    store.close()
}

fn table_bytes(store: &Store) -> u64 {
    store.stats().tables.iter().map(|t| t.file_bytes).sum()
}
