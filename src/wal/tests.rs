//! The WAL's tests: records round-trip, damage is found and told apart from a torn tail,
//! salvage keeps what it can.

use super::record::{
    encode_record, for_each_op, payload_len, stamp_seqs, HEADER_CRC_AT, PAYLOAD_CRC_AT,
};
use super::resync::next_record;
use super::*;
use crate::codec::le_u32;
use crate::error::Error;

/// xorshift64*: deterministic, so a failure replays.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn record(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_record(&mut out, 7, 1, std::iter::once(super::Op::Put(key, value))).unwrap();
    out
}

/// `payload_len` is the exact payload length `encode_record` writes, `for_each_op` gives
/// back the operations it encoded, and the CRCs are `crc32fast::hash`'s, for batches with
/// lengths across varint boundaries.
#[test]
fn encoded_records_decode_in_place() {
    let mut rng = Rng(0x9e37_79b9);
    for round in 0..300 {
        let n = 1 + rng.below(if round % 10 == 0 { 200 } else { 4 });
        let sizes = [0, 1, 127, 128, 300, 16_383, 16_384, 70_000];
        let ops: Vec<(Vec<u8>, Option<Vec<u8>>, u64)> = (0..n)
            .map(|_| {
                let klen = sizes[rng.below(6)];
                let k = rng.bytes(klen);
                let vlen = sizes[rng.below(8)];
                let v = (rng.below(4) != 0).then(|| rng.bytes(vlen));
                // Some puts expire (op code 4).
                let e = if v.is_some() && rng.below(2) == 0 {
                    rng.next() | 1
                } else {
                    0
                };
                (k, v, e)
            })
            .collect();
        let refs = || {
            ops.iter().map(|(k, v, e)| match v {
                Some(v) => super::Op::put(k, v, *e),
                None => super::Op::Delete(k),
            })
        };
        let mut out = Vec::new();
        encode_record(&mut out, round as u64, ops.len(), refs()).unwrap();
        assert_eq!(
            payload_len(refs().map(|op| (0, op))),
            out.len() - RECORD_HEADER_LEN
        );
        let payload = &out[RECORD_HEADER_LEN..];
        assert_eq!(le_u32(&out, PAYLOAD_CRC_AT), crc32fast::hash(payload));
        assert_eq!(
            le_u32(&out, HEADER_CRC_AT),
            crc32fast::hash(&out[..HEADER_CRC_AT])
        );
        let mut back = Vec::new();
        for_each_op(&out, |op| {
            let (k, v, e) = match op {
                super::Op::Put(k, v) => (k, Some(v), 0),
                super::Op::PutExpiring(k, v, e) => (k, Some(v), e),
                super::Op::Delete(k) => (k, None, 0),
                super::Op::DeleteRange(..) => unreachable!("no range in these batches"),
            };
            back.push((k.to_vec(), v.map(<[u8]>::to_vec), e))
        })
        .unwrap();
        assert_eq!(back, ops);
    }
    // A record cut short or with a byte too many does not decode.
    let r = record(b"k", b"v");
    assert!(for_each_op(&r[..r.len() - 1], |_| {}).is_err());
    let mut long = r.clone();
    long.push(0);
    assert!(for_each_op(&long, |_| {}).is_err());
}

/// A header whose own CRC holds, claiming `len` bytes with payload CRC `crc`.
fn header_claiming(len: u32, crc: u32) -> Vec<u8> {
    let mut h = len.to_le_bytes().to_vec();
    h.extend_from_slice(&crc.to_le_bytes());
    let c = crc32fast::hash(&h);
    h.extend_from_slice(&c.to_le_bytes());
    h
}

