//! [`Layout::Coded`](super::Layout::Coded): run ids coded by the combination of runs in a
//! bucket, with per-run fingerprint widths (Chucky's idea, our layout).
//!
//! Most keys of a leveled tree live in its largest level, so most buckets hold four entries
//! of the same one or two runs. Instead of a run id per slot, a bucket stores one prefix
//! code for the *multiset* of its entries' run classes (which four classes, in any order),
//! short for the likely combinations and long for the rare ones; every fingerprint then gets
//! the bits left over. A class is a level (L1..L6, one run each) or L0, whose entries also
//! carry the table's 5-bit L0 number inside their field. Fingerprint widths are chosen per
//! class: the bits a bucket does not spend on its code, it spends where most keys are.
//!
//! ```text
//! bucket (S bits, the low bits first):
//! | field 0 | field 1 | field 2 | field 3 | zero padding | code (ℓ bits) |
//!   fields in canonical order (class, then value); a level's field is its fingerprint,
//!   an L0 field is fingerprint · 32 + L0 number; empty slots have no field
//! ```
//!
//! A combination C is codable when its code length ℓ(C) and its fields fit the bucket:
//! ℓ(C) ≤ S − Σ widths. Lengths are those bounds (capped at [`MAX_CODE`]), so a
//! combination whose entries are wide gets a short code, and Kraft's inequality
//! Σ 2^−ℓ(C) ≤ 1 decides which combinations of four entries get a code at all: every
//! combination with an empty slot does (so a removal always fits), and the full ones are
//! taken by probability under a model of the run sizes ([`Shares`]) until the code space is
//! used up. A full combination without a code is one more way for a bucket to be "full":
//! the cuckoo walk puts the entry elsewhere, exactly as for a bucket of four. The code is
//! canonical (codes of one length are consecutive numbers), so it is stored as one length per
//! combination. Buckets are packed whole into 64-byte lines (`⌊512 / S⌋` per line), so a
//! query reads at most two lines; decoding is one lookup of the bucket's top 12 bits in a
//! 4,096-entry table, and the four slots are then compared without a branch. Stored bucket
//! bits are XORed with the empty bucket's encoding, so a zeroed table is an empty filter.
//!
//! The alternate bucket is taken from the top 8 bits of the 32-bit fingerprint source,
//! which every stored width (at least 8 bits) keeps, so an entry can move between its two
//! buckets knowing only its field.

use super::slots::{Entry, Slots};
use super::{RunId, RunSet, LEVELS, MAX_RUNS};
use crate::error::{Error, Result};

/// Symbols of a combination: 0..=5 the levels L1..L6, 6 the L0 class, 7 an empty slot.
pub(super) const SYMBOLS: usize = 8;
const L0: usize = 6;
const EMPTY: usize = 7;
/// Bits of an L0 entry's table number (its run id − 6).
pub const L0_SUB_BITS: u32 = 5;
/// Combinations of 4 symbols out of 8 (with repetition).
pub const COMBOS: usize = 330;
/// Narrowest fingerprint (the alternate bucket's tag is its top 8 bits).
pub const MIN_WIDTH: u8 = 8;
/// Widest fingerprint.
pub const MAX_WIDTH: u8 = 24;
/// Longest code (every code is decoded by one lookup in a table of 2^MAX_CODE entries).
pub const MAX_CODE: u8 = 12;
/// Bits of the alternate bucket's tag.
const ALT_BITS: u32 = 8;
/// Bucket sizes a spec may have.
pub const BUCKET_BITS: std::ops::RangeInclusive<u8> = 24..=60;
/// The bucket sizes [`CodedSpec::for_fpr`] tries: 12, 11, 10 and 9 buckets per line.
const SIZES: [u8; 4] = [42, 46, 51, 56];
/// Largest share of buckets the model may leave without a code for a spec
/// [`CodedSpec::for_fpr`] tries (the cuckoo walks route around a few per cent; whether they
/// do is then checked by filling a table).
const MAX_UNCODABLE: f64 = 0.05;
/// Buckets of the table [`CodedSpec::for_fpr`] fills to check a spec.
const TRIAL_BUCKETS: u64 = 8192;
/// Specs of one bucket size [`CodedSpec::for_fpr`] fills at most.
const TRIALS: usize = 6;
/// The probability a level or L0 with no keys is given in the model, so that a few of its
/// full combinations are coded when it gets keys later.
const FLOOR: f64 = 1e-3;

/// The 330 combinations, each as 4 ascending symbols, in lexicographic order.
fn combos() -> Vec<[u8; 4]> {
    let mut v = Vec::with_capacity(COMBOS);
    for a in 0..SYMBOLS as u8 {
        for b in a..SYMBOLS as u8 {
            for c in b..SYMBOLS as u8 {
                for d in c..SYMBOLS as u8 {
                    v.push([a, b, c, d]);
                }
            }
        }
    }
    v
}

