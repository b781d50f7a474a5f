//! Appending records to a WAL file.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::io::{Fs, WritableFile};

use super::{WAL_HEADER_LEN, WAL_MAGIC, WAL_VERSION};

/// Bytes a buffered WAL holds before handing them to the operating system.
pub const WAL_BUFFER: usize = 1 << 20;

/// A log whose appends are fsynced reserves its space ahead of its records
/// ([`WritableFile::allocate`]): first this much...
const RESERVE_FIRST: u64 = 64 << 10;
/// ...then as much again as it holds, up to this much at a time.
const RESERVE_MAX: u64 = 1 << 20;

/// Appends records to one WAL file.
pub struct WalWriter {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    /// Bytes appended so far (buffered ones included).
    pub len: u64,
    buf: Vec<u8>,
    buffered: bool,
    /// The file's length reserved so far (zeros past `len`), and whether to go on reserving
    /// (not on a file system that cannot).
    reserved: u64,
    reserve: bool,
}

impl WalWriter {
    /// Creates a new WAL file and writes its header. Nothing is fsynced: the header becomes
    /// durable with the first [`WalWriter::sync`], and the caller makes the directory entry
    /// durable before it promises any record is (so a memtable switch costs no fsync on the
    /// write path).
    pub fn create(fs: &dyn Fs, path: &Path) -> Result<WalWriter> {
        let io = |e| Error::io(path, e);
        let mut file = fs.create(path).map_err(io)?;
        let mut head = Vec::with_capacity(WAL_HEADER_LEN);
        head.extend_from_slice(&WAL_MAGIC);
        head.push(WAL_VERSION);
        head.resize(WAL_HEADER_LEN, 0);
        file.write_all(&head).map_err(io)?;
        Ok(WalWriter {
            file,
            path: path.to_path_buf(),
            len: WAL_HEADER_LEN as u64,
            buf: Vec::new(),
            buffered: false,
            reserved: 0,
            reserve: true,
        })
    }

    /// With `true`, records collect in a [`WAL_BUFFER`] buffer and reach the operating system
    /// when it fills, on [`WalWriter::write_out`] and on [`WalWriter::sync`].
    pub fn set_buffered(&mut self, buffered: bool) {
        self.buffered = buffered;
    }

    /// Appends one encoded record; with `sync` it is durable when this returns.
    ///
    /// A synced append first makes sure the record lands in reserved space: the file is
    /// extended with zeros ahead of the records, a step at a time (format.md, "Write-ahead
    /// log": a log may end in zero bytes). The fsync of a record written there has no block
    /// allocation or file size to record, only the data: on ext4 it skips the journal commit.
    pub fn append(&mut self, record: &[u8], sync: bool) -> Result<()> {
        if sync {
            self.reserve_for(record.len() as u64);
        }
        if self.buffered && !sync {
            self.buf.extend_from_slice(record);
            if self.buf.len() >= WAL_BUFFER {
                self.write_out()?;
            }
        } else {
            self.write_out()?;
            self.file
                .write_all(record)
                .map_err(|e| Error::io(&self.path, e))?;
        }
        self.len += record.len() as u64;
        if sync {
            self.sync()?;
        }
        Ok(())
    }

    /// Appends one encoded record and hands it to the operating system, in reserved space as
    /// a synced [`append`](Self::append) would, but without the fsync: the caller fsyncs
    /// through [`sync_handle`](Self::sync_handle) (outside its lock), or with
    /// [`sync`](Self::sync).
    pub fn append_for_sync(&mut self, record: &[u8]) -> Result<()> {
        self.reserve_for(record.len() as u64);
        self.write_out()?;
        self.file
            .write_all(record)
            .map_err(|e| Error::io(&self.path, e))?;
        self.len += record.len() as u64;
        Ok(())
    }

    /// A handle that fsyncs this log from another thread ([`WritableFile::sync_handle`]);
    /// `None` when the file system has none (or it could not be made): fsync with
    /// [`sync`](Self::sync) then.
    pub fn sync_handle(&self) -> Option<std::sync::Arc<dyn crate::io::SyncHandle>> {
        self.file.sync_handle().ok().flatten()
    }

    /// Reserves space for `more` bytes after the records when the reserved space ends before
    /// them. Best effort: a file system that cannot reserve, or a failed reservation (a full
    /// disk), only stops the reserving; the write itself reports what it meets.
    fn reserve_for(&mut self, more: u64) {
        let need = self.len + more;
        if !self.reserve || need <= self.reserved {
            return;
        }
        let step = self.reserved.clamp(RESERVE_FIRST, RESERVE_MAX);
        let to = need + step;
        match self.file.allocate(to) {
            Ok(true) => self.reserved = to,
            Ok(false) | Err(_) => self.reserve = false,
        }
    }

    /// Hands buffered records to the operating system.
    pub fn write_out(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            self.file
                .write_all(&self.buf)
                .map_err(|e| Error::io(&self.path, e))?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Writes out the buffer and fsyncs.
    pub fn sync(&mut self) -> Result<()> {
        self.write_out()?;
        self.file.sync().map_err(|e| Error::io(&self.path, e))
    }
}
