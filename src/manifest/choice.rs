//! Store property 4, the allocation choice (format.md, "Allocation choice"): present when
//! the store chooses its filter allocation by itself (a new store created without a policy),
//! it records what the last decision saw and predicted; the policy (store property 1) holds
//! what it chose.
//!
//! ```text
//! | l0_tables u32 | deeper_levels u8 | measured u8 | uniform f64 | monkey f64 |   22 bytes
//! ```

use crate::codec::Cursor;
use crate::error::{Error, Result};
use crate::filter::choice::AllocationChoice;

/// Store property tag of the allocation choice.
pub(super) const PROP_ALLOCATION_CHOICE: u64 = 4;

pub(super) fn encode(c: &AllocationChoice) -> Vec<u8> {
    let mut b = Vec::with_capacity(22);
    b.extend_from_slice(&c.l0_tables.to_le_bytes());
    b.push(c.deeper_levels);
    b.push(u8::from(c.measured));
    b.extend_from_slice(&c.uniform.to_le_bytes());
    b.extend_from_slice(&c.monkey.to_le_bytes());
    b
}

pub(super) fn decode(mut c: Cursor) -> Result<AllocationChoice> {
    let l0_tables = c.u32("allocation choice L0 tables")?;
    let deeper_levels = c.u8("allocation choice deeper levels")?;
    let at = c.offset();
    let measured = match c.u8("allocation choice reach")? {
        0 => false,
        1 => true,
        m => {
            return Err(Error::corrupt(
                at,
                format!("allocation choice reach flag {m}"),
            ))
        }
    };
    // Each run wastes at most one read per lookup: a prediction lies in 0 ..= runs.
    let runs = f64::from(l0_tables) + f64::from(deeper_levels);
    let mut reads = [0.0; 2];
    for r in &mut reads {
        let at = c.offset();
        *r = c.f64("allocation choice prediction")?;
        if !(0.0..=runs).contains(&*r) {
            return Err(Error::corrupt(
                at,
                format!("allocation choice prediction {r} (0 to {runs} wasted reads)"),
            ));
        }
    }
    if !c.is_empty() {
        return Err(c.err("trailing bytes in the allocation choice"));
    }
    Ok(AllocationChoice {
        l0_tables,
        deeper_levels,
        measured,
        uniform: reads[0],
        monkey: reads[1],
    })
}