fn packed(s: [u8; 4]) -> usize {
    (s[0] as usize) << 9 | (s[1] as usize) << 6 | (s[2] as usize) << 3 | s[3] as usize
}

/// Where the keys are: the fraction of entries in each level and in L0 (a model for the
/// code; the filter is correct for any distribution, and compact for one close to it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shares {
    /// Fraction of entries in L1..L6.
    pub levels: [f64; LEVELS as usize],
    /// Fraction of entries in all L0 tables together.
    pub l0: f64,
}

impl Shares {
    /// The shares of per-run entry counts (indexed by run id).
    pub fn from_counts(counts: &[u64; MAX_RUNS]) -> Shares {
        let total: u64 = counts.iter().sum();
        let t = total.max(1) as f64;
        let mut levels = [0.0; LEVELS as usize];
        for (n, l) in levels.iter_mut().enumerate() {
            *l = counts[n] as f64 / t;
        }
        let l0 = counts[LEVELS as usize..].iter().sum::<u64>() as f64 / t;
        Shares { levels, l0 }
    }

    /// A leveled tree whose last level is `last` (1..=6) with ratio `t` between levels,
    /// and `l0` of the entries in L0: the last level holds the most, each level above it
    /// 1/t of the one below.
    pub fn leveled(last: u8, t: f64, l0: f64) -> Shares {
        let last = last.clamp(1, LEVELS);
        let mut levels = [0.0; LEVELS as usize];
        let mut w = 1.0;
        for n in (0..last as usize).rev() {
            levels[n] = w;
            w /= t;
        }
        let sum: f64 = levels.iter().sum();
        for l in &mut levels {
            *l *= (1.0 - l0) / sum;
        }
        Shares { levels, l0 }
    }

    /// Probability of each symbol in a slot at `load`.
    fn symbols(&self, load: f64) -> [f64; SYMBOLS] {
        let load = load.clamp(0.01, 0.999);
        let mut p = [0.0; SYMBOLS];
        for (x, l) in p.iter_mut().zip(&self.levels) {
            *x = l.max(FLOOR);
        }
        p[L0] = self.l0.max(FLOOR);
        let sum: f64 = p[..EMPTY].iter().sum();
        for x in &mut p[..EMPTY] {
            *x *= load / sum;
        }
        p[EMPTY] = 1.0 - load;
        p
    }
}

/// Probability of combination `c` (a multiset of 4) when slots are independent with
/// symbol probabilities `p`.
fn probability(c: [u8; 4], p: &[f64; SYMBOLS]) -> f64 {
    let mut perms = 24.0;
    let mut run = 1;
    for i in 1..4 {
        if c[i] == c[i - 1] {
            run += 1;
            perms /= run as f64;
        } else {
            run = 1;
        }
    }
    perms * c.iter().map(|&s| p[s as usize]).product::<f64>()
}

/// The parameters of a coded layout: bucket size, fingerprint widths per class, and the
/// length of each combination's code (0: no code).
#[derive(Clone, Debug, PartialEq)]
pub struct CodedSpec {
    /// Bits per bucket, S.
    pub bucket_bits: u8,
    /// Fingerprint bits of L1..L6 and L0 (an L0 field has 5 more bits, its table number).
    pub widths: [u8; 7],
    /// Code length of each combination (in the order of 4 ascending symbols, levels 0..=5,
    /// L0 6, empty 7), 0 for a combination without a code.
    pub lengths: Vec<u8>,
}

impl CodedSpec {
    /// A spec of `bucket_bits` and `widths` whose code favours the combinations likely
    /// under `shares` at `load` (see the module documentation).
    pub fn build(bucket_bits: u8, widths: [u8; 7], shares: &Shares, load: f64) -> Result<Self> {
        check_shape(bucket_bits, &widths)?;
        let fw = field_widths(&widths);
        let p = shares.symbols(load);
        let cs = combos();
        let unit = |len: u8| 1u64 << (MAX_CODE - len);
        let mut lengths = vec![0u8; COMBOS];
        let mut kraft = 0u64;
        let mut full = Vec::new();
        for (k, c) in cs.iter().enumerate() {
            let room = bound(bucket_bits, &fw, *c);
            if c[3] as usize == EMPTY {
                if room < 1 {
                    return Err(Error::InvalidArgument(format!(
                        "coded layout: three entries of widths {widths:?} do not fit a {bucket_bits}-bit bucket"
                    )));
                }
                lengths[k] = room as u8;
                kraft += unit(room as u8);
            } else if room >= 1 {
                full.push((probability(*c, &p) * f64::powi(2.0, room), k, room as u8));
            }
        }
        if kraft > unit(0) {
            return Err(Error::InvalidArgument(format!(
                "coded layout: the combinations with an empty slot need more code space than a {bucket_bits}-bit bucket has"
            )));
        }
        full.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        for (_, k, len) in full {
            if kraft + unit(len) <= unit(0) {
                kraft += unit(len);
                lengths[k] = len;
            }
        }
        let spec = CodedSpec {
            bucket_bits,
            widths,
            lengths,
        };
        spec.validate()?;
        Ok(spec)
    }

