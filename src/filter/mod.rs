//! Approximate-membership filters stored as self-describing, memory-mappable blocks.
//!
//! A filter block is a 64-byte header followed by the kind's body (see `format.md`,
//! "Filter block"). Builders take key hashes ([`crate::hash::key_hash`]) and return the block's
//! bytes; [`Filter::decode`] is a zero-copy view over a borrowed `&[u8]` (for example a memory
//! map) that checks every field and the CRCs before answering queries.
//!
//! ```text
//! | header (64 bytes) | body (body_len bytes, little-endian) |
//! ```

pub(crate) mod alloc;
pub(crate) mod blocked;
mod blocked_layout;
pub(crate) mod bloom;
pub(crate) mod choice;
pub(crate) mod cuckoo;
pub(crate) mod fuse;
pub mod global;
pub(crate) mod header;
mod kernel;
mod kind;
pub mod range;
mod simd;
pub(crate) use simd::prefetch_ref;

use crate::codec::{le_u32, le_u64};
use crate::error::{Error, Result};
use crate::hash::{HASH_SEED, HASH_XXH3_64};

pub use self::kernel::{blocked_kernel, kernel_setting, kernel_summary, Kernel, KERNEL_ENV};
pub use self::kind::{check_fpr, FilterKind};

/// Magic at the start of every filter block.
pub const FILTER_MAGIC: [u8; 4] = *b"FSFL";
/// Version of the bloom and binary-fuse layouts, and of blocked-bloom's and cuckoo's first
/// layouts. The header's
/// version byte is the version of the kind's layout (see [`FilterKind::versions`]).
pub const FILTER_VERSION: u8 = 1;
/// Size of the filter block header; the body starts here (64-byte aligned in a file).
pub const HEADER_LEN: usize = header::HEADER_LEN;

/// A point filter block's frame ([`header`]).
const FRAME: header::Frame = header::Frame {
    magic: FILTER_MAGIC,
    block: "filter block",
    name: "filter",
};

/// The decoded, checked header of a filter block.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Header {
    /// Filter kind (never `None` inside a block).
    pub kind: FilterKind,
    /// Layout version of the kind (one of [`FilterKind::versions`]).
    pub version: u8,
    /// Number of keys: for the bloom kinds the number of hashes the filter was built from
    /// (duplicates included), for cuckoo the number of fingerprints stored.
    pub n: u64,
    /// Target false-positive rate the filter was sized for.
    pub target_fpr: f64,
    /// Kind parameter 1: bits (bloom), blocks (blocked-bloom), buckets (cuckoo), seed
    /// (binary-fuse).
    pub p1: u64,
    /// Kind parameter 2: probes k (bloom kinds), fingerprint bits (cuckoo), bytes (fingerprint
    /// bits, arity, log2 segment length, 0) (binary-fuse).
    pub p2: u32,
    /// Kind parameter 3: 0 (bloom kinds), slots per bucket (cuckoo), segments (binary-fuse).
    pub p3: u32,
    /// Length of the body in bytes.
    pub body_len: u64,
}

/// Byte offsets of the header's fields (format.md, "Filter block").
mod off {
    pub(super) const VERSION: usize = 4;
    pub(super) const KIND: usize = 5;
    pub(super) const HASH: usize = 6;
    pub(super) const SEED: usize = 8;
    pub(super) const N: usize = 16;
    pub(super) const TARGET_FPR: usize = 24;
    pub(super) const P1: usize = 32;
    pub(super) const P2: usize = 40;
    pub(super) const P3: usize = 44;
    pub(super) const BODY_LEN: usize = super::header::BODY_LEN;
    // BODY_CRC: `header::BODY_CRC`.
    pub(super) const HEADER_CRC: usize = super::header::HEADER_CRC;
}

impl Header {
    /// Serialises the header followed by `body` into one block, computing both CRCs.
    pub(crate) fn encode_block(&self, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + body.len());
        out.extend_from_slice(&FILTER_MAGIC);
        out.push(self.version);
        out.push(self.kind.tag());
        out.push(HASH_XXH3_64);
        out.push(0);
        out.extend_from_slice(&HASH_SEED.to_le_bytes());
        out.extend_from_slice(&self.n.to_le_bytes());
        out.extend_from_slice(&self.target_fpr.to_le_bytes());
        out.extend_from_slice(&self.p1.to_le_bytes());
        out.extend_from_slice(&self.p2.to_le_bytes());
        out.extend_from_slice(&self.p3.to_le_bytes());
        out.extend_from_slice(&(body.len() as u64).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
        let header_crc = crc32fast::hash(&out[..off::HEADER_CRC]);
        out.extend_from_slice(&header_crc.to_le_bytes());
        debug_assert_eq!(out.len(), HEADER_LEN);
        out.extend_from_slice(body);
        out
    }

