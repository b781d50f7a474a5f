//! [`FaultFs`]: the test file system that injects faults and models what a power cut
//! leaves (see its documentation).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use super::{Fs, WritableFile};

mod tree;
use crate::filename::FileName;

/// A test file system that injects faults and remembers what is durable.
///
/// Every operation is applied to the real directory at once (reads go to the OS, so the store
/// sees its own writes) but nothing is fsynced for real. Instead it keeps a model of the one
/// directory the store lives in:
///
/// * per file (inode): the bytes written and how many of them an fsync covered;
/// * the directory as of the last `sync_dir`, and the creations, renames and removals made
///   since (pending, in order).
///
/// [`FaultFs::crash_image`] writes what a power cut would leave: the last synced directory
/// with the first `applied` pending entry operations replayed (a file system may or may not
/// have committed them, in order), every file truncated to its synced length. Re-creating a
/// file that exists truncates it for good, as the worst case.
///
/// Faults: [`FaultFs::fail_table_files_after`] fails every operation on table and filter
/// files after the first N (a disk that fills while tables are written);
/// [`FaultFs::fail_at`] makes the N-th operation (create, write, fsync, rename,
/// remove, `sync_dir`, counted from 0 over the life of this `FaultFs`) return an OS error
/// (`ENOSPC`: a failed write lands half its bytes first; `EIO`), once or from then on;
/// [`FaultFs::cut_power_at_sync`] makes the N-th fsync/`sync_dir` and everything after it
/// fail without effect, freezing the durable state at that point.
///
/// A gate holds log fsyncs for tests of concurrent writers: after
/// [`FaultFs::hold_log_syncs`] every fsync of a `.wal` file waits until
/// [`FaultFs::pass_log_sync`] lets one through (to succeed, or to fail without effect) or
/// [`FaultFs::release_log_syncs`] opens the gate; [`FaultFs::held_log_syncs`] counts the
/// fsyncs waiting. So a test can keep one writer's fsync in flight while others queue behind
/// it, without relying on timing.
#[derive(Debug, Default, Clone)]
pub struct FaultFs {
    state: std::sync::Arc<std::sync::Mutex<FaultState>>,
    gate: std::sync::Arc<SyncGate>,
}

/// See [`FaultFs::hold_log_syncs`].
#[derive(Debug, Default)]
struct SyncGate {
    state: std::sync::Mutex<GateState>,
    cv: std::sync::Condvar,
}

#[derive(Debug, Default)]
struct GateState {
    holding: bool,
    /// fsyncs waiting at the gate.
    waiting: usize,
    /// Passes handed out and not yet taken: `None` to let an fsync through, `Some(errno)` to
    /// fail it.
    passes: std::collections::VecDeque<Option<i32>>,
}

impl SyncGate {
    fn lock(&self) -> std::sync::MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits at the gate when it holds; `Some(errno)` when the fsync is to fail.
    fn pass(&self) -> Option<i32> {
        let mut g = self.lock();
        if !g.holding {
            return None;
        }
        g.waiting += 1;
        self.cv.notify_all();
        let verdict = loop {
            if let Some(v) = g.passes.pop_front() {
                break v;
            }
            if !g.holding {
                break None;
            }
            g = self.cv.wait(g).unwrap_or_else(|p| p.into_inner());
        };
        g.waiting -= 1;
        self.cv.notify_all();
        verdict
    }
}

/// `ENOSPC` on Linux.
pub const ENOSPC: i32 = 28;
/// `EIO` on Linux.
pub const EIO: i32 = 5;

#[derive(Debug, Default)]
struct FaultState {
    data: Vec<Inode>,
    names: std::collections::BTreeMap<std::path::PathBuf, usize>,
    durable: std::collections::BTreeMap<std::path::PathBuf, usize>,
    pending: Vec<DirOp>,
    ops: u64,
    syncs: u64,
    fail: Option<(u64, i32, bool)>,
    /// [`FaultFs::fail_table_files_after`]: (operations on table and filter files still to
    /// succeed, errno).
    fail_tables: Option<(u64, i32)>,
    power_cut: Option<u64>,
    /// [`FaultFs::refuse_links`]: the errno every hard link fails with.
    refuse_links: Option<i32>,
    dead: bool,
    fired: Option<String>,
    sync_log: Vec<std::path::PathBuf>,
}

/// One file's contents as the model knows them.
#[derive(Debug, Default)]
struct Inode {
    /// The bytes written.
    bytes: Vec<u8>,
    /// How many of them an fsync covered.
    synced: usize,
    /// The length reserved by [`WritableFile::allocate`] (zeros past the bytes written)...
    allocated: u64,
    /// ...and as of the last fsync: a power cut leaves the file at least this long.
    synced_allocated: u64,
}

