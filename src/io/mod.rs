//! The I/O seam: every byte the store writes goes through an [`Fs`], so tests can fail the
//! N-th write, fsync or rename and throw away bytes that were never synced (a power cut).
//! Reads go straight to the operating system.

use std::fmt::Debug;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::filename::FileName;

mod fault;
pub use fault::{FaultFs, EIO, ENOSPC};

/// A file opened for writing.
pub trait WritableFile: Send {
    /// Appends all of `buf`.
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()>;
    /// Makes everything written so far durable (fsync).
    fn sync(&mut self) -> io::Result<()>;
    /// Reserves disk space for the file's first `len` bytes, extending it with zero bytes
    /// where it is shorter (`fallocate(2)`, mode 0); the write position stays where it is.
    /// `Ok(false)`: the file system cannot (nothing changed). An fsync of bytes written into
    /// reserved space then has no block allocation or file size to record: only the data.
    fn allocate(&mut self, len: u64) -> io::Result<bool> {
        let _ = len;
        Ok(false)
    }
    /// A handle that fsyncs this file from another thread while this one goes on writing
    /// it (a duplicate of its descriptor): the store's synced writes wait for an fsync made
    /// outside its writer lock. `Ok(None)` (the default): the file system has none, and the
    /// store fsyncs through this file under its writer lock.
    fn sync_handle(&self) -> io::Result<Option<Arc<dyn SyncHandle>>> {
        Ok(None)
    }
}

/// Fsyncs one file, from any thread (see [`WritableFile::sync_handle`]). An fsync makes
/// durable at least every byte written before it started.
pub trait SyncHandle: Send + Sync {
    /// Makes everything written to the file so far durable (fsync).
    fn sync(&self) -> io::Result<()>;
}

impl SyncHandle for File {
    fn sync(&self) -> io::Result<()> {
        self.sync_data()
    }
}

/// A [`SyncHandle`] that does nothing ([`NoSyncFs`]).
struct NoSync;

impl SyncHandle for NoSync {
    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
}

/// The write side of a file system.
pub trait Fs: Send + Sync + Debug {
    /// Creates (or truncates) `path` for writing.
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>>;
    /// Atomically renames `from` to `to`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Creates the directory `path` (its parent exists; `path` does not).
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        fs::create_dir(path)
    }
    /// Makes `to` a second name of the file `from` (a hard link; `EXDEV` when they are on
    /// different file systems). The entry is durable once `to`'s directory is synced.
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::hard_link(from, to)
    }
    /// Renames the directory `from` to `to`, atomically, failing (`EEXIST`) when `to`
    /// exists, even as an empty directory (`renameat2(RENAME_NOREPLACE)`).
    fn rename_dir(&self, from: &Path, to: &Path) -> io::Result<()> {
        rename_noreplace(from, to)
    }
}

/// `rename(2)` that refuses to replace `to` (see [`Fs::rename_dir`]).
pub(crate) fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE).map_err(io::Error::from)
}