    /// The smallest bucket (12, 11, 10 or 9 per line) and the widths whose modelled
    /// false-positive rate at `load` under `shares` is at most `fpr` and with which a table
    /// of keys drawn from `shares` fills to `load` without stashing an entry (checked by
    /// filling one of 8,192 buckets); the most accurate spec that fills when none reaches
    /// `fpr`. Deterministic.
    pub fn for_fpr(fpr: f64, shares: &Shares, load: f64) -> CodedSpec {
        let mut classes: Vec<usize> = (0..7).collect();
        let share = |c: usize| if c == L0 { shares.l0 } else { shares.levels[c] };
        classes.sort_by(|&a, &b| share(b).total_cmp(&share(a)).then(a.cmp(&b)));
        let mut best: Option<(f64, CodedSpec)> = None;
        for &s in &SIZES {
            let mut candidates: Vec<(f64, CodedSpec)> = Vec::new();
            for f in MIN_WIDTH..=MAX_WIDTH {
                for d2 in 0..=2u8 {
                    for d3 in d2.max(1)..=3u8 {
                        for d0 in 0..=3u8 {
                            let mut w = [0u8; 7];
                            for (r, &c) in classes.iter().enumerate() {
                                let d = match r {
                                    0 => 0,
                                    1 => d2,
                                    _ => d3,
                                };
                                let d = if c == L0 { d0 } else { d };
                                w[c] = f.saturating_sub(d).clamp(MIN_WIDTH, MAX_WIDTH);
                            }
                            let Ok(spec) = CodedSpec::build(s, w, shares, load) else {
                                continue;
                            };
                            if spec.uncodable_mass(shares, load) > MAX_UNCODABLE
                                || candidates.iter().any(|(_, c)| c.widths == spec.widths)
                            {
                                continue;
                            }
                            candidates.push((spec.modelled_fpr(shares, load), spec));
                        }
                    }
                }
            }
            candidates.sort_by(|a, b| a.0.total_cmp(&b.0));
            // The most accurate that fills: at this bucket size a lower rate costs nothing.
            for (r, spec) in candidates.into_iter().take(TRIALS) {
                if !spec.fills(shares, load) {
                    continue;
                }
                if r <= fpr {
                    return spec;
                }
                if best.as_ref().is_none_or(|(b, _)| r < *b) {
                    best = Some((r, spec));
                }
                break;
            }
        }
        best.map(|(_, s)| s).unwrap_or_else(|| {
            // Every spec stashed early: the widest bucket with the narrowest fields.
            let w = [MIN_WIDTH; 7];
            CodedSpec::build(56, w, shares, load).unwrap_or(CodedSpec {
                bucket_bits: 56,
                widths: w,
                lengths: Vec::new(),
            })
        })
    }

    /// True when a table of `TRIAL_BUCKETS` buckets of this spec takes keys drawn from
    /// `shares` (L0 keys spread over 8 tables) up to `load` without stashing one.
    pub fn fills(&self, shares: &Shares, load: f64) -> bool {
        use super::{GlobalFilter, Layout};
        let Ok(f) = GlobalFilter::with_buckets(Layout::Coded(self.clone()), TRIAL_BUCKETS) else {
            return false;
        };
        let mut cum = [0.0; 7];
        let mut acc = 0.0;
        for (c, x) in cum.iter_mut().enumerate() {
            acc += if c == L0 { shares.l0 } else { shares.levels[c] };
            *x = acc;
        }
        let n = (f.buckets() as f64 * 4.0 * load) as u64;
        let mut w = f.writer();
        (0..n).all(|i| {
            let h = crate::hash::mix64(i ^ 0x7472_6961_6c00_0000);
            let u = (h >> 11) as f64 / (1u64 << 53) as f64 * acc;
            let c = cum.iter().position(|&x| u < x).unwrap_or(1);
            let run = if c == L0 {
                RunId(LEVELS + (h % 8) as u8)
            } else {
                RunId(c as u8)
            };
            w.insert(crate::hash::mix64(h), run)
        })
    }

