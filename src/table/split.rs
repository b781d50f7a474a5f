//! The split form of a data block: what an LZ4 block of codec 3 decompresses to. It holds
//! the same entries as the block (see [`super::block`]) with their lengths taken out of the
//! key and value bytes, so that LZ4, which has no entropy coder, finds the lengths repeated
//! and leaves only the keys' and values' own bytes as literals.
//!
//! ```text
//! | n varint | plen varint | prefix (plen bytes) | lens_len varint |
//! | suffix_len varint | vtag varint |  × n, lens_len bytes in all
//! | suffix 0 | value 0 | suffix 1 | value 1 | ... |
//!   key i = prefix ‖ suffix i; vtag 0 = tombstone, vtag v > 0 = a value of v − 1 bytes
//! ```
//! `prefix` is the prefix all the block's keys share (that of its first and last key). The
//! block is rebuilt from it exactly as the table writer made it: every entry shares with its
//! predecessor the longest common prefix of their keys, except every
//! [`RESTART_INTERVAL`](super::block::RESTART_INTERVAL)th, which is a restart point. A
//! point lookup reads the split form while it is being decoded ([`get_decoding`]) and stops
//! at its key.

use std::cmp::Ordering;

use super::block::{
    self, common_prefix, lcp_cmp, put_restarts, varint, varint_len, RESTART_INTERVAL,
};
use super::lz4::{Lz4Prefix, MAX_BLOCK_LEN};
use crate::codec::{put_varint, Cursor};
use crate::error::{Error, Result};

/// What [`split`] does with each entry (its whole key and its value) in one pass.
type EntryFn<'a> = dyn FnMut(&[u8], Option<&[u8]>) + 'a;

/// Appends the split form of `blk` (a whole block as [`block::BlockBuilder`] and the table
/// writer make it: entries, restart array, count) to `out`; returns `false` (and leaves
/// `out` as it may be) when `blk` does not decode, which a block just written always does.
pub fn split(blk: &[u8], out: &mut Vec<u8>) -> bool {
    let Ok(b) = block::Block::new(blk, 0) else {
        return false;
    };
    let entries = &blk[..b.entries_len()];
    // Two passes over the entries, each rebuilding the keys: lengths, then bytes.
    let mut key = Vec::new();
    let mut walk = |f: &mut EntryFn| -> bool {
        let (mut pos, mut prev_len) = (0usize, 0usize);
        key.clear();
        while pos < entries.len() {
            let Ok(s) = block::span_at(entries, 0, pos, prev_len) else {
                return false;
            };
            key.truncate(s.shared);
            key.extend_from_slice(&entries[s.suffix]);
            f(&key, s.value.map(|v| &entries[v]));
            prev_len = key.len();
            pos = s.end;
        }
        true
    };
    let (mut n, mut first, mut last) = (0usize, Vec::new(), Vec::new());
    if !walk(&mut |k, _| {
        if n == 0 {
            first = k.to_vec();
        }
        n += 1;
        last.clear();
        last.extend_from_slice(k);
    }) {
        return false;
    }
    let plen = common_prefix(&first, &last);
    put_varint(out, n as u64);
    put_varint(out, plen as u64);
    out.extend_from_slice(&first[..plen]);
    let mut lens = Vec::with_capacity(2 * n);
    // Every key of a sorted block starts with `prefix`; an unsorted one may not be split.
    let mut prefixed = true;
    walk(&mut |k, v| {
        prefixed &= k.get(..plen) == first.get(..plen);
        put_varint(&mut lens, k.len().saturating_sub(plen) as u64);
        put_varint(&mut lens, v.map_or(0, |v| v.len() as u64 + 1));
    });
    if !prefixed {
        return false;
    }
    put_varint(out, lens.len() as u64);
    out.extend_from_slice(&lens);
    walk(&mut |k, v| {
        out.extend_from_slice(k.get(plen..).unwrap_or_default());
        out.extend_from_slice(v.unwrap_or_default());
    })
}

