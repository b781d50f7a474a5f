use super::file::{decode, encode};
use super::*;

fn t(s: &[u8], e: &[u8]) -> RangeTombstone {
    RangeTombstone {
        start: s.to_vec(),
        end: e.to_vec(),
    }
}

/// The cover gives, for every key, the smallest rank of the tombstones over it: checked
/// against a brute force over random tombstones of short keys.
#[test]
fn cover_agrees_with_brute_force() {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        x = crate::hash::mix64(x);
        x
    };
    for round in 0..300 {
        let n = 1 + (next() % 12) as usize;
        let mut ts = Vec::new();
        for _ in 0..n {
            let a = (next() % 30) as u8;
            let b = a + 1 + (next() % 10) as u8;
            ts.push((t(&[a], &[b]), (next() % 6) as u32));
        }
        if round % 7 == 0 {
            ts.push((t(&[3], &[3, 0]), 0));
        }
        let c = Cover::build(ts.iter().map(|(t, r)| (t, *r)));
        for k in 0..45u8 {
            for key in [vec![k], vec![k, 0], vec![k, 9]] {
                let want = ts
                    .iter()
                    .filter(|(t, _)| t.contains(&key))
                    .map(|(_, r)| *r)
                    .min();
                assert_eq!(c.rank_at(&key), want, "{key:?} in {ts:?}");
                for rank in 0..7 {
                    assert_eq!(c.hides(&key, rank), want.is_some_and(|w| w < rank));
                }
            }
        }
        for w in c.fragments().windows(2) {
            assert!(w[0].end <= w[1].start, "fragments overlap");
        }
    }
}

#[test]
fn prefix_end_is_past_every_key_with_the_prefix() {
    assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
    assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
    assert_eq!(prefix_end(b"\xff\xff"), None);
    assert_eq!(prefix_end(b""), None);
    assert!(key_space_end().as_slice() > vec![0xffu8; crate::MAX_KEY_LEN].as_slice());
}

/// The file round-trips, and every damage is an error naming an offset inside the file,
/// never a panic.
#[test]
fn tombstone_file_round_trips_and_refuses_damage() {
    let ts = vec![t(b"a", b"c"), t(b"b", b"zz"), t(b"q", &key_space_end())];
    let bytes = encode(&ts);
    assert_eq!(decode(&bytes).unwrap(), ts);
    assert_eq!(decode(&encode(&[])).unwrap(), vec![]);
    // Every single-byte change and every truncation is refused (the CRC covers everything).
    let small = encode(&ts[..2]);
    for i in 0..small.len() {
        for flip in [1u8, 0x80, 0xff] {
            let mut b = small.clone();
            b[i] ^= flip;
            let e = decode(&b).unwrap_err().to_string();
            assert!(e.contains("offset"), "{e}");
        }
    }
    for n in 0..small.len() {
        assert!(decode(&small[..n]).is_err());
    }
    // Hostile bodies with a good CRC: each refused with its offset.
    let seal = |body: &[u8]| {
        let mut b = b"FSRT\x01\0\0\0".to_vec();
        b.extend_from_slice(body);
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    };
    let cases: [(&[u8], &str); 5] = [
        (&[0xff, 0xff, 0xff, 0xff, 0x0f], "count"),
        (
            &[1, 1, b'b', 1, b'a'],
            "offset 9: range tombstone whose start",
        ),
        (
            &[2, 1, b'b', 1, b'c', 1, b'a', 1, b'c'],
            "offset 13: range tombstones out of order",
        ),
        (&[1, 5, b'a', 1, b'b'], "need 5 bytes"),
        (&[1, 1, b'a', 1, b'b', 0], "trailing"),
    ];
    for (body, want) in cases {
        let e = decode(&seal(body)).unwrap_err().to_string();
        assert!(e.contains(want), "{body:?}: {e}");
    }
    let mut v2 = encode(&ts);
    v2[4] = 2;
    assert!(matches!(
        decode(&v2),
        Err(crate::Error::Unsupported { offset: 4, .. })
    ));
}

/// `Cover::covers` says whether every key from `lo` to `hi` lies under a tombstone of a
/// lower rank: checked against `rank_at` over every short key (each gap and each fragment
/// of such tombstones starts at one of them), including the edges.
#[test]
fn covers_agrees_with_rank_at_over_every_key() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x = crate::hash::mix64(x);
        x
    };
    let samples: Vec<Vec<u8>> = (0..45u8)
        .flat_map(|k| [vec![k], vec![k, 0], vec![k, 9]])
        .collect();
    let (mut yes, mut no) = (0, 0);
    for _ in 0..300 {
        let n = 1 + (next() % 6) as usize;
        let ts: Vec<_> = (0..n)
            .map(|_| {
                let a = (next() % 30) as u8;
                (t(&[a], &[a + 1 + (next() % 12) as u8]), (next() % 4) as u32)
            })
            .collect();
        let c = Cover::build(ts.iter().map(|(t, r)| (t, *r)));
        for _ in 0..40 {
            let lo = &samples[(next() % samples.len() as u64) as usize];
            let hi = &samples[(next() % samples.len() as u64) as usize];
            if lo > hi {
                continue;
            }
            let rank = (next() % 5) as u32;
            let want = samples
                .iter()
                .filter(|k| *k >= lo && *k <= hi)
                .all(|k| c.rank_at(k).is_some_and(|r| r < rank));
            assert_eq!(
                c.covers(lo, hi, rank),
                want,
                "{lo:?}..={hi:?} < {rank} in {ts:?}"
            );
            if want {
                yes += 1;
            } else {
                no += 1;
            }
        }
    }
    assert!(yes > 100 && no > 100, "{yes} covered, {no} not");
}