    /// Checks every rule a spec must keep (also what decoding a checkpoint checks): sizes,
    /// widths, each length within its bound, every combination with an empty slot coded,
    /// and Kraft's inequality.
    pub fn validate(&self) -> Result<()> {
        check_shape(self.bucket_bits, &self.widths)?;
        if self.lengths.len() != COMBOS {
            return Err(Error::corrupt(
                0,
                format!(
                    "coded layout with {} code lengths, not {COMBOS}",
                    self.lengths.len()
                ),
            ));
        }
        let fw = field_widths(&self.widths);
        let mut kraft = 0u64;
        for (k, (c, &len)) in combos().iter().zip(&self.lengths).enumerate() {
            let room = bound(self.bucket_bits, &fw, *c);
            if len > 0 && (len as i32 > room || len > MAX_CODE) {
                return Err(Error::corrupt(
                    k as u64,
                    format!("code of {len} bits for combination {c:?}, room for {room}"),
                ));
            }
            if len == 0 && c[3] as usize == EMPTY {
                return Err(Error::corrupt(
                    k as u64,
                    format!("combination {c:?} with an empty slot has no code"),
                ));
            }
            if len > 0 {
                kraft += 1 << (MAX_CODE - len);
            }
        }
        if kraft > 1 << MAX_CODE {
            return Err(Error::corrupt(0, "code lengths break Kraft's inequality"));
        }
        Ok(())
    }

    /// Buckets per 64-byte line.
    pub fn per_line(&self) -> u32 {
        512 / self.bucket_bits as u32
    }

    /// Bits per entry at `load`: the line's 512 bits over its buckets' slots.
    pub fn bits_per_key(&self, load: f64) -> f64 {
        512.0 / (self.per_line() as f64 * 4.0 * load)
    }

    /// The modelled rate of false positives at `load` under `shares`: each of the 8 slots a
    /// query reads holds an entry of class c with probability load · share(c), which matches
    /// with probability 2^−width(c).
    pub fn modelled_fpr(&self, shares: &Shares, load: f64) -> f64 {
        let mut e = 0.0;
        for c in 0..7 {
            let share = if c == L0 { shares.l0 } else { shares.levels[c] };
            e += 8.0 * load * share * 0.5f64.powi(self.widths[c] as i32);
        }
        1.0 - (-e).exp()
    }

    /// The modelled share of buckets whose four entries form a combination without a code.
    pub fn uncodable_mass(&self, shares: &Shares, load: f64) -> f64 {
        let p = shares.symbols(load);
        combos()
            .iter()
            .zip(&self.lengths)
            .filter(|(_, &l)| l == 0)
            .map(|(c, _)| probability(*c, &p))
            .sum()
    }
}

fn check_shape(bucket_bits: u8, widths: &[u8; 7]) -> Result<()> {
    if !BUCKET_BITS.contains(&bucket_bits) {
        return Err(Error::corrupt(
            0,
            format!("coded bucket of {bucket_bits} bits outside {BUCKET_BITS:?}"),
        ));
    }
    if let Some(w) = widths.iter().find(|w| !(MIN_WIDTH..=MAX_WIDTH).contains(w)) {
        return Err(Error::corrupt(
            0,
            format!("fingerprint width {w} outside {MIN_WIDTH}..={MAX_WIDTH}"),
        ));
    }
    Ok(())
}

/// Field bits of each symbol: the class's width, 5 more for L0, none for an empty slot.
fn field_widths(widths: &[u8; 7]) -> [u8; SYMBOLS] {
    let mut fw = [0u8; SYMBOLS];
    fw[..7].copy_from_slice(widths);
    fw[L0] += L0_SUB_BITS as u8;
    fw
}

/// The longest code combination `c` has room for: S − Σ field widths, capped at
/// [`MAX_CODE`] (may be ≤ 0: no room).
fn bound(bucket_bits: u8, fw: &[u8; SYMBOLS], c: [u8; 4]) -> i32 {
    let used: i32 = c.iter().map(|&s| fw[s as usize] as i32).sum();
    (bucket_bits as i32 - used).min(MAX_CODE as i32)
}

/// A combination's fields, for decoding.
#[derive(Clone, Copy, Debug, Default)]
struct Info {
    /// Entries (slots not empty).
    k: u8,
    syms: [u8; 4],
    /// Bit offset and width of each field.
    off: [u8; 4],
    fw: [u8; 4],
}

/// A combination's fingerprint bits for the first, packed test of a query: the key's
/// fingerprint of width 32 − `shift[j]` placed at bit `pos[j]` for each slot, XORed with
/// the bucket and masked to the fingerprints (`fp`), is zero in a slot's field exactly where
/// that slot matches; `(x − lo) & !x & hi` is non-zero when some field is zero (and may also
/// flag the field above a zero one: the exact test settles those).
#[derive(Clone, Copy, Debug, Default)]
struct Packed {
    pos: [u8; 4],
    shift: [u8; 4],
    fp: u64,
    lo: u64,
    hi: u64,
}

