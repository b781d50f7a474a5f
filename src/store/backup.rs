//! Online checkpoints ([`Store::checkpoint`]): a second store directory made while writers
//! run, from hard links of the immutable table files and a manifest naming exactly them.
//!
//! The steps, each through the store's [`Fs`](crate::io::Fs) (so crash tests reach every
//! one): the cut, a flush of every keyspace's memtable made at one instant of the commit
//! order (every write committed before it goes into a table, none after it: memtables
//! queued since are not sealed until the table sets are taken); under the global-filter
//! locks and each tree's version-set lock, every tree's current
//! [`Version`](crate::version::Version) and a manifest naming their tables with the
//! keyspace records (each version is held until the end: a compaction that retires its
//! tables cannot delete their files, see `table/files.rs`); a temporary directory next to
//! the destination; a hard link (a copy, fsynced, where linking fails with `EXDEV`) of
//! each table's files; the global filter's saved state, when lookups go through one; the
//! manifest (written, fsynced, renamed, directory fsynced); the temporary directory renamed
//! to the destination (refusing to replace anything); the parent directory fsynced. Until
//! that rename no directory of the destination's name exists, and the temporary one has no
//! `MANIFEST` until its last file step, so an interrupted checkpoint leaves nothing that
//! opens as the destination.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

use super::global_save::table_set_tag;
use super::{Inner, Store};
use crate::error::{Error, Result};
use crate::filename::FileName;
use crate::io::{replace_file, Fs};
use crate::manifest::Manifest;
use crate::version::Version;

/// `EXDEV`: a hard link across file systems.
const EXDEV: i32 = 18;

/// Distinguishes the temporary directories of checkpoints made at once by one process.
static TMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// What a checkpoint made (see [`Store::checkpoint_with_report`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckpointReport {
    /// Table, filter and range-filter files linked.
    pub linked_files: u64,
    /// Files copied because linking failed with `EXDEV` (another file system).
    pub copied_files: u64,
    /// Bytes of the copied files.
    pub copied_bytes: u64,
    /// Bytes of the files written anew: the manifest and the global filter's saved state.
    pub written_bytes: u64,
}

impl Store {
    /// Makes a checkpoint of the store in `dest` while writers go on: a store directory
    /// that holds, in every keyspace, exactly the writes committed before one instant (its
    /// cut) during the call: every write acknowledged before the call began, and possibly
    /// later ones that form a prefix of the commit order (whole batches only, a batch
    /// across keyspaces included). Open it as a store, or copy it back in place of a lost
    /// store: that is the restore (docs/engine.md, "Checkpoints"). Called on a
    /// [`Keyspace`](super::Keyspace)'s handle, it is still the whole store's.
    ///
    /// It flushes every keyspace's memtable first, then hard-links the table files of the
    /// resulting table sets (copying them when `dest` is on another file system) and
    /// writes a manifest naming exactly them; no log is copied. `dest` must not exist; its parent must. The
    /// directory appears under its name only once complete and durable; a failure or a
    /// crash on the way leaves no directory named `dest` (a crash may leave a temporary
    /// `.NAME.checkpoint-*` directory beside it, which never opens as `dest` and can be
    /// removed). The source store is never changed beyond the flush.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let store = filterstore::Store::open(dir.path().join("db"), Default::default())?;
    /// store.put("k", "v")?;
    /// store.checkpoint(dir.path().join("copy"))?;
    /// let copy = filterstore::Store::open(dir.path().join("copy"), Default::default())?;
    /// assert_eq!(copy.get("k")?.as_deref(), Some(&b"v"[..]));
    /// # Ok::<(), filterstore::Error>(())
    /// ```
    pub fn checkpoint(&self, dest: impl AsRef<Path>) -> Result<()> {
        self.checkpoint_with_report(dest).map(|_| ())
    }

