//! The `COUNTERS` file: the store's lifetime counters (format.md, "Lifetime counters").
//!
//! A small checksummed file, replaced atomically (written to `COUNTERS.tmp`, fsynced,
//! renamed, directory fsynced) at the end of every flush and when the store is closed. It holds the totals
//! since the store was created, up to that moment; a crash loses the counts since the last
//! flush or close. Nothing about the data depends on it: a missing file counts from zero,
//! and a damaged one is reported (in [`Stats::lifetime_problem`](crate::Stats) and by
//! `verify`) and replaced by the next write.

use std::path::Path;

use crate::codec::Cursor;
use crate::error::{Error, Result};
use crate::filename::FileName;
use crate::io::{replace_file, Fs};

/// Defines [`Lifetime`] from one list of counter names, each a field of
/// [`Stats`](crate::Stats) too: the struct, the sum of two, and the array form that this
/// file's format writes in this order.
macro_rules! lifetime_counters {
    ($($field:ident),* $(,)?) => {
        /// Counters summed over every process that has used the store (see
        /// [`Stats::lifetime`](crate::Stats::lifetime)); each field means what the
        /// [`Stats`](crate::Stats) field of the same name means. Saved in the store's
        /// `COUNTERS` file (`format.md`, "Lifetime counters").
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        #[non_exhaustive]
        #[allow(missing_docs)] // the fields are documented on `Stats`
        pub struct Lifetime {
            $(pub $field: u64,)*
        }

        impl Lifetime {
            /// How many counters there are.
            pub(crate) const COUNT: usize = [$(stringify!($field)),*].len();

            /// The field-by-field sum (saturating).
            pub(crate) fn plus(&self, o: &Lifetime) -> Lifetime {
                Lifetime { $($field: self.$field.saturating_add(o.$field),)* }
            }

            /// The counters in declaration order.
            pub(crate) fn to_array(self) -> [u64; Self::COUNT] {
                [$(self.$field),*]
            }

            /// The inverse of [`to_array`](Self::to_array).
            pub(crate) fn from_array(a: [u64; Self::COUNT]) -> Lifetime {
                let [$($field),*] = a;
                Lifetime { $($field),* }
            }
        }
    };
}

// The COUNTERS file stores these in this order: changing the list changes the file, which
// needs a new version in format.md (the fixture test fails until it has one).
lifetime_counters!(
    lookups,
    filter_negatives,
    filter_positives,
    false_positives,
    unfiltered_reads,
    data_block_reads,
    bytes_read,
    user_bytes_written,
    wal_bytes_written,
    flush_bytes_written,
    compaction_bytes_written,
    compaction_bytes_read,
    flushes,
    compactions,
    block_cache_hits,
    block_cache_misses,
    range_probes,
    range_skipped,
    range_false_positives,
);

const MAGIC: &[u8; 8] = b"FSCOUNTR";
/// The version written: 2 added the block cache's hits and misses, 3 the range filters'
/// probes, tables skipped and false positives.
const VERSION: u32 = 3;
/// Offsets of the header fields.
const OFF_VERSION: usize = 8;
const OFF_COUNT: usize = 12;
const OFF_VALUES: usize = 16;
/// Counters in a version-3 file: the fields of `Lifetime`, in declaration order.
const COUNT: usize = Lifetime::COUNT;
/// Counters in a version-1 file (still read): the first 14 fields of `Lifetime`; the rest
/// count from zero.
const COUNT_V1: usize = 14;
/// Counters in a version-2 file (still read): the first 16 fields; the range filters'
/// count from zero.
const COUNT_V2: usize = 16;

/// Length of a file of `count` counters: header, values, CRC.
const fn file_len(count: usize) -> usize {
    OFF_VALUES + 8 * count + 4
}

