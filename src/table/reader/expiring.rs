//! What version 5 tables add to reading (format.md, "Table"): tagged values and the meta's
//! expiry facts.

use super::*;

impl Table {
    /// Whether the table stores its values tagged, with their expiries (version 5).
    #[inline]
    pub(crate) fn tagged(&self) -> bool {
        self.version >= 5
    }

    /// A block's entries as stored: a version 5 table's values still tagged (what a
    /// `TableCursor` and [`scan_entries`](Self::scan_entries) read; the fuzz harness checks
    /// them against it).
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn block_entries_raw(&self, i: usize, counters: &TableCounters) -> Result<Vec<Entry>> {
        let off = self.index.handle(i).map_or(0, |h| h.0);
        let data = self.block(i, counters, true)?;
        let block = Block::new(&data, off).map_err(|e| e.in_file(&self.path, 0))?;
        block
            .iter()
            .collect::<Result<Vec<_>>>()
            .map_err(|e| e.in_file(&self.path, 0))
    }

    /// [`block_entries`](Self::block_entries) with each value's `expires_at` (0: never; a
    /// version 5 table's value tags checked and taken off, an error naming the file and the
    /// block's offset when one does not decode).
    pub fn block_entries_exp(
        &self,
        i: usize,
        counters: &TableCounters,
    ) -> Result<Vec<(Entry, u64)>> {
        let off = self.index.handle(i).map_or(0, |h| h.0);
        let data = self.block(i, counters, true)?;
        let block = Block::new(&data, off).map_err(|e| e.in_file(&self.path, 0))?;
        let tagged = self.tagged();
        block
            .iter()
            .map(|e| {
                let (k, v) = e?;
                match v {
                    Some(v) if tagged => {
                        let (value, exp) = crate::expiry::split_tagged(&v, off)?;
                        Ok(((k, Some(value.to_vec())), exp))
                    }
                    v => Ok(((k, v), 0)),
                }
            })
            .collect::<Result<Vec<_>>>()
            .map_err(|e| e.in_file(&self.path, 0))
    }
}

/// The meta's expiry facts after `data_bytes` (version 5; zeros before): expiring entries,
/// their bytes, the earliest and the latest expiry. Facts that disagree are corruption.
pub(super) fn meta_facts(c: &mut Cursor, version: u32) -> Result<(u64, u64, u64, u64)> {
    if version < 5 {
        return Ok((0, 0, 0, 0));
    }
    let at = c.offset();
    let expiring = c.varint("expiring entries")?;
    let bytes = c.varint("expiring bytes")?;
    let earliest = c.varint("earliest expiry")?;
    let latest = c.varint("latest expiry")?;
    if (expiring == 0) != (earliest == 0)
        || (expiring == 0 && (bytes != 0 || latest != 0))
        || earliest > latest
    {
        return Err(Error::corrupt(at, "table meta's expiry facts disagree"));
    }
    Ok((expiring, bytes, earliest, latest))
}