    /// [`Store::checkpoint`], returning what it linked, copied and wrote.
    pub fn checkpoint_with_report(&self, dest: impl AsRef<Path>) -> Result<CheckpointReport> {
        let dest = dest.as_ref();
        // A checkpoint is the store's, whichever of its handles asks.
        let inner = &self.handle.inner;
        inner.check_writable()?;
        match std::fs::symlink_metadata(dest) {
            Ok(_) => {
                return Err(Error::InvalidArgument(format!(
                    "checkpoint destination {} exists",
                    dest.display()
                )))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(dest, e)),
        }
        let name = dest.file_name().ok_or_else(|| {
            Error::InvalidArgument(format!("checkpoint destination {}", dest.display()))
        })?;
        let parent = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        // 1 and 2: the cut, and the table sets that hold exactly it.
        let mut tries = 0;
        let (versions, manifest, global) = loop {
            if let Some(cut) = inner.cut()? {
                break cut;
            }
            tries += 1;
            if tries == MAX_CUTS {
                return Err(Error::Internal(format!(
                    "checkpoint of {}: keyspaces dropped under {MAX_CUTS} cuts in a row",
                    inner.dir.display()
                )));
            }
        };
        let tmp = parent.join(format!(
            ".{}.checkpoint-{}-{}",
            name.to_string_lossy(),
            std::process::id(),
            TMP_SEQ.fetch_add(1, SeqCst)
        ));
        let fs = &*inner.fs;
        let made = write_dir(fs, &tmp, &versions, &manifest, &global);
        let report = match made {
            Ok(r) => r,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(e);
            }
        };
        drop(versions);
        // 3. Published under its name, then durably so.
        if let Err(e) = fs.rename_dir(&tmp, dest) {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(Error::io(dest, e));
        }
        if let Err(e) = fs.sync_dir(&parent) {
            // Complete but perhaps not durable: taken back, best effort.
            let _ = std::fs::remove_dir_all(dest);
            return Err(Error::io(&parent, e));
        }
        Ok(report)
    }
}

/// Cuts a checkpoint tries before it gives up, each undone by a keyspace dropped between
/// its cut and its table sets.
const MAX_CUTS: usize = 10;

/// What a cut gives a checkpoint: every tree's table set (held until the files are
/// linked), the manifest naming exactly their tables, the saved bytes of the global filter
/// of each keyspace under one, by keyspace id.
type Cut = (Vec<Arc<Version>>, Manifest, Vec<(u32, Vec<u8>)>);

/// Holds back the seal of every memtable queued after a checkpoint's cut until dropped
/// (`Bg::seal_holds`).
struct SealHold<'a> {
    inner: &'a Inner,
    at: u64,
}

impl Drop for SealHold<'_> {
    fn drop(&mut self) {
        let mut bg = self.inner.lock_bg();
        if let Some(i) = bg.seal_holds.iter().position(|&h| h == self.at) {
            bg.seal_holds.swap_remove(i);
        }
        self.inner.bg_cv.notify_all();
    }
}

