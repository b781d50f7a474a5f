//! The on-disk exception dictionary: a filterstore directory (key = lower-cased word, value =
//! hyphenated form) whose tables are fronted by a filter, so most words never touch the disk.
//!
//! [`ExceptionDict::open_or_build`] loads the exception sources into the store on first use
//! (one atomic batch, then a flush, so the entries sit in a table behind a filter) and reuses
//! the directory afterwards. A digest of the sources is kept under [`DIGEST_KEY`], a key that
//! starts with `#` and so can never be a word (words are ASCII letters). When the sources
//! change, only the difference is applied (changed and new entries put, removed ones deleted,
//! then one flush); the dictionary is never rebuilt. When the requested filter differs from
//! the tables' filter, the tables are refiltered (filters rebuilt, no data rewritten).

use std::path::{Path, PathBuf};

use super::exceptions::{parse_exceptions, ExceptionLookup, MemoryExceptions};
use filterstore::{
    Error, FilterKind, Options, PinnedReader, Reader, Result, Stats, Store, SyncPolicy, WriteBatch,
};

/// The reserved key holding the digest of the exception sources (never a word).
pub const DIGEST_KEY: &[u8] = b"#sources-digest";

/// One exception list: a name for messages and its text (TeX `\hyphenation{...}` or plain).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExceptionSource {
    /// Where the text came from (shown in error messages).
    pub name: String,
    /// The list's text.
    pub text: String,
}

impl ExceptionSource {
    /// A source from a name and its text.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        ExceptionSource {
            name: name.into(),
            text: text.into(),
        }
    }

    /// Reads a file.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Ok(ExceptionSource::new(path.display().to_string(), text))
    }

    /// The built-in US English lists: Knuth's 14 exceptions, then the TUGboat list.
    pub fn en_us() -> Vec<ExceptionSource> {
        vec![
            ExceptionSource::new(
                "hyph-en-us.hyp.txt (built in)",
                super::EN_US_KNUTH_EXCEPTIONS,
            ),
            ExceptionSource::new("ushyphex.tex (built in)", super::EN_US_TUGBOAT_EXCEPTIONS),
        ]
    }
}

/// Parses the sources in order (a later entry for a word replaces an earlier one, as in TeX).
pub fn load_sources(sources: &[ExceptionSource]) -> Result<MemoryExceptions> {
    let mut m = MemoryExceptions::new();
    for s in sources {
        let list = parse_exceptions(&s.text)
            .map_err(|e| Error::InvalidArgument(format!("{}: {e}", s.name)))?;
        m.extend(list);
    }
    Ok(m)
}

/// A digest of the sources' texts, in order (xxh3-64 over length-prefixed texts, hex).
pub fn sources_digest(sources: &[ExceptionSource]) -> String {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&(sources.len() as u64).to_le_bytes());
    for s in sources {
        h.update(&(s.text.len() as u64).to_le_bytes());
        h.update(s.text.as_bytes());
    }
    format!("v1:{:016x}", h.digest())
}

/// What [`ExceptionDict::open_or_build`] did to bring the directory up to date.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// The store was empty: every entry was loaded.
    pub built: bool,
    /// Entries put (new or changed words).
    pub put: usize,
    /// Entries deleted (words no longer in the sources).
    pub deleted: usize,
    /// The tables' filters were rebuilt for a different kind or rate.
    pub refiltered: bool,
    /// Distinct exception words in the sources.
    pub entries: usize,
}

impl SyncReport {
    /// True when the directory was used as it was (no write, no refilter).
    pub fn reused(&self) -> bool {
        !self.built && self.put == 0 && self.deleted == 0 && !self.refiltered
    }
}

/// The exception dictionary on disk (see the module documentation).
pub struct ExceptionDict {
    store: Store,
    dir: PathBuf,
    report: SyncReport,
}

impl std::fmt::Debug for ExceptionDict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExceptionDict")
            .field("dir", &self.dir)
            .field("report", &self.report)
            .finish()
    }
}

impl ExceptionDict {
    /// Opens the dictionary in `dir` (creating it when missing) and brings it up to date with
    /// `sources`: first use loads everything; a changed digest applies only the difference;
    /// a `kind`/`fpr` different from the tables' filter refilters the tables. `None` keeps
    /// the store's own choice (blocked-bloom at 1 % for a new one).
    pub fn open_or_build(
        dir: impl AsRef<Path>,
        sources: &[ExceptionSource],
        kind: Option<FilterKind>,
        fpr: Option<f64>,
    ) -> Result<ExceptionDict> {
        let wanted = load_sources(sources)?;
        let digest = sources_digest(sources);
        Self::open_with(dir.as_ref(), &wanted, &digest, kind, fpr)
    }

