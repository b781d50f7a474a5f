//! What each decoder is fuzzed with, shared by the cargo-fuzz targets (`fuzz_targets/*.rs`)
//! and the stable-Rust fuzz tests that CI runs (`tests/reliability/hostile.rs`), so the two
//! exercise the same calls and check the same properties. Each function takes one input,
//! panics when a property fails, and returns whether the decoder accepted the input.
//!
//! Properties, beyond "no panic, no hang" (and, in the tests, no allocation the input does not
//! justify):
//! - WAL: an accepted log's intact prefix and torn tail cover the file exactly; the prefix
//!   alone replays to the same operations with nothing torn; an error is a corruption at an
//!   offset inside the file (or at its end, for a batch cut short).
//! - manifest: an accepted manifest holds a filter policy a store accepts and re-encodes (as
//!   the current version) to bytes that decode to the same manifest and the same encoding; a
//!   refused one is a corruption at an offset inside the file.
//! - block: the scans' cursor (`BlockCursor`) reads exactly the entries the iterator reads,
//!   and fails at the same entry.
//! - table: the merges' cursor (`TableCursor`: chunks of blocks, decoded in place) and a
//!   scan's path (`Table::scan_entries`: blocks read ahead) read exactly the entries that
//!   reading block by block does, and fail at the same block; the scan's path takes each
//!   block once (a read or a cache hit).
//! - filter: every kernel the CPU has answers as the portable code, one by one and batched.
//! - range: a range filter that stores no value answers "no" to every range.
//! - global filter: an accepted filter answers queries, accepts updates, and re-encodes to
//!   bytes that decode to the same encoding.
//! - compressed block: an accepted one decodes to at most `LZ4_MAX_RATIO` (LZ4) or
//!   `ZSTD_MAX_RATIO` (zstd) times its payload and at most `MAX_BLOCK_LEN` bytes, a zstd one
//!   to at most what its frame's headers allow; an error is a corruption at an offset inside
//!   it (or, for zstd in a build without the feature, unsupported there); an LZ4 one decoded
//!   a prefix at a time (as a point lookup decodes it) yields prefixes of the same bytes and
//!   fails exactly when the whole decode fails. A codec-3 one (LZ4 of a split form) rebuilds
//!   at most `split::rebuilt_bound` of its split form, and damage in that form is a
//!   corruption at its offset in the decompressed bytes.
//! - split form: an accepted one rebuilds a block of at most `split::rebuilt_bound` bytes; a
//!   refused one is a corruption at an offset inside it; a point lookup that reads it while
//!   it is decoded answers as the rebuilt block does when its keys are sorted, and decides
//!   (answers at all) for every form that rebuilds.
//! - lifetime counters: an accepted `COUNTERS` file re-encodes (as the current version) to
//!   bytes that decode to the same counters, and a current-version file re-encodes to itself;
//!   a refused one is a corruption at an offset inside the file.
//! - zstd frame: the bound read from a frame's headers is at most `ZSTD_MAX_RATIO` times its
//!   bytes, and a frame the library decodes never yields more than that bound.
//!
//! Checked-in inputs: `fuzz/corpus/<target>/` (seeds, and any input that once failed).
#![allow(dead_code)] // each cargo-fuzz target uses one function

use std::path::Path;

use filterstore::filter::global::{GlobalFilter, RunId};
use filterstore::filter::range::RangeFilter;
use filterstore::filter::{Filter, Kernel};
use filterstore::lifetime;
use filterstore::manifest::Manifest;
use filterstore::table::block::{Block, BlockCursor};
use filterstore::table::compress::{self, MAX_BLOCK_LEN, ZSTD_MAX_RATIO};
use filterstore::table::lz4::LZ4_MAX_RATIO;
use filterstore::table::split;
use filterstore::table::{Table, TableCounters, TableCursor};
use filterstore::wal::replay_bytes;
use filterstore::Error;
use filterstore::FilterPolicy;

/// Input names, as the cargo-fuzz targets and corpus directories are named.
pub const TARGETS: [&str; 11] = [
    "wal",
    "block",
    "table",
    "filter",
    "manifest",
    "range",
    "global",
    "compressed",
    "split",
    "zstd",
    "counters",
];

