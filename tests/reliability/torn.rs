//! Torn tails of any content at the end of a log are dropped and reported, keeping every
//! record before them (zeros alone after the last record are reserved space, the log's end); damage followed by a valid record is refused, naming file and offset.
//! Logs are encoded here from `format.md`, independently of the writer.

use std::path::Path;

use filterstore::verify::Warning;
use filterstore::wal::{replay_bytes, replay_file, ReplayEnd, TornTail};
use filterstore::{Error, Options, Store, SyncPolicy};

use crate::common::Rng;
use crate::{scratch_dir, value_of};

type Op = (Vec<u8>, Option<Vec<u8>>);

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// One record: `| len u32 | crc32(payload) u32 | crc32(bytes 0..8) u32 | payload |`.
fn record(ops: &[Op]) -> Vec<u8> {
    let mut p = Vec::new();
    varint(&mut p, ops.len() as u64);
    for (k, v) in ops {
        p.push(if v.is_some() { 1 } else { 2 });
        varint(&mut p, k.len() as u64);
        p.extend_from_slice(k);
        if let Some(v) = v {
            varint(&mut p, v.len() as u64);
            p.extend_from_slice(v);
        }
    }
    let mut r = (p.len() as u32).to_le_bytes().to_vec();
    r.extend_from_slice(&crc32fast::hash(&p).to_le_bytes());
    let h = crc32fast::hash(&r);
    r.extend_from_slice(&h.to_le_bytes());
    r.extend_from_slice(&p);
    r
}

fn exact(rng: &mut Rng, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.next() as u8).collect()
}

/// `lo` plus up to `spread − 1` random bytes.
fn some(rng: &mut Rng, lo: usize, spread: u64) -> Vec<u8> {
    let n = lo + rng.below(spread) as usize;
    exact(rng, n)
}

fn batch(rng: &mut Rng) -> Vec<Op> {
    (0..1 + rng.below(4))
        .map(|_| {
            let k = format!("key{}", rng.below(1_000_000)).into_bytes();
            let v = match rng.below(6) {
                0 => None,
                // Now and then a value longer than a sector or a page.
                1 => Some(some(rng, 600, 6000)),
                _ => Some(some(rng, 0, 80)),
            };
            (k, v)
        })
        .collect()
}

/// A log of `n` random records: its bytes, each record's offset, and the ops of each.
fn log(rng: &mut Rng, n: usize) -> (Vec<u8>, Vec<usize>, Vec<Vec<Op>>) {
    let mut b = b"FSWL\x02\0\0\0".to_vec();
    let (mut offsets, mut batches) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let ops = batch(rng);
        offsets.push(b.len());
        b.extend(record(&ops));
        batches.push(ops);
    }
    (b, offsets, batches)
}

fn replay(b: &[u8]) -> (filterstore::Result<ReplayEnd>, Vec<Op>) {
    let mut applied = Vec::new();
    let r = replay_bytes(b, |k, v| applied.push((k, v)));
    (r, applied)
}

/// Kinds of torn tail a crash can leave after the last complete record.
const KINDS: [&str; 9] = [
    "zeros",
    "random bytes",
    "a valid prefix of a record",
    "a header whose payload is zeros",
    "a header whose payload is garbage",
    "a header and part of its payload",
    "a payload whose header is lost",
    "a header whose payload, holding record images, is cut short",
    "the last record partly overwritten",
];

