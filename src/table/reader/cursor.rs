//! [`TableCursor`]: a compaction's sequential read of a table, in chunks of blocks.

use super::*;

/// Bytes a [`TableCursor`] reads at once: several consecutive data blocks per system call.
/// Small, so that the chunks of all of a merge's sources (one each) are more likely still in
/// the CPU's caches when the merge decodes what the read copied in: a merge of ten sources
/// spent less CPU with 64 KiB chunks than with 256 KiB ones, for 4x the system calls.
const CURSOR_CHUNK: usize = 64 << 10;

/// Reads a table's entries in key order for a merge: consecutive data blocks are read in
/// chunks of [`CURSOR_CHUNK`] bytes, each block counted and CRC-checked, and entries are
/// decoded in place (a compressed block is decompressed into one buffer first; the current
/// key is rebuilt in one buffer; no allocation per entry). Holds one chunk and one block,
/// so its memory does not depend on the table's size. Never touches the block cache: a
/// merge reads every block once, and must not push out the blocks lookups keep asking for.
pub struct TableCursor {
    table: Arc<Table>,
    counters: Arc<TableCounters>,
    next_block: usize,
    chunk: Vec<u8>,
    /// File offset of `chunk[0]`.
    chunk_at: u64,
    /// The current block, decompressed (when `in_plain`).
    plain: Vec<u8>,
    in_plain: bool,
    /// The current block's entries: `chunk[block_start..block_start + entries_len]`, or
    /// `plain[..entries_len]` when `in_plain`.
    block_start: usize,
    entries_len: usize,
    /// File offset of the current block (for errors).
    block_at: u64,
    /// Offset of the next entry inside the current block.
    pos: usize,
    key: Vec<u8>,
    /// [`prefix8`] of the current key, computed from the block's bytes (see [`next_head`]).
    head: u64,
    /// The current value's place in the current block (`None`: a tombstone), without its
    /// tag in a version 5 table.
    value: Option<(usize, usize)>,
    /// The current value's `expires_at` (0: never).
    expires: u64,
    valid: bool,
}

/// [`prefix8`] of the key made of the first `shared` bytes of the key whose [`prefix8`] is
/// `old`, followed by `suffix`. Computed from `old` and the block's bytes rather than loaded
/// from the key just rebuilt: a load that overlaps the small stores that rebuilt it waits for
/// them (a failed store-to-load forward), once per entry of a merge.
#[inline]
pub(super) fn next_head(old: u64, shared: usize, suffix: &[u8]) -> u64 {
    if shared >= 8 {
        return old;
    }
    // The first `shared` bytes of `old` (none for 0: a shift by 64 bits would overflow).
    let keep = match shared {
        0 => 0,
        s => old & !(u64::MAX >> (8 * s)),
    };
    keep | prefix8(suffix) >> (8 * shared)
}

impl TableCursor {
    /// A cursor on the first entry of `table`; block reads are counted in `counters`.
    pub fn new(table: Arc<Table>, counters: Arc<TableCounters>) -> Result<TableCursor> {
        let mut c = TableCursor {
            table,
            counters,
            next_block: 0,
            chunk: Vec::new(),
            chunk_at: 0,
            plain: Vec::new(),
            in_plain: false,
            block_start: 0,
            entries_len: 0,
            block_at: 0,
            pos: 0,
            key: Vec::new(),
            head: 0,
            value: None,
            expires: 0,
            valid: true,
        };
        c.advance()?;
        Ok(c)
    }

    /// False once every entry was returned.
    #[inline]
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current key.
    #[inline]
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// [`prefix8`] of the current key.
    #[inline]
    pub(crate) fn head(&self) -> u64 {
        self.head
    }

    /// The current block's entries.
    #[inline]
    fn entries(&self) -> &[u8] {
        if self.in_plain {
            &self.plain[..self.entries_len]
        } else {
            &self.chunk[self.block_start..self.block_start + self.entries_len]
        }
    }

