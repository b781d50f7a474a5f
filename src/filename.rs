//! Every name in a store directory, and the parser that reads them back (as LevelDB's
//! `db/filename.{h,cc}`): nothing else in the crate spells a store file's name.
//!
//! ```text
//! NNNNNN.sst     a table                                 ┐ numbered: one counter
//! NNNNNN.filter  a table's filter                        │ (the manifest's next_file),
//! NNNNNN.range   a table's range filter                  │
//! NNNNNN.rdel    a table's range tombstones              │
//! NNNNNN.khash   a table's key hashes (global filter)    │
//! NNNNNN.wal     a write-ahead log                       ┘ six or more decimal digits
//! MANIFEST       the live tables, levels and filter files
//! MANIFEST.tmp   the next MANIFEST, until it is renamed over it
//! COUNTERS       the lifetime counters
//! COUNTERS.tmp   the next COUNTERS, until it is renamed over it
//! GLOBALFILTER   a checkpoint of the global filter (a store under the global policy)
//! GLOBALFILTER.tmp  the next GLOBALFILTER, until it is renamed over it
//! GLOBALFILTER-ID      the checkpoint of named keyspace ID's global filter (ID: 1 to
//! GLOBALFILTER-ID.tmp  2^32 - 1, decimal, no leading zero), and the next one
//! LOCK           held with an exclusive flock while the store is open
//! lost/          what `store repair` could not use
//! ```
//! `format.md` ("Store directory") says what each holds. A new kind of numbered file is one
//! line of the `numbered_kinds!` list below.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Defines [`Numbered`] from one line per kind of numbered file: its name, its extension,
/// whether it belongs to one table (removed at open when no manifest names it, and moved to
/// `lost/` by repair), and what it holds.
macro_rules! numbered_kinds {
    ($($kind:ident $ext:literal $per_table:literal $what:literal;)*) => {
        /// The kinds of numbered file (`NNNNNN.EXT`) in a store directory.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Numbered {
            $(#[doc = $what] $kind,)*
        }

        impl Numbered {
            /// Every kind.
            pub const ALL: &'static [Numbered] = &[$(Numbered::$kind),*];

            /// The file name extension, without the dot.
            pub const fn extension(self) -> &'static str {
                match self {
                    $(Numbered::$kind => $ext,)*
                }
            }

            /// True for the files that belong to one table (the manifest names them in the
            /// table's record); false for the logs.
            pub const fn per_table(self) -> bool {
                match self {
                    $(Numbered::$kind => $per_table,)*
                }
            }
        }
    };
}

numbered_kinds! {
    // kind  extension  per table  what it holds
    Table    "sst"      true       "`NNNNNN.sst`: a table (sorted data, index, meta, footer).";
    Filter   "filter"   true       "`NNNNNN.filter`: one filter block, for one table.";
    Range    "range"    true       "`NNNNNN.range`: one range filter block, for one table.";
    Tombstones "rdel"   true       "`NNNNNN.rdel`: the range tombstones of one table.";
    KeyHashes "khash"   true       "`NNNNNN.khash`: the key hashes of one table (global filter).";
    Wal      "wal"      false      "`NNNNNN.wal`: a write-ahead log.";
}

impl Numbered {
    /// The kind whose extension is `ext`.
    pub fn from_extension(ext: &str) -> Option<Numbered> {
        Numbered::ALL.iter().copied().find(|k| k.extension() == ext)
    }

    /// `dir/NNNNNN.EXT` for file number `n`.
    pub fn path(self, dir: &Path, n: u64) -> PathBuf {
        FileName::Numbered(self, n).path(dir)
    }
}

/// A name in a store directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FileName {
    /// `NNNNNN.EXT`: file number `n` of a [`Numbered`] kind.
    Numbered(Numbered, u64),
    /// `MANIFEST`.
    Manifest,
    /// `MANIFEST.tmp`.
    ManifestTmp,
    /// `COUNTERS`.
    Counters,
    /// `COUNTERS.tmp`.
    CountersTmp,
    /// `GLOBALFILTER`: the global filter's checkpoint.
    GlobalFilter,
    /// `GLOBALFILTER.tmp`.
    GlobalFilterTmp,
    /// `GLOBALFILTER-ID`: the global filter's checkpoint of named keyspace `ID` (not 0: the
    /// default keyspace's is [`FileName::GlobalFilter`]).
    KeyspaceGlobalFilter(u32),
    /// `GLOBALFILTER-ID.tmp`.
    KeyspaceGlobalFilterTmp(u32),
    /// `LOCK`.
    Lock,
    /// `lost/`, the directory repair moves what it cannot use into.
    Lost,
}

