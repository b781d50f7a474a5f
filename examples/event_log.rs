//! An event log: events of many streams under keys `stream/SEQUENCE`, the latest N of a
//! stream read by a reverse scan, and retention by range deletion: dropping a stream's events
//! older than a cut is one `delete_range` (one log record, one range tombstone), however many
//! events it removes, and `compact_range` gives their disk space back at once.
//!
//! `cargo run --example event_log [DIR]` (a temporary directory when none is given).

use filterstore::{Options, Store, WriteBatch};

/// The key of event `seq` of `stream`: fixed-width, so that key order is event order.
fn event_key(stream: &str, seq: u64) -> Vec<u8> {
    format!("{stream}/{seq:012}").into_bytes()
}

/// The first key past every event of `stream`.
fn stream_end(stream: &str) -> Vec<u8> {
    format!("{stream}0").into_bytes() // '0' follows '/'
}

/// The last `n` events of `stream`, newest first.
fn latest(store: &Store, stream: &str, n: usize) -> filterstore::Result<Vec<(u64, String)>> {
    let from = event_key(stream, 0);
    store
        .scan(from.as_slice()..stream_end(stream).as_slice())
        .rev()
        .take(n)
        .map(|item| {
            let (k, v) = item?;
            let seq = std::str::from_utf8(&k[stream.len() + 1..])
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            Ok((seq, String::from_utf8_lossy(&v).into_owned()))
        })
        .collect()
}

fn main() -> filterstore::Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = std::env::args_os()
        .nth(1)
        .map_or_else(|| tmp.path().to_path_buf(), std::path::PathBuf::from);
    let store = Store::open(&dir, Options::default())?;
    let streams = ["orders", "payments", "shipping"];
    // 20,000 events per stream, appended in batches of 100 (each batch atomic).
    for chunk in 0..200u64 {
        let mut batch = WriteBatch::new();
        for s in streams {
            for i in 0..100 {
                let seq = chunk * 100 + i;
                batch.put(event_key(s, seq), format!("{s} event {seq}").into_bytes());
            }
        }
        store.write(batch)?;
    }
    store.flush()?;
    println!("latest 3 orders: {:?}", latest(&store, "orders", 3)?);

    // Retention: keep only the last 1,000 events of each stream. One range tombstone per
    // stream, whatever the number of events it removes.
    let wal_before = store.stats().lifetime.wal_bytes_written;
    for s in streams {
        store.delete_range(event_key(s, 0), event_key(s, 19_000))?;
    }
    println!(
        "retention: 3 range deletes, {} log bytes",
        store.stats().lifetime.wal_bytes_written - wal_before
    );
    let left = store.scan_prefix(b"payments/").count();
    println!("payments kept: {left}");
    assert_eq!(left, 1_000);
    assert_eq!(store.get(event_key("payments", 18_999))?, None);
    // New events after the cut are not affected by it.
    store.put(event_key("orders", 20_000), b"orders event 20000")?;
    println!("latest 2 orders: {:?}", latest(&store, "orders", 2)?);

    // Give the deleted events' disk space back now instead of when compaction gets there.
    let bytes = |s: &Store| -> u64 { s.stats().tables.iter().map(|t| t.file_bytes).sum() };
    let before = bytes(&store);
    for s in streams {
        store.compact_range(event_key(s, 0), stream_end(s))?;
    }
    println!(
        "table bytes: {before} before compact_range, {} after",
        bytes(&store)
    );
    Ok(())
}
