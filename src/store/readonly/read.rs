//! One consistent read of the writer's files for a read-only handle: the manifest, the
//! tables it names (each keyspace's table set apart), the live logs (from where the last
//! read stopped), and the manifest again; tried again while the writer changes them.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use super::MAX_TRIES;
use crate::counters::Sharded;
use crate::error::{Error, Result};
use crate::filename::{numbered_files, wal_path, FileName, Numbered};
use crate::filter::FilterKind;
use crate::manifest::Manifest;
use crate::store::global_save::load_checkpoint;
use crate::store::Options;
use crate::table::files::TableFiles;
use crate::table::BlockCache;
use crate::version::{TableHandle, Version};
use crate::wal::{replay_ops_by, KeyspaceIds, OwnedOp, WAL_HEADER_LEN};

/// Operations read from a log, each with its keyspace id.
pub(super) type Ops = Vec<(u32, OwnedOp)>;

/// What one read of a log found.
pub(super) struct LogRead {
    pub n: u64,
    /// The end of its last whole record.
    pub end: u64,
    /// Operations past where the read started.
    pub ops: Ops,
}

/// One consistent read of the writer's files.
pub(super) struct Read1 {
    pub manifest_bytes: Vec<u8>,
    pub manifest: Manifest,
    /// Each tree's table set, by keyspace id: the default keyspace's first, then the live
    /// keyspaces' in the manifest's order.
    pub versions: Vec<(u32, Version)>,
    /// The logs some tree still needs, oldest first, each read from its offset in the
    /// `from` of [`read_all`] (else from its start).
    pub logs: Vec<LogRead>,
    pub last_seq: u64,
}

impl Read1 {
    /// The flushed-log number of keyspace `id`'s tree (`None`: not live).
    pub fn log_number(&self, id: u32) -> Option<u64> {
        if id == 0 {
            return Some(self.manifest.log_number);
        }
        let k = self.manifest.keyspaces.live.iter().find(|k| k.id == id)?;
        Some(k.log_number)
    }

    /// Keyspace `id`'s share of the logs: each log it still needs (numbered at or past
    /// `log_number`) with its operations of that keyspace.
    pub fn tree_logs(&self, id: u32, log_number: u64) -> Vec<TreeLog<'_>> {
        let logs = self.logs.iter().filter(|l| l.n >= log_number);
        logs.map(|l| TreeLog {
            n: l.n,
            ops: l
                .ops
                .iter()
                .filter(|(k, _)| *k == id)
                .map(|(_, op)| op)
                .collect(),
        })
        .collect()
    }
}

/// One log's operations of one tree.
pub(super) struct TreeLog<'a> {
    pub n: u64,
    pub ops: Vec<&'a OwnedOp>,
}

/// Why a try failed: start over, or give up.
enum Retry {
    Again(Error),
    Fail(Error),
}

impl From<Error> for Retry {
    fn from(e: Error) -> Retry {
        match &e {
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                Retry::Again(e)
            }
            _ => Retry::Fail(e),
        }
    }
}

fn read_manifest(dir: &Path) -> Result<(Vec<u8>, Manifest)> {
    let path = FileName::Manifest.path(dir);
    let bytes = std::fs::read(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            Error::InvalidArgument(format!("no store at {}", dir.display()))
        }
        _ => Error::io(&path, e),
    })?;
    let m = Manifest::decode(&bytes).map_err(|e| e.in_file(&path, 0))?;
    Ok((bytes, m))
}

/// Reads log `n` (open as `f`) from `from` (a record boundary; 0 for the whole file): its
/// operations, the end of its last whole record and its last sequence number.
fn read_log(
    dir: &Path,
    (n, mut f): (u64, &File),
    from: u64,
    ids: KeyspaceIds,
    ops: &mut Ops,
) -> Result<(u64, Option<u64>, u64)> {
    let path = wal_path(dir, n);
    let mut bytes = Vec::new();
    let skip = if from > WAL_HEADER_LEN as u64 {
        // The header, then the records past `from`: replayed as a log of their own.
        let mut header = [0u8; WAL_HEADER_LEN];
        f.read_exact(&mut header).map_err(|e| Error::io(&path, e))?;
        bytes.extend_from_slice(&header);
        f.seek(SeekFrom::Start(from))
            .map_err(|e| Error::io(&path, e))?;
        from - WAL_HEADER_LEN as u64
    } else {
        0
    };
    f.read_to_end(&mut bytes).map_err(|e| Error::io(&path, e))?;
    let end = replay_ops_by(&bytes, ids, |id, op| ops.push((id, op)))
        .map_err(|e| e.in_file(&path, skip))?;
    let valid = if end.valid_len == 0 {
        from
    } else {
        end.valid_len + skip
    };
    Ok((valid.max(from), end.last_seq, end.records))
}

/// Opens every log in `dir` numbered past `after`, oldest first. A log gone between the
/// listing and its opening is left out: the writer deleted it after a manifest that no
/// longer needs it, one that every later read of the manifest sees.
fn open_logs(dir: &Path, after: Option<u64>, into: &mut Vec<(u64, File)>) -> Result<()> {
    for (n, kind) in numbered_files(dir)? {
        if kind != Some(Numbered::Wal) || after.is_some_and(|a| n <= a) {
            continue;
        }
        let path = wal_path(dir, n);
        match File::open(&path) {
            Ok(f) => into.push((n, f)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&path, e)),
        }
    }
    Ok(())
}

/// Where a read starts: each log's offset already read (a log not listed is read whole),
/// and the table handles already open (kept for the tables still named as they were).
pub(super) struct ReadFrom<'a> {
    pub offsets: &'a [(u64, u64)],
    pub have: &'a HashMap<u64, Arc<TableHandle>>,
}