#[test]
fn settling_from_running_crcs_agrees_with_direct_crcs() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut found = 0;
    for case in 0..400 {
        // Random bytes, some valid records planted, some headers that hold but claim a
        // payload whose CRC does not, some records with one payload byte flipped.
        let len = rng.below(3000);
        let mut b = rng.bytes(len);
        for _ in 0..rng.below(4) {
            let at = rng.below(b.len() + 1);
            let len = rng.below(200);
            let v = rng.bytes(len);
            let mut r = match rng.below(3) {
                0 => record(b"k", &v),
                1 => header_claiming(1 + rng.below(500) as u32, rng.next() as u32),
                _ => {
                    let mut r = record(b"key", &v);
                    let i = RECORD_HEADER_LEN + rng.below(r.len() - RECORD_HEADER_LEN);
                    r[i] ^= 1 << rng.below(8);
                    r
                }
            };
            let tail = b.split_off(at);
            b.append(&mut r);
            b.extend(tail);
        }
        for _ in 0..5 {
            let from = rng.below(b.len() + 1);
            let direct = next_record(&b, from, usize::MAX);
            for budget in [0, 300] {
                let settled = next_record(&b, from, budget);
                assert_eq!(direct, settled, "case {case}, from {from}, budget {budget}");
            }
            if let Some(at) = direct {
                assert!(at >= from && record_at(&b, at), "case {case}");
                found += 1;
            }
        }
    }
    assert!(found > 100, "only {found} scans found a record");
}

#[test]
fn crafted_headers_claiming_long_payloads_are_settled_not_rehashed() {
    // 4 MiB of valid headers back to back, each claiming a payload up to the end of the
    // file, none matching it: hashing each claimed payload would take ~10^12 byte-steps
    // (minutes); settling them takes one pass. Then the same with a valid record at the end.
    let valid = record(b"key", b"the one valid record");
    let headers = (4 << 20) / RECORD_HEADER_LEN;
    let total = headers * RECORD_HEADER_LEN + valid.len();
    for with_valid in [false, true] {
        let mut b = Vec::with_capacity(total);
        for _ in 0..headers {
            let claim = total - b.len() - RECORD_HEADER_LEN;
            b.extend(header_claiming(claim as u32, 0xdead_beef));
        }
        if with_valid {
            b.extend_from_slice(&valid);
        } else {
            b.resize(total, 0xa5);
        }
        let want = with_valid.then_some(total - valid.len());
        assert_eq!(next_record(&b, 0, b.len()), want);
        // In a log, after a record whose header is damaged.
        let mut log = b"FSWL\x03\0\0\0".to_vec();
        log.extend_from_slice(&[0xff; RECORD_HEADER_LEN]);
        log.extend_from_slice(&b);
        match replay_bytes(&log, |_, _| {}) {
            Ok(end) if !with_valid => {
                let t = end.torn_tail.unwrap();
                assert_eq!((t.offset, t.len), (8, (log.len() - 8) as u64));
            }
            Err(Error::Corruption {
                offset: 8, reason, ..
            }) if with_valid => {
                let at = log.len() - valid.len();
                assert!(reason.contains(&format!("offset {at}")), "{reason}");
            }
            other => panic!("with_valid {with_valid}: {other:?}"),
        }
    }
}

#[test]
fn a_record_is_what_the_header_claims_and_nothing_else() {
    let r = record(b"k", b"v");
    assert!(record_at(&r, 0));
    assert!(!record_at(&r[..r.len() - 1], 0));
    for i in 0..r.len() {
        for bit in 0..8 {
            let mut d = r.clone();
            d[i] ^= 1 << bit;
            assert!(!record_at(&d, 0), "byte {i} bit {bit}");
        }
    }
    // Zeros never pass: length 0 is refused before any CRC.
    assert_eq!(next_record(&[0; 4096], 0, usize::MAX), None);
    // A length of 0 with matching CRCs (no writer makes one) is refused too.
    let mut empty = header_claiming(0, 0);
    empty.push(0);
    assert!(!record_at(&empty, 0));
}

