//! Store property 1 (and a keyspace record's policy): the filter policy, `| kind u8 |
//! allocation u8 | value f64 |` (see `format.md`).

use super::MAX_BITS_PER_KEY;
use crate::codec::Cursor;
use crate::error::{Error, Result};
use crate::filter::alloc::FilterPolicy;
use crate::filter::FilterKind;

/// `allocation` byte of the filter policy: every table at the rate `value`.
const ALLOC_UNIFORM: u8 = 0;
/// `allocation` byte of the filter policy: Monkey's split of `value` bits per key.
const ALLOC_MONKEY: u8 = 1;
pub(super) fn encode_policy(p: &FilterPolicy) -> Vec<u8> {
    let (allocation, value) = match *p {
        FilterPolicy::Uniform { fpr, .. } => (ALLOC_UNIFORM, fpr),
        FilterPolicy::Budget { bits_per_key, .. } => (ALLOC_MONKEY, bits_per_key),
    };
    let mut b = vec![p.kind().tag(), allocation];
    b.extend_from_slice(&value.to_le_bytes());
    b
}

pub(super) fn decode_policy(mut c: Cursor) -> Result<FilterPolicy> {
    let at = c.offset();
    let t = c.u8("filter kind")?;
    let kind = FilterKind::from_tag(t)
        .ok_or_else(|| Error::corrupt(at, format!("unknown filter kind tag {t}")))?;
    let at = c.offset();
    let allocation = c.u8("allocation")?;
    let value_at = c.offset();
    let value = c.f64("filter policy value")?;
    if !c.is_empty() {
        return Err(c.err("trailing bytes in the filter policy"));
    }
    match allocation {
        ALLOC_UNIFORM if value > 0.0 && value < 1.0 => {
            Ok(FilterPolicy::Uniform { kind, fpr: value })
        }
        ALLOC_UNIFORM => Err(Error::corrupt(
            value_at,
            format!("uniform rate {value} not strictly between 0 and 1"),
        )),
        ALLOC_MONKEY if (0.0..=MAX_BITS_PER_KEY).contains(&value) => Ok(FilterPolicy::Budget {
            kind,
            bits_per_key: value,
        }),
        ALLOC_MONKEY => Err(Error::corrupt(
            value_at,
            format!("budget of {value} bits per key (0 to {MAX_BITS_PER_KEY})"),
        )),
        a => Err(Error::corrupt(at, format!("unknown allocation {a}"))),
    }
}