    /// Decodes and checks a header; returns it with the body slice. Offsets in errors are
    /// relative to the start of `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<(Header, &[u8])> {
        let head = header::check_head(bytes, &FRAME)?;
        let kind = match FilterKind::from_tag(head[off::KIND]) {
            Some(k) if !k.versions().is_empty() => k,
            _ => {
                return Err(Error::corrupt(
                    off::KIND as u64,
                    format!("unknown filter kind tag {}", head[off::KIND]),
                ))
            }
        };
        let version = head[off::VERSION];
        if !kind.versions().contains(&version) {
            return Err(Error::corrupt(
                off::VERSION as u64,
                format!("unsupported {kind} filter version {version}"),
            ));
        }
        if head[off::HASH] != HASH_XXH3_64 {
            return Err(Error::corrupt(
                off::HASH as u64,
                format!("unknown hash algorithm {}", head[off::HASH]),
            ));
        }
        let seed = le_u64(head, off::SEED);
        if seed != HASH_SEED {
            return Err(Error::corrupt(
                off::SEED as u64,
                format!("unexpected hash seed {seed:#x}"),
            ));
        }
        let h = Header {
            kind,
            version,
            n: le_u64(head, off::N),
            target_fpr: f64::from_bits(le_u64(head, off::TARGET_FPR)),
            p1: le_u64(head, off::P1),
            p2: le_u32(head, off::P2),
            p3: le_u32(head, off::P3),
            body_len: le_u64(head, off::BODY_LEN),
        };
        if !(h.target_fpr > 0.0 && h.target_fpr < 1.0) {
            return Err(Error::corrupt(
                off::TARGET_FPR as u64,
                "target false-positive rate outside (0, 1)",
            ));
        }
        let body = header::check_body(bytes, &FRAME)?;
        Ok((h, body))
    }
}

/// Builds a filter block of `kind` over `hashes` (duplicates allowed) sized for `fpr`.
///
/// Runs on the current rayon pool: install a pool with one thread to build single-threaded.
/// Returns `Ok(None)` for [`FilterKind::None`].
pub fn build(kind: FilterKind, fpr: f64, hashes: &[u64]) -> Result<Option<Vec<u8>>> {
    if kind.per_table() == FilterKind::None {
        // No filter has no rate to check (a budget records ε = 1 for it); a global store's
        // tables have no filter block of their own.
        return Ok(None);
    }
    check_fpr(fpr)?;
    Ok(match kind {
        FilterKind::None | FilterKind::Global => None,
        FilterKind::Bloom => Some(bloom::build(fpr, hashes)),
        FilterKind::BlockedBloom => Some(blocked::build(fpr, hashes)),
        FilterKind::Cuckoo => Some(cuckoo::build(fpr, hashes)),
        FilterKind::BinaryFuse => Some(fuse::build(fpr, hashes)?),
    })
}

/// A checked, zero-copy view of a filter block.
#[derive(Clone, Copy, Debug)]
pub struct Filter<'a> {
    header: Header,
    /// The body (the block after its header), queried in place.
    body: &'a [u8],
    /// The kind's checked parameters.
    view: View,
    /// The query kernel chosen for this view when it was made (see [`Run`]).
    run: Run,
}

/// A query kernel: `may_contain` over a body for the view it was chosen for (any other view
/// answers "maybe"). A filter keeps one and calls it directly, so a query costs one indirect
/// call and no dispatch on the kind, width or CPU features. The view is read where it lives
/// and the body comes in registers, so a query builds nothing in memory first (rebinding a
/// whole filter per query, as the store's mapped filters did, cost 3.8 ns of an 18 ns lookup
/// in the hyphenation dictionary: the kernel waited on the fresh copy).
///
/// The hash comes second, where a caller's `(&self, hash)` already has it, so a call from
/// `may_contain` only loads the body beside it.
///
/// `unsafe` because a SIMD kernel must only run on a CPU that has its instructions; only
/// `simd` hands those out, after checking. Every other kernel is safe to call.
type Run = unsafe fn(&View, u64, &[u8]) -> bool;