/// How a query reads one slot of a combination, without a branch: the field is
/// `(v >> off) & mask`, its fingerprint `field >> sub`, compared with the key's top `fpw`
/// bits (`q >> shift`, shift = 32 − fpw), and a match names run `base + (field & runs)`;
/// `valid` is 0 for an empty slot, which then never matches.
#[derive(Clone, Copy, Debug, Default)]
struct Lane {
    off: u8,
    sub: u8,
    shift: u8,
    base: u8,
    runs: u32,
    mask: u32,
    valid: u32,
}

/// The runtime tables of a [`CodedSpec`].
#[derive(Debug)]
pub(super) struct Code {
    pub(super) bucket_bits: u32,
    pub(super) per_line: u32,
    /// ⌈2⁶⁴ / per_line⌉: i / per_line as a multiplication.
    div: u64,
    mask: u64,
    /// Fingerprint width per symbol (0 for empty).
    fpw: [u8; SYMBOLS],
    /// Code and length per combination (length 0: no code).
    enc: Vec<(u64, u8)>,
    info: Vec<Info>,
    packed: Vec<Packed>,
    lanes: Vec<[Lane; 4]>,
    /// Combination index of 4 ascending symbols (packed 3 bits each).
    index: Vec<u16>,
    /// Top MAX_CODE bits of a bucket → combination | length << 16, or u32::MAX for bits that
    /// begin no code.
    decode: Vec<u32>,
    /// The empty bucket's encoding, XORed into every stored bucket.
    empty: u64,
}

impl Code {
    pub(super) fn new(spec: &CodedSpec) -> Result<Code> {
        spec.validate()?;
        let s = spec.bucket_bits as u32;
        let fw = field_widths(&spec.widths);
        let mut fpw = [0u8; SYMBOLS];
        fpw[..7].copy_from_slice(&spec.widths);
        let cs = combos();
        let mut index = vec![u16::MAX; 1 << 12];
        let mut info = Vec::with_capacity(COMBOS);
        for (k, c) in cs.iter().enumerate() {
            index[packed(*c)] = k as u16;
            let mut i = Info {
                syms: *c,
                ..Info::default()
            };
            let mut off = 0u8;
            for j in 0..4 {
                if c[j] as usize != EMPTY {
                    i.k += 1;
                    i.off[j] = off;
                    i.fw[j] = fw[c[j] as usize];
                    off += fw[c[j] as usize];
                }
            }
            info.push(i);
        }
        let lanes: Vec<[Lane; 4]> = info
            .iter()
            .map(|i| {
                let mut l = [Lane {
                    shift: 31,
                    ..Lane::default()
                }; 4];
                for (j, lane) in l.iter_mut().enumerate().take(i.k as usize) {
                    let sym = i.syms[j] as usize;
                    let l0 = sym == L0;
                    *lane = Lane {
                        off: i.off[j],
                        sub: if l0 { L0_SUB_BITS as u8 } else { 0 },
                        shift: 32 - fpw[sym],
                        base: if l0 { LEVELS } else { sym as u8 },
                        runs: if l0 { (1 << L0_SUB_BITS) - 1 } else { 0 },
                        mask: ((1u64 << i.fw[j]) - 1) as u32,
                        valid: 1,
                    };
                }
                l
            })
            .collect();
        let packed: Vec<Packed> = info
            .iter()
            .map(|i| {
                let mut p = Packed {
                    pos: [63; 4],
                    shift: [31; 4],
                    ..Packed::default()
                };
                for j in 0..i.k as usize {
                    let sym = i.syms[j] as usize;
                    let sub = if sym == L0 { L0_SUB_BITS as u8 } else { 0 };
                    let w = fpw[sym];
                    p.pos[j] = i.off[j] + sub;
                    p.shift[j] = 32 - w;
                    p.fp |= ((1u64 << w) - 1) << p.pos[j];
                    p.lo |= 1 << p.pos[j];
                    p.hi |= 1 << (p.pos[j] + w - 1);
                }
                p
            })
            .collect();
        // Canonical code: by length, then combination index; codes of one length are
        // consecutive numbers, each length's first code follows the previous length's last.
        let mut coded: Vec<(u8, u16)> = spec
            .lengths
            .iter()
            .enumerate()
            .filter(|(_, &l)| l > 0)
            .map(|(k, &l)| (l, k as u16))
            .collect();
        coded.sort_unstable();
        let mut enc = vec![(0u64, 0u8); COMBOS];
        let mut decode = vec![u32::MAX; 1 << MAX_CODE];
        let mut next = 0u64;
        let mut prev_len = 0u8;
        for &(l, k) in &coded {
            next <<= l - prev_len;
            prev_len = l;
            enc[k as usize] = (next, l);
            let lo = (next << (MAX_CODE - l)) as usize;
            let hi = lo + (1usize << (MAX_CODE - l));
            for e in &mut decode[lo..hi] {
                *e = k as u32 | (l as u32) << 16;
            }
            next += 1;
        }
        let mut code = Code {
            bucket_bits: s,
            per_line: 512 / s,
            div: (u64::MAX / (512 / s) as u64) + 1,
            mask: if s == 64 { u64::MAX } else { (1 << s) - 1 },
            fpw,
            enc,
            info,
            packed,
            lanes,
            index,
            decode,
            empty: 0,
        };
        code.empty = code
            .encode_plain(&Slots::default())
            .ok_or_else(|| Error::corrupt(0, "coded layout: the empty bucket has no code"))?;
        Ok(code)
    }