/// The header of a split block: where its parts start.
struct Header {
    n: usize,
    prefix: std::ops::Range<usize>,
    /// Offsets of the lengths and of the bytes.
    lens: usize,
    body: usize,
}

/// An entry's two lengths at `*at` of `bytes` (advanced past them): its suffix's length
/// and its value tag.
#[inline]
fn lens(bytes: &[u8], at: &mut usize) -> Option<(usize, usize)> {
    if let Some(&[s, t]) = bytes.get(*at..at.saturating_add(2)) {
        if (s | t) < 0x80 {
            *at += 2;
            return Some((s as usize, t as usize));
        }
    }
    Some((varint(bytes, at)?, varint(bytes, at)?))
}

/// The header of the split block `bytes`, or `None` when `bytes` ends before it does (or a
/// length in it is no varint): no answer for a prefix that is too short, and the error of
/// [`unsplit`] for a whole block.
fn header(bytes: &[u8]) -> Option<Header> {
    let mut at = 0;
    let n = varint(bytes, &mut at)?;
    let plen = varint(bytes, &mut at)?;
    let prefix = at..at.checked_add(plen)?;
    at = prefix.end;
    let lens_len = varint(bytes, &mut at)?;
    Some(Header {
        n,
        prefix,
        lens: at,
        body: at.checked_add(lens_len)?,
    })
}

/// Most bytes the block rebuilt from a split form of `split_len` bytes may take: a page
/// ([`PAGE_SIZE`](super::PAGE_SIZE); a block of more than one entry is at most that), or 64
/// bytes more than the form (a block of one entry is a few bytes longer than its split
/// form), and at most [`MAX_BLOCK_LEN`]. The bound stops a crafted form whose long prefix,
/// repeated at every restart point, would take space quadratic in its length.
pub fn rebuilt_bound(split_len: usize) -> usize {
    // The writer's own blocks must rebuild within the bound: it cuts a block of more than
    // one entry at a page at most (format.md, "Pages"). A larger block size for the writer
    // needs a larger bound here (and in format.md) first.
    const _: () = assert!(super::BLOCK_SIZE <= super::PAGE_SIZE);
    const _: () = assert!(super::RAW_BLOCK_SIZE <= super::PAGE_SIZE);
    split_len
        .saturating_add(64)
        .clamp(super::PAGE_SIZE, MAX_BLOCK_LEN)
}

