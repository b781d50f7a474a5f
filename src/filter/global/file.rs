//! A global filter's bytes (its checkpoint): a 64-byte header, then the body.
//!
//! ```text
//! | header (64 bytes) | layout parameters | runs | stash | table words |
//! ```
//!
//! The layout is in `format.md` ("Global filter"). Decoding checks every field, both CRCs,
//! and every bucket (valid slots in canonical order, L0 numbers in range), and that the
//! entries per run in the buckets and the stash add up to the counts recorded: bytes that
//! decode give a filter whose every operation is safe. Layout 2 (the coded layout, which
//! only the public `filter::global` API ever wrote) is refused as unsupported.

use std::io::Write;

use super::runs::Runs;
use super::{fixed, GlobalFilter, Layout, RunId, LEVELS, MAX_RUNS};
use crate::codec::{le_u32, le_u64, Cursor};
use crate::error::{Error, Result};
use crate::filter::header::{check_body, check_head, Frame, HEADER_LEN};
use crate::hash::{HASH_SEED, HASH_XXH3_64};

/// A global filter's frame (`filter/header.rs`).
const FRAME: Frame = Frame {
    magic: GLOBAL_MAGIC,
    block: "global filter",
    name: "global filter",
};

/// Magic at the start of a global filter's bytes.
pub const GLOBAL_MAGIC: [u8; 4] = *b"FSGF";
/// The format version written.
pub const GLOBAL_VERSION: u8 = 1;
const LAYOUT_FIXED16: u8 = 1;
/// The removed coded layout: refused ([`Error::Unsupported`]).
const LAYOUT_CODED: u8 = 2;

/// Header field offsets.
mod off {
    pub(super) const VERSION: usize = 4;
    pub(super) const LAYOUT: usize = 5;
    pub(super) const HASH: usize = 6;
    pub(super) const RESERVED1: usize = 7;
    pub(super) const SEED: usize = 8;
    pub(super) const BUCKETS: usize = 16;
    pub(super) const TAG: usize = 24;
    pub(super) const ENTRIES: usize = 32;
    pub(super) const STASHED: usize = 40;
    pub(super) const RESERVED2: usize = 44;
    // 48..64: body length, body CRC, header CRC (`filter/header.rs`).
}

/// Bytes of the table words written per chunk.
const CHUNK_WORDS: usize = 8192;

impl GlobalFilter {
    /// The filter's bytes, with `tag` (the owner's label of the state they match, e.g. the
    /// manifest generation). Takes the writer lock, so no update runs meanwhile.
    pub fn encode(&self, tag: u64) -> Vec<u8> {
        let mut out = Vec::new();
        // Writing to a Vec never fails.
        let _ = self.write_to(tag, &mut out);
        out
    }

