//! Hyphenation exceptions: parsing, the lookup seam, and the in-memory implementation.
//!
//! An exception is stored as key = the lower-cased word (`associate`), value = its
//! lower-cased hyphenated form as written in the list (`as-so-ciate`). A value without a
//! hyphen means "never hyphenate this word". The hyphenator applies the hyphen minimums to
//! the stored hyphens when it uses them, so the stored value is the list's entry unchanged.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::Path;

use super::patterns::is_letters;
use filterstore::{Error, Result};

/// Where the hyphenator asks whether a word is an exception.
///
/// `lower_word` is the lower-cased word (ASCII letters only) and `hash` is
/// [`filterstore::hash::key_hash`]`(lower_word)`, computed once per word so that a store can hand it
/// to the filter of every table. The answer is the hyphenated form (lower case, `-` between
/// parts, e.g. `as-so-ciate`), or `None` when the word is not an exception.
pub trait ExceptionLookup {
    /// Looks `lower_word` up.
    fn lookup(&self, lower_word: &[u8], hash: u64) -> Result<Option<Vec<u8>>>;

    /// True when this source can never hold an exception: the hyphenator then skips
    /// the hashing and the lookup altogether (and counts no lookup).
    fn is_always_empty(&self) -> bool {
        false
    }
}

impl<T: ExceptionLookup + ?Sized> ExceptionLookup for &T {
    fn lookup(&self, lower_word: &[u8], hash: u64) -> Result<Option<Vec<u8>>> {
        (**self).lookup(lower_word, hash)
    }
    fn is_always_empty(&self) -> bool {
        (**self).is_always_empty()
    }
}

/// No exceptions: patterns only.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoExceptions;

impl ExceptionLookup for NoExceptions {
    fn lookup(&self, _lower_word: &[u8], _hash: u64) -> Result<Option<Vec<u8>>> {
        Ok(None)
    }
    fn is_always_empty(&self) -> bool {
        true
    }
}

/// One parsed exception: the lower-cased word and its lower-cased hyphenated form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exception {
    /// The word without hyphens, lower case (the key).
    pub word: Vec<u8>,
    /// The hyphenated form, lower case (the value), e.g. `as-so-ciate`.
    pub hyphenated: Vec<u8>,
}

impl Exception {
    /// Parses one entry such as `as-so-ciate` or `Ying-yong` (case is folded).
    ///
    /// The entry must be ASCII letters and hyphens, with at least one letter, and no hyphen at
    /// either end or twice in a row.
    pub fn parse(entry: &str) -> Result<Exception> {
        let bytes = entry.as_bytes();
        let bad = |why: &str| {
            let shown: String = entry.chars().take(60).collect();
            Error::InvalidArgument(format!("bad hyphenation exception {shown:?}: {why}"))
        };
        if bytes.first() == Some(&b'-') || bytes.last() == Some(&b'-') {
            return Err(bad("hyphen at an end"));
        }
        if bytes.windows(2).any(|w| w == b"--") {
            return Err(bad("two hyphens in a row"));
        }
        let hyphenated: Vec<u8> = bytes.iter().map(|b| b.to_ascii_lowercase()).collect();
        let word: Vec<u8> = hyphenated.iter().copied().filter(|&b| b != b'-').collect();
        if !is_letters(&word) {
            return Err(bad("not made of ASCII letters and hyphens"));
        }
        Ok(Exception { word, hyphenated })
    }
}