/// Replaces `dir/name` with `bytes` atomically, through `fs`: written to `dir/tmp`, fsynced,
/// renamed over `dir/name`, and the directory fsynced. A crash leaves the old file or the
/// new one, never a mix; once it returns, the new one is durable. Errors name the file (or
/// the directory) of the step that failed.
pub(crate) fn replace_file(
    fs: &dyn Fs,
    dir: &Path,
    tmp: FileName,
    name: FileName,
    bytes: &[u8],
) -> Result<()> {
    let tmp = tmp.path(dir);
    let path = name.path(dir);
    let mut f = fs.create(&tmp).map_err(|e| Error::io(&tmp, e))?;
    f.write_all(bytes).map_err(|e| Error::io(&tmp, e))?;
    f.sync().map_err(|e| Error::io(&tmp, e))?;
    drop(f);
    fs.rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
    fs.sync_dir(dir).map_err(|e| Error::io(dir, e))
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

struct RealFile(File);

impl WritableFile for RealFile {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.write_all(buf)
    }
    fn sync(&mut self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn allocate(&mut self, len: u64) -> io::Result<bool> {
        use rustix::fs::{fallocate, FallocateFlags};
        match fallocate(&self.0, FallocateFlags::empty(), 0, len) {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::NOSYS) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
    fn sync_handle(&self) -> io::Result<Option<Arc<dyn SyncHandle>>> {
        Ok(Some(Arc::new(self.0.try_clone()?)))
    }
}

impl Fs for RealFs {
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        Ok(Box::new(RealFile(f)))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}

/// The real file system with every fsync skipped: for benchmarks that time CPU work and for
/// tests of logic. Never use it for data you want to keep.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoSyncFs;

struct NoSyncFile(Box<dyn WritableFile>);

impl WritableFile for NoSyncFile {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.write_all(buf)
    }
    fn sync(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn allocate(&mut self, len: u64) -> io::Result<bool> {
        self.0.allocate(len)
    }
    fn sync_handle(&self) -> io::Result<Option<Arc<dyn SyncHandle>>> {
        Ok(Some(Arc::new(NoSync)))
    }
}

impl Fs for NoSyncFs {
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        Ok(Box::new(NoSyncFile(RealFs.create(path)?)))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        RealFs.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        RealFs.remove(path)
    }
    fn sync_dir(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reserved space reads back as zeros past the bytes written, the write position stays,
    /// and a power cut keeps the reservation only once an fsync covered it.
    #[test]
    fn allocate_reserves_zeros_that_an_fsync_makes_durable() {
        for (fs, real) in [(&FaultFs::new() as &dyn Fs, false), (&RealFs, true)] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("000001.wal");
            let mut f = fs.create(&path).unwrap();
            f.write_all(b"head").unwrap();
            if !f.allocate(64).unwrap() {
                assert!(real, "FaultFs always reserves");
                continue; // a file system without fallocate
            }
            f.write_all(b"tail").unwrap();
            let mut want = b"headtail".to_vec();
            want.resize(64, 0);
            assert_eq!(std::fs::read(&path).unwrap(), want);
        }
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new();
        let path = dir.path().join("000001.wal");
        let mut f = fs.create(&path).unwrap();
        fs.sync_dir(dir.path()).unwrap();
        f.write_all(b"abc").unwrap();
        f.sync().unwrap();
        assert!(f.allocate(32).unwrap());
        let image = |name: &str| {
            let img = dir.path().join(name);
            std::fs::create_dir(&img).unwrap();
            fs.crash_image(&img, usize::MAX).unwrap();
            std::fs::read(img.join("000001.wal")).unwrap()
        };
        assert_eq!(image("before"), b"abc", "reservation not yet synced");
        f.write_all(b"de").unwrap();
        f.sync().unwrap();
        let mut want = b"abcde".to_vec();
        want.resize(32, 0);
        assert_eq!(image("after"), want);
    }

    /// The steps in their order (create, write, fsync, rename, directory fsync), each failure
    /// an error naming its file, and `MANIFEST` whole, old or new, whichever step failed.
    #[test]
    fn replace_file_steps_in_order_and_never_leaves_a_mix() {
        let (tmp, name) = (FileName::ManifestTmp, FileName::Manifest);
        for fail in 0..6u64 {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path();
            std::fs::write(name.path(d), b"old").unwrap();
            let fs = FaultFs::new();
            fs.fail_at(fail, EIO, false);
            let r = replace_file(&fs, d, tmp, name, b"new bytes");
            let now = std::fs::read(name.path(d)).unwrap();
            let names = [
                tmp.path(d),
                tmp.path(d),
                tmp.path(d),
                name.path(d),
                d.to_path_buf(),
            ];
            match names.get(fail as usize) {
                Some(path) => {
                    let e = r.unwrap_err();
                    assert!(
                        matches!(&e, Error::Io { path: Some(p), .. } if p == path),
                        "{fail}: {e}"
                    );
                    let want: &[u8] = if fail < 4 { b"old" } else { b"new bytes" };
                    assert_eq!(now, want, "step {fail} failed");
                }
                None => {
                    r.unwrap();
                    assert_eq!(now, b"new bytes");
                    assert_eq!(fs.sync_log(), [tmp.path(d), d.to_path_buf()]);
                    assert_eq!(fs.ops(), 5);
                }
            }
        }
    }
}