    /// Writes the filter's bytes to `w` (see [`GlobalFilter::encode`]) without holding a
    /// second copy of the table: one pass computes the body's CRC, a second writes it.
    pub fn write_to(&self, tag: u64, w: &mut impl Write) -> Result<()> {
        let writer = self.writer();
        let st = &writer.st;
        let mut head = Vec::new();
        match &self.layout {
            Layout::Fixed16 => {
                head.push(fixed::FP_BITS as u8);
                head.push(fixed::RUN_BITS as u8);
            }
        }
        head.push(st.runs.l0.len() as u8);
        head.extend(st.runs.l0.iter().map(|r| r.index() as u8));
        for c in st.counts {
            head.extend_from_slice(&c.to_le_bytes());
        }
        let stash = writer.stashed();
        for &(h, r) in &stash {
            head.extend_from_slice(&h.to_le_bytes());
            head.push(r.index() as u8);
        }
        let words = &self.table.words;
        let mut crc = crc32fast::Hasher::new();
        crc.update(&head);
        let mut buf = Vec::with_capacity(CHUNK_WORDS * 8);
        for chunk in words.chunks(CHUNK_WORDS) {
            buf.clear();
            for x in chunk {
                buf.extend_from_slice(&x.load(std::sync::atomic::Ordering::Relaxed).to_le_bytes());
            }
            crc.update(&buf);
        }
        let body_len = head.len() as u64 + words.len() as u64 * 8;
        let mut h = Vec::with_capacity(HEADER_LEN);
        h.extend_from_slice(&GLOBAL_MAGIC);
        h.push(GLOBAL_VERSION);
        h.push(match self.layout {
            Layout::Fixed16 => LAYOUT_FIXED16,
        });
        h.push(HASH_XXH3_64);
        h.push(0);
        h.extend_from_slice(&HASH_SEED.to_le_bytes());
        h.extend_from_slice(&self.table.buckets.to_le_bytes());
        h.extend_from_slice(&tag.to_le_bytes());
        h.extend_from_slice(&st.in_table.to_le_bytes());
        h.extend_from_slice(&(stash.len() as u32).to_le_bytes());
        h.extend_from_slice(&0u32.to_le_bytes());
        h.extend_from_slice(&body_len.to_le_bytes());
        h.extend_from_slice(&crc.finalize().to_le_bytes());
        let hc = crc32fast::hash(&h);
        h.extend_from_slice(&hc.to_le_bytes());
        debug_assert_eq!(h.len(), HEADER_LEN);
        w.write_all(&h)?;
        w.write_all(&head)?;
        for chunk in words.chunks(CHUNK_WORDS) {
            buf.clear();
            for x in chunk {
                buf.extend_from_slice(&x.load(std::sync::atomic::Ordering::Relaxed).to_le_bytes());
            }
            w.write_all(&buf)?;
        }
        Ok(())
    }