type Ops = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// A whole WAL file.
pub fn wal(data: &[u8]) -> bool {
    let mut ops: Ops = Vec::new();
    let n = data.len() as u64;
    match replay_bytes(data, |k, v| ops.push((k, v))) {
        Ok(end) => {
            match end.torn_tail {
                Some(t) => assert!(
                    t.offset == end.valid_len && t.len > 0 && t.offset + t.len == n,
                    "torn tail {t:?} does not end a {n}-byte log at {}",
                    end.valid_len
                ),
                // Zeros after the last record are reserved space, the log's end.
                None => assert!(
                    data.get(end.valid_len as usize..)
                        .is_some_and(|rest| rest.iter().all(|&b| b == 0)),
                    "no torn tail, yet bytes other than zeros left over"
                ),
            }
            let prefix = data.get(..end.valid_len as usize).unwrap_or_default();
            let mut again: Ops = Vec::new();
            let e = replay_bytes(prefix, |k, v| again.push((k, v)))
                .unwrap_or_else(|e| panic!("the intact prefix of a log is refused: {e}"));
            assert!(
                e.torn_tail.is_none() && e.records == end.records && again == ops,
                "the intact prefix replays differently: {e:?} vs {end:?}"
            );
            true
        }
        // At most the file's length: a record cut inside its batch needs bytes at the end.
        Err(Error::Corruption { offset, .. }) if offset <= n => false,
        // A reserved op code or a keyspace other than 0 (log version 3): refused where it is.
        Err(Error::Unsupported { offset, .. }) if offset < n => false,
        Err(e) => panic!("a {n}-byte log: not a corruption inside it: {e:?}"),
    }
}

/// A block, after one byte that picks the length of a probe key (a prefix of the block).
pub fn block(data: &[u8]) -> bool {
    let Some((&n, bytes)) = data.split_first() else {
        return false;
    };
    let Ok(b) = Block::new(bytes, 0) else {
        return false;
    };
    let mut probes = vec![bytes[..(n as usize).min(bytes.len())].to_vec()];
    let mut all = true;
    for (i, e) in b.iter().take(100_000).enumerate() {
        match e {
            Ok((k, _)) if i % 16 == 0 && probes.len() < 16 => probes.push(k),
            Ok(_) => {}
            Err(_) => {
                all = false;
                break;
            }
        }
    }
    for k in &probes {
        let _ = b.get(k);
    }
    // The scans' cursor reads exactly the entries the iterator reads and stops where it
    // stops (an error at the same entry); its seeks never panic.
    let mut c = BlockCursor::new(bytes, 0).expect("the cursor refuses a block `Block` took");
    let mut it = b.iter();
    let mut read = c.seek_to_first();
    let mut n = 0;
    while n < 100_000 {
        match (&read, it.next()) {
            (Ok(()), Some(Ok((k, v)))) if c.valid() => {
                assert!(
                    c.key() == k.as_slice() && c.value() == v.as_deref(),
                    "entry {n}: the cursor and the iterator disagree"
                );
            }
            (Ok(()), None) if !c.valid() => break,
            (Err(_), Some(Err(_))) => break,
            (r, e) => panic!(
                "entry {n}: cursor {r:?} valid={}, iterator {e:?}",
                c.valid()
            ),
        }
        read = c.advance();
        n += 1;
    }
    for k in &probes {
        for after in [false, true] {
            if c.seek(k, after).is_ok() && c.valid() {
                let _ = c.advance();
            }
        }
    }
    // Backward (a reverse scan's path): errors, never panics (a damaged block's restart
    // points may cut its entries differently from a forward read: no comparison here; the
    // unit tests of `table::block` compare on well-formed blocks).
    let mut back = 0;
    let mut r = c.seek_to_last();
    while r.is_ok() && c.valid() && back < 100_000 {
        let _ = (c.key(), c.value());
        back += 1;
        r = c.prev();
    }
    for k in &probes {
        for before in [false, true] {
            if c.seek_back(k, before).is_ok() && c.valid() {
                let _ = c.prev();
            }
        }
    }
    all
}