/// A batch kernel: [`Filter::retain_maybe_in`] over a body for the view it was chosen for
/// (keys, their hashes, the prefetch distance, the output). `unsafe` for the same reason as
/// [`Run`].
type RunBatch = unsafe fn(&View, &[u8], &[u32], &[u64], usize, &mut Vec<u32>);

/// A kind's checked parameters (no bytes: the body is passed to every query).
#[derive(Clone, Copy, Debug)]
#[repr(u8)]
enum View {
    Bloom(bloom::BloomView),
    Blocked(blocked::BlockedView),
    Cuckoo(cuckoo::CuckooView),
    Fuse(fuse::FuseView),
}

impl View {
    /// Checks the kind's parameters in `header` against `body`.
    fn new(header: &Header, body: &[u8]) -> Result<View> {
        Ok(match header.kind {
            FilterKind::Bloom => View::Bloom(bloom::BloomView::new(header, body)?),
            FilterKind::BlockedBloom => View::Blocked(blocked::BlockedView::new(header, body)?),
            FilterKind::Cuckoo => View::Cuckoo(cuckoo::CuckooView::new(header, body)?),
            FilterKind::BinaryFuse => View::Fuse(fuse::FuseView::new(header, body)?),
            FilterKind::None | FilterKind::Global => {
                return Err(Error::corrupt(
                    5,
                    format!("filter kind {} has no block", header.kind),
                ))
            }
        })
    }

    /// The kernel for this view.
    fn run(&self) -> Run {
        match self {
            View::Bloom(_) => bloom::run,
            View::Blocked(v) => v.run(),
            View::Cuckoo(v) => v.run(),
            View::Fuse(v) => v.run(),
        }
    }
}

/// The body of `block` (empty when `block` is shorter than a header).
#[inline]
fn body_of(block: &[u8]) -> &[u8] {
    block.get(HEADER_LEN..).unwrap_or(&[])
}