/// The manifest's file name.
pub const MANIFEST_NAME: &str = "MANIFEST";
/// The directory, inside the store's, that repair moves what it cannot use into.
pub const LOST_DIR: &str = "lost";

/// The fixed names, with what they parse to.
const FIXED: [(&str, FileName); 8] = [
    (MANIFEST_NAME, FileName::Manifest),
    ("MANIFEST.tmp", FileName::ManifestTmp),
    ("COUNTERS", FileName::Counters),
    ("COUNTERS.tmp", FileName::CountersTmp),
    ("GLOBALFILTER", FileName::GlobalFilter),
    ("GLOBALFILTER.tmp", FileName::GlobalFilterTmp),
    ("LOCK", FileName::Lock),
    (LOST_DIR, FileName::Lost),
];

impl FileName {
    /// What `name` (a directory entry's name, no directory) is in a store; `None` for a
    /// name the store does not use.
    ///
    /// ```
    /// use filterstore::filename::{FileName, Numbered};
    /// assert_eq!(FileName::parse("000042.sst"), Some(FileName::Numbered(Numbered::Table, 42)));
    /// assert_eq!(FileName::parse("1234567.wal"), Some(FileName::Numbered(Numbered::Wal, 1234567)));
    /// assert_eq!(FileName::parse("MANIFEST"), Some(FileName::Manifest));
    /// assert_eq!(FileName::parse("notes.txt"), None);
    /// ```
    pub fn parse(name: &str) -> Option<FileName> {
        if let Some(&(_, f)) = FIXED.iter().find(|(n, _)| *n == name) {
            return Some(f);
        }
        if let Some(rest) = name.strip_prefix(KEYSPACE_GLOBAL_PREFIX) {
            return match rest.strip_suffix(".tmp") {
                Some(id) => parse_keyspace_id(id).map(FileName::KeyspaceGlobalFilterTmp),
                None => parse_keyspace_id(rest).map(FileName::KeyspaceGlobalFilter),
            };
        }
        let (n, ext) = parse_numbered(name)?;
        Some(FileName::Numbered(Numbered::from_extension(ext)?, n))
    }

    /// `dir` joined with this name.
    pub fn path(self, dir: &Path) -> PathBuf {
        dir.join(self.to_string())
    }

    /// The global filter checkpoint of keyspace `id` and its temporary name:
    /// `GLOBALFILTER` and `GLOBALFILTER.tmp` for the default keyspace (0), else
    /// `GLOBALFILTER-ID` and `GLOBALFILTER-ID.tmp`.
    pub fn global_filter(id: u32) -> (FileName, FileName) {
        match id {
            0 => (FileName::GlobalFilter, FileName::GlobalFilterTmp),
            id => (
                FileName::KeyspaceGlobalFilter(id),
                FileName::KeyspaceGlobalFilterTmp(id),
            ),
        }
    }
}

/// What a named keyspace's global filter checkpoint's name starts with.
const KEYSPACE_GLOBAL_PREFIX: &str = "GLOBALFILTER-";

/// A named keyspace's id as its checkpoint's name spells it: 1 to 2^32 - 1 in decimal
/// digits, without a leading zero (one spelling per id).
fn parse_keyspace_id(s: &str) -> Option<u32> {
    if s.is_empty() || s.starts_with('0') || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The keyspace global filter checkpoints of `dir` (`GLOBALFILTER-ID` and its `.tmp`), by
/// keyspace id; unreadable directories and other names are skipped.
pub(crate) fn keyspace_global_files(dir: &Path) -> Vec<(u32, FileName)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        match e.file_name().to_str().and_then(FileName::parse) {
            Some(f @ FileName::KeyspaceGlobalFilter(id))
            | Some(f @ FileName::KeyspaceGlobalFilterTmp(id)) => out.push((id, f)),
            _ => {}
        }
    }
    out.sort_by_key(|&(id, f)| (id, f.to_string()));
    out
}

impl fmt::Display for FileName {
    /// The name as it is on disk: `000042.sst`, `MANIFEST`, `lost`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileName::Numbered(kind, n) => write!(f, "{n:06}.{}", kind.extension()),
            FileName::KeyspaceGlobalFilter(id) => write!(f, "{KEYSPACE_GLOBAL_PREFIX}{id}"),
            FileName::KeyspaceGlobalFilterTmp(id) => {
                write!(f, "{KEYSPACE_GLOBAL_PREFIX}{id}.tmp")
            }
            other => {
                let name = FIXED
                    .iter()
                    .find(|(_, x)| x == other)
                    .map_or("", |(n, _)| n);
                f.write_str(name)
            }
        }
    }
}