/// Appends (or, for the last kind, makes) a torn tail of kind `kind`; returns the offset where
/// the damage starts.
fn tear(rng: &mut Rng, b: &mut Vec<u8>, offsets: &[usize], kind: usize) -> usize {
    let start = b.len();
    let next = record(&batch(rng));
    let payload_len = next.len() - 12;
    match KINDS[kind] {
        "zeros" => b.resize(start + 1 + rng.below(9000) as usize, 0),
        "random bytes" => {
            // Mostly short; sometimes a large garbage region (the scan must stay linear).
            let n = if rng.below(20) == 0 {
                1 << 20
            } else {
                1 + rng.below(9000) as usize
            };
            b.extend(exact(rng, n));
        }
        "a valid prefix of a record" => {
            let cut = 1 + rng.below(next.len() as u64 - 1) as usize;
            b.extend_from_slice(&next[..cut]);
        }
        "a header whose payload is zeros" => {
            b.extend_from_slice(&next[..12]);
            b.resize(b.len() + payload_len, 0);
        }
        "a header whose payload is garbage" => {
            b.extend_from_slice(&next[..12]);
            b.extend(some(rng, payload_len, 100));
        }
        "a header and part of its payload" => {
            let cut = 12 + rng.below(payload_len as u64) as usize;
            b.extend_from_slice(&next[..cut]);
        }
        "a payload whose header is lost" => {
            let header = if rng.below(2) == 0 {
                vec![0; 12]
            } else {
                exact(rng, 12)
            };
            b.extend(header);
            b.extend_from_slice(&next[12..]);
        }
        "a header whose payload, holding record images, is cut short" => {
            // A value that is itself a log: its records must not be mistaken for ones that
            // follow the torn record (the header vouches for the payload's extent).
            let mut inner = Vec::new();
            for _ in 0..3 {
                inner.extend(record(&batch(rng)));
            }
            let r = record(&[(b"wal-image".to_vec(), Some(inner))]);
            let cut = 12 + rng.below((r.len() - 12) as u64) as usize;
            if rng.below(2) == 0 {
                b.extend_from_slice(&r[..cut]);
            } else {
                // All of it there, but the end of the payload garbled.
                b.extend_from_slice(&r[..cut]);
                b.extend(exact(rng, r.len() - cut));
            }
        }
        "the last record partly overwritten" => {
            let last = *offsets.last().unwrap();
            let from = last + rng.below((b.len() - last) as u64) as usize;
            let to = from + 1 + rng.below((b.len() - from) as u64) as usize;
            for x in &mut b[from..to] {
                *x = if rng.below(3) == 0 {
                    0
                } else {
                    rng.next() as u8
                };
            }
            if filterstore::wal::record_at(b, last) {
                b[from] ^= 0x55; // overwritten with the same bytes: change one
            }
            return last;
        }
        k => unreachable!("{k}"),
    }
    start
}

#[test]
fn torn_tails_of_any_content_keep_every_record_before_them() {
    let mut rng = Rng::new(15);
    let mut per_kind = [0u32; KINDS.len()];
    let mut dropped = 0u64;
    for case in 0..1500 {
        let kind = case % KINDS.len();
        let n = rng.below(12) as usize + usize::from(KINDS[kind].starts_with("the last"));
        let (mut b, offsets, batches) = log(&mut rng, n);
        let at = tear(&mut rng, &mut b, &offsets, kind);
        let kept = offsets.iter().filter(|&&o| o < at).count();
        let what = format!("case {case}: {n} records, then {}", KINDS[kind]);
        let (r, applied) = replay(&b);
        let end = r.unwrap_or_else(|e| panic!("{what}: refused: {e}"));
        assert_eq!(end.records, kept as u64, "{what}");
        assert_eq!(end.valid_len, at as u64, "{what}");
        let want: Vec<Op> = batches[..kept].concat();
        assert!(
            applied == want,
            "{what}: the records before the damage differ"
        );
        if KINDS[kind] == "zeros" {
            // Zeros from a record boundary on are space reserved ahead of the records: the
            // log's end, nothing torn.
            assert_eq!(end.torn_tail, None, "{what}");
            per_kind[kind] += 1;
            continue;
        }
        let t = end
            .torn_tail
            .unwrap_or_else(|| panic!("{what}: no torn tail"));
        assert_eq!(
            (t.offset, t.len),
            (at as u64, (b.len() - at) as u64),
            "{what}: {t:?}"
        );
        // Dropping the tail leaves a log that replays the same, with nothing torn.
        let (r, again) = replay(&b[..at]);
        assert_eq!(r.unwrap().torn_tail, None, "{what}");
        assert!(again == applied, "{what}");
        per_kind[kind] += 1;
        dropped += t.len;
    }
    // A log cut inside its own header, or whose header never reached the disk.
    for n in 1..8 {
        let (r, _) = replay(&b"FSWL\x02\0\0\0"[..n]);
        let t = r.unwrap().torn_tail.unwrap();
        assert_eq!((t.offset, t.len), (0, n as u64));
    }
    let (r, _) = replay(&[0u8; 4096]);
    assert_eq!(r.unwrap().torn_tail.map(|t| t.len), Some(4096));
    assert_eq!(replay(&[]).0.unwrap().torn_tail, None, "an empty log");
    let summary: Vec<String> = KINDS
        .iter()
        .zip(per_kind)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    println!(
        "torn tails: 1,500 logs, {dropped} bytes dropped ({})",
        summary.join(", ")
    );
}

