//! What range filter builds cost: a [`BuildClock`] a store shares with its table writers
//! counts the CPU time its builders spent (pushing keys and building blocks) and the blocks
//! built, so that their share of a load is read (`Stats::range_build`), not inferred from two
//! noisy loads.
//!
//! CPU time, not wall time: builds run beside table writes, flushes and compactions, and on a
//! loaded machine a wall clock also counts the time a build's thread waited for a core. Each
//! piece of work is timed on the thread that ran it (this thread's CPU clock, read before and
//! after), and the pieces of the block's parallel passes each time themselves (`build.rs`).

use std::sync::Arc;

use super::build_clock::{cpu_since, thread_cpu};
use super::{BuildClock, RangeFilterBuilder};
use crate::error::Result;

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
        self.charged(|b| {
            for k in keys {
                b.push(k)?;
            }
            Ok(())
        })
    }

    /// Runs `work` (keys pushed and whatever work comes with them, such as reading them back
    /// from a table) and counts the CPU time it took on this thread as this builder's, when
    /// it is clocked.
    pub fn charged<T>(&mut self, work: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        let start = self.clock.is_some().then(thread_cpu);
        let r = work(self);
        if let Some(start) = start {
            self.nanos = self.nanos.saturating_add(cpu_since(start));
        }
        r
    }

    /// Builds the block. Runs on the current rayon pool; the bytes never depend on its size.
    /// A clocked builder records its CPU time (this thread's, and that of the pieces of its
    /// parallel passes on whichever threads ran them) and one block built.
    pub fn finish(mut self) -> Result<Vec<u8>> {
        let Some(clock) = self.clock.take() else {
            return self.build_block(false).map(|(block, _)| block);
        };
        let nanos = self.nanos;
        let (block, spent) = self.build_block(true)?;
        clock.record(nanos.saturating_add(spent));
        Ok(block)
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