/// The bytes of a table-format-4 data block without its CRC (payload, then the codec tag):
/// decompressed when the tag says LZ4 or zstd, then read as a block (as `block` does).
pub fn compressed(data: &[u8]) -> bool {
    let mut buf = Vec::new();
    let ratio = match data.last() {
        Some(2) => ZSTD_MAX_RATIO,
        _ => LZ4_MAX_RATIO,
    };
    let whole = compress::decode(data, 0, &mut buf);
    let payload = data.len().saturating_sub(1);
    let mut split_form = Vec::new();
    match data.last() {
        Some(1) => lz4_prefixes(&data[..payload], whole.as_deref().ok()),
        Some(3) => {
            // The LZ4 layer alone, then the split form's own decoder.
            let form = compress::lz4_into(&data[..payload], 0, &mut split_form)
                .map(|n| split_form[..n].to_vec());
            lz4_prefixes(&data[..payload], form.as_deref().ok());
            if let Ok(form) = &form {
                split_lookups(form, &data[..payload]);
                let mut rebuilt = Vec::new();
                let again = split::unsplit(form, 0, &mut rebuilt).map(|()| rebuilt);
                assert_eq!(
                    again.as_deref().ok(),
                    whole.as_deref().ok(),
                    "the block decodes other than its split form rebuilds"
                );
            }
        }
        _ => {}
    }
    match whole {
        Ok(raw) => {
            let most = match data.last() {
                Some(3) => split::rebuilt_bound(payload.max(1) * ratio),
                _ => payload.max(1) * ratio,
            };
            assert!(
                raw.len() <= MAX_BLOCK_LEN && raw.len() <= most,
                "{} bytes decompressed from a {payload}-byte payload",
                raw.len()
            );
            if data.last() == Some(&2) {
                let frame = data.get(4..payload).unwrap_or_default();
                let bound = compress::zstd_frame_bound(frame);
                assert!(
                    bound.is_some_and(|b| raw.len() <= b),
                    "{} bytes decompressed from a zstd frame bounded at {bound:?}",
                    raw.len()
                );
            }
            if let Ok(b) = Block::new(raw, 0) {
                for e in b.iter().take(100_000) {
                    if e.is_err() {
                        break;
                    }
                }
            }
            true
        }
        Err(Error::Corruption { offset, .. }) if offset <= data.len() as u64 => false,
        // Damage in a split form: its offset in the decompressed bytes.
        Err(Error::Corruption { offset, .. })
            if data.last() == Some(&3) && offset <= (payload * LZ4_MAX_RATIO) as u64 =>
        {
            false
        }
        // A zstd block in a build without the `zstd` feature.
        Err(Error::Unsupported { offset, .. })
            if offset <= data.len() as u64 && data.last() == Some(&2) =>
        {
            false
        }
        Err(e) => panic!(
            "a {}-byte block: not a corruption inside it: {e:?}",
            data.len()
        ),
    }
}

/// An LZ4 payload decoded a prefix at a time (as a point lookup decodes it): every prefix
/// it yields is the start of what the whole decode yields, and it fails exactly when that
/// fails (`whole`: the whole decode's bytes, `None` when it failed).
fn lz4_prefixes(payload: &[u8], whole: Option<&[u8]>) {
    let Ok((mut d, len)) = compress::Lz4Prefix::new(payload, 0) else {
        assert!(
            whole.is_none(),
            "the claim refused only by the prefix decoder"
        );
        return;
    };
    let mut out = vec![0u8; len];
    let mut step = 1usize;
    while d.decoded() < len {
        let before = d.decoded();
        if d.fill(&mut out, before + step).is_err() {
            assert!(
                whole.is_none(),
                "a prefix fails where the whole decode does not"
            );
            return;
        }
        assert!(d.decoded() > before, "no progress");
        if let Some(w) = whole {
            assert_eq!(&out[..d.decoded()], &w[..d.decoded()], "prefix differs");
        }
        step = step * 2 + 1;
    }
    assert!(whole.is_some(), "decoded in prefixes, not whole");
}

/// A split form (what a codec-3 block's LZ4 layer decodes to): rebuilt into a block, read as
/// a block, and looked up in while it is decoded from an LZ4 block that holds it.
pub fn split(data: &[u8]) -> bool {
    let mut rebuilt = Vec::new();
    match split::unsplit(data, 0, &mut rebuilt) {
        Ok(()) => {
            assert!(
                rebuilt.len() <= split::rebuilt_bound(data.len()),
                "{} bytes rebuilt from a {}-byte split form",
                rebuilt.len(),
                data.len()
            );
        }
        Err(Error::Corruption { offset, .. }) if offset <= data.len() as u64 => {}
        Err(e) => panic!("a {}-byte split form: {e:?}", data.len()),
    }
    if !data.is_empty() && data.len() <= u32::MAX as usize {
        // An LZ4 block of one sequence of literals holds `data` as it is.
        let mut payload = (data.len() as u32).to_le_bytes().to_vec();
        let n = data.len();
        payload.push((n.min(15) as u8) << 4);
        if n >= 15 {
            let mut rest = n - 15;
            while rest >= 255 {
                payload.push(255);
                rest -= 255;
            }
            payload.push(rest as u8);
        }
        payload.extend_from_slice(data);
        split_lookups(data, &payload);
    }
    !rebuilt.is_empty()
}