impl Inode {
    fn new(bytes: Vec<u8>, synced: usize) -> Inode {
        Inode {
            bytes,
            synced,
            ..Inode::default()
        }
    }
}

#[derive(Debug, Clone)]
enum DirOp {
    Create(std::path::PathBuf, usize),
    Rename(std::path::PathBuf, std::path::PathBuf),
    Remove(std::path::PathBuf),
}

/// The inode number the model gives a directory ([`Fs::create_dir`]).
const DIR: usize = usize::MAX;

fn apply_op(m: &mut std::collections::BTreeMap<std::path::PathBuf, usize>, op: &DirOp) {
    match op {
        DirOp::Create(p, i) => {
            m.insert(p.clone(), *i);
        }
        DirOp::Rename(from, to) => {
            // A directory moves with every name under it.
            let moved: Vec<_> = m.keys().filter(|k| k.starts_with(from)).cloned().collect();
            for k in moved {
                if let (Some(i), Ok(rest)) = (m.remove(&k), k.strip_prefix(from)) {
                    let new = if rest.as_os_str().is_empty() {
                        to.clone()
                    } else {
                        to.join(rest)
                    };
                    m.insert(new, i);
                }
            }
        }
        DirOp::Remove(p) => {
            m.remove(p);
        }
    }
}

impl FaultState {
    /// Counts an operation; `Err` when it must fail (with the errno), and whether a failing
    /// write may land part of its bytes.
    fn step(&mut self, what: &str, path: &Path, is_sync: bool) -> Result<(), (i32, bool)> {
        let n = self.ops;
        self.ops += 1;
        if is_sync {
            if self.power_cut == Some(self.syncs) {
                self.dead = true;
                self.fired = Some(format!("power cut at {what} {}", path.display()));
            }
            if !self.dead {
                self.syncs += 1;
                self.sync_log.push(path.to_path_buf());
            }
        }
        if self.dead {
            return Err((EIO, false));
        }
        if let Some((left, errno)) = &mut self.fail_tables {
            let name = path.file_name().and_then(|n| n.to_str());
            let per_table = name
                .and_then(FileName::parse)
                .is_some_and(|f| matches!(f, FileName::Numbered(kind, _) if kind.per_table()));
            if per_table {
                if *left > 0 {
                    *left -= 1;
                } else {
                    let errno = *errno;
                    if self.fired.is_none() {
                        self.fired = Some(fired_at(what, path));
                    }
                    return Err((errno, true));
                }
            }
        }
        match self.fail {
            Some((at, errno, sticky)) if n == at || (sticky && n > at) => {
                if n == at {
                    self.fired = Some(fired_at(what, path));
                }
                Err((errno, true))
            }
            _ => Ok(()),
        }
    }
}

/// `what path (thread NAME)`: the operation a fault hit, and the thread that made it.
fn fired_at(what: &str, path: &Path) -> String {
    let t = std::thread::current();
    format!(
        "{what} {} (thread {})",
        path.display(),
        t.name().unwrap_or("unnamed")
    )
}

struct FaultFile {
    state: std::sync::Arc<std::sync::Mutex<FaultState>>,
    gate: std::sync::Arc<SyncGate>,
    path: std::path::PathBuf,
    ino: usize,
    file: File,
}

impl FaultFs {
    /// A fault-free instance that knows no files yet.
    pub fn new() -> FaultFs {
        FaultFs::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FaultState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes every regular file now in `dir` as written, synced and durably named.
    pub fn adopt_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.lock();
        for e in fs::read_dir(dir)? {
            let e = e?;
            if e.file_type()?.is_file() {
                let bytes = fs::read(e.path())?;
                let len = bytes.len();
                s.data.push(Inode::new(bytes, len));
                let ino = s.data.len() - 1;
                s.names.insert(e.path(), ino);
                s.durable.insert(e.path(), ino);
            }
        }
        Ok(())
    }

    /// Makes operation `n` (counted from 0 since creation) fail with `errno`; with `sticky`
    /// every later operation fails too.
    pub fn fail_at(&self, n: u64, errno: i32, sticky: bool) {
        self.lock().fail = Some((n, errno, sticky));
    }

    /// A disk that fills up while tables are written: after `skip` more operations on table
    /// and filter files (`NNNNNN.sst`, `NNNNNN.filter`, every per-table kind of
    /// [`Numbered`](crate::filename::Numbered): create, write, fsync, remove), every one fails
    /// with `errno` (a failed write lands half its bytes), while logs and the manifest still
    /// work. Flushes and compactions meet it; the write path does not.
    pub fn fail_table_files_after(&self, skip: u64, errno: i32) {
        self.lock().fail_tables = Some((skip, errno));
    }