#[test]
fn salvage_keeps_every_record_around_the_damage() {
    let mut log = b"FSWL\x03\0\0\0".to_vec();
    let recs: Vec<Vec<u8>> = (0..5u8).map(|i| record(&[b'k', i], b"value")).collect();
    let mut offsets = Vec::new();
    for r in &recs {
        offsets.push(log.len());
        log.extend_from_slice(r);
    }
    for (damaged, at) in [(1usize, 0usize), (1, 5), (3, RECORD_HEADER_LEN + 2)] {
        let mut b = log.clone();
        b[offsets[damaged] + at] ^= 0x10;
        // Replay refuses: a valid record follows.
        assert!(replay_bytes(&b, |_, _| {}).is_err());
        let mut keys = Vec::new();
        let s = salvage_bytes(&b, |seq, ops| {
            assert_eq!(seq, Some(7));
            keys.extend(ops.into_iter().map(|op| match op {
                super::OwnedOp::Put(k, _) | super::OwnedOp::Delete(k) => k[1],
                super::OwnedOp::PutExpiring(k, ..) => k[1],
                super::OwnedOp::DeleteRange(k, _) => k[1],
            }))
        });
        let want: Vec<u8> = (0..5u8).filter(|&i| i as usize != damaged).collect();
        assert_eq!(keys, want);
        assert_eq!(s.records, 4);
        assert_eq!(s.dropped.len(), 1);
        let d = &s.dropped[0];
        assert_eq!(d.offset, offsets[damaged] as u64);
        assert_eq!(d.len, recs[damaged].len() as u64);
        assert!(!d.torn_tail && !s.opens_as_is());
    }
    // A bad file header: every record is still kept.
    let mut b = log.clone();
    b[0] = b'X';
    let s = salvage_bytes(&b, |_, _| {});
    assert_eq!((s.records, s.dropped.len()), (5, 1));
    // A torn tail alone: the log opens as it is.
    let mut b = log.clone();
    b.extend_from_slice(b"garbage");
    let s = salvage_bytes(&b, |_, _| {});
    assert!(s.opens_as_is() && s.dropped[0].torn_tail && s.records == 5);
}

/// The header's three reserved bytes are zero; anything else is corruption at offset 5
/// (a flipped bit there used to pass unnoticed).
#[test]
fn reserved_header_bytes_must_be_zero() {
    let mut head = WAL_MAGIC.to_vec();
    head.extend_from_slice(&[WAL_VERSION, 0, 0, 0]);
    assert!(replay_bytes(&head, |_, _| {}).is_ok());
    for at in 5..WAL_HEADER_LEN {
        let mut b = head.clone();
        b[at] = 0x08;
        match replay_bytes(&b, |_, _| {}) {
            Err(Error::Corruption { offset, .. }) => assert_eq!(offset, 5),
            other => panic!("byte {at}: {other:?}"),
        }
    }
}

/// A record framed as format.md says around `payload`: length, payload CRC, header CRC.
fn framed(payload: &[u8]) -> Vec<u8> {
    let mut r = header_claiming(payload.len() as u32, crc32fast::hash(payload));
    r.extend_from_slice(payload);
    r
}

/// A version-3 log of `records`.
fn log_v3(records: &[Vec<u8>]) -> Vec<u8> {
    let mut b = WAL_MAGIC.to_vec();
    b.extend_from_slice(&[3, 0, 0, 0]);
    for r in records {
        b.extend_from_slice(r);
    }
    b
}

/// Version 3 as format.md describes it: `seq u64`, then the ops each with a keyspace id;
/// replay reports the largest sequence number and the version. `stamp_seqs` renumbers
/// records made with another number, CRCs included.
#[test]
fn version_3_records_carry_their_sequence_number() {
    let mut p = 41u64.to_le_bytes().to_vec();
    p.extend_from_slice(&[2, 1, 0, 1, b'a', 1, b'x', 2, 0, 1, b'b']);
    let mut r = Vec::new();
    encode_record(
        &mut r,
        41,
        2,
        [super::Op::Put(b"a", b"x"), super::Op::Delete(b"b")].into_iter(),
    )
    .unwrap();
    assert_eq!(r, framed(&p), "the encoder writes format.md's bytes");
    let mut ops = Vec::new();
    let end = replay_bytes(&log_v3(&[r.clone(), record(b"c", b"y")]), |k, v| {
        ops.push((k, v))
    })
    .unwrap();
    assert_eq!((end.version, end.last_seq, end.records), (3, Some(41), 2));
    assert_eq!(ops.len(), 3);
    // Renumbered as a group: 100 and 101, and still valid records.
    let mut group = [r.clone(), record(b"c", b"y")].concat();
    assert_eq!(stamp_seqs(&mut group, 100), 101);
    assert!(record_at(&group, 0) && record_at(&group, r.len()));
    let end = replay_bytes(&log_v3(&[group]), |_, _| {}).unwrap();
    assert_eq!(end.last_seq, Some(101));
}