/// Lookups in the split form `form` held by the LZ4 payload `payload` (`| raw_len u32 | LZ4
/// block |`), read while it is decoded: they decide for every form that rebuilds into a block,
/// and where that block's keys are sorted, answer as [`Block::get`] does on it.
fn split_lookups(form: &[u8], payload: &[u8]) {
    let mut rebuilt = Vec::new();
    let rebuilds = split::unsplit(form, 0, &mut rebuilt).is_ok();
    let block = rebuilds.then(|| Block::new(&rebuilt, 0).ok()).flatten();
    let keys: Vec<Vec<u8>> = match &block {
        Some(b) => b
            .iter()
            .take(1000)
            .map_while(|e| e.ok())
            .map(|e| e.0)
            .collect(),
        None => Vec::new(),
    };
    let sorted = keys.windows(2).all(|w| w[0] < w[1]);
    let mut probes = vec![Vec::new(), b"key".to_vec(), vec![0xff; 20]];
    for k in keys.iter().take(64) {
        probes.push(k.clone());
        let mut after = k.clone();
        after.push(0);
        probes.push(after);
    }
    for p in &probes {
        let Ok((mut dec, len)) = compress::Lz4Prefix::new(payload, 0) else {
            return;
        };
        let mut out = vec![0u8; len];
        let got = split::get_decoding(&mut dec, &mut out, p);
        assert!(
            !rebuilds || matches!(got, Ok(Some(_))),
            "a split form that rebuilds left undecided: {got:?}"
        );
        if let (Some(b), Ok(got)) = (&block, got) {
            // A key past the block's last goes to the next block: no answer to compare.
            let past = keys.last().is_some_and(|last| p > last);
            if sorted && !past && keys.len() < 1000 {
                if let Some(got) = got {
                    assert_eq!(Ok(got), b.get(p).map_err(|_| ()), "probe {p:?}");
                }
            }
        }
    }
}

/// A zstd frame (the body of a codec-2 block without its length): accepted when its headers
/// give a bound; then, with the `zstd` feature, the frame decoded through the block decoder
/// under claims around that bound.
pub fn zstd(data: &[u8]) -> bool {
    let Some(bound) = compress::zstd_frame_bound(data) else {
        return false;
    };
    assert!(
        bound <= data.len() * ZSTD_MAX_RATIO,
        "a {}-byte frame bounded at {bound}",
        data.len()
    );
    let mut buf = Vec::new();
    for claim in [1, bound / 2, bound, bound + 1]
        .into_iter()
        .filter(|&c| (1..=MAX_BLOCK_LEN).contains(&c) && c <= u32::MAX as usize)
    {
        let mut block = (claim as u32).to_le_bytes().to_vec();
        block.extend_from_slice(data);
        block.push(2);
        match compress::decode(&block, 0, &mut buf) {
            Ok(raw) => assert!(raw.len() == claim && claim <= bound, "{claim} of {bound}"),
            Err(Error::Corruption { offset, .. } | Error::Unsupported { offset, .. })
                if offset <= block.len() as u64 => {}
            Err(e) => panic!("a {}-byte frame: {e:?}", data.len()),
        }
    }
    true
}

/// A table file: written to `path`, opened both ways (positioned reads and a map), each
/// with and without a block cache (a lookup's cache miss estimates the block's size from the
/// index and meta before reading it), every block read, a few lookups (twice: misses, then
/// hits), the padding checked, and every entry read again through a merge's cursor.
/// Panics when the cursor's entries differ from the blocks' (see [`cursor_matches_blocks`]).
pub fn table(data: &[u8], path: &Path) -> bool {
    std::fs::write(path, data).expect("write the scratch table file");
    let counters = TableCounters::default();
    let mut opened = false;
    for (mmap_reads, cache) in [(false, 0), (true, 0), (false, 64 << 10), (true, 1 << 20)] {
        let Ok(t) = Table::open(path, mmap_reads) else {
            continue;
        };
        let t = t.with_block_cache(cache);
        opened = true;
        let t = std::sync::Arc::new(t);
        cursor_matches_blocks(&t);
        let mut probes = vec![b"key".to_vec(), Vec::new()];
        // With a cache, lookups first (each a miss), then the blocks read through it.
        let rounds = if cache > 0 { 2 } else { 1 };
        for _ in 0..rounds {
            for k in probes.iter().take(64) {
                let _ = t.get(k, &counters);
            }
        }
        for i in 0..t.block_count() {
            if let Ok(entries) = t.block_entries(i, &counters) {
                probes.extend(entries.into_iter().step_by(37).map(|e| e.0));
            }
        }
        for k in probes.iter().take(64) {
            let _ = t.get(k, &counters);
        }
        let _ = t.check_padding();
    }
    opened
}