    /// The symbol of a run: its level's (0..=5) or L0's.
    #[inline(always)]
    fn symbol(run: u8) -> usize {
        if run < LEVELS {
            run as usize
        } else {
            L0
        }
    }

    /// The fingerprint width of `run`'s class.
    pub(super) fn fp_width(&self, run: RunId) -> u32 {
        self.fpw[Self::symbol(run.index() as u8)] as u32
    }

    pub(super) fn entry(&self, hash: u64, run: RunId) -> Entry {
        let w = self.fp_width(run);
        Entry {
            run: run.index() as u8,
            fp: (hash as u32) >> (32 - w),
        }
    }

    pub(super) fn tag_of_entry(&self, e: Entry) -> u32 {
        e.fp >> (self.fpw[Self::symbol(e.run)] as u32 - ALT_BITS)
    }

    /// Bucket `i`'s first word and bit offset there.
    #[inline(always)]
    pub(super) fn place(&self, i: u64) -> (usize, u32) {
        let line = ((i as u128 * self.div as u128) >> 64) as u64;
        let pos = i - line * self.per_line as u64;
        let bit = pos as u32 * self.bucket_bits;
        (line as usize * 8 + (bit / 64) as usize, bit % 64)
    }

    #[inline(always)]
    pub(super) fn read(&self, words: &[std::sync::atomic::AtomicU64], i: u64) -> u64 {
        let (w, sh) = self.place(i);
        self.read_at(words, w, sh)
    }

    /// The bucket whose bits start at bit `sh` of word `w`: both words it may span are
    /// loaded and combined without a branch (a mispredicted branch here would cancel the
    /// second bucket's load); the second word is `w` itself at the end of a line, where no
    /// bucket crosses, so no other line is touched.
    #[inline(always)]
    pub(super) fn read_at(&self, words: &[std::sync::atomic::AtomicU64], w: usize, sh: u32) -> u64 {
        use std::sync::atomic::Ordering::Relaxed;
        let w2 = w + (w & 7 != 7) as usize;
        let lo = words.get(w).map_or(0, |x| x.load(Relaxed));
        let hi = words.get(w2).map_or(0, |x| x.load(Relaxed));
        // hi << (64 − sh), written so that sh = 0 shifts it out instead of overflowing.
        let v = lo >> sh | (hi << 1) << (63 - sh);
        (v & self.mask) ^ self.empty
    }

    pub(super) fn write(&self, words: &[std::sync::atomic::AtomicU64], i: u64, raw: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        let v = (raw ^ self.empty) & self.mask;
        let (w, sh) = self.place(i);
        let (Some(a), b) = (words.get(w), words.get(w + 1)) else {
            return;
        };
        let m = self.mask << sh;
        a.store((a.load(Relaxed) & !m) | (v << sh), Relaxed);
        if sh + self.bucket_bits > 64 {
            if let Some(b) = b {
                let m = self.mask >> (64 - sh);
                b.store((b.load(Relaxed) & !m) | (v >> (64 - sh)), Relaxed);
            }
        }
    }

    /// The combination of a bucket's bits and its code length; `None` for bits that are no
    /// code (never in a bucket the writer wrote).
    #[inline(always)]
    fn combo(&self, v: u64) -> Option<(usize, u32)> {
        let top = (v >> (self.bucket_bits - MAX_CODE as u32)) as usize & ((1 << MAX_CODE) - 1);
        let d = *self.decode.get(top)?;
        (d != u32::MAX).then_some(((d & 0xffff) as usize, d >> 16))
    }

    /// The entries of a bucket's bits, or `None` when the bits are not a valid bucket (no
    /// code, padding not zero, an L0 number out of range).
    pub(super) fn decode(&self, v: u64) -> Option<Slots> {
        let (k, len) = self.combo(v)?;
        let info = &self.info[k];
        let mut s = Slots::default();
        let mut used = 0u32;
        for j in 0..info.k as usize {
            let field = (v >> info.off[j]) & ((1u64 << info.fw[j]) - 1);
            let sym = info.syms[j] as usize;
            let e = if sym == L0 {
                let sub = (field & ((1 << L0_SUB_BITS) - 1)) as u8;
                if sub as usize >= MAX_RUNS - LEVELS as usize {
                    return None;
                }
                Entry {
                    run: LEVELS + sub,
                    fp: (field >> L0_SUB_BITS) as u32,
                }
            } else {
                Entry {
                    run: sym as u8,
                    fp: field as u32,
                }
            };
            s.e[j] = e;
            used += info.fw[j] as u32;
        }
        s.n = info.k as usize;
        // Padding between the fields and the code is zero.
        let pad = (v & !(u64::MAX << (self.bucket_bits - len))) >> used;
        (pad == 0).then_some(s)
    }