/// Parses an exception list in either of two forms:
///
/// * TeX: every `\hyphenation{...}` block of the text (entries separated by white space);
/// * plain (when the text has no `\hyphenation`): white-space separated entries.
///
/// In both forms `%` starts a comment that runs to the end of the line.
pub fn parse_exceptions(text: &str) -> Result<Vec<Exception>> {
    let mut clean = String::with_capacity(text.len());
    for line in text.lines() {
        match line.find('%') {
            Some(p) => clean.push_str(&line[..p]),
            None => clean.push_str(line),
        }
        clean.push('\n');
    }
    let mut out = Vec::new();
    const CMD: &str = "\\hyphenation";
    if !clean.contains(CMD) {
        for tok in clean.split_whitespace() {
            out.push(Exception::parse(tok)?);
        }
        return Ok(out);
    }
    let mut rest = clean.as_str();
    while let Some(p) = rest.find(CMD) {
        let after = rest[p + CMD.len()..].trim_start();
        let body = after.strip_prefix('{').ok_or_else(|| {
            Error::InvalidArgument("\\hyphenation not followed by '{'".to_string())
        })?;
        let end = body
            .find('}')
            .ok_or_else(|| Error::InvalidArgument("\\hyphenation block without '}'".to_string()))?;
        for tok in body[..end].split_whitespace() {
            out.push(Exception::parse(tok)?);
        }
        rest = &body[end + 1..];
    }
    Ok(out)
}

/// Exceptions held in memory, indexed by the word's [`filterstore::hash::key_hash`] (so a lookup
/// reuses the hash the hyphenator already computed instead of hashing again).
///
/// A 65,536-bit map of the hashes' top 16 bits (8 KB, in front of the hash table like a
/// filter) answers most absent words with one bit test: with the 1,766 built-in
/// exceptions, 97 % of other words stop there.
///
/// A later entry for the same word replaces an earlier one, as in TeX.
#[derive(Debug, Clone, Default)]
pub struct MemoryExceptions {
    /// `(lower-cased word, hyphenated form)`.
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    /// key hash -> first entry with that hash.
    index: HashMap<u64, u32, BuildHasherDefault<PassThrough>>,
    /// Next entry with the same key hash (`NONE` ends the chain).
    chain: Vec<u32>,
    /// Bit `hash >> 48` is set when an entry's key hash has those top 16 bits (empty until
    /// the first insert).
    top_bits: Vec<u64>,
}

/// Words of [`MemoryExceptions::top_bits`]: 2^16 bits.
const TOP_WORDS: usize = (1 << 16) / 64;

const NONE: u32 = u32::MAX;

/// A hasher for keys that are already good 64-bit hashes.
#[derive(Debug, Clone, Copy, Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = filterstore::hash::mix64(self.0 ^ b as u64);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

impl MemoryExceptions {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// The built-in US English exceptions: Knuth's 14 (`hyph-en-us.hyp.txt`) followed by the
    /// TUGboat list (`ushyphex.tex`), which therefore wins where both name a word.
    pub fn en_us() -> Result<Self> {
        let mut m = Self::new();
        m.extend(parse_exceptions(super::EN_US_KNUTH_EXCEPTIONS)?);
        m.extend(parse_exceptions(super::EN_US_TUGBOAT_EXCEPTIONS)?);
        Ok(m)
    }

    /// Parses `text` (see [`parse_exceptions`]) and adds its entries.
    pub fn add_text(&mut self, text: &str) -> Result<()> {
        self.extend(parse_exceptions(text)?);
        Ok(())
    }

