//! The part of [`FaultFs`]'s model that knows directories: the crash image of a tree, and
//! the inode a hard link shares.

use std::fs;
use std::io;
use std::path::Path;

use super::{apply_op, FaultFs, FaultState, Inode, DIR};

impl FaultState {
    /// The inode of the file `path`: the model's, or (a file written before this `FaultFs`
    /// knew its directory) a new one, durable as the file is now.
    pub(super) fn inode_of(&mut self, path: &Path) -> io::Result<usize> {
        if let Some(&ino) = self.names.get(path) {
            return Ok(ino);
        }
        let bytes = fs::read(path)?;
        let len = bytes.len();
        self.data.push(Inode::new(bytes, len));
        Ok(self.data.len() - 1)
    }
}

impl FaultFs {
    /// [`crash_image`](Self::crash_image) of the tree under `root`: every directory and file
    /// a power cut now would leave there, written under `dst` at the same relative paths.
    pub fn crash_image_tree(&self, root: &Path, dst: &Path, applied: usize) -> io::Result<()> {
        let s = self.lock();
        let mut m = s.durable.clone();
        for op in s.pending.iter().take(applied) {
            apply_op(&mut m, op);
        }
        for (p, ino) in m {
            let Ok(rel) = p.strip_prefix(root) else {
                continue;
            };
            let at = dst.join(rel);
            if ino == DIR {
                fs::create_dir_all(&at)?;
                continue;
            }
            if let Some(parent) = at.parent() {
                fs::create_dir_all(parent)?;
            }
            let d = &s.data[ino];
            let mut bytes = d.bytes[..d.synced].to_vec();
            let reserved = usize::try_from(d.synced_allocated).map_err(io::Error::other)?;
            if reserved > bytes.len() {
                bytes.resize(reserved, 0);
            }
            fs::write(at, &bytes)?;
        }
        Ok(())
    }
}
