//! Expiry (time to live) and compaction filters: the clock reads judge expiry by, the
//! per-keyspace [`CompactionFilter`] the compaction merge calls, and the tagged value layout
//! that version 5 tables store expiring entries in (format.md, "Table").
//!
//! An entry written with a time to live carries `expires_at`, Unix time in milliseconds
//! (0: it never expires). It is **expired** once the clock reads `expires_at` or later; an
//! expired entry reads as a tombstone (it hides older versions of its key, as the delete it
//! stands for would), and compaction turns it into one (or drops it at the bottom level).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};

/// Where the store reads the time from, in Unix milliseconds (see [`Options::clock`]).
///
/// [`Options::clock`]: crate::Options::clock
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Milliseconds since the Unix epoch.
    fn now_millis(&self) -> u64;
}

/// The system's real-time clock (the default).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_millis(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }
}

/// A clock that moves only when told to (tests, benchmarks, simulations). Clones share it.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock standing at `millis` (Unix milliseconds).
    pub fn new(millis: u64) -> ManualClock {
        ManualClock(Arc::new(AtomicU64::new(millis)))
    }
    /// Moves the clock on by `d`.
    pub fn advance(&self, d: Duration) {
        self.0.fetch_add(d.as_millis() as u64, Relaxed);
    }
    /// Sets the clock to `millis`.
    pub fn set(&self, millis: u64) {
        self.0.store(millis, Relaxed);
    }
}

impl Clock for ManualClock {
    fn now_millis(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// The time a read judges expiry by: fixed (a snapshot's creation time, a scan's start, a
/// compaction's), or read from the clock the first time an expiring entry asks, so that a
/// read that meets none never reads the clock.
pub(crate) struct Now<'a> {
    clock: &'a dyn Clock,
    at: OnceLock<u64>,
}

impl<'a> Now<'a> {
    /// The clock's time, read when first needed.
    pub(crate) fn lazy(clock: &'a dyn Clock) -> Now<'a> {
        Now {
            clock,
            at: OnceLock::new(),
        }
    }
    /// A fixed time.
    pub(crate) fn fixed(millis: u64) -> Now<'static> {
        let at = OnceLock::new();
        let _ = at.set(millis);
        Now {
            clock: &SystemClock,
            at,
        }
    }
    /// The time, in Unix milliseconds.
    pub(crate) fn millis(&self) -> u64 {
        *self.at.get_or_init(|| self.clock.now_millis())
    }
    /// Whether an entry expiring at `expires_at` (0: never) is expired.
    #[inline]
    pub(crate) fn expired(&self, expires_at: u64) -> bool {
        expires_at != 0 && expires_at <= self.millis()
    }
}

/// Whether an entry expiring at `expires_at` (0: never) is expired at `now`.
#[inline]
pub(crate) fn expired_at(expires_at: u64, now: u64) -> bool {
    expires_at != 0 && expires_at <= now
}

/// `expires_at` of a write made at `now` with a time to live of `ttl` (at least 1 ms
/// after `now`, so a put is never expired by the time it is written; never 0).
pub(crate) fn expires_at(now: u64, ttl: Duration) -> u64 {
    let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
    now.saturating_add(ms).max(1)
}

/// A table's expiry facts (its meta's, format.md "Table", version 5), for planning.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Expiring {
    /// Key and value bytes of the entries with an expiry.
    pub bytes: u64,
    /// The earliest and the latest `expires_at` among them (0, 0: none).
    pub earliest: u64,
    pub latest: u64,
}

impl Expiring {
    /// Whether an entry of the table has expired by `now` (surely, not an estimate).
    pub(crate) fn any_expired(&self, now: u64) -> bool {
        expired_at(self.earliest, now)
    }

    /// An estimate of the bytes expired by `now`: the expiring bytes, times the share of the
    /// span from the earliest to the latest expiry that `now` has passed (expiries taken as
    /// spread evenly over it); 0 before the earliest, all of them from the latest on.
    pub(crate) fn expired_bytes(&self, now: u64) -> u64 {
        if !self.any_expired(now) {
            return 0;
        }
        if now >= self.latest {
            return self.bytes;
        }
        let span = (self.latest - self.earliest).max(1) as f64;
        let passed = (now - self.earliest) as f64;
        (self.bytes as f64 * (passed / span)) as u64
    }
}

/// What a [`CompactionFilter`] decides about one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decision {
    /// Write the entry as it is.
    Keep,
    /// Remove it: a tombstone in its place (nothing at the bottom level, where no older
    /// version can lie under it).
    Remove,
    /// Write this value instead (the entry's expiry, if any, is kept).
    Change(Vec<u8>),
}