    /// Ends any injected failure (power cuts stay).
    pub fn heal(&self) {
        let mut s = self.lock();
        s.fail = None;
        s.fail_tables = None;
    }

    /// Makes every [`Fs::hard_link`] fail with `errno` without counting as an operation
    /// (`EXDEV`: every destination is on another file system).
    pub fn refuse_links(&self, errno: i32) {
        self.lock().refuse_links = Some(errno);
    }

    /// Makes sync point `n` (fsync or `sync_dir`, counted from 0) and everything after it
    /// fail without effect.
    pub fn cut_power_at_sync(&self, n: u64) {
        self.lock().power_cut = Some(n);
    }

    /// From now on every fsync of a log (`.wal`) file waits at a gate, until
    /// [`pass_log_sync`](Self::pass_log_sync) lets it through or
    /// [`release_log_syncs`](Self::release_log_syncs) opens the gate.
    pub fn hold_log_syncs(&self) {
        self.gate.lock().holding = true;
    }

    /// Log fsyncs waiting at the gate now.
    pub fn held_log_syncs(&self) -> usize {
        self.gate.lock().waiting
    }

    /// Waits until `n` log fsyncs wait at the gate (or `timeout` passes: returns how many
    /// do then).
    pub fn wait_held_log_syncs(&self, n: usize, timeout: std::time::Duration) -> usize {
        let end = std::time::Instant::now() + timeout;
        let mut g = self.gate.lock();
        while g.waiting < n {
            let left = end.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            g = self
                .gate
                .cv
                .wait_timeout(g, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        g.waiting
    }

    /// Lets one held log fsync through (the next to arrive, if none waits): `None` to do it,
    /// `Some(errno)` to fail it without effect (nothing it covers becomes durable).
    pub fn pass_log_sync(&self, fail: Option<i32>) {
        self.gate.lock().passes.push_back(fail);
        self.gate.cv.notify_all();
    }

    /// Opens the gate: held log fsyncs and later ones go through.
    pub fn release_log_syncs(&self) {
        self.gate.lock().holding = false;
        self.gate.cv.notify_all();
    }

    /// Operations so far.
    pub fn ops(&self) -> u64 {
        self.lock().ops
    }

    /// Sync points (fsyncs and `sync_dir`s) completed so far.
    pub fn syncs(&self) -> u64 {
        self.lock().syncs
    }

    /// The path of every completed sync point, in order (the directory for `sync_dir`).
    pub fn sync_log(&self) -> Vec<std::path::PathBuf> {
        self.lock().sync_log.clone()
    }

    /// The operation an injected fault or power cut hit, if one did.
    pub fn fired(&self) -> Option<String> {
        self.lock().fired.clone()
    }

    /// Entry operations (create, rename, remove) since the last `sync_dir`.
    pub fn pending_dir_ops(&self) -> usize {
        self.lock().pending.len()
    }

    /// Writes into the empty directory `dst` what a power cut now would leave, with the first
    /// `applied` pending entry operations taken as committed (clamped to their number).
    pub fn crash_image(&self, dst: &Path, applied: usize) -> io::Result<()> {
        let s = self.lock();
        let mut m = s.durable.clone();
        for op in s.pending.iter().take(applied) {
            apply_op(&mut m, op);
        }
        for (p, ino) in m {
            if ino == DIR {
                continue;
            }
            let d = &s.data[ino];
            let name = p
                .file_name()
                .ok_or_else(|| io::Error::other("no file name"))?;
            let mut bytes = d.bytes[..d.synced].to_vec();
            // Reserved space the fsync made durable reads back as zeros.
            let reserved = usize::try_from(d.synced_allocated).map_err(io::Error::other)?;
            if reserved > bytes.len() {
                bytes.resize(reserved, 0);
            }
            fs::write(dst.join(name), &bytes)?;
        }
        Ok(())
    }
}

fn os_err(errno: i32) -> io::Error {
    io::Error::from_raw_os_error(errno)
}

/// An fsync of inode `ino` (named `path`): it covers the bytes written before it started,
/// not those written while it waits at the gate (an fsync from another thread than the
/// writer's, see [`crate::io::SyncHandle`]).
fn fault_sync(
    state: &std::sync::Mutex<FaultState>,
    gate: &SyncGate,
    path: &Path,
    ino: usize,
) -> io::Result<()> {
    let (len, allocated) = {
        let s = state.lock().unwrap_or_else(|p| p.into_inner());
        (s.data[ino].bytes.len(), s.data[ino].allocated)
    };
    let is_log = path.extension().is_some_and(|e| e == "wal");
    let verdict = if is_log { gate.pass() } else { None };
    let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(errno) = verdict {
        s.ops += 1;
        s.fired = Some(fired_at("held fsync", path));
        return Err(os_err(errno));
    }
    s.step("fsync", path, true).map_err(|(e, _)| os_err(e))?;
    let d = &mut s.data[ino];
    // A re-created file (same name, new inode contents) may be shorter than what was
    // written before the fsync started.
    d.synced = d.synced.max(len.min(d.bytes.len()));
    d.synced_allocated = d.synced_allocated.max(allocated.min(d.allocated));
    Ok(())
}

/// The [`crate::io::SyncHandle`] of a [`FaultFile`].
struct FaultSync {
    state: std::sync::Arc<std::sync::Mutex<FaultState>>,
    gate: std::sync::Arc<SyncGate>,
    path: std::path::PathBuf,
    ino: usize,
}

impl crate::io::SyncHandle for FaultSync {
    fn sync(&self) -> io::Result<()> {
        fault_sync(&self.state, &self.gate, &self.path, self.ino)
    }
}

impl WritableFile for FaultFile {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (n, r) = match s.step("write", &self.path, false) {
            Ok(()) => (buf.len(), Ok(())),
            Err((e, partial)) => (if partial { buf.len() / 2 } else { 0 }, Err(os_err(e))),
        };
        self.file.write_all(&buf[..n])?;
        s.data[self.ino].bytes.extend_from_slice(&buf[..n]);
        r
    }
    fn sync(&mut self) -> io::Result<()> {
        fault_sync(&self.state, &self.gate, &self.path, self.ino)
    }
    fn sync_handle(&self) -> io::Result<Option<std::sync::Arc<dyn crate::io::SyncHandle>>> {
        Ok(Some(std::sync::Arc::new(FaultSync {
            state: self.state.clone(),
            gate: self.gate.clone(),
            path: self.path.clone(),
            ino: self.ino,
        })))
    }
    fn allocate(&mut self, len: u64) -> io::Result<bool> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.step("allocate", &self.path, false)
            .map_err(|(e, _)| os_err(e))?;
        let d = &mut s.data[self.ino];
        if len > d.allocated.max(d.bytes.len() as u64) {
            // The real file reads back as the store would find it: zeros past the bytes
            // written (the write position stays).
            self.file.set_len(len)?;
        }
        d.allocated = d.allocated.max(len);
        Ok(true)
    }
}