    /// Like [`open_or_build`](Self::open_or_build) with the exceptions already parsed and
    /// their digest computed by the caller.
    pub fn open_with(
        dir: &Path,
        wanted: &MemoryExceptions,
        digest: &str,
        kind: Option<FilterKind>,
        fpr: Option<f64>,
    ) -> Result<ExceptionDict> {
        let opts = Options::default()
            .filter(kind)
            .fpr(fpr)
            .sync(SyncPolicy::OnFlush)
            .create_if_missing(true)
            // The dictionary is one table (a change adds a small one, and its compaction runs
            // below): no idle or scan drain, which would merge its L0 into L1 under the
            // lookups and leave a pinned reader counting in a table the store no longer lists.
            .idle_drain(None)
            .scan_drain(false);
        let store = Store::open(dir, opts)?;
        let mut report = SyncReport {
            entries: wanted.len(),
            ..SyncReport::default()
        };
        let stored_digest = store.get(DIGEST_KEY)?;
        if stored_digest.as_deref() != Some(digest.as_bytes()) {
            let mut batch = WriteBatch::new();
            let wanted_entries = wanted.sorted_entries();
            // The store's words, in key order; '#' sorts before every letter.
            let mut have: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            for e in store.scan::<&[u8]>(..) {
                let (k, v) = e?;
                if !k.starts_with(b"#") {
                    have.push((k.into(), v.into()));
                }
            }
            report.built = have.is_empty() && stored_digest.is_none();
            let (mut i, mut j) = (0, 0);
            while i < wanted_entries.len() || j < have.len() {
                let w = wanted_entries.get(i);
                let h = have.get(j);
                match (w, h) {
                    (Some(&(wk, wv)), Some((hk, hv))) if wk == hk.as_slice() => {
                        if wv != hv.as_slice() {
                            batch.put(wk, wv);
                            report.put += 1;
                        }
                        i += 1;
                        j += 1;
                    }
                    (Some(&(wk, wv)), Some((hk, _))) if wk < hk.as_slice() => {
                        batch.put(wk, wv);
                        report.put += 1;
                        i += 1;
                    }
                    (Some(&(wk, wv)), None) => {
                        batch.put(wk, wv);
                        report.put += 1;
                        i += 1;
                    }
                    (_, Some((hk, _))) => {
                        batch.delete(hk.clone());
                        report.deleted += 1;
                        j += 1;
                    }
                    (None, None) => break,
                }
            }
            batch.put(DIGEST_KEY, digest.as_bytes());
            store.write(batch)?;
            store.flush()?;
            // The compactions this change made due run now, not in the background under the
            // lookups (or beside a refilter) that follow; a small change stays a small table.
            store.wait_for_compaction()?;
        }
        if kind.is_some() || fpr.is_some() {
            let (k, e) = store.filter();
            let differs = store
                .stats()
                .tables
                .iter()
                .any(|t| t.filter_kind != k || (k != FilterKind::None && t.target_fpr != e));
            if differs {
                store.refilter(k, e)?;
                report.refiltered = true;
            }
        }
        Ok(ExceptionDict {
            store,
            dir: dir.to_path_buf(),
            report,
        })
    }

    /// What opening did.
    pub fn report(&self) -> SyncReport {
        self.report
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The underlying store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// A lookup source for one thread pinned to the dictionary's tables (see
    /// [`Store::pinned_reader`]): no lock, no check of the store's state and no memtable
    /// per word, the one table of a built dictionary asked directly; use it for a run of
    /// many words. Writes made to the store after this call are not seen by it.
    pub fn reader(&self) -> Result<PinnedReader> {
        self.store.pinned_reader()
    }

    /// The store's counters (diff two snapshots for per-run figures).
    pub fn stats(&self) -> Stats {
        self.store.stats()
    }
}

impl ExceptionLookup for ExceptionDict {
    /// One [`Store::get_with_hash`] with the hyphenator's hash (no second hashing).
    fn lookup(&self, lower_word: &[u8], hash: u64) -> Result<Option<Vec<u8>>> {
        Ok(self.store.get_with_hash(lower_word, hash)?.map(Vec::from))
    }
}

impl ExceptionLookup for Reader {
    /// One [`Reader::get_with_hash`] with the hyphenator's hash.
    fn lookup(&self, lower_word: &[u8], hash: u64) -> Result<Option<Vec<u8>>> {
        Ok(self.get_with_hash(lower_word, hash)?.map(Vec::from))
    }
}

impl ExceptionLookup for PinnedReader {
    /// One [`PinnedReader::get_with_hash`] with the hyphenator's hash.
    #[inline]
    fn lookup(&self, lower_word: &[u8], hash: u64) -> Result<Option<Vec<u8>>> {
        Ok(self.get_with_hash(lower_word, hash)?.map(Vec::from))
    }
}