    /// The bits of a bucket holding `s` (XORed by the caller), or `None` when its
    /// combination has no code.
    fn encode_plain(&self, s: &Slots) -> Option<u64> {
        let mut items: [(usize, u64); 4] = [(EMPTY, 0); 4];
        for (j, e) in s.entries().iter().enumerate() {
            let sym = Self::symbol(e.run);
            let field = if sym == L0 {
                (e.fp as u64) << L0_SUB_BITS | (e.run - LEVELS) as u64
            } else {
                e.fp as u64
            };
            items[j] = (sym, field);
        }
        items.sort_unstable();
        let syms = items.map(|(s, _)| s as u8);
        let k = *self.index.get(packed(syms))? as usize;
        let (code, len) = *self.enc.get(k)?;
        if len == 0 {
            return None;
        }
        let info = &self.info[k];
        let mut v = code << (self.bucket_bits - len as u32);
        for (item, off) in items.iter().zip(info.off).take(info.k as usize) {
            v |= item.1 << off;
        }
        Some(v)
    }

    pub(super) fn encode(&self, s: &Slots) -> Option<u64> {
        self.encode_plain(s)
    }

    /// The runs of buckets `b1` and `b2` whose entry matches `hash`'s fingerprint.
    #[inline(always)]
    pub(super) fn matches(&self, b1: u64, b2: u64, hash: u64) -> RunSet {
        let q = hash as u32;
        RunSet(self.match_one(b1, q) | self.match_one(b2, q))
    }

    #[inline(always)]
    fn match_one(&self, v: u64, q: u32) -> u32 {
        let top = (v >> (self.bucket_bits - MAX_CODE as u32)) as usize & ((1 << MAX_CODE) - 1);
        let d = self.decode.get(top).copied().unwrap_or(u32::MAX) & 0xffff;
        let Some(p) = self.packed.get(d as usize) else {
            return 0; // no code: never in a bucket the writer wrote
        };
        let mut want = 0u64;
        for j in 0..4 {
            want |= ((q >> p.shift[j]) as u64) << p.pos[j];
        }
        let x = (v ^ want) & p.fp;
        if x.wrapping_sub(p.lo) & !x & p.hi == 0 {
            return 0;
        }
        self.match_exact(d as usize, v, q)
    }

    /// The exact test of each slot (after the packed test found a candidate).
    #[cold]
    fn match_exact(&self, k: usize, v: u64, q: u32) -> u32 {
        let Some(lanes) = self.lanes.get(k) else {
            return 0;
        };
        let mut set = 0u64;
        for l in lanes {
            let field = (v >> l.off) as u32 & l.mask;
            let hit = ((field >> l.sub) == q >> l.shift) as u32 & l.valid;
            let run = l.base as u32 + (field & l.runs);
            set |= (hit as u64) << (run & 63);
        }
        set as u32
    }

    /// Bytes of the code tables.
    pub(super) fn memory_bytes(&self) -> u64 {
        (self.enc.len() * 16
            + self.info.len() * std::mem::size_of::<Info>()
            + self.lanes.len() * std::mem::size_of::<[Lane; 4]>()
            + self.packed.len() * std::mem::size_of::<Packed>()
            + self.index.len() * 2
            + self.decode.len() * 4) as u64
    }
}