/// Rebuilds into `out` (cleared) the block whose split form is `bytes`, whose decompressed
/// bytes start at file offset `base` (errors name `base` plus the offset in `bytes`). The
/// block is refused when its lengths do not account for exactly its bytes, or when it
/// would take more than [`rebuilt_bound`] bytes.
pub fn unsplit(bytes: &[u8], base: u64, out: &mut Vec<u8>) -> Result<()> {
    let bad =
        |at: usize, what: &str| Error::corrupt(base + at as u64, format!("split block: {what}"));
    let mut c = Cursor::new(bytes, base);
    // Each entry takes at least two bytes of lengths.
    let n = c.len(bytes.len() / 2, "entry count")?;
    let plen = c.len(c.remaining(), "prefix length")?;
    c.bytes(plen, "prefix")?;
    let lens_len = c.len(c.remaining(), "lengths' length")?;
    // The same header as the lookup reads it (`c` checked its lengths and named the fault).
    let Some((h, lengths)) = header(bytes)
        .filter(|h| (h.n, h.prefix.len(), h.body - h.lens) == (n, plen, lens_len))
        .and_then(|h| bytes.get(..h.body).map(|lengths| (h, lengths)))
    else {
        return Err(bad(0, "its header does not decode"));
    };
    let limit = rebuilt_bound(bytes.len());
    out.clear();
    // The rebuilt block: the bytes, three lengths per entry, the prefix at each restart
    // point, the restart array. Nothing is written past `limit`: each entry, and the
    // restart array, is refused before it would cross it, so `out` never grows past it.
    let restarts_n = n.div_ceil(RESTART_INTERVAL);
    out.reserve_exact(limit);
    let (mut la, mut pos) = (h.lens, h.body);
    let prefix = &bytes[h.prefix.clone()];
    let mut prev: &[u8] = &[];
    let mut restarts = Vec::with_capacity(restarts_n);
    for i in 0..n {
        let at_len = la;
        let Some((slen, tag)) = lens(lengths, &mut la) else {
            return Err(bad(at_len, "entry lengths do not decode"));
        };
        let vlen = tag.saturating_sub(1);
        let end = pos
            .checked_add(slen)
            .and_then(|k| k.checked_add(vlen).map(|e| (k, e)));
        let Some((kend, end)) = end.filter(|&(_, e)| e <= bytes.len()) else {
            return Err(bad(at_len, "an entry runs past the block's end"));
        };
        let suffix = &bytes[pos..kend];
        let restart = i % RESTART_INTERVAL == 0;
        let (shared, unshared) = if restart {
            restarts.push(out.len() as u32);
            (0, plen + slen)
        } else {
            let cp = common_prefix(suffix, prev);
            (plen + cp, slen - cp)
        };
        let size = varint_len(shared) + varint_len(unshared) + varint_len(tag) + unshared + vlen;
        if out.len() + size > limit {
            return Err(bad(pos, "the block it rebuilds is too long"));
        }
        if (shared | unshared | tag) < 0x80 {
            out.extend_from_slice(&[shared as u8, unshared as u8, tag as u8]);
        } else {
            put_varint(out, shared as u64);
            put_varint(out, unshared as u64);
            put_varint(out, tag as u64);
        }
        if restart {
            out.extend_from_slice(prefix);
        }
        // The key's unshared bytes, then the value: one run of `bytes`.
        out.extend_from_slice(&bytes[kend - (unshared - restart as usize * plen)..end]);
        prev = suffix;
        pos = end;
    }
    if la != h.body {
        return Err(bad(la, "lengths left after the last entry"));
    }
    if pos != bytes.len() {
        return Err(bad(pos, "bytes left after the last entry"));
    }
    if out.len() + 4 * restarts.len() + 4 > limit {
        return Err(bad(pos, "the block it rebuilds is too long"));
    }
    put_restarts(out, &restarts);
    Ok(())
}

/// Looks `key` up in a split block while `dec` decodes it into `out` (its `raw_len` bytes):
/// the header first, then the entries' bytes only as far as the entry looked for (or the
/// first one past it). `Some` answer as [`block::Block::get`] gives it on the rebuilt block
/// of a sorted block; `None` when this scan cannot read the block (bytes no writer makes):
/// the caller then decodes the rest and rebuilds it, which names the damage.
pub fn get_decoding(
    dec: &mut Lz4Prefix<'_>,
    out: &mut [u8],
    key: &[u8],
) -> Result<Option<Option<Option<Vec<u8>>>>> {
    let h = loop {
        if let Some(h) = header(&out[..dec.decoded()]) {
            break h;
        }
        if dec.decoded() == out.len() {
            return Ok(None);
        }
        let upto = (dec.decoded() * 2).max(64);
        dec.fill(out, upto)?;
    };
    let Some(rest) = key.strip_prefix(&out[h.prefix.clone()]) else {
        // Every key of the block starts with the prefix: `key` is not one of them.
        return Ok(Some(None));
    };
    let (mut la, mut pos) = (h.lens, h.body);
    for _ in 0..h.n {
        if la + 20 > dec.decoded() && la < h.body {
            dec.fill(out, h.body.min(la + 20))?;
        }
        let Some((slen, tag)) = lens(&out[..h.body.min(dec.decoded())], &mut la) else {
            return Ok(None);
        };
        let kend = pos.checked_add(slen);
        let end = kend.and_then(|k| k.checked_add(tag.saturating_sub(1)));
        let (Some(kend), Some(end)) = (kend, end) else {
            return Ok(None);
        };
        if end > out.len() {
            return Ok(None);
        }
        if kend > dec.decoded() {
            dec.fill(out, kend)?;
        }
        match lcp_cmp(&out[pos..kend], rest).1 {
            Ordering::Less => {}
            Ordering::Equal => {
                if tag == 0 {
                    return Ok(Some(Some(None)));
                }
                if end > dec.decoded() {
                    dec.fill(out, end)?;
                }
                return Ok(Some(Some(Some(out[kend..end].to_vec()))));
            }
            Ordering::Greater => return Ok(Some(None)),
        }
        pos = end;
    }
    Ok(Some(None))
}