    /// The current value (`None`: a tombstone).
    #[inline]
    pub fn value(&self) -> Option<&[u8]> {
        self.value.map(|(a, b)| &self.entries()[a..b])
    }

    /// The current value's `expires_at` (Unix milliseconds; 0: never).
    #[inline]
    pub fn expires(&self) -> u64 {
        self.expires
    }

    /// Moves to the next entry.
    pub fn advance(&mut self) -> Result<()> {
        while self.pos >= self.entries_len {
            if self.next_block >= self.table.block_count() {
                self.valid = false;
                return Ok(());
            }
            self.load_block(self.next_block)?;
            self.next_block += 1;
        }
        // The fields borrowed one by one (not through `entries`), so that `head` and `key`
        // can change while the block is borrowed.
        let block = if self.in_plain {
            &self.plain[..self.entries_len]
        } else {
            &self.chunk[self.block_start..self.block_start + self.entries_len]
        };
        let e = block::span_at(block, self.block_at, self.pos, self.key.len())
            .map_err(|e| e.in_file(&self.table.path, 0))?;
        let suffix = &block[e.suffix.clone()];
        self.head = next_head(self.head, e.shared, suffix);
        self.key.truncate(e.shared);
        self.key.extend_from_slice(suffix);
        self.value = e.value.map(|r| (r.start, r.end));
        self.pos = e.end;
        if self.table.tagged() {
            if let Some((a, b)) = self.value {
                let at = self.block_at + a as u64;
                let (v, exp) = crate::expiry::split_tagged(&block[a..b], at)
                    .map_err(|e| e.in_file(&self.table.path, 0))?;
                self.value = Some((b - v.len(), b));
                self.expires = exp;
            } else {
                self.expires = 0;
            }
        }
        Ok(())
    }

    /// Makes block `i` current, reading a new chunk when it is not in the one held.
    fn load_block(&mut self, i: usize) -> Result<()> {
        let t = &self.table;
        let Some((offset, len)) = t.index.handle(i) else {
            return Err(Error::Internal(format!("block {i} out of range")));
        };
        let need = len as usize + 4;
        let held = offset >= self.chunk_at
            && offset + need as u64 <= self.chunk_at + self.chunk.len() as u64;
        if !held {
            // From this block up to the chunk size, but not past the data.
            let to_data_end = t.index_offset.saturating_sub(offset);
            let want = (CURSOR_CHUNK as u64).min(to_data_end).max(need as u64) as usize;
            self.chunk.resize(want, 0);
            match &t.map {
                Some(map) if t.map_data => {
                    let src = map
                        .get(offset as usize..offset as usize + want)
                        .ok_or_else(|| {
                            Error::corrupt(offset, "data block past the end of the map")
                                .in_file(&t.path, 0)
                        })?;
                    self.chunk.copy_from_slice(src)
                }
                _ => t
                    .file
                    .read_exact_at(&mut self.chunk, offset)
                    .map_err(|e| Error::io(&t.path, e))?,
            }
            self.chunk_at = offset;
        }
        let start = (offset - self.chunk_at) as usize;
        self.counters.add_block_reads(1);
        self.counters.add_bytes_read(need as u64);
        let (data, crc) = self.chunk[start..start + need].split_at(len as usize);
        check_crc(data, le_u32(crc, 0), offset, "data block").map_err(|e| e.in_file(&t.path, 0))?;
        let stored = &self.chunk[start..start + len as usize];
        let raw = t.decode(stored, offset, &mut self.plain)?;
        let entries_len = Block::new(raw, offset)
            .map_err(|e| e.in_file(&t.path, 0))?
            .entries_len();
        // Raw blocks are decoded in place in the chunk; `decode` returns a slice of it.
        self.in_plain = t.version >= 4 && stored.last() != Some(&compress::CODEC_NONE);
        self.block_start = start;
        self.entries_len = entries_len;
        self.block_at = offset;
        self.pos = 0;
        self.key.clear();
        Ok(())
    }
}