    /// Reads a file (see [`parse_exceptions`]) and adds its entries.
    pub fn add_file(&mut self, path: &Path) -> Result<()> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        self.add_text(&text)
            .map_err(|e| Error::InvalidArgument(format!("{}: {e}", path.display())))
    }

    /// Adds one entry, replacing any earlier one for the same word.
    pub fn insert(&mut self, e: Exception) {
        let hash = filterstore::hash::key_hash(&e.word);
        if let Some(i) = self.find(&e.word, hash) {
            self.entries[i].1 = e.hyphenated;
            return;
        }
        if self.top_bits.is_empty() {
            self.top_bits = vec![0; TOP_WORDS];
        }
        let top = (hash >> 48) as usize;
        if let Some(w) = self.top_bits.get_mut(top / 64) {
            *w |= 1 << (top % 64);
        }
        let i = self.entries.len() as u32;
        let head = self.index.insert(hash, i).unwrap_or(NONE);
        self.chain.push(head);
        self.entries.push((e.word, e.hyphenated));
    }

    #[inline]
    fn find(&self, lower_word: &[u8], hash: u64) -> Option<usize> {
        let top = (hash >> 48) as usize;
        if self.top_bits.get(top / 64)? & (1 << (top % 64)) == 0 {
            return None;
        }
        let mut i = *self.index.get(&hash)?;
        while let Some((k, _)) = self.entries.get(i as usize) {
            if k == lower_word {
                return Some(i as usize);
            }
            i = *self.chain.get(i as usize)?;
        }
        None
    }

    /// Number of distinct words.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there is no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries as `(key, value)` pairs, sorted by key (e.g. to bulk-load a store).
    pub fn sorted_entries(&self) -> Vec<(&[u8], &[u8])> {
        let mut v: Vec<(&[u8], &[u8])> = self
            .entries
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
            .collect();
        v.sort_unstable();
        v
    }

    /// The stored hyphenated form of `lower_word`.
    pub fn get(&self, lower_word: &[u8]) -> Option<&[u8]> {
        let i = self.find(lower_word, filterstore::hash::key_hash(lower_word))?;
        self.entries.get(i).map(|(_, v)| v.as_slice())
    }
}

impl Extend<Exception> for MemoryExceptions {
    fn extend<I: IntoIterator<Item = Exception>>(&mut self, iter: I) {
        for e in iter {
            self.insert(e);
        }
    }
}

impl ExceptionLookup for MemoryExceptions {
    /// `hash` must be `key_hash(lower_word)` (as the hyphenator passes it); with another
    /// value the word is not found.
    fn lookup(&self, lower_word: &[u8], hash: u64) -> Result<Option<Vec<u8>>> {
        Ok(self
            .find(lower_word, hash)
            .and_then(|i| self.entries.get(i))
            .map(|(_, v)| v.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_entries() {
        let e = Exception::parse("Ying-yong").unwrap();
        assert_eq!(e.word, b"yingyong");
        assert_eq!(e.hyphenated, b"ying-yong");
        for bad in ["-ab", "ab-", "a--b", "", "-", "a1b", "naïve", "a b"] {
            assert!(Exception::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parses_tex_blocks_and_plain_lists() {
        let tex = "% c {x}\n\\hyphenation{\n  ta-ble % table\n  Ying-yong Shu-xue\n}\n% EOF\n";
        let v = parse_exceptions(tex).unwrap();
        let words: Vec<&[u8]> = v.iter().map(|e| e.hyphenated.as_slice()).collect();
        assert_eq!(words, vec![&b"ta-ble"[..], b"ying-yong", b"shu-xue"]);
        let v = parse_exceptions("as-so-ciate\npresent\n").unwrap();
        assert_eq!(v.len(), 2);
        assert!(parse_exceptions("\\hyphenation{ab-c").is_err());
    }

    #[test]
    fn builtin_lists_have_the_expected_sizes() {
        let knuth = parse_exceptions(crate::hyph::EN_US_KNUTH_EXCEPTIONS).unwrap();
        let tug = parse_exceptions(crate::hyph::EN_US_TUGBOAT_EXCEPTIONS).unwrap();
        assert_eq!(knuth.len(), 14);
        assert_eq!(tug.len(), 1753);
        assert_eq!(
            tug.iter().filter(|e| !e.hyphenated.contains(&b'-')).count(),
            47
        );
        let m = MemoryExceptions::en_us().unwrap();
        // reciprocity is in both lists; the TUGboat entry wins.
        assert_eq!(m.get(b"reciprocity"), Some(&b"rec-i-proc-i-ty"[..]));
        assert_eq!(m.get(b"table"), Some(&b"ta-ble"[..]));
        assert_eq!(m.len(), 14 + 1753 - 1);
        assert_eq!(m.sorted_entries().len(), m.len());
        let h = filterstore::hash::key_hash(b"table");
        assert_eq!(m.lookup(b"table", h).unwrap(), Some(b"ta-ble".to_vec()));
        assert_eq!(m.lookup(b"tables", h).unwrap(), None);
    }
}