impl<'a> Filter<'a> {
    /// Checks `bytes` (magic, version, kind, hash, lengths, parameters, CRCs) and returns a
    /// view that answers queries in place. Never panics on any input.
    pub fn decode(bytes: &'a [u8]) -> Result<Filter<'a>> {
        let (header, body) = Header::decode(bytes)?;
        let view = View::new(&header, body)?;
        Ok(Filter {
            header,
            body,
            view,
            run: view.run(),
        })
    }

    /// False means the key with this hash was certainly not inserted.
    #[inline]
    pub fn may_contain(&self, hash: u64) -> bool {
        self.query(self.body, hash)
    }

    /// [`may_contain`](Self::may_contain) over `block`, the block this filter was decoded
    /// from (or a copy of it), for a filter kept without its bytes (see
    /// [`rebind`](Self::rebind)): nothing is checked again and nothing is copied. Never
    /// panics, whatever `block` holds.
    #[inline]
    pub fn may_contain_in(&self, block: &[u8], hash: u64) -> bool {
        self.query(body_of(block), hash)
    }

    #[inline]
    fn query(&self, body: &[u8], hash: u64) -> bool {
        // Binary fuse with 8-bit fingerprints, the static kind tables are expected to carry,
        // is answered here, inline: its query is a dozen instructions, and the kernel call
        // cost 13 % of an in-cache query (100k keys, 3.5 vs 3.1 ns). Every other filter pays
        // one predictable branch for it.
        if let View::Fuse(f) = &self.view {
            if f.is_inline() {
                return f.query_with::<u8>(body, hash);
            }
        }
        // SAFETY: `run` was chosen for this view by `View::run`: a portable kernel, or a SIMD
        // kernel that `simd` returned only after checking that this CPU has its
        // instructions.
        #[allow(unsafe_code)]
        unsafe {
            (self.run)(&self.view, hash, body)
        }
    }

    /// Reads the bytes [`may_contain`](Self::may_contain) will need first for `hash` and
    /// returns them folded into one byte (meaningless; feed it to [`std::hint::black_box`]).
    ///
    /// A store asks several tables' filters about one key. Touching all of them first, with
    /// loads that do not depend on each other, lets their cache misses overlap; the
    /// `may_contain` calls that follow then find their lines in cache instead of waiting for
    /// one miss after another. Never panics, whatever the bytes.
    #[inline]
    pub fn touch(&self, hash: u64) -> u8 {
        self.touch_body(self.body, hash)
    }

    /// [`touch`](Self::touch) over `block` (see [`may_contain_in`](Self::may_contain_in)).
    #[inline]
    pub fn touch_in(&self, block: &[u8], hash: u64) -> u8 {
        self.touch_body(body_of(block), hash)
    }

    /// Prefetches the cache lines [`may_contain_in`](Self::may_contain_in) will read for
    /// `hash` over `block`: a hint to the CPU that, unlike [`touch`](Self::touch), does not
    /// hold up the instructions after it while the lines are on their way. Issued for many
    /// keys ahead of their queries, it lets their cache misses overlap (batched lookups,
    /// `Store::multi_get`). Changes no answer; never panics, whatever the bytes.
    #[inline]
    pub fn prefetch_in(&self, block: &[u8], hash: u64) {
        let body = body_of(block);
        match &self.view {
            View::Bloom(v) => v.prefetch(body, hash),
            View::Blocked(v) => v.prefetch(body, hash),
            View::Cuckoo(v) => v.prefetch(body, hash),
            View::Fuse(v) => v.prefetch(body, hash),
        }
    }

    /// Pushes onto `maybe`, in order, each of `keys` (indices into `hashes`) whose hash
    /// [`may_contain_in`](Self::may_contain_in) over `block` accepts, prefetching the lines
    /// of the key `ahead` places further on before each query ([`prefetch_in`](Self::prefetch_in)),
    /// so that many cache misses are on their way while one key is tested. The kind is
    /// dispatched once per call, not once per key: the loop is compiled per kind, with its
    /// prefetch inline. Never panics on the bytes.
    ///
    /// # Panics
    /// If an index in `keys` is out of bounds for `hashes`.
    pub fn retain_maybe_in(
        &self,
        block: &[u8],
        keys: &[u32],
        hashes: &[u64],
        ahead: usize,
        maybe: &mut Vec<u32>,
    ) {
        let body = body_of(block);
        match &self.view {
            View::Bloom(v) => {
                self.retain(body, keys, hashes, ahead, maybe, |h| v.prefetch(body, h))
            }
            View::Blocked(v) => match v.batch {
                // SAFETY: `batch` was chosen for this view by `BlockedView::new` from what
                // `simd` returned, only after checking that this CPU has its instructions.
                #[allow(unsafe_code)]
                Some(batch) => unsafe { batch(&self.view, body, keys, hashes, ahead, maybe) },
                None => self.retain(body, keys, hashes, ahead, maybe, |h| v.prefetch(body, h)),
            },
            View::Cuckoo(v) => {
                self.retain(body, keys, hashes, ahead, maybe, |h| v.prefetch(body, h))
            }
            View::Fuse(v) => self.retain(body, keys, hashes, ahead, maybe, |h| v.prefetch(body, h)),
        }
    }

    /// [`retain_maybe_in`](Self::retain_maybe_in) with the kind's prefetch.
    #[inline(always)]
    fn retain(
        &self,
        body: &[u8],
        keys: &[u32],
        hashes: &[u64],
        ahead: usize,
        maybe: &mut Vec<u32>,
        prefetch: impl Fn(u64),
    ) {
        for &i in keys.iter().take(ahead) {
            prefetch(hashes[i as usize]);
        }
        for (j, &i) in keys.iter().enumerate() {
            if let Some(&next) = keys.get(j + ahead) {
                prefetch(hashes[next as usize]);
            }
            if self.query(body, hashes[i as usize]) {
                maybe.push(i);
            }
        }
    }

    #[inline]
    fn touch_body(&self, body: &[u8], hash: u64) -> u8 {
        match &self.view {
            View::Bloom(v) => v.touch(body, hash),
            View::Blocked(v) => v.touch(body, hash),
            View::Cuckoo(v) => v.touch(body, hash),
            View::Fuse(v) => v.touch(body, hash),
        }
    }

    /// The same filter answering every query with portable code, without SIMD instructions.
    /// Its answers are identical (the tests check it on every machine); useful to compare the
    /// two and to time the portable code on a CPU that has the SIMD instructions.
    pub fn portable(self) -> Filter<'a> {
        self.with_kernel(Kernel::Scalar)
    }