/// The file's bytes for `l`.
pub fn encode(l: &Lifetime) -> Vec<u8> {
    let mut out = Vec::with_capacity(file_len(COUNT));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(COUNT as u32).to_le_bytes());
    for v in l.to_array() {
        out.extend_from_slice(&v.to_le_bytes());
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes a `COUNTERS` file's bytes. Errors carry the offset of what is wrong (the caller
/// adds the file name).
pub fn decode(b: &[u8]) -> Result<Lifetime> {
    let mut c = Cursor::new(b, 0);
    if c.bytes(MAGIC.len(), "COUNTERS magic")? != MAGIC {
        return Err(Error::corrupt(0, "not a COUNTERS file (bad magic)"));
    }
    let version = c.u32("COUNTERS version")?;
    let want = match version {
        1 => COUNT_V1,
        2 => COUNT_V2,
        VERSION => COUNT,
        _ => {
            return Err(Error::corrupt(
                OFF_VERSION as u64,
                format!("unknown COUNTERS version {version} (this build reads 1 to {VERSION})"),
            ))
        }
    };
    let count = c.u32("counter count")?;
    if count as usize != want {
        return Err(Error::corrupt(
            OFF_COUNT as u64,
            format!("COUNTERS version {version} holds {want} counters, not {count}"),
        ));
    }
    let len = file_len(want);
    if b.len() != len {
        return Err(Error::corrupt(
            0,
            format!("COUNTERS is {} bytes, not {len}", b.len()),
        ));
    }
    let mut v = [0u64; COUNT];
    for x in v.iter_mut().take(want) {
        *x = c.u64("counter")?;
    }
    let stored = c.u32("COUNTERS CRC")?;
    let computed = crc32fast::hash(&b[..len - 4]);
    if stored != computed {
        return Err(Error::checksum(
            (len - 4) as u64,
            "COUNTERS",
            stored,
            computed,
        ));
    }
    Ok(Lifetime::from_array(v))
}

/// Reads the file of `dir`: `Ok(None)` when there is none.
pub(crate) fn load(dir: &Path) -> Result<Option<Lifetime>> {
    let path = FileName::Counters.path(dir);
    match std::fs::read(&path) {
        Ok(b) => decode(&b).map(Some).map_err(|e| e.in_file(&path, 0)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(&path, e)),
    }
}

/// Replaces the file of `dir` with `l` atomically (through `COUNTERS.tmp`, see
/// [`replace_file`]), so a crash after it returns keeps these counts.
pub(crate) fn store(fs: &dyn Fs, dir: &Path, l: &Lifetime) -> Result<()> {
    replace_file(
        fs,
        dir,
        FileName::CountersTmp,
        FileName::Counters,
        &encode(l),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Lifetime {
        Lifetime::from_array(std::array::from_fn(|i| (i as u64 + 1) * 1_000_003))
    }

    /// `tests/fixtures/counters-v3.bin` was written from format.md by an independent script
    /// (Python's struct and zlib.crc32) with counter i = (i + 1) × 1,000,003.
    #[test]
    fn fixture_decodes_and_today_encodes_it_byte_for_byte() {
        let b = include_bytes!("../tests/fixtures/counters-v3.bin");
        assert_eq!(b.len(), 172);
        let l = decode(b).unwrap();
        assert_eq!(l, sample());
        assert_eq!(l.lookups, 1_000_003);
        assert_eq!(l.compactions, 14 * 1_000_003);
        assert_eq!(l.block_cache_hits, 15 * 1_000_003);
        assert_eq!(l.block_cache_misses, 16 * 1_000_003);
        assert_eq!(l.range_probes, 17 * 1_000_003);
        assert_eq!(l.range_skipped, 18 * 1_000_003);
        assert_eq!(l.range_false_positives, 19 * 1_000_003);
        assert_eq!(encode(&l), b.to_vec());
    }

    /// Older versions (`tests/fixtures/counters-v1.bin` and `counters-v2.bin`, the same
    /// script's output for the 14 and 16 counters they held) are still read; the counters
    /// they lack are zero.
    #[test]
    fn older_fixtures_still_decode() {
        let v1 = include_bytes!("../tests/fixtures/counters-v1.bin");
        let v2 = include_bytes!("../tests/fixtures/counters-v2.bin");
        for (b, len, held) in [(&v1[..], 132, COUNT_V1), (&v2[..], 148, COUNT_V2)] {
            assert_eq!(b.len(), len);
            let l = decode(b).unwrap();
            let mut want = sample().to_array();
            want[held..].fill(0);
            assert_eq!(l, Lifetime::from_array(want));
            assert_eq!(l.compactions, 14 * 1_000_003);
            assert_eq!(l.range_probes, 0);
        }
        assert_eq!(decode(v1).unwrap().block_cache_hits, 0);
        assert_eq!(decode(v2).unwrap().block_cache_misses, 16 * 1_000_003);
    }

    #[test]
    fn round_trip() {
        let l = sample();
        let b = encode(&l);
        assert_eq!(b.len(), file_len(COUNT));
        assert_eq!(decode(&b).unwrap(), l);
    }

    #[test]
    fn every_truncation_and_bit_flip_is_an_error() {
        let v1 = include_bytes!("../tests/fixtures/counters-v1.bin").to_vec();
        let v2 = include_bytes!("../tests/fixtures/counters-v2.bin").to_vec();
        for b in [encode(&sample()), v1, v2] {
            for n in 0..b.len() {
                assert!(decode(&b[..n]).is_err(), "truncated to {n}");
            }
            for i in 0..b.len() * 8 {
                let mut d = b.clone();
                d[i / 8] ^= 1 << (i % 8);
                assert!(decode(&d).is_err(), "bit {i} flipped");
            }
            let mut long = b.clone();
            long.push(0);
            assert!(decode(&long).is_err());
        }
    }

    #[test]
    fn checksum_error_carries_both_values() {
        let mut b = encode(&sample());
        b[OFF_VALUES] ^= 1;
        match decode(&b) {
            Err(Error::Corruption {
                checksum: Some(c), ..
            }) => assert_ne!(c.stored, c.computed),
            other => panic!("{other:?}"),
        }
    }
}