#[cfg(test)]
mod tests {
    use super::super::block::tests::{adversarial_key_sets, probes};
    use super::super::block::{put_entry, Block, BlockBuilder};
    use super::*;

    /// Blocks of the adversarial key sets, as the writer makes them (values of one- and
    /// two-byte lengths, tombstones, repetitive bytes).
    fn blocks() -> Vec<(Vec<Vec<u8>>, Vec<u8>)> {
        let mut out = Vec::new();
        for set in adversarial_key_sets() {
            for chunk in [1usize, 16, 17, 40, 200] {
                for keys in set.chunks(chunk).take(5) {
                    let mut b = BlockBuilder::default();
                    for (i, k) in keys.iter().enumerate() {
                        let v = vec![b'v'; if i % 11 == 4 { 200 } else { 20 + i % 30 }];
                        b.add(k, (i % 5 != 3).then_some(v.as_slice()));
                    }
                    let raw = b.finish();
                    // As the writer makes them: a page at most, unless of one entry.
                    if raw.len() <= crate::table::PAGE_SIZE || keys.len() == 1 {
                        out.push((keys.to_vec(), raw));
                    }
                }
            }
        }
        out
    }

    /// Splitting a block and rebuilding it gives back its bytes exactly.
    #[test]
    fn unsplit_rebuilds_the_block_exactly() {
        let mut n = 0;
        for (_, raw) in blocks() {
            let mut s = Vec::new();
            assert!(split(&raw, &mut s));
            let mut back = vec![9u8; 3];
            unsplit(&s, 0, &mut back).unwrap();
            assert_eq!(back, raw);
            n += 1;
        }
        assert!(n > 100, "{n}");
    }

    /// A block whose keys are out of order (no writer makes one) is not split when a key
    /// lacks the prefix of its first and last: rebuilding would change the key.
    #[test]
    fn an_unsorted_block_is_not_split() {
        let mut raw = Vec::new();
        put_entry(&mut raw, 0, b"ab", Some(b"1"));
        put_entry(&mut raw, 0, b"b", Some(b"2"));
        put_entry(&mut raw, 0, b"ac", Some(b"3"));
        put_restarts(&mut raw, &[0]);
        let mut s = Vec::new();
        assert!(!split(&raw, &mut s));
    }

    /// Random 16-byte keys and half-repeated values: the lengths cost LZ4 almost nothing,
    /// so the split form compresses to fewer bytes than the block.
    #[test]
    fn the_split_form_compresses_better() {
        let mut rng = super::super::block::tests::Rng(3);
        let mut keys: Vec<Vec<u8>> = (0..35)
            .map(|_| [rng.next().to_be_bytes(), rng.next().to_be_bytes()].concat())
            .collect();
        keys.sort();
        let mut b = BlockBuilder::default();
        for k in &keys {
            let mut v: Vec<u8> = (0..50).map(|_| b' ' + (rng.below(95) as u8)).collect();
            v.extend_from_within(..);
            b.add(k, Some(&v));
        }
        let raw = b.finish();
        let mut s = Vec::new();
        assert!(split(&raw, &mut s));
        let (whole, parts) = (
            lz4_flex::block::compress(&raw).len(),
            lz4_flex::block::compress(&s).len(),
        );
        // Three length bytes per entry leave the literals, a column costs a few bytes.
        assert!(parts + 35 * 2 < whole, "{parts} vs {whole}");
    }