    /// The same filter answering with the fastest kernel this CPU has up to `ceiling`
    /// ([`Kernel::Scalar`] < [`Kernel::Avx2`] < [`Kernel::Avx512`]), whatever
    /// [`KERNEL_ENV`] says; [`kernel`](Self::kernel) tells which one that is. Every kernel
    /// gives the same answers (the tests check it on every machine). Only blocked-bloom
    /// (layout version 2) has SIMD kernels; other filters are returned unchanged.
    pub fn with_kernel(self, ceiling: Kernel) -> Filter<'a> {
        let view = match self.view {
            View::Blocked(v) => View::Blocked(v.with_kernel(Some(ceiling))),
            v => v,
        };
        Filter {
            view,
            run: view.run(),
            ..self
        }
    }

    /// The kernel this filter's queries run on (chosen at decode time from what the CPU has
    /// and [`KERNEL_ENV`], or by [`with_kernel`](Self::with_kernel)).
    pub fn kernel(&self) -> Kernel {
        match &self.view {
            View::Blocked(v) => v.kernel(),
            _ => Kernel::Scalar,
        }
    }

    /// True when queries use SIMD instructions (chosen at decode time from what the CPU has).
    pub fn uses_simd(&self) -> bool {
        self.kernel() != Kernel::Scalar
    }

    /// The block's header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Size of the whole block in bytes.
    pub fn block_len(&self) -> u64 {
        HEADER_LEN as u64 + self.header.body_len
    }

    /// The false-positive rate theory predicts for this filter's parameters and `n`.
    pub fn theoretical_fpr(&self) -> f64 {
        let h = &self.header;
        match h.kind {
            FilterKind::Bloom => bloom::theoretical_fpr(h.p1, h.p2, h.n),
            FilterKind::BlockedBloom => blocked::theoretical_fpr(h.p1, h.p2, h.n),
            FilterKind::Cuckoo => cuckoo::theoretical_fpr(h.p1, h.p2, h.n),
            FilterKind::BinaryFuse => fuse::theoretical_fpr(h.p2 & 0xff, h.n),
            FilterKind::None | FilterKind::Global => 1.0,
        }
    }
}

/// Rounds `len` up to a multiple of 64 (filter bodies are placed 64-byte aligned).
pub fn align64(len: u64) -> u64 {
    len.div_ceil(64) * 64
}

impl<'a> Filter<'a> {
    /// This filter's checked parameters over `bytes`, which must be the block it was decoded
    /// from (or a copy of it): no check is repeated. `rebind(&[])` keeps a decoded filter as
    /// `Filter<'static>` beside the memory map it came from; queries then pass the map to
    /// [`may_contain_in`](Self::may_contain_in). Queries never panic, whatever `bytes` holds.
    #[inline]
    pub fn rebind<'b>(&self, bytes: &'b [u8]) -> Filter<'b> {
        Filter {
            header: self.header,
            body: body_of(bytes),
            view: self.view,
            run: self.run,
        }
    }

    /// A view over `bytes` (the whole block) whose header was already checked by
    /// [`Filter::decode`]: skips the CRCs, keeps the length checks (so it cannot panic).
    #[inline]
    pub fn with_header(header: &Header, bytes: &'a [u8]) -> Result<Filter<'a>> {
        let body = bytes
            .get(HEADER_LEN..)
            .ok_or_else(|| Error::corrupt(0, "filter block shorter than its header"))?;
        let view = View::new(header, body)?;
        Ok(Filter {
            header: *header,
            body,
            view,
            run: view.run(),
        })
    }
}

/// What theory says of a filter of `kind` sized for `n` distinct keys at the target rate
/// `fpr`: (bits per key of its body, expected false-positive rate). `None` for the kinds
/// without a per-table filter (`None`, `Global`). The benchmark draws its theory lines from
/// it (`store bench`).
pub fn theory(kind: FilterKind, n: u64, fpr: f64) -> Option<(f64, f64)> {
    let keys = n.max(1) as f64;
    match kind {
        FilterKind::Bloom => {
            let (m, k) = bloom::params(n, fpr);
            Some((m as f64 / keys, bloom::theoretical_fpr(m, k, n)))
        }
        FilterKind::BlockedBloom => {
            let (b, k) = blocked::params(n, fpr);
            Some((b as f64 * 512.0 / keys, blocked::theoretical_fpr(b, k, n)))
        }
        FilterKind::Cuckoo => {
            let f = cuckoo::fingerprint_bits(fpr);
            let buckets = (n as f64 / (4.0 * cuckoo::TARGET_LOAD)).ceil() as u64;
            Some((
                buckets as f64 * 4.0 * f as f64 / keys,
                cuckoo::theoretical_fpr(buckets, f, n),
            ))
        }
        FilterKind::BinaryFuse => {
            let f = fuse::fingerprint_bits(fpr);
            let slots = fuse::Layout::for_keys(n).array_len();
            Some((
                (slots * f as u64) as f64 / keys,
                fuse::theoretical_fpr(f, n),
            ))
        }
        FilterKind::None | FilterKind::Global => None,
    }
}
