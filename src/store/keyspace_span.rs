//! What spans keyspaces: a [`WriteBatch`] with ops in several (one log record, atomic
//! across them) and a store's [`Snapshot`] read keyspace by keyspace at its one instant.

use std::sync::Arc;

use super::{Keyspace, Snapshot};
use crate::error::{Error, Result};
use crate::wal::WriteBatch;

impl WriteBatch {
    /// Adds a put into keyspace `ks` (the batch stays one atomic log record across
    /// keyspaces).
    pub fn put_in(
        &mut self,
        ks: &Keyspace,
        key: impl Into<Vec<u8>>,
        value: impl Into<Vec<u8>>,
    ) -> &mut Self {
        self.put(key, value);
        self.tag_last(ks)
    }
    /// Adds a delete from keyspace `ks`.
    pub fn delete_in(&mut self, ks: &Keyspace, key: impl Into<Vec<u8>>) -> &mut Self {
        self.delete(key);
        self.tag_last(ks)
    }
    /// Adds the removal of every key `k` of keyspace `ks` with `start <= k < end`.
    pub fn delete_range_in(
        &mut self,
        ks: &Keyspace,
        start: impl Into<Vec<u8>>,
        end: impl Into<Vec<u8>>,
    ) -> &mut Self {
        let n = self.len();
        self.delete_range(start, end);
        if self.len() > n {
            self.tag_last(ks);
        }
        self
    }

    /// Gives the last op keyspace `ks` (earlier ops without one keep none: the keyspace of
    /// the handle that writes the batch).
    fn tag_last(&mut self, ks: &Keyspace) -> &mut Self {
        let n = self.ops.len();
        self.ids.resize(n, None);
        let store = Arc::as_ptr(&ks.store.inner.manifest) as usize;
        self.ids[n - 1] = Some((ks.id(), store));
        self
    }
}

impl Snapshot {
    /// Keyspace `ks` as of this snapshot's instant: a store's snapshot covers every
    /// keyspace at one commit ([`Keyspace`]). An error for a keyspace
    /// created after it, or of another store.
    pub fn keyspace(&self, ks: &Keyspace) -> Result<Snapshot> {
        let same =
            |s: &Snapshot| Arc::ptr_eq(&s.pinned.inner.manifest, &ks.as_store().inner.manifest);
        if ks.id() == self.pinned.inner.tree.id && same(self) {
            return Ok(self.clone());
        }
        let found = self.keyspaces.as_ref().and_then(|all| {
            let (_, s) = all.iter().find(|(id, _)| *id == ks.id())?;
            same(s).then(|| s.clone())
        });
        found.ok_or_else(|| {
            Error::InvalidArgument(format!(
                "the snapshot does not hold keyspace {:?} (created after it, or of another store)",
                ks.name()
            ))
        })
    }
}
