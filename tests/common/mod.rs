//! Helpers shared by the integration tests.
#![allow(dead_code)]

/// A small deterministic PRNG (xorshift64*), so failures replay from their seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max as u64 + 1) as usize;
        (0..n).map(|_| self.next() as u8).collect()
    }
}

use std::io;
use std::path::Path;

use filterstore::io::{Fs, RealFs, WritableFile};

/// The real file system without fsyncs: for tests of logic, not durability.
#[derive(Debug)]
pub struct NoSyncFs;

struct NoSyncFile(Box<dyn WritableFile>);

impl WritableFile for NoSyncFile {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.write_all(buf)
    }
    fn sync(&mut self) -> io::Result<()> {
        Ok(())
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