    /// A filter from its bytes, and the tag they were written with. Checks everything (see
    /// the module documentation); any failure is a corruption error at the offending offset.
    pub fn decode(bytes: &[u8]) -> Result<(GlobalFilter, u64)> {
        let head = check_head(bytes, &FRAME)?;
        if head[off::VERSION] != GLOBAL_VERSION {
            return Err(Error::corrupt(
                off::VERSION as u64,
                format!("unsupported global filter version {}", head[off::VERSION]),
            ));
        }
        if head[off::HASH] != HASH_XXH3_64 {
            return Err(Error::corrupt(
                off::HASH as u64,
                format!("unknown hash algorithm {}", head[off::HASH]),
            ));
        }
        if head[off::RESERVED1] != 0 || le_u32(head, off::RESERVED2) != 0 {
            return Err(Error::corrupt(
                off::RESERVED1 as u64,
                "reserved header bytes are not zero",
            ));
        }
        let seed = le_u64(head, off::SEED);
        if seed != HASH_SEED {
            return Err(Error::corrupt(
                off::SEED as u64,
                format!("unexpected hash seed {seed:#x}"),
            ));
        }
        let buckets = le_u64(head, off::BUCKETS);
        let tag = le_u64(head, off::TAG);
        let entries = le_u64(head, off::ENTRIES);
        let stashed = le_u32(head, off::STASHED) as usize;
        let body = check_body(bytes, &FRAME)?;
        let mut c = Cursor::new(body, HEADER_LEN as u64);
        let layout = match head[off::LAYOUT] {
            LAYOUT_FIXED16 => {
                let at = c.offset();
                let (f, r) = (c.u8("fingerprint bits")?, c.u8("run bits")?);
                if (f as u32, r as u32) != (fixed::FP_BITS, fixed::RUN_BITS) {
                    return Err(Error::corrupt(
                        at,
                        format!("fixed16 slots of {f}+{r} bits, not 11+5"),
                    ));
                }
                Layout::Fixed16
            }
            LAYOUT_CODED => {
                return Err(Error::Unsupported {
                    file: std::path::PathBuf::new(),
                    offset: off::LAYOUT as u64,
                    reason: "global filter layout 2 (coded) was removed; only layout 1 \
                             (fixed16) is read: build the filter again from its keys"
                        .to_string(),
                })
            }
            t => {
                return Err(Error::corrupt(
                    off::LAYOUT as u64,
                    format!("unknown global filter layout {t}"),
                ))
            }
        };
        if buckets == 0 || buckets > 1 << 40 {
            return Err(Error::corrupt(
                off::BUCKETS as u64,
                format!("{buckets} buckets"),
            ));
        }
        let at = c.offset();
        let n_l0 = c.u8("L0 run count")? as usize;
        if n_l0 > MAX_RUNS - LEVELS as usize {
            return Err(Error::corrupt(at, format!("{n_l0} L0 runs")));
        }
        let mut l0 = Vec::with_capacity(n_l0);
        for _ in 0..n_l0 {
            let at = c.offset();
            let id = c.u8("L0 run id")? as usize;
            let run = RunId::from_index(id)
                .filter(|r| r.is_l0() && !l0.contains(r))
                .ok_or_else(|| Error::corrupt(at, format!("bad or repeated L0 run id {id}")))?;
            l0.push(run);
        }
        let counts_at = c.offset();
        let mut counts = [0u64; MAX_RUNS];
        for x in &mut counts {
            *x = c.u64("run count")?;
        }
        if stashed > c.remaining() / 9 {
            return Err(Error::corrupt(
                off::STASHED as u64,
                format!("{stashed} stashed entries do not fit the body"),
            ));
        }
        let mut stash = Vec::with_capacity(stashed);
        for _ in 0..stashed {
            let h = c.u64("stashed hash")?;
            let at = c.offset();
            let r = c.u8("stashed run")? as usize;
            let run = RunId::from_index(r)
                .ok_or_else(|| Error::corrupt(at, format!("stashed run id {r}")))?;
            stash.push((h, run));
        }
        // The table's length, checked before anything of that size is allocated.
        let table_at = c.offset();
        let words = match &layout {
            Layout::Fixed16 => buckets, // one word a bucket
        };
        if c.remaining() as u64 != words * 8 {
            return Err(Error::corrupt(
                table_at,
                format!(
                    "{} bytes of table where {buckets} buckets take {}",
                    c.remaining(),
                    words * 8
                ),
            ));
        }
        let f = GlobalFilter::with_buckets(layout, buckets).map_err(|e| match e {
            Error::InvalidArgument(m) => Error::corrupt(off::BUCKETS as u64, m),
            e => e,
        })?;
        if f.table.words.len() as u64 != words {
            return Err(Error::corrupt(off::BUCKETS as u64, "table size mismatch"));
        }
        for w in f.table.words.iter() {
            w.store(c.u64("table word")?, std::sync::atomic::Ordering::Relaxed);
        }
        // Every bucket valid, the entries adding up.
        let mut seen = [0u64; MAX_RUNS];
        let mut in_table = 0u64;
        for (i, w) in f.table.words.iter().enumerate() {
            let raw = w.load(std::sync::atomic::Ordering::Relaxed);
            if !fixed::valid(raw) {
                return Err(Error::corrupt(
                    table_at + i as u64 * 8,
                    format!("bucket {i}: not four canonical 16-bit slots"),
                ));
            }
            let s = fixed::decode(raw);
            for e in s.entries() {
                seen[e.run as usize] += 1;
            }
            in_table += s.n as u64;
        }
        if in_table != entries {
            return Err(Error::corrupt(
                off::ENTRIES as u64,
                format!("header says {entries} entries, the buckets hold {in_table}"),
            ));
        }
        for &(_, r) in &stash {
            seen[r.index()] += 1;
        }
        if let Some(r) = (0..MAX_RUNS).find(|&r| seen[r] != counts[r]) {
            return Err(Error::corrupt(
                counts_at + r as u64 * 8,
                format!(
                    "run {r}: {} entries recorded, {} present",
                    counts[r], seen[r]
                ),
            ));
        }
        {
            let mut w = f.writer();
            w.st.counts = counts;
            w.st.in_table = in_table;
            w.st.runs = Runs { l0 };
            for (h, r) in stash {
                w.stash_add(h, r);
            }
        }
        Ok((f, tag))
    }
}