/// Damage kinds before the last record: the records after it are valid.
const MID: [&str; 5] = [
    "a bit flipped in a header",
    "a bit flipped in a payload",
    "a range zeroed",
    "a header replaced by garbage",
    "garbage inserted between records",
];

#[test]
fn damage_followed_by_a_valid_record_is_refused_with_file_and_offset() {
    let tmp = scratch_dir();
    let path = tmp.path().join("000007.wal");
    let mut rng = Rng::new(16);
    let mut kept_total = 0;
    for case in 0..600 {
        let kind = case % MID.len();
        let n = 2 + rng.below(10) as usize;
        let (mut b, offsets, batches) = log(&mut rng, n);
        let j = rng.below(n as u64 - 1) as usize; // a record with one after it
        let (lo, hi) = (offsets[j], offsets[j + 1]);
        let mut at = lo;
        match MID[kind] {
            "a bit flipped in a header" => b[lo + rng.below(12) as usize] ^= 1 << rng.below(8),
            "a bit flipped in a payload" => {
                b[lo + 12 + rng.below((hi - lo - 12) as u64) as usize] ^= 1 << rng.below(8)
            }
            "a range zeroed" => {
                let from = lo + rng.below((hi - lo) as u64) as usize;
                let to = from + 1 + rng.below((hi - from) as u64) as usize;
                if b[from..to].iter().all(|&x| x == 0) {
                    b[from] = 1; // make sure something changed
                }
                b[from..to].fill(0);
            }
            "a header replaced by garbage" => {
                let g = exact(&mut rng, 12);
                b[lo..lo + 12].copy_from_slice(&g);
            }
            "garbage inserted between records" => {
                let g = some(&mut rng, 1, 5000);
                b.splice(hi..hi, g);
                at = hi;
            }
            k => unreachable!("{k}"),
        }
        // Sometimes a torn tail after the valid records too: still refused.
        if rng.below(4) == 0 {
            b.extend(some(&mut rng, 1, 100));
        }
        let what = format!("case {case}: {n} records, {} in record {j}", MID[kind]);
        std::fs::write(&path, &b).unwrap();
        let mut applied = Vec::new();
        match replay_file(&path, |k, v| applied.push((k, v))) {
            Err(Error::Corruption {
                file,
                offset,
                reason,
                ..
            }) => {
                assert_eq!(file, path, "{what}");
                assert_eq!(offset, at as u64, "{what}: {reason}");
                assert!(
                    reason.contains("a valid record follows"),
                    "{what}: {reason}"
                );
            }
            other => panic!("{what}: not refused: {other:?}"),
        }
        let kept = if at == hi { j + 1 } else { j };
        assert!(
            applied == batches[..kept].concat(),
            "{what}: records before the damage"
        );
        kept_total += kept;
    }
    // A log whose header is lost but whose records are there is refused too.
    let (mut b, ..) = log(&mut rng, 3);
    b[..8].fill(0);
    std::fs::write(&path, &b).unwrap();
    assert!(matches!(
        replay_file(&path, |_, _| {}),
        Err(Error::Corruption { file, offset: 0, .. }) if file == path
    ));
    println!(
        "mid-log damage: 600 logs refused with file and offset ({}), {kept_total} records before the damage applied",
        MID.join(", ")
    );
}

