//! What range filter builds cost: a [`BuildClock`] a store shares with its table writers
//! counts the time its builders spent (pushing keys and building blocks) and the blocks
//! built, so that their share of a load is read (`Stats::range_build`), not inferred from two
//! noisy loads.

use std::sync::Arc;
use std::time::Instant;

use super::{BuildClock, RangeFilterBuilder};
use crate::error::Result;

/// Nanoseconds since `t`.
fn since(t: Instant) -> u64 {
    u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

impl RangeFilterBuilder {
    /// Counts this builder's time in `clock` (`None`: not counted): [`push_all`]'s and
    /// [`finish`]'s, recorded when the block is built.
    ///
    /// [`push_all`]: Self::push_all
    /// [`finish`]: Self::finish
    pub fn clocked(mut self, clock: Option<&Arc<BuildClock>>) -> RangeFilterBuilder {
        self.clock = clock.cloned();
        self
    }

    /// Adds `keys` (see [`push`](Self::push)), timed when the builder is clocked.
    pub fn push_all<'k>(&mut self, keys: impl IntoIterator<Item = &'k [u8]>) -> Result<()> {
        let t = self.clock.is_some().then(Instant::now);
        for k in keys {
            self.push(k)?;
        }
        if let Some(t) = t {
            self.nanos = self.nanos.saturating_add(since(t));
        }
        Ok(())
    }

    /// Counts the time since `start` as this builder's (keys pushed and whatever work came
    /// with them, such as reading them back from a table), when it is clocked.
    pub fn charge(&mut self, start: Instant) {
        if self.clock.is_some() {
            self.nanos = self.nanos.saturating_add(since(start));
        }
    }

    /// Builds the block. Runs on the current rayon pool; the bytes never depend on its size.
    /// A clocked builder records its time and one block built.
    pub fn finish(mut self) -> Result<Vec<u8>> {
        let Some(clock) = self.clock.take() else {
            return self.build_block();
        };
        let (nanos, t) = (self.nanos, Instant::now());
        let block = self.build_block();
        if block.is_ok() {
            clock.record(nanos.saturating_add(since(t)));
        }
        block
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clocked_build_counts_one_block_and_its_time() {
        let clock = Arc::new(BuildClock::default());
        let keys: Vec<Vec<u8>> = (0u32..20_000).map(|i| i.to_be_bytes().to_vec()).collect();
        let mut b = RangeFilterBuilder::new(16.0).unwrap().clocked(Some(&clock));
        b.push_all(keys.iter().map(Vec::as_slice)).unwrap();
        let block = b.finish().unwrap();
        assert_eq!(clock.built(), 1);
        assert!(clock.nanos() > 0);
        // The same bytes as an unclocked build.
        assert_eq!(block, super::super::build(&keys, 16.0).unwrap());
        // An unclocked builder counts nothing anywhere.
        let mut b = RangeFilterBuilder::new(16.0).unwrap();
        b.push_all(keys.iter().map(Vec::as_slice)).unwrap();
        b.finish().unwrap();
        assert_eq!(clock.built(), 1);
    }
}