    /// A lookup in the split form while it is decoded answers as `Block::get` does on the
    /// block, and stops early: a block's first key needs only its first entry.
    #[test]
    fn get_decoding_agrees_with_get_and_stops_early() {
        let (mut decided, mut early) = (0, 0);
        for (keys, raw) in blocks() {
            let block = Block::new(&raw, 0).unwrap();
            let mut s = Vec::new();
            assert!(split(&raw, &mut s));
            let mut payload = (s.len() as u32).to_le_bytes().to_vec();
            payload.extend(lz4_flex::block::compress(&s));
            for p in probes(&keys) {
                if keys.last().is_some_and(|last| &p > last) {
                    continue; // the index sends such keys to the next block
                }
                let (mut dec, len) = Lz4Prefix::new(&payload, 0).unwrap();
                let mut out = vec![0u8; len];
                let got = get_decoding(&mut dec, &mut out, &p).unwrap();
                assert_eq!(got, Some(block.get(&p).unwrap()), "probe {p:?}");
                decided += 1;
                if keys.first() == Some(&p) && len > 1000 {
                    assert!(dec.decoded() < len / 4, "{} of {len}", dec.decoded());
                    early += 1;
                }
            }
        }
        assert!(decided > 10_000 && early > 10, "{decided} {early}");
    }

    /// The codec-3 payload of the split form `s`, as the table writer stores it (payload,
    /// then the codec byte).
    fn stored(s: &[u8]) -> Vec<u8> {
        let mut p = (s.len() as u32).to_le_bytes().to_vec();
        p.extend(lz4_flex::block::compress(s));
        p.push(super::super::compress::CODEC_LZ4_SPLIT);
        p
    }