impl Fs for FaultFs {
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let mut s = self.lock();
        s.step("create", path, false).map_err(|(e, _)| os_err(e))?;
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        let ino = match s.names.get(path) {
            Some(&ino) => {
                s.data[ino] = Inode::default();
                ino
            }
            None => {
                s.data.push(Inode::default());
                let ino = s.data.len() - 1;
                s.names.insert(path.to_path_buf(), ino);
                s.pending.push(DirOp::Create(path.to_path_buf(), ino));
                ino
            }
        };
        Ok(Box::new(FaultFile {
            state: self.state.clone(),
            gate: self.gate.clone(),
            path: path.to_path_buf(),
            ino,
            file,
        }))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.lock();
        s.step("rename", to, false).map_err(|(e, _)| os_err(e))?;
        fs::rename(from, to)?;
        let op = DirOp::Rename(from.to_path_buf(), to.to_path_buf());
        apply_op(&mut s.names, &op);
        s.pending.push(op);
        Ok(())
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        s.step("remove", path, false).map_err(|(e, _)| os_err(e))?;
        fs::remove_file(path)?;
        let op = DirOp::Remove(path.to_path_buf());
        apply_op(&mut s.names, &op);
        s.pending.push(op);
        Ok(())
    }
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        s.step("create_dir", path, false)
            .map_err(|(e, _)| os_err(e))?;
        fs::create_dir(path)?;
        let op = DirOp::Create(path.to_path_buf(), DIR);
        apply_op(&mut s.names, &op);
        s.pending.push(op);
        Ok(())
    }
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.lock();
        if let Some(errno) = s.refuse_links {
            return Err(os_err(errno));
        }
        s.step("link", to, false).map_err(|(e, _)| os_err(e))?;
        fs::hard_link(from, to)?;
        let ino = s.inode_of(from)?;
        let op = DirOp::Create(to.to_path_buf(), ino);
        apply_op(&mut s.names, &op);
        s.pending.push(op);
        Ok(())
    }
    fn rename_dir(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.lock();
        s.step("rename", to, false).map_err(|(e, _)| os_err(e))?;
        super::rename_noreplace(from, to)?;
        let op = DirOp::Rename(from.to_path_buf(), to.to_path_buf());
        apply_op(&mut s.names, &op);
        s.pending.push(op);
        Ok(())
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.lock();
        s.step("sync_dir", dir, true).map_err(|(e, _)| os_err(e))?;
        let pending = std::mem::take(&mut s.pending);
        for op in &pending {
            apply_op(&mut s.durable, op);
        }
        Ok(())
    }
}