fn wal_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    v.sort();
    v
}

/// The scenario: 50 single puts, each by its own handle as the command line makes
/// them, then 14 bytes of arbitrary data appended to every log. The store opens and every put
/// is there; `verify_dir` warns about each torn tail (file and offset) and finds no problem.
#[test]
fn fifty_puts_then_garbage_appended_to_every_log() {
    let _serial = crate::serial();
    let tmp = scratch_dir();
    let dir = tmp.path().join("store");
    let key = |i: u64| format!("key{i:03}").into_bytes();
    let mut rng = Rng::new(50);
    let mut warnings = 0;
    for round in 0..3u64 {
        let o = || Options::default().sync(SyncPolicy::EveryWrite);
        for i in 0..50 {
            let s = Store::open(&dir, o()).unwrap();
            s.put(key(i), value_of(&key(i), round)).unwrap();
        }
        let logs = wal_files(&dir);
        assert!(!logs.is_empty());
        let mut lens = Vec::new();
        for p in &logs {
            let mut b = std::fs::read(p).unwrap();
            lens.push(b.len() as u64);
            b.extend(exact(&mut rng, 14));
            std::fs::write(p, &b).unwrap();
        }
        let r = filterstore::verify::verify_dir(&dir).unwrap();
        assert!(r.is_intact(), "round {round}: {:?}", r.problems);
        for (p, len) in logs.iter().zip(lens) {
            let w = r
                .warnings
                .iter()
                .find(|w| matches!(w, Warning::TornTail { file, .. } if file == p))
                .unwrap_or_else(|| panic!("round {round}: no warning for {}", p.display()));
            let Warning::TornTail { tail, .. } = w else {
                unreachable!("one kind of warning")
            };
            // A log torn in an earlier round holds that round's garbage too.
            assert!(
                tail.offset <= len && tail.offset + tail.len == len + 14,
                "round {round}: {w}"
            );
            let line = w.to_string();
            assert!(
                line.contains(&p.display().to_string())
                    && line.contains(&format!("offset {}", tail.offset)),
                "{line}"
            );
        }
        let s = Store::open(&dir, o()).unwrap();
        // Opening dropped the same tails verify warned about, and counts them.
        assert_eq!(s.dropped_at_open(), &r.warnings[..], "round {round}");
        let st = s.stats();
        assert_eq!(st.torn_tails_dropped, r.warnings.len() as u64);
        let bytes: u64 = r
            .warnings
            .iter()
            .map(|w| match w {
                Warning::TornTail { tail, .. } => tail.len,
                _ => unreachable!("one kind of warning"),
            })
            .sum();
        assert_eq!(st.torn_tail_bytes_dropped, bytes, "round {round}");
        for i in 0..50 {
            assert_eq!(
                s.get(key(i)).unwrap().map(Vec::from),
                Some(value_of(&key(i), round)),
                "round {round}: key {i}"
            );
        }
        // The next round writes over a store that has been through this once.
        if round == 1 {
            s.flush().unwrap();
        }
        warnings += r.warnings.len();
    }
    println!("50 puts, 14 bytes on every log, 3 rounds: {warnings} torn-tail warnings, 150 gets");
}