    use proptest::strategy::Strategy;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]

        /// Blocks as the writer makes them from keys under a common prefix of 0 to 300
        /// bytes (tails over a small alphabet, some longer than 127 bytes; the key that is
        /// the prefix itself, the empty key among them), with empty, short and long values
        /// and tombstones: the split
        /// form rebuilds the block byte for byte, `decode` of its codec-3 payload returns
        /// it, and a lookup while decoding answers as `Block::get` for every key and its
        /// neighbours.
        #[test]
        fn split_forms_rebuild_and_answer_as_the_block(
            plen in proptest::prop_oneof![proptest::strategy::Just(0usize), 1usize..20, 120usize..300],
            pbyte in proptest::prelude::any::<u8>(),
            tails in proptest::collection::btree_map(
                (
                    proptest::collection::vec(proptest::prop_oneof![
                        proptest::strategy::Just(0u8),
                        proptest::strategy::Just(0xffu8),
                        proptest::prelude::any::<u8>(),
                    ], 0..6),
                    proptest::prop_oneof![
                        3 => proptest::strategy::Just(0usize),
                        1 => 126usize..140,
                    ],
                ).prop_map(|(mut t, pad)| {
                    // Now and then a suffix of more than 127 bytes (two-byte lengths),
                    // whose neighbours share most of it but not the block's prefix.
                    if pad > 0 && !t.is_empty() {
                        t.splice(1..1, std::iter::repeat_n(b'x', pad));
                    }
                    t
                }),
                proptest::option::weighted(0.8, proptest::prop_oneof![
                    proptest::strategy::Just(0usize), 1usize..10, 126usize..130, 300usize..400,
                ]),
                1..80,
            ),
        ) {
            let prefix = vec![pbyte; plen];
            let entries: Vec<(Vec<u8>, Option<Vec<u8>>)> = tails
                .iter()
                .enumerate()
                .map(|(i, (t, v))| ([&prefix[..], t].concat(), v.map(|n| vec![i as u8; n])))
                .collect();
            // As the writer cuts blocks: at most a page, unless of one entry.
            let mut m = entries.len();
            let raw = loop {
                let mut b = BlockBuilder::default();
                for (k, v) in &entries[..m] {
                    b.add(k, v.as_deref());
                }
                let raw = b.finish();
                if raw.len() <= crate::table::PAGE_SIZE || m == 1 {
                    break raw;
                }
                m -= 1;
            };
            let entries = &entries[..m];
            let block = Block::new(&raw, 0).unwrap();
            let mut s = Vec::new();
            proptest::prop_assert!(split(&raw, &mut s));
            let mut back = Vec::new();
            unsplit(&s, 0, &mut back).unwrap();
            proptest::prop_assert_eq!(&back, &raw);
            let mut buf = Vec::new();
            let st = stored(&s);
            let decoded = super::super::compress::decode(&st, 0, &mut buf).unwrap();
            proptest::prop_assert_eq!(decoded, &raw[..]);
            let keys: Vec<Vec<u8>> = entries.iter().map(|e| e.0.clone()).collect();
            let mut payload = (s.len() as u32).to_le_bytes().to_vec();
            payload.extend(lz4_flex::block::compress(&s));
            let mut ps = probes(&keys);
            ps.push(prefix.clone());
            ps.push(prefix[..plen / 2].to_vec());
            for p in ps {
                if keys.last().is_some_and(|last| &p > last) {
                    continue; // the index sends such keys to the next block
                }
                let (mut dec, len) = Lz4Prefix::new(&payload, 0).unwrap();
                let mut out = vec![0u8; len];
                let got = get_decoding(&mut dec, &mut out, &p).unwrap();
                let want = entries.iter().find(|e| e.0 == p).map(|e| e.1.clone());
                proptest::prop_assert_eq!(&block.get(&p).unwrap(), &want);
                proptest::prop_assert_eq!(got, Some(want), "probe {:?}", p);
            }
        }
    }

    /// Every truncation and every single-byte change of a split form is refused with an
    /// error inside it, or rebuilds a block; never a panic, never a block past the bound.
    #[test]
    fn damage_is_an_error_at_an_offset_inside() {
        let (keys, raw) = blocks()
            .into_iter()
            .find(|(k, _)| k.len() == 40 && k[0].len() == 16)
            .unwrap();
        assert!(keys.len() > 1);
        let mut s = Vec::new();
        assert!(split(&raw, &mut s));
        let mut out = Vec::new();
        let check = |b: &[u8], out: &mut Vec<u8>| match unsplit(b, 1000, out) {
            Ok(()) => assert!(out.len() <= rebuilt_bound(b.len())),
            Err(Error::Corruption { offset, .. }) => {
                assert!((1000..=1000 + b.len() as u64).contains(&offset), "{offset}")
            }
            Err(e) => panic!("{e:?}"),
        };
        for cut in 0..s.len() {
            check(&s[..cut], &mut out);
            assert!(unsplit(&s[..cut], 1000, &mut out).is_err(), "cut at {cut}");
        }
        for i in 0..s.len() {
            for x in [1u8, 0x80, 0xff] {
                let mut d = s.clone();
                d[i] ^= x;
                check(&d, &mut out);
            }
        }
        // A prefix repeated at every restart point may not blow the block up: 2,000
        // entries of empty suffixes and values under a 3,000-byte prefix.
        let mut big = Vec::new();
        put_varint(&mut big, 2000);
        put_varint(&mut big, 3000);
        big.extend(std::iter::repeat_n(b'p', 3000));
        put_varint(&mut big, 4000);
        big.extend([0u8, 1].repeat(2000));
        match unsplit(&big, 0, &mut out) {
            Err(Error::Corruption { reason, .. }) => assert!(reason.contains("too long")),
            other => panic!("{other:?}"),
        }
        assert!(out.capacity() <= rebuilt_bound(big.len()));
    }
}