/// A numbered name split into its number and extension (whatever the extension): the part
/// before the first dot must be decimal digits.
fn parse_numbered(name: &str) -> Option<(u64, &str)> {
    let (num, ext) = name.split_once('.')?;
    if !num.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((num.parse().ok()?, ext))
}

/// `dir/NNNNNN.sst`.
pub(crate) fn table_path(dir: &Path, n: u64) -> PathBuf {
    Numbered::Table.path(dir, n)
}

/// `dir/NNNNNN.filter`.
pub(crate) fn filter_path(dir: &Path, n: u64) -> PathBuf {
    Numbered::Filter.path(dir, n)
}

/// `dir/NNNNNN.range`.
pub(crate) fn range_path(dir: &Path, n: u64) -> PathBuf {
    Numbered::Range.path(dir, n)
}

/// `dir/NNNNNN.rdel`.
pub(crate) fn tombstones_path(dir: &Path, n: u64) -> PathBuf {
    Numbered::Tombstones.path(dir, n)
}

/// `dir/NNNNNN.khash`.
pub(crate) fn key_hashes_path(dir: &Path, n: u64) -> PathBuf {
    Numbered::KeyHashes.path(dir, n)
}

/// `dir/NNNNNN.wal`.
pub(crate) fn wal_path(dir: &Path, n: u64) -> PathBuf {
    Numbered::Wal.path(dir, n)
}

/// The numbered files of `dir`, sorted by number: (number, kind), the kind `None` for an
/// extension this build does not know (its number is still taken: numbers are never
/// reused).
pub(crate) fn numbered_files(dir: &Path) -> Result<Vec<(u64, Option<Numbered>)>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let e = e.map_err(|e| Error::io(dir, e))?;
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some((n, ext)) = parse_numbered(name) {
            out.push((n, Numbered::from_extension(ext)));
        }
    }
    out.sort();
    Ok(out)
}

/// The number after every numbered file's in `dir` (`files` as [`numbered_files`] lists
/// them), 1 when there is none: where a store that never reuses a number goes on. A file
/// numbered `u64::MAX` leaves none: an error naming it.
pub(crate) fn number_after(dir: &Path, files: &[(u64, Option<Numbered>)]) -> Result<u64> {
    let Some(&(n, kind)) = files.iter().max_by_key(|(n, _)| *n) else {
        return Ok(1);
    };
    n.checked_add(1).ok_or_else(|| {
        // The name as it is (an unknown extension, leading zeros), found again.
        let path = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name())
            .find(|name| name.to_str().and_then(parse_numbered).map(|p| p.0) == Some(n))
            .map(|name| dir.join(name))
            .or_else(|| kind.map(|k| k.path(dir, n)))
            .unwrap_or_else(|| dir.to_path_buf());
        Error::corrupt(
            0,
            format!("file number {n} is the largest there is: no number is left for a new file"),
        )
        .in_file(path, 0)
    })
}

/// The error of a store whose next file number, `n`, is the largest there is (numbers are
/// never reused): the MANIFEST it opened with named it.
pub(crate) fn numbers_exhausted(dir: &Path, n: u64) -> Error {
    Error::corrupt(
        0,
        format!(
            "the next file number, {n}, is the largest there is: no number is left for a new file"
        ),
    )
    .in_file(FileName::Manifest.path(dir), 0)
}