/// One consistent read of the store in `dir`, tried again while the writer changes it under
/// it (see the module documentation).
pub(super) fn read_all(
    dir: &Path,
    opts: &Options,
    cache: &Option<Arc<BlockCache>>,
    counters: &dyn Fn(u32) -> Arc<Sharded<8>>,
    from: &ReadFrom<'_>,
) -> Result<Read1> {
    let mut last = None;
    for i in 0..MAX_TRIES {
        match try_read(dir, opts, cache, counters, from) {
            Ok(Some(r)) => return Ok(r),
            Ok(None) => {}
            Err(Retry::Again(e)) => last = Some(e),
            Err(Retry::Fail(e)) => return Err(e),
        }
        // Again at once, then after a pause that doubles up to 16 ms (about 0.2 s in all):
        // a writer busy flushing is let finish.
        match i {
            0..=2 => std::thread::yield_now(),
            _ => std::thread::sleep(std::time::Duration::from_millis(1 << (i - 3).min(4))),
        }
    }
    let why = last.map_or_else(
        || "the manifest kept changing".to_string(),
        |e| e.to_string(),
    );
    Err(Error::Internal(format!(
        "read-only open of {}: no consistent read in {MAX_TRIES} tries ({why})",
        dir.display()
    )))
}

/// One try: `Ok(None)` when the manifest changed under it.
fn try_read(
    dir: &Path,
    opts: &Options,
    cache: &Option<Arc<BlockCache>>,
    counters: &dyn Fn(u32) -> Arc<Sharded<8>>,
    from: &ReadFrom<'_>,
) -> std::result::Result<Option<Read1>, Retry> {
    // The logs are opened before the manifest is read: what is open stays readable when the
    // writer deletes it, and a log the manifest needs was either listed here or made after
    // the listing (module documentation).
    let mut wals = Vec::new();
    open_logs(dir, None, &mut wals).map_err(Retry::Fail)?;
    let listed = wals.last().map(|(n, _)| *n);
    let (manifest_bytes, manifest) = read_manifest(dir).map_err(Retry::Fail)?;
    let mut by_tree: Vec<(u32, Vec<Arc<TableHandle>>)> = std::iter::once(0)
        .chain(manifest.keyspaces.live.iter().map(|k| k.id))
        .map(|id| (id, Vec::new()))
        .collect();
    for r in &manifest.tables {
        let t = match from.have.get(&r.number) {
            Some(t) if t.record == *r => Arc::clone(t),
            _ => Arc::new(TableHandle::open(
                dir,
                r.clone(),
                TableFiles::named(&opts.fs, dir, r),
                opts.mmap_reads,
                cache.as_ref(),
            )?),
        };
        // The manifest refuses a table of a keyspace it does not list.
        if let Some((_, ts)) = by_tree.iter_mut().find(|(id, _)| *id == r.keyspace) {
            ts.push(t);
        }
    }
    let mut versions: Vec<(u32, Version)> = by_tree
        .into_iter()
        .map(|(id, ts)| (id, Version::new(ts)))
        .collect();
    // The writer's saved global filter of each keyspace under one (`GLOBALFILTER`,
    // `GLOBALFILTER-ID`), when it answers for exactly these tables (it is saved at close);
    // else lookups go to the tables' own filters or indexes.
    let policies =
        std::iter::once(manifest.policy).chain(manifest.keyspaces.live.iter().map(|k| k.policy));
    for ((id, v), policy) in versions.iter_mut().zip(policies) {
        if policy.kind() == FilterKind::Global {
            if let Some(loaded) = load_checkpoint(dir, *id, v, counters(*id)) {
                *v = loaded;
            }
        }
    }
    // Logs some tree still needs: each read on from where a refresh stopped.
    let offsets: HashMap<u64, u64> = from.offsets.iter().copied().collect();
    let mut logs = Vec::new();
    let mut last_seq = manifest.last_seq;
    let live_ids: Vec<u32> = manifest.keyspaces.live.iter().map(|k| k.id).collect();
    let ids = crate::store::tree::keyspace_ids(&manifest, &live_ids);
    let min_log = manifest.log_numbers().min().unwrap_or(0);
    // Every tree's flushed-log number at or below the newest log listed: no tree's tables
    // hold writes of a log made after the listing, so the logs listed (each read to its
    // end now, the newest to its last whole record) and the tables make one prefix of the
    // commit order. Else (a flush of a log made after the listing, or a store whose logs
    // are all older than its log numbers) the logs made since are opened too, and the
    // manifest read again must be unchanged, which shows no flush or log deletion happened
    // between its two reads.
    let newest_flushed = manifest.log_numbers().max().unwrap_or(0);
    if listed.is_none_or(|n| newest_flushed > n) {
        open_logs(dir, listed, &mut wals).map_err(Retry::Fail)?;
        let (again, _) = read_manifest(dir).map_err(Retry::Fail)?;
        if again != manifest_bytes {
            return Ok(None);
        }
    }
    for (n, f) in &wals {
        if *n < min_log {
            continue;
        }
        let start = offsets.get(n).copied().unwrap_or(0);
        let mut ops = Vec::new();
        let (end, seq, records) = read_log(dir, (*n, f), start, ids, &mut ops)?;
        last_seq = match seq {
            Some(s) => last_seq.max(s),
            None => last_seq.saturating_add(records),
        };
        logs.push(LogRead { n: *n, end, ops });
    }
    Ok(Some(Read1 {
        manifest_bytes,
        manifest,
        versions,
        logs,
        last_seq,
    }))
}