/// A version 2 log (no sequence numbers, no keyspaces) still replays, reporting none.
#[test]
fn version_2_logs_still_replay() {
    let mut b = WAL_MAGIC.to_vec();
    b.extend_from_slice(&[2, 0, 0, 0]);
    b.extend(framed(&[1, 1, 1, b'k', 1, b'v']));
    b.extend(framed(&[1, 2, 1, b'k']));
    let mut ops = Vec::new();
    let end = replay_bytes(&b, |k, v| ops.push((k, v))).unwrap();
    assert_eq!((end.version, end.last_seq, end.records), (2, None, 2));
    assert_eq!(
        ops,
        [(b"k".to_vec(), Some(b"v".to_vec())), (b"k".to_vec(), None)]
    );
    // Version 4 is refused at its version byte.
    b[4] = 4;
    let e = replay_bytes(&b, |_, _| {}).unwrap_err();
    assert!(e.to_string().contains("unsupported WAL version 4"), "{e}");
}

/// A delete-range (op code 3) round-trips: one op of the two keys, 13 bytes of payload
/// besides them (sequence number 8, count 1, op code 1, keyspace 1, two lengths 1 each).
#[test]
fn delete_range_is_one_op_of_its_two_keys() {
    let ops = [
        super::Op::Put(b"a", b"1"),
        super::Op::DeleteRange(b"k000", b"k999"),
    ];
    let mut out = Vec::new();
    encode_record(&mut out, 3, ops.len(), ops.iter()).unwrap();
    let mut back = Vec::new();
    for_each_op(&out, |op| back.push(op.into_owned())).unwrap();
    assert_eq!(back, ops.iter().map(|o| o.into_owned()).collect::<Vec<_>>());
    assert_eq!(
        payload_len(ops.iter().map(|op| (0, *op))),
        out.len() - RECORD_HEADER_LEN
    );
    let one = [super::Op::DeleteRange(b"k000", b"k999")];
    encode_record(&mut out, 3, 1, one.iter()).unwrap();
    assert_eq!(out.len() - RECORD_HEADER_LEN, 13 + 8);
}

/// Hostile version-3 records whose CRCs hold: an unknown op code, or a delete-range whose
/// start is not below its end, or an expiring put at time 0, is corruption, a keyspace
/// other than 0 unsupported, a
/// payload too short for its sequence number corruption; each names the offset of what it
/// refuses (in a file, the file too), none panics, and none is taken for a torn tail.
#[test]
fn hostile_version_3_records_are_errors_naming_the_offset() {
    let seq = 9u64.to_le_bytes();
    // Payloads after `seq`, with the offset (in the payload) of the refused byte.
    let cases: [(&[u8], usize, &str, bool); 7] = [
        (&[1, 0, 0, 1, b'k'], 1, "unknown WAL op tag 0", true),
        (&[1, 5, 0, 1, b'k'], 1, "unknown WAL op tag 5", true),
        (&[1, 255, 0, 1, b'k'], 1, "unknown WAL op tag 255", true),
        (
            &[1, 3, 0, 1, b'b', 1, b'a'],
            1,
            "start is not below its end",
            true,
        ),
        (
            &[2, 2, 0, 1, b'a', 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, b'k', 0],
            7,
            "put with expiry at time 0",
            true,
        ),
        (&[1, 1, 7, 1, b'k', 0], 2, "keyspace id 7", false),
        (&[1, 2, 0x80, 0x01, 1, b'k'], 2, "keyspace id 128", false),
    ];
    let payload_at = (WAL_HEADER_LEN + RECORD_HEADER_LEN) as u64;
    let dir = tempfile::tempdir().unwrap();
    for (i, (rest, at, what, corrupt)) in cases.iter().enumerate() {
        let p = [&seq[..], rest].concat();
        // After a good record, so the offset is not the first record's by chance.
        let good = record(b"g", b"h");
        let log = log_v3(&[good.clone(), framed(&p)]);
        let want = payload_at + good.len() as u64 + 8 + *at as u64;
        let path = dir.path().join(format!("{i:06}.wal"));
        std::fs::write(&path, &log).unwrap();
        let e = replay_file(&path, |_, _| {}).unwrap_err();
        let shown = e.to_string();
        assert!(
            shown.contains(what) && shown.contains(&format!("{i:06}.wal")),
            "{shown}"
        );
        match e {
            Error::Corruption { offset, .. } if *corrupt => assert_eq!(offset, want, "{what}"),
            Error::Unsupported { offset, .. } if !corrupt => assert_eq!(offset, want, "{what}"),
            other => panic!("{what}: {other:?}"),
        }
        // Salvage drops the record (and keeps the good one) rather than misread it.
        let mut kept = 0;
        let s = salvage_bytes(&log, |_, ops| kept += ops.len());
        assert_eq!((kept, s.records, s.dropped.len()), (1, 1, 1), "{what}");
    }
    // A payload cut inside its sequence number: corruption at the payload's start.
    for n in 1..8 {
        let log = log_v3(&[framed(&seq[..n])]);
        match replay_bytes(&log, |_, _| {}) {
            Err(Error::Corruption { offset, reason, .. }) => {
                assert_eq!(offset, payload_at);
                assert!(reason.contains("sequence number"), "{reason}");
            }
            other => panic!("{n} bytes: {other:?}"),
        }
    }
}