/// Whether `dir` holds a table or a log (`NNNNNN.sst`, `NNNNNN.wal`): data that a store
/// without a manifest would have lost track of.
pub fn has_data_files(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            e.file_name()
                .to_str()
                .and_then(FileName::parse)
                .is_some_and(|f| {
                    matches!(f, FileName::Numbered(Numbered::Table | Numbered::Wal, _))
                })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The number after the largest, 1 for none, and an error naming the file at `u64::MAX`.
    #[test]
    fn number_after_the_largest_never_wraps() {
        let dir = Path::new("/nonexistent");
        let t = Some(Numbered::Table);
        assert_eq!(number_after(dir, &[]).unwrap(), 1);
        assert_eq!(number_after(dir, &[(3, t), (9, None), (4, t)]).unwrap(), 10);
        assert_eq!(number_after(dir, &[(u64::MAX - 1, t)]).unwrap(), u64::MAX);
        let e = number_after(dir, &[(2, None), (u64::MAX, t)]).unwrap_err();
        assert!(e.to_string().contains("18446744073709551615.sst"), "{e}");
    }

    fn every_fixed_and_numbered() -> Vec<FileName> {
        let mut all: Vec<FileName> = FIXED.iter().map(|&(_, f)| f).collect();
        for &k in Numbered::ALL {
            for n in [0, 1, 42, 999_999, 1_000_000, u64::MAX] {
                all.push(FileName::Numbered(k, n));
            }
        }
        for id in [1, 9, 10, 4_000_000, u32::MAX] {
            all.push(FileName::KeyspaceGlobalFilter(id));
            all.push(FileName::KeyspaceGlobalFilterTmp(id));
        }
        all
    }

    #[test]
    fn every_name_parses_back() {
        for f in every_fixed_and_numbered() {
            assert_eq!(FileName::parse(&f.to_string()), Some(f), "{f}");
        }
    }

    #[test]
    fn the_names_are_those_of_format_md() {
        let dir = Path::new("d");
        assert_eq!(table_path(dir, 7), dir.join("000007.sst"));
        assert_eq!(filter_path(dir, 7), dir.join("000007.filter"));
        assert_eq!(range_path(dir, 7), dir.join("000007.range"));
        assert_eq!(tombstones_path(dir, 7), dir.join("000007.rdel"));
        assert_eq!(wal_path(dir, 1_234_567), dir.join("1234567.wal"));
        let names: Vec<String> = FIXED.iter().map(|(_, f)| f.to_string()).collect();
        assert_eq!(
            names,
            [
                "MANIFEST",
                "MANIFEST.tmp",
                "COUNTERS",
                "COUNTERS.tmp",
                "GLOBALFILTER",
                "GLOBALFILTER.tmp",
                "LOCK",
                "lost"
            ]
        );
        let exts: Vec<&str> = Numbered::ALL.iter().map(|k| k.extension()).collect();
        assert_eq!(exts, ["sst", "filter", "range", "rdel", "khash", "wal"]);
        let per_table: Vec<bool> = Numbered::ALL.iter().map(|k| k.per_table()).collect();
        assert_eq!(per_table, [true, true, true, true, true, false]);
        assert_eq!(
            FileName::global_filter(0),
            (FileName::GlobalFilter, FileName::GlobalFilterTmp)
        );
        let (f, tmp) = FileName::global_filter(12);
        assert_eq!(
            (f.to_string(), tmp.to_string()),
            ("GLOBALFILTER-12".into(), "GLOBALFILTER-12.tmp".into())
        );
    }

    #[test]
    fn other_names_are_not_the_stores() {
        for name in [
            "",
            ".",
            "..",
            "sst",
            ".sst",
            "x.sst",
            "00001x.sst",
            "000001.SST",
            "000001.tmp",
            "000001",
            "+5.sst",
            "-5.sst",
            "manifest",
            "MANIFEST.",
            "LOCK.tmp",
            "lost.1",
            "18446744073709551616.sst",
            "GLOBALFILTER-",
            "GLOBALFILTER-.tmp",
            "GLOBALFILTER-0",
            "GLOBALFILTER-0.tmp",
            "GLOBALFILTER-01",
            "GLOBALFILTER-+1",
            "GLOBALFILTER--1",
            "GLOBALFILTER-1x",
            "GLOBALFILTER-1.TMP",
            "GLOBALFILTER-1.tmp.tmp",
            "GLOBALFILTER-1.bak",
            "GLOBALFILTER-4294967296",
            "GLOBALFILTER.1",
            "globalfilter-1",
        ] {
            assert_eq!(FileName::parse(name), None, "{name:?}");
        }
    }

    #[test]
    fn a_listing_keeps_every_number_and_knows_the_kinds() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "000003.wal",
            "000001.sst",
            "000002.filter",
            "000009.sst.part",
            "MANIFEST",
            "LOCK",
            "notes.txt",
        ] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        std::fs::create_dir(dir.path().join(LOST_DIR)).unwrap();
        assert_eq!(
            numbered_files(dir.path()).unwrap(),
            [
                (1, Some(Numbered::Table)),
                (2, Some(Numbered::Filter)),
                (3, Some(Numbered::Wal)),
                (9, None),
            ]
        );
        assert!(has_data_files(dir.path()));
        std::fs::remove_file(dir.path().join("000001.sst")).unwrap();
        std::fs::remove_file(dir.path().join("000003.wal")).unwrap();
        assert!(!has_data_files(dir.path()), "a filter alone is not data");
    }

    #[test]
    fn keyspace_checkpoints_are_listed_by_id() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "GLOBALFILTER",
            "GLOBALFILTER-7.tmp",
            "GLOBALFILTER-3",
            "GLOBALFILTER-03",
            "GLOBALFILTER-7",
            "GLOBALFILTER-x",
        ] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        assert_eq!(
            keyspace_global_files(dir.path()),
            [
                (3, FileName::KeyspaceGlobalFilter(3)),
                (7, FileName::KeyspaceGlobalFilter(7)),
                (7, FileName::KeyspaceGlobalFilterTmp(7)),
            ]
        );
    }
}