/// The entries of `t` read through a [`TableCursor`] are those read block by block, in
/// order, up to the first block that fails; the cursor fails exactly when one does.
fn cursor_matches_blocks(t: &std::sync::Arc<Table>) {
    // Through a scan's path first, while a cache is cold (each miss reads blocks ahead).
    let scan_counters = TableCounters::default();
    let mut scanned = Vec::new();
    let scan = t.scan_entries(&scan_counters, &mut scanned);
    let counters = TableCounters::default();
    let mut expected = Vec::new();
    let mut fails = false;
    let mut taken = t.block_count();
    for i in 0..t.block_count() {
        // As stored (a version 5 table's values tagged): what the scan's path reads.
        match t.block_entries_raw(i, &counters) {
            Ok(entries) => expected.extend(entries),
            Err(_) => {
                fails = true;
                taken = i + 1;
                break;
            }
        }
    }
    // The scan's path reads the entries block by block reading does, fails at the same
    // block, and takes each block it reaches once: read (ahead or not) or found cached.
    assert_eq!(scan.is_err(), fails, "scan {scan:?}");
    assert!(
        scanned == expected,
        "scan read {} entries, block by block {}",
        scanned.len(),
        expected.len()
    );
    let used = scan_counters.block_reads() + scan_counters.cache_hits();
    assert!(
        used <= taken as u64 && (fails || used == taken as u64),
        "scan used {used} blocks of {taken}"
    );
    // The cursor takes a version 5 table's value tags off (and fails on one that does not
    // decode), as `block_entries` does.
    let mut expected = Vec::new();
    let mut fails = false;
    for i in 0..t.block_count() {
        match t.block_entries(i, &counters) {
            Ok(entries) => expected.extend(entries),
            Err(_) => {
                fails = true;
                break;
            }
        }
    }
    let mut read = Vec::new();
    let outcome = (|| -> filterstore::Result<()> {
        let mut c = TableCursor::new(t.clone(), Default::default())?;
        while c.valid() {
            read.push((c.key().to_vec(), c.value().map(<[u8]>::to_vec)));
            c.advance()?;
        }
        Ok(())
    })();
    assert_eq!(
        outcome.is_err(),
        fails,
        "cursor {outcome:?}, block by block {}",
        if fails { "fails" } else { "succeeds" }
    );
    if fails {
        // The cursor yields a failing block's entries up to its first bad one: it read every
        // entry of the blocks before that one, as they are.
        assert!(
            read.len() >= expected.len() && read[..expected.len()] == expected[..],
            "cursor read {} entries, the blocks before the failing one {}",
            read.len(),
            expected.len()
        );
    } else {
        assert!(
            read == expected,
            "cursor read {} entries, block by block {}",
            read.len(),
            expected.len()
        );
    }
}

/// A filter block.
pub fn filter(data: &[u8]) -> bool {
    let Ok(f) = Filter::decode(data) else {
        return false;
    };
    let hashes = [
        0u64,
        1,
        u64::MAX,
        0x9e37_79b9_7f4a_7c15,
        0x1234_5678_9abc_def0,
    ];
    for h in hashes {
        f.may_contain(h);
        f.touch(h);
    }
    // Every kernel this CPU has (blocked-bloom's per layout version), one by one and batched:
    // the same answers as the portable code.
    let portable: Vec<bool> = hashes
        .iter()
        .map(|&h| f.portable().may_contain(h))
        .collect();
    let keys: Vec<u32> = (0..hashes.len() as u32).collect();
    for kernel in Kernel::ALL {
        let g = f.with_kernel(kernel);
        let one: Vec<bool> = hashes.iter().map(|&h| g.may_contain(h)).collect();
        assert_eq!(
            one,
            portable,
            "kernel {} differs from the portable code",
            g.kernel()
        );
        let mut maybe = Vec::new();
        g.retain_maybe_in(data, &keys, &hashes, 2, &mut maybe);
        let want: Vec<u32> = keys
            .iter()
            .copied()
            .filter(|&i| portable[i as usize])
            .collect();
        assert_eq!(maybe, want, "kernel {}: batch differs", g.kernel());
    }
    let _ = f.theoretical_fpr();
    true
}