/// Called by compaction for every value it writes (RocksDB's and fjall's compaction
/// filter). It must be deterministic enough that it does not matter *when* an entry is
/// compacted: an entry it removes may still be read until a compaction reaches it (flushes
/// do not call it), and one it keeps may be shown to it again by every later compaction.
/// Its [`name`](Self::name) is what a keyspace created with it records
/// ([`Options::register_compaction_filter`](crate::Options::register_compaction_filter)):
/// the store then opens only with a filter of that name registered. The default keyspace's
/// ([`Options::compaction_filter`](crate::Options::compaction_filter)) is not recorded
/// (`docs/engine.md`, "Expiry and compaction filters").
pub trait CompactionFilter: Send + Sync + std::fmt::Debug {
    /// Its name: 1 to 255 bytes, unique among the filters an [`Options`](crate::Options)
    /// registers, and the same at every open for a keyspace that records it.
    fn name(&self) -> &str;
    /// Decides about the value `value` of `key`, being written into level `level`.
    fn filter(&self, level: usize, key: &[u8], value: &[u8]) -> Decision;
}

/// Tags that start every value's payload in a version 5 table (format.md, "Table").
pub(crate) const TAG_PLAIN: u8 = 0;
/// The payload's tag when an 8-byte `expires_at` follows it.
pub(crate) const TAG_EXPIRING: u8 = 1;

/// Appends a version 5 payload for `value` expiring at `expires_at` (0: never).
#[inline]
pub(crate) fn put_tagged(out: &mut Vec<u8>, value: &[u8], expires_at: u64) {
    if expires_at == 0 {
        out.push(TAG_PLAIN);
    } else {
        out.push(TAG_EXPIRING);
        out.extend_from_slice(&expires_at.to_le_bytes());
    }
    out.extend_from_slice(value);
}

/// Bytes [`put_tagged`] adds to the value.
#[inline]
pub(crate) fn tag_len(expires_at: u64) -> usize {
    if expires_at == 0 {
        1
    } else {
        9
    }
}

/// Splits a version 5 payload into `(value, expires_at)`; an error at `at` (the payload's
/// offset in its block, for the caller to name the file) when it does not decode.
#[inline]
pub(crate) fn split_tagged(payload: &[u8], at: u64) -> Result<(&[u8], u64)> {
    match payload.split_first() {
        Some((&TAG_PLAIN, v)) => Ok((v, 0)),
        Some((&TAG_EXPIRING, rest)) if rest.len() >= 8 => {
            let (e, v) = rest.split_at(8);
            let exp = u64::from_le_bytes(e.try_into().unwrap_or_default());
            if exp == 0 {
                return Err(Error::corrupt(at, "expiring value with expires_at 0"));
            }
            Ok((v, exp))
        }
        Some((&TAG_EXPIRING, _)) => {
            Err(Error::corrupt(at, "expiring value shorter than its expiry"))
        }
        Some((&t, _)) => Err(Error::corrupt(at, format!("unknown value tag {t}"))),
        None => Err(Error::corrupt(at, "value without its tag")),
    }
}

/// [`split_tagged`] of a payload already checked (by the reader that handed it out): a
/// damaged one reads as an unexpiring value of no bytes.
#[inline]
pub(crate) fn split_checked(payload: &[u8]) -> (&[u8], u64) {
    split_tagged(payload, 0).unwrap_or((&[], 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tagged_payloads_round_trip_and_refuse_damage() {
        for (v, e) in [(&b""[..], 0), (b"abc", 0), (b"", 7), (b"xyz", u64::MAX)] {
            let mut out = Vec::new();
            put_tagged(&mut out, v, e);
            assert_eq!(out.len(), v.len() + tag_len(e));
            assert_eq!(split_tagged(&out, 0).unwrap(), (v, e));
        }
        assert!(split_tagged(&[], 5).unwrap_err().to_string().contains("5"));
        assert!(split_tagged(&[2, 0], 0).is_err());
        assert!(split_tagged(&[1, 0, 0], 0).is_err());
        assert!(split_tagged(&[1, 0, 0, 0, 0, 0, 0, 0, 0], 0).is_err());
    }

    #[test]
    fn now_reads_the_clock_once_and_judges_expiry() {
        let c = ManualClock::new(100);
        let now = Now::lazy(&c);
        assert!(!now.expired(0));
        assert!(now.expired(100));
        assert!(!now.expired(101));
        c.advance(Duration::from_millis(50));
        assert!(!now.expired(101), "the time is read once");
        assert!(Now::lazy(&c).expired(150));
        assert_eq!(expires_at(10, Duration::ZERO), 11);
    }
}