impl Inner {
    /// Steps 1 and 2 of a checkpoint, on the store's `Inner`: the cut, then the table sets
    /// that hold exactly the writes before it. `None` when a keyspace live at the cut was
    /// dropped before its table set was taken (the caller cuts again).
    fn cut(self: &Arc<Inner>) -> Result<Option<Cut>> {
        // 1. The cut: under the writer lock, every tree's memtable made immutable at one
        // instant of the commit order, so every write committed before it is about to be
        // in a table and none after it is; then no memtable queued since is sealed until
        // the table sets are taken (a later one of one tree would hold half of a batch
        // whose other half is in another tree's memtable).
        let (trees, records, hold) = {
            let mut w = self.lock_writer();
            self.check_writable()?;
            let trees = self.all_trees();
            let slots: Vec<usize> = trees.iter().map(|t| t.tree.slot).collect();
            let target = self.switch_trees(&mut w, &slots)?;
            let records = self.manifest.lock().keyspaces.clone();
            self.lock_bg().seal_holds.push(target);
            let hold = SealHold {
                inner: self,
                at: target,
            };
            (trees, records, (hold, target))
        };
        let (hold, target) = hold;
        self.wait_sealed(target)?;
        // 2. Each tree's table set and its part of the manifest; with, for each tree under
        // the global filter, its filter's bytes for exactly its tables (taken under its
        // global-filter locks: no flush or compaction changes it meanwhile). Every version is held until the end: a compaction that retires
        // its tables cannot delete their files (`table/files.rs`).
        let (v, mut manifest, mut global) = {
            let _change = self.lock_global_change();
            let _global = self.lock_global();
            let (v, m) = self.tree.versions.snapshot_manifest();
            let g = v.global().map(|g| (0, g.filter.encode(table_set_tag(&v))));
            (v, m, Vec::from_iter(g))
        };
        manifest.keyspaces = records;
        let mut versions = vec![v];
        let mut live = Vec::new();
        for t in &trees[1..] {
            // Its global filter's bytes for exactly its table set, as the default's.
            let _change = t.lock_global_change();
            let _global = t.lock_global();
            let (v, m) = t.tree.versions.snapshot_manifest();
            // Taken after the table set: a keyspace not dropped by now had its whole set.
            if t.tree.dropped.load(SeqCst) {
                return Ok(None);
            }
            let id = t.tree.id;
            let Some(mut rec) = manifest.keyspaces.live.iter().find(|k| k.id == id).cloned() else {
                return Err(Error::Internal(format!("keyspace {id} has no record")));
            };
            rec.log_number = m.log_number;
            rec.policy = m.policy;
            rec.cursors = m.cursors;
            manifest.tables.extend(m.tables.into_iter().map(|mut r| {
                r.keyspace = id;
                r
            }));
            live.push(rec);
            if let Some(g) = v.global() {
                global.push((id, g.filter.encode(table_set_tag(&v))));
            }
            versions.push(v);
        }
        drop(hold);
        // Only the keyspaces of the cut (one created since holds nothing of it).
        live.sort_by_key(|k| k.id);
        manifest.keyspaces.live = live;
        // Every record of the tables was numbered before this load.
        manifest.last_seq = self.last_seq.load(SeqCst);
        Ok(Some((versions, manifest, global)))
    }
}

/// Fills the new directory `tmp` with the files of every tree's table set `versions`, the
/// `global` bytes of each keyspace's global filter (by keyspace id) and `manifest`, every
/// file and entry durable when it returns.
fn write_dir(
    fs: &dyn Fs,
    tmp: &Path,
    versions: &[Arc<Version>],
    manifest: &Manifest,
    global: &[(u32, Vec<u8>)],
) -> Result<CheckpointReport> {
    fs.create_dir(tmp).map_err(|e| Error::io(tmp, e))?;
    let mut report = CheckpointReport::default();
    for t in versions.iter().flat_map(|v| v.tables()) {
        for f in t.files.each() {
            let from = f.path();
            let Some(file_name) = from.file_name() else {
                continue;
            };
            let to = tmp.join(file_name);
            match fs.hard_link(from, &to) {
                Ok(()) => report.linked_files += 1,
                Err(e) if e.raw_os_error() == Some(EXDEV) => {
                    report.copied_bytes += copy_file(fs, from, &to)?;
                    report.copied_files += 1;
                }
                Err(e) => return Err(Error::io(&to, e)),
            }
        }
    }
    for (id, bytes) in global {
        let (file, tmp_name) = FileName::global_filter(*id);
        replace_file(fs, tmp, tmp_name, file, bytes)?;
        report.written_bytes += bytes.len() as u64;
    }
    // Its last step fsyncs `tmp`, making every link above durable too.
    manifest.store(fs, tmp)?;
    report.written_bytes += manifest.encode().len() as u64;
    Ok(report)
}

/// Copies `from` to the new file `to` through `fs`, fsynced; returns the bytes copied.
fn copy_file(fs: &dyn Fs, from: &Path, to: &Path) -> Result<u64> {
    let mut src = File::open(from).map_err(|e| Error::io(from, e))?;
    let mut out = fs.create(to).map_err(|e| Error::io(to, e))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = src.read(&mut buf).map_err(|e| Error::io(from, e))?;
        if n == 0 {
            break;
        }
        out.write_all(&buf[..n]).map_err(|e| Error::io(to, e))?;
        total += n as u64;
    }
    out.sync().map_err(|e| Error::io(to, e))?;
    Ok(total)
}