/// The tag of a key's fingerprint that picks its alternate bucket.
#[inline(always)]
pub(super) fn tag_of_hash(hash: u64) -> u32 {
    (hash as u32) >> (32 - ALT_BITS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::mix64;

    fn spec() -> CodedSpec {
        CodedSpec::build(
            42,
            [9, 10, 8, 8, 8, 8, 8],
            &Shares::leveled(2, 10.0, 0.0),
            0.955,
        )
        .unwrap()
    }

    #[test]
    fn every_combination_with_an_empty_slot_has_a_code() {
        let s = spec();
        s.validate().unwrap();
        for (c, &l) in combos().iter().zip(&s.lengths) {
            if c[3] as usize == EMPTY {
                assert!(l > 0, "{c:?}");
            }
        }
        // The common full combinations of a two-level tree are coded.
        let code = Code::new(&s).unwrap();
        for c in [[1u8, 1, 1, 1], [0, 1, 1, 1], [0, 0, 1, 1]] {
            assert!(code.enc[code.index[packed(c)] as usize].1 > 0, "{c:?}");
        }
    }

    /// Every bucket of random entries whose combination has a code round-trips through
    /// encode and decode, queries find exactly the matching entries, and a zeroed table
    /// decodes as empty buckets.
    #[test]
    fn buckets_round_trip() {
        let s = spec();
        let code = Code::new(&s).unwrap();
        // A zeroed table reads as empty buckets.
        let zero: Vec<std::sync::atomic::AtomicU64> = (0..8)
            .map(|_| std::sync::atomic::AtomicU64::new(0))
            .collect();
        for i in 0..code.per_line as u64 {
            assert_eq!(code.decode(code.read(&zero, i)).map(|s| s.n), Some(0));
        }
        let mut x = 5u64;
        let (mut coded, mut total) = (0, 0);
        for _ in 0..100_000 {
            x = mix64(x);
            let q = x;
            let mut slots = Slots::default();
            for _ in 0..(x >> 61) as usize % 5 {
                x = mix64(x);
                let run = match x % 8 {
                    0..=3 => 1,
                    4 | 5 => 0,
                    6 => 6 + (x >> 40) as u8 % 26,
                    _ => (x >> 30) as u8 % 6,
                };
                let h = if x.is_multiple_of(3) { q } else { x };
                slots.e[slots.n] = code.entry(h, RunId(run));
                slots.n += 1;
            }
            total += 1;
            let Some(v) = code.encode(&slots) else {
                assert_eq!(slots.n, 4, "a partial bucket must encode");
                continue;
            };
            coded += 1;
            let back = code.decode(v).expect("decodes");
            let mut a = back.entries().to_vec();
            let mut b = slots.entries().to_vec();
            a.sort();
            b.sort();
            assert_eq!(a, b);
            let want = slots
                .entries()
                .iter()
                .filter(|e| *e == &code.entry(q, RunId(e.run)))
                .fold(0u32, |m, e| m | 1 << e.run);
            assert_eq!(code.matches(v, v, q).0, want);
        }
        assert!(coded > total * 9 / 10, "{coded} of {total} coded");
    }

    /// The bucket read and write functions keep their neighbours' bits, at every position
    /// of a line (across word boundaries).
    #[test]
    fn packed_buckets_keep_neighbours() {
        use std::sync::atomic::AtomicU64;
        for bits in [42u8, 46, 51, 56] {
            let s = CodedSpec::build(
                bits,
                [9, 10, 8, 8, 8, 8, 8],
                &Shares::leveled(2, 10.0, 0.0),
                0.9,
            )
            .unwrap();
            let code = Code::new(&s).unwrap();
            let n = code.per_line as u64 * 3;
            let words: Vec<AtomicU64> = (0..24).map(|_| AtomicU64::new(0)).collect();
            let vals: Vec<u64> = (0..n).map(|i| mix64(i) & code.mask).collect();
            for i in 0..n {
                code.write(&words, i, vals[i as usize]);
            }
            for i in 0..n {
                assert_eq!(
                    code.read(&words, i),
                    vals[i as usize],
                    "bits {bits} bucket {i}"
                );
            }
        }
    }

    #[test]
    fn for_fpr_meets_the_rate_for_a_drained_tree() {
        let sh = Shares::leveled(2, 10.0, 0.0);
        let s = CodedSpec::for_fpr(0.01, &sh, 0.955);
        assert!(s.modelled_fpr(&sh, 0.955) <= 0.01);
        assert!(s.fills(&sh, 0.955));
        assert_eq!(s.per_line(), 12, "{s:?}");
        // With 2 % of the keys in L0 (an L0 field has 5 more bits), 42 bits do not fill.
        let sh = Shares {
            levels: [0.10, 0.88, 0.0, 0.0, 0.0, 0.0],
            l0: 0.02,
        };
        let s = CodedSpec::for_fpr(0.01, &sh, 0.955);
        assert!(s.modelled_fpr(&sh, 0.955) <= 0.01);
        assert!(s.fills(&sh, 0.955));
        assert_eq!(s.per_line(), 11, "{s:?}");
    }

    #[test]
    fn validate_refuses_broken_specs() {
        let mut s = spec();
        s.lengths[0] = 0; // the all-level-1 combination... has no empty slot: allowed
        s.validate().unwrap();
        let last = COMBOS - 1; // four empty slots
        s.lengths[last] = 0;
        assert!(s.validate().is_err());
        let mut s = spec();
        for l in &mut s.lengths {
            if *l > 1 {
                *l = 1;
            }
        }
        assert!(s.validate().is_err(), "Kraft");
        let mut s = spec();
        s.widths[0] = 7;
        assert!(s.validate().is_err());
    }
}