/// Op code 4 (put with expiry) as format.md lays it out: `| 4 | keyspace | expires_at u64 |
/// key_len | key | value_len | value |`, written by the encoder for a put with an expiry and
/// handed back with it; an `expires_at` of 0 or one cut short is corruption naming the
/// file and the offset of the field.
#[test]
fn puts_with_expiry_round_trip_and_hostile_ones_name_the_offset() {
    let mut r = Vec::new();
    let ops = [
        super::Op::PutExpiring(b"a", b"x", 1234),
        super::Op::Put(b"b", b""),
        super::Op::Delete(b"c"),
    ];
    encode_record(&mut r, 5, 3, ops.iter().copied()).unwrap();
    let mut p = 5u64.to_le_bytes().to_vec();
    p.extend_from_slice(&[3, 4, 0]);
    p.extend_from_slice(&1234u64.to_le_bytes());
    p.extend_from_slice(&[1, b'a', 1, b'x', 1, 0, 1, b'b', 0, 2, 0, 1, b'c']);
    assert_eq!(r, framed(&p), "the encoder writes format.md's bytes");
    assert_eq!(payload_len(ops.iter().map(|op| (0, *op))), p.len());
    let mut got = Vec::new();
    crate::wal::replay_ops(&log_v3(&[r.clone()]), |op| got.push(op)).unwrap();
    assert_eq!(got, ops.map(|op| op.into_owned()));
    let dir = tempfile::tempdir().unwrap();
    let payload_at = (WAL_HEADER_LEN + RECORD_HEADER_LEN) as u64;
    // expires_at 0, then a record cut inside expires_at (the count says one op).
    let cut = [&5u64.to_le_bytes()[..], &[1, 4, 0, 9, 9, 9]].concat();
    for (i, (payload, at, what)) in [(p.clone(), 11usize, "time 0"), (cut, 11, "expires_at")]
        .into_iter()
        .enumerate()
    {
        let mut payload = payload;
        if i == 0 {
            payload[11..19].fill(0);
        }
        let path = dir.path().join(format!("{i:06}.wal"));
        std::fs::write(&path, log_v3(&[framed(&payload)])).unwrap();
        match replay_file(&path, |_, _| {}) {
            Err(e @ Error::Corruption { .. }) => {
                let shown = e.to_string();
                assert!(
                    shown.contains(what) && shown.contains(&format!("{i:06}.wal")),
                    "{shown}"
                );
                let Error::Corruption { offset, .. } = e else {
                    unreachable!()
                };
                assert_eq!(offset, payload_at + at as u64, "{what}");
            }
            other => panic!("{what}: {other:?}"),
        }
    }
}

/// Ops of keyspaces other than the default carry their ids (a varint, so an id of 128 or
/// more takes two bytes and more): the length bound counts them, and they decode back.
#[test]
fn ops_carry_their_keyspace_ids() {
    let ops = [
        (0, super::Op::Put(b"a", b"1")),
        (5, super::Op::Delete(b"b")),
        (300, super::Op::DeleteRange(b"c", b"d")),
        (70_000, super::Op::PutExpiring(b"e", b"2", 9)),
    ];
    let mut out = Vec::new();
    crate::wal::encode_record_in(&mut out, 1, ops.len(), ops.iter().copied()).unwrap();
    assert_eq!(
        payload_len(ops.iter().copied()),
        out.len() - RECORD_HEADER_LEN
    );
    let mut back = Vec::new();
    crate::wal::for_each_op_in(&out, |id, op| back.push((id, op))).unwrap();
    assert_eq!(back, ops);
    // Without a manifest, an id other than 0 is refused.
    assert!(
        for_each_op(&out, |_| {}).is_ok(),
        "the store's own records: any id"
    );
}
