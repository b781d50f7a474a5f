//! Range deletion, measured (docs/engine.md, "Range deletion"): a store of N keys (16-byte
//! keys, 100-byte values) in levels; one `delete_range` of the contiguous middle D keys:
//! its log record's bytes, the time of a scan over the range before and after it (the
//! tombstone in the memtable, then flushed), the table bytes before and after
//! `compact_range` (and the tables it dropped whole, the bytes its compactions read); then
//! point gets of present keys with no range tombstone against the
//! same store with 1,000 range tombstones over gaps between keys (alternating rounds,
//! medians).
//!
//! `cargo run --release -p filterstore-tools --bin range_delete_bench -- DIR [N] [D] [rounds]`

use std::time::Instant;

use filterstore::{Options, Store, SyncPolicy};

fn key(i: u64) -> Vec<u8> {
    format!("key{i:013}").into_bytes()
}

/// 100 bytes that do not compress, different for every key.
fn value(i: u64) -> Vec<u8> {
    let mut x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..100)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn table_bytes(s: &Store) -> u64 {
    s.stats().tables.iter().map(|t| t.file_bytes).sum()
}

fn time_scan(s: &Store, a: &[u8], b: &[u8]) -> (f64, usize) {
    let t = Instant::now();
    let n = s.scan(a..b).count();
    (t.elapsed().as_secs_f64() * 1e3, n)
}

fn gets(s: &Store, n: u64, lookups: u64, seed: u64) -> f64 {
    let t = Instant::now();
    let mut found = 0;
    for i in 0..lookups {
        let k = key((i.wrapping_mul(7919).wrapping_add(seed)) % n);
        found += s.get(&k).unwrap().is_some() as u64;
    }
    assert!(found > 0);
    t.elapsed().as_nanos() as f64 / lookups as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() -> filterstore::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = std::path::PathBuf::from(args.first().expect("usage: DIR [N] [D] [rounds]"));
    let n: u64 = args
        .get(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let d: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(n / 10);
    let rounds: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(5);
    let _ = std::fs::remove_dir_all(&dir);
    let opts = || Options::default().sync(SyncPolicy::Buffered);
    let s = Store::open(&dir, opts())?;
    for i in 0..n {
        s.put(key(i), value(i))?;
    }
    s.flush()?;
    s.wait_for_compaction()?;
    let (a, b) = (key((n - d) / 2), key((n - d) / 2 + d));
    let before: Vec<f64> = (0..rounds).map(|_| time_scan(&s, &a, &b).0).collect();
    let wal = s.stats().lifetime.wal_bytes_written;
    s.delete_range(&a, &b)?;
    let record = s.stats().lifetime.wal_bytes_written - wal;
    println!(
        "delete_range of {d} keys out of {n}: log record {record} bytes ({} bytes besides the two keys of {} bytes)",
        record - (a.len() + b.len()) as u64,
        a.len()
    );
    let mem: Vec<f64> = (0..rounds)
        .map(|_| time_scan(&s, &a, &b))
        .map(|x| {
            assert_eq!(x.1, 0);
            x.0
        })
        .collect();
    s.flush()?;
    let flushed: Vec<f64> = (0..rounds).map(|_| time_scan(&s, &a, &b).0).collect();
    let (mb, mm, mf) = (median(before), median(mem), median(flushed));
    println!(
        "scan of the range: {mb:.2} ms before, {mm:.3} ms after (tombstone in the memtable, {:.4}x), {mf:.3} ms after its flush ({:.4}x)",
        mm / mb,
        mf / mb
    );
    let tb = table_bytes(&s);
    let st = s.stats();
    s.compact_range(&a, &b)?;
    let ta = table_bytes(&s);
    let sa = s.stats();
    println!(
        "table bytes: {tb} before compact_range, {ta} after ({} reclaimed; the range held {} bytes of keys and values)",
        tb - ta,
        d * (16 + 100)
    );
    println!(
        "compact_range: {} tables dropped whole (unread), {} bytes read by its compactions, {} written",
        sa.lifecycle.tables_dropped_whole - st.lifecycle.tables_dropped_whole,
        sa.compaction_bytes_read - st.compaction_bytes_read,
        sa.compaction_bytes_written - st.compaction_bytes_written
    );
    drop(s);
    // Gets without and with 1,000 range tombstones (over gaps: they cover no key), in an L0
    // table over the loaded level; the store without them gets 1,000 point deletes of absent
    // keys instead, so that both have the same tables.
    let plain = dir.with_extension("plain");
    let ranged = dir.with_extension("ranged");
    let fixed = || opts().compaction_trigger(None);
    for p in [&plain, &ranged] {
        let _ = std::fs::remove_dir_all(p);
        let s = Store::open(p, fixed())?;
        for i in 0..n {
            s.put(key(i), value(i))?;
        }
        s.flush()?;
        s.compact()?;
        for t in 0..1000u64 {
            let k = key(t * (n / 1000));
            let (lo, hi) = ([&k[..], b"\x01"].concat(), [&k[..], b"\x02"].concat());
            if p == &ranged {
                s.delete_range(lo, hi)?;
            } else {
                s.delete(lo)?;
            }
        }
        s.flush()?;
    }
    let (sp, sr) = (
        Store::open(&plain, fixed())?,
        Store::open(&ranged, fixed())?,
    );
    let lookups = 300_000;
    gets(&sp, n, lookups, 1);
    gets(&sr, n, lookups, 1);
    let (mut vp, mut vr) = (Vec::new(), Vec::new());
    for r in 0..rounds as u64 {
        vp.push(gets(&sp, n, lookups, r));
        vr.push(gets(&sr, n, lookups, r));
    }
    let (p, r) = (median(vp), median(vr));
    println!(
        "present get: {p:.0} ns without range tombstones, {r:.0} ns with 1,000 ({:.3}x); tables {} and {}",
        r / p,
        sp.stats().tables.len(),
        sr.stats().tables.len()
    );
    Ok(())
}