/// A MANIFEST file.
pub fn manifest(data: &[u8]) -> bool {
    let n = data.len() as u64;
    let m = match Manifest::decode(data) {
        Ok(m) => m,
        // Every refusal names an offset inside the file (or its end, for one cut short).
        Err(Error::Corruption { offset, .. }) if offset <= n => return false,
        Err(e) => panic!("a {n}-byte manifest: not a corruption inside it: {e:?}"),
    };
    let ok = match m.policy {
        FilterPolicy::Uniform { fpr, .. } => fpr > 0.0 && fpr < 1.0,
        FilterPolicy::Budget { bits_per_key, .. } => {
            (0.0..=filterstore::manifest::MAX_BITS_PER_KEY).contains(&bits_per_key)
        }
    };
    assert!(
        ok,
        "a decoded manifest holds a policy no store accepts: {:?}",
        m.policy
    );
    let bytes = m.encode();
    let again = Manifest::decode(&bytes)
        .unwrap_or_else(|e| panic!("a decoded manifest re-encodes to bytes it refuses: {e}"));
    assert!(
        again.policy == m.policy && again.encode() == bytes,
        "a decoded manifest does not survive encode, decode, encode"
    );
    true
}

/// A whole `COUNTERS` file (the lifetime counters).
pub fn counters(data: &[u8]) -> bool {
    let n = data.len() as u64;
    let l = match lifetime::decode(data) {
        Ok(l) => l,
        // Every refusal names an offset inside the file (or its end, for one cut short).
        Err(Error::Corruption { offset, .. }) if offset <= n => return false,
        Err(e) => panic!("a {n}-byte COUNTERS file: not a corruption inside it: {e:?}"),
    };
    let bytes = lifetime::encode(&l);
    let again = lifetime::decode(&bytes)
        .unwrap_or_else(|e| panic!("decoded counters re-encode to bytes they refuse: {e}"));
    assert_eq!(again, l, "counters do not survive encode and decode");
    if data.len() == bytes.len() {
        // Same length means the current version: nothing may be lost or reordered.
        assert_eq!(
            bytes, data,
            "a current-version COUNTERS file re-encodes differently"
        );
    }
    true
}

/// A range filter block: decoded, then asked ranges of every kind (bounded, open, inverted,
/// with the empty key) and prefixes.
pub fn range(data: &[u8]) -> bool {
    let Ok(f) = RangeFilter::decode(data) else {
        return false;
    };
    let probes: [&[u8]; 8] = [
        b"",
        b"\0",
        b"\xff\xff",
        b"key-5",
        b"key-50\0",
        b"\x80\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01",
        data.get(..16).unwrap_or(data),
        data.get(data.len().saturating_sub(20)..).unwrap_or(data),
    ];
    let empty = f.header().stored == 0;
    for a in probes {
        for b in probes {
            let answers = [
                f.may_intersect(a..b),
                f.may_intersect(a..=b),
                f.may_intersect(a..),
                f.may_intersect(..b),
                f.may_contain_prefix(a),
            ];
            assert!(
                !empty || answers.iter().all(|&x| !x),
                "a range filter of no value answered maybe"
            );
        }
    }
    let _ = (
        f.may_intersect::<&[u8]>(..),
        f.expected_fpr(32),
        f.bits_per_key(),
        f.is_exact(),
    );
    true
}

/// A global filter's bytes (its checkpoint).
pub fn global(data: &[u8]) -> bool {
    let Ok((f, tag)) = GlobalFilter::decode(data) else {
        return false;
    };
    let probes = [
        0u64,
        1,
        u64::MAX,
        0x9e37_79b9_7f4a_7c15,
        0x1234_5678_9abc_def0,
    ];
    for h in probes {
        f.query(h);
        f.lines_touched(h);
    }
    let _ = f.theoretical_fpr();
    let bytes = f.encode(tag);
    let (again, t) = GlobalFilter::decode(&bytes)
        .unwrap_or_else(|e| panic!("a decoded global filter re-encodes to bytes it refuses: {e}"));
    assert!(
        t == tag && again.encode(tag) == bytes,
        "a decoded global filter does not survive encode, decode, encode"
    );
    // Updates on what was decoded keep every entry they add.
    let mut w = f.writer();
    let run = RunId::level(1).expect("level 1");
    for h in probes {
        w.insert(h, run);
    }
    drop(w);
    for h in probes {
        assert!(f.query(h).contains(run), "an inserted key is not found");
    }
    true
}
