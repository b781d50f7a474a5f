//! Range tombstones in a scan: an entry is hidden when a newer source's range tombstone
//! covers it, and the older sources then skip the covered range by seeking
//! ([`Merge::skip_older`]), so a scan over a deleted range reads a block or so per source,
//! not every entry under the tombstone.

use super::*;

/// The range tombstones of a scan's `sources` (newest first), each ranked by its source's
/// number; `None` when there are none.
pub(super) fn scan_cover(sources: &[ScanSource]) -> Option<Box<Cover>> {
    let mut all = Vec::new();
    for (i, s) in sources.iter().enumerate() {
        match s {
            ScanSource::Mem(m) => all.extend(m.ranges.iter().map(|t| (t, i as u32))),
            ScanSource::Tables(t) => all.extend(t.tombstones().map(|t| (t, i as u32))),
        }
    }
    (!all.is_empty()).then(|| Box::new(Cover::build(all)))
}

/// The next value of `merge` and its key that no range tombstone of `cover` hides (see
/// [`Merge::next_item`]); past a hidden entry, the sources older than the tombstone's skip
/// to the end of its fragment (backward: to its start).
pub(super) fn next_visible<const REV: bool>(
    merge: &mut Merge<ScanSource, REV>,
    cover: Option<&Cover>,
) -> Option<Result<(Slice, Slice)>> {
    let Some(cover) = cover else {
        return merge.next_item();
    };
    loop {
        let mut item = None;
        let mut skip: Option<(u32, Vec<u8>)> = None;
        let r = merge.next_source_entry(|src, s| {
            let Some(v) = s.value_slice() else { return };
            let k = s.key();
            match cover.fragment_at(k) {
                Some(f) if f.rank < src => {
                    skip = Some((f.rank, if REV { f.start.clone() } else { f.end.clone() }));
                }
                _ => item = Some((Slice::from(k), v)),
            }
        });
        match r {
            Ok(true) if item.is_some() => return item.map(Ok),
            Ok(true) => {}
            Ok(false) => return None,
            Err(e) => return Some(Err(e)),
        }
        if let Some((rank, to)) = skip {
            if let Err(e) = merge.skip_older(rank, &to) {
                merge.finish();
                return Some(Err(e));
            }
        }
    }
}
