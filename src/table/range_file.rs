//! A table's range filter file (`NNNNNN.range`): one range filter block (`format.md`, "Range
//! filter block"), written whole and fsynced beside the table, mapped and queried in place.
//! Separate from the point filter's file so that either can be rebuilt, added or removed by
//! `refilter` without touching the other or the table's data.

use std::fs::File;
use std::ops::Bound;
use std::path::Path;

use memmap2::Mmap;

use crate::error::{Error, Result};
use crate::filter::range::RangeFilter;
use crate::io::Fs;

/// A range filter file mapped into memory; queried in place.
#[derive(Debug)]
pub struct MappedRangeFilter {
    map: Mmap,
    /// The decoded, checked filter, rebound to `&[]`; queried over `map`
    /// ([`RangeFilter::rebind`]).
    checked: RangeFilter<'static>,
}

impl MappedRangeFilter {
    /// Checks the file fully (magic, version, parameters, both CRCs, the Elias–Fano
    /// structure) and maps it. As for point filters, the check reads the file with `read`,
    /// so the map's pages come into the process only as scans touch them.
    pub fn open(path: &Path) -> Result<MappedRangeFilter> {
        let mut file = File::open(path).map_err(|e| Error::io(path, e))?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut bytes).map_err(|e| Error::io(path, e))?;
        let checked = RangeFilter::decode(&bytes)
            .map_err(|e| e.in_file(path, 0))?
            .rebind(&[]);
        let len = bytes.len();
        drop(bytes);
        let map = crate::mmap::map_readonly(&file).map_err(|e| Error::io(path, e))?;
        // The map must hold the bytes checked (the filter's own length is the block's).
        if map.len() != len {
            return Err(
                Error::corrupt(0, "range filter file changed while it was opened").in_file(path, 0),
            );
        }
        Ok(MappedRangeFilter { map, checked })
    }

    /// False means that no key of the table lies between `lo` and `hi`.
    #[inline]
    pub fn may_intersect(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
        self.checked.rebind(&self.map).may_intersect_bounds(lo, hi)
    }

    /// Size of the filter block in bytes.
    pub fn bytes(&self) -> u64 {
        self.map.len() as u64
    }
}

/// Writes `block` (a range filter block) to `path`, fsynced; returns its length.
pub fn write_range_file(fs: &dyn Fs, path: &Path, block: &[u8]) -> Result<u64> {
    let io = |e| Error::io(path, e);
    let mut f = fs.create(path).map_err(io)?;
    f.write_all(block).map_err(io)?;
    f.sync().map_err(io)?;
    Ok(block.len() as u64)
}