/// Torn tails of every kind at the end of every log of a store: it opens, every record
/// before the damage is there, and verify warns instead of failing.
#[test]
fn a_store_opens_after_torn_tails_of_any_kind_on_its_logs() {
    let _serial = crate::serial();
    let tmp = scratch_dir();
    let mut rng = Rng::new(17);
    let (mut logs, mut checked, mut lost_total) = (0, 0, 0);
    for case in 0..KINDS.len() * 4 {
        let kind = case % KINDS.len();
        let dir = tmp.path().join(format!("s{case}"));
        let mut model = std::collections::BTreeMap::new();
        for h in 0..4u64 {
            let s = Store::open(&dir, Options::default().sync(SyncPolicy::EveryWrite)).unwrap();
            for i in 0..1 + rng.below(6) {
                let k = format!("h{h}-{i}").into_bytes();
                s.put(&k, value_of(&k, 1)).unwrap();
                model.insert(k.clone(), value_of(&k, 1));
            }
        }
        let mut lost = Vec::new();
        for p in wal_files(&dir) {
            let mut b = std::fs::read(&p).unwrap();
            // The log as its records left it: without the space reserved after them.
            let records_end = replay_bytes(&b, |_, _| {}).unwrap();
            assert_eq!(records_end.torn_tail, None);
            b.truncate(records_end.valid_len as usize);
            // Offsets of the complete records, from the log's own replay.
            let mut offsets = Vec::new();
            let mut pos = 8;
            while pos < b.len() {
                offsets.push(pos);
                pos += 12 + u32::from_le_bytes(b[pos..pos + 4].try_into().unwrap()) as usize;
            }
            if offsets.is_empty() && KINDS[kind].starts_with("the last") {
                continue;
            }
            let at = tear(&mut rng, &mut b, &offsets, kind);
            if at < pos {
                // The last record was damaged: its keys are gone, the others must stay.
                let mut keys = Vec::new();
                replay_bytes(&std::fs::read(&p).unwrap()[..pos], |k, _| keys.push(k)).unwrap();
                let mut before = 0;
                replay_bytes(&b[..at], |_, _| before += 1).unwrap();
                lost.extend(keys.into_iter().skip(before));
            }
            std::fs::write(&p, &b).unwrap();
        }
        let what = format!("case {case}: {}", KINDS[kind]);
        let r = filterstore::verify::verify_dir(&dir).unwrap();
        assert!(r.is_intact(), "{what}: {:?}", r.problems);
        // Zeros after the last record read as reserved space: the log's end, no warning.
        let zeros = KINDS[kind] == "zeros";
        assert_eq!(r.warnings.is_empty(), zeros, "{what}: {:?}", r.warnings);
        let s = Store::open(&dir, Options::default())
            .unwrap_or_else(|e| panic!("{what}: open refused: {e}"));
        assert_eq!(s.dropped_at_open(), &r.warnings[..], "{what}");
        assert_eq!(s.stats().torn_tails_dropped, r.warnings.len() as u64);
        for (k, v) in &model {
            let want = (!lost.contains(k)).then(|| v.clone());
            assert_eq!(s.get(k).unwrap().map(Vec::from), want, "{what}: {k:?}");
        }
        // Opening rewrote the logs: the next open has nothing to drop, and loses nothing.
        drop(s);
        let s = Store::open(&dir, Options::default()).unwrap();
        assert!(s.dropped_at_open().is_empty(), "{what}");
        assert_eq!(s.stats().torn_tail_bytes_dropped, 0);
        for (k, v) in &model {
            let want = (!lost.contains(k)).then(|| v.clone());
            assert_eq!(
                s.get(k).unwrap().map(Vec::from),
                want,
                "{what}: reopened: {k:?}"
            );
        }
        logs += r.warnings.len();
        checked += model.len();
        lost_total += lost.len();
    }
    println!(
        "stores with torn logs: {} stores opened, {logs} torn logs, {checked} keys checked ({lost_total} in damaged last records)",
        KINDS.len() * 4
    );
}

#[test]
fn torn_tail_fields_describe_the_dropped_bytes() {
    // A log of one record, then garbage: the tail starts where the record ends.
    let mut rng = Rng::new(18);
    let (mut b, _, batches) = log(&mut rng, 1);
    let end = b.len();
    b.extend_from_slice(b"\x01garbage-garbage");
    let (r, applied) = replay(&b);
    assert!(applied == batches[0]);
    assert_eq!(
        r.unwrap().torn_tail,
        Some(TornTail {
            offset: end as u64,
            len: 16,
            reason: "record header CRC mismatch",
        })
    );
}
