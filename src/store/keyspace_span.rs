//! What spans keyspaces: a [`WriteBatch`] with ops in several (one log record, atomic
//! across them), a store's [`Snapshot`] read keyspace by keyspace at its one instant, and a
//! [`Transaction`]'s reads and writes in keyspaces other than its own (`tx/mod.rs` keeps a
//! part per keyspace).

use std::ops::RangeBounds;
use std::sync::Arc;

use super::live::{owned_range, prefix_range};
use super::tx::TransactionScan;
use super::{Keyspace, Snapshot, Store, Transaction};
use crate::error::{Error, Result};
use crate::wal::WriteBatch;
use crate::Slice;

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
        self.tag_last_with(ks.as_store())
    }

    /// [`tag_last`](Self::tag_last) by the keyspace's handle as a [`Store`].
    pub(super) fn tag_last_with(&mut self, ks: &Store) -> &mut Self {
        let n = self.ops.len();
        self.ids.resize(n, None);
        let store = Arc::as_ptr(&ks.inner.manifest) as usize;
        self.ids[n - 1] = Some((ks.inner.tree.id, store));
        self
    }
}

impl Snapshot {
    /// Keyspace `ks` as of this snapshot's instant: a store's snapshot covers every
    /// keyspace at one commit ([`Keyspace`]). An error for a keyspace
    /// created after it, or of another store.
    pub fn keyspace(&self, ks: &Keyspace) -> Result<Snapshot> {
        self.keyspace_of(ks.as_store())
    }

    /// [`keyspace`](Self::keyspace) by the keyspace's handle as a [`Store`].
    pub(super) fn keyspace_of(&self, ks: &Store) -> Result<Snapshot> {
        let same = |s: &Snapshot| Arc::ptr_eq(&s.pinned.inner.manifest, &ks.inner.manifest);
        let (id, name) = (ks.inner.tree.id, &ks.inner.tree.name);
        if id == self.pinned.inner.tree.id && same(self) {
            return Ok(self.clone());
        }
        let found = self.keyspaces.as_ref().and_then(|all| {
            let (_, s) = all.iter().find(|(i, _)| *i == id)?;
            same(s).then(|| s.clone())
        });
        found.ok_or_else(|| {
            Error::InvalidArgument(format!(
                "the snapshot does not hold keyspace {name:?} (created after it, or of another store)"
            ))
        })
    }
}

impl Transaction {
    /// [`get`](Self::get) in keyspace `ks` of the same store, read at the same instant as
    /// every other keyspace the transaction reads. An error for a keyspace created after the
    /// transaction began, or of another store.
    pub fn get_in(&mut self, ks: &Keyspace, key: impl AsRef<[u8]>) -> Result<Option<Slice>> {
        self.get_at(ks.as_store(), key.as_ref())
    }

    /// [`contains_key`](Self::contains_key) in keyspace `ks`.
    pub fn contains_key_in(&mut self, ks: &Keyspace, key: impl AsRef<[u8]>) -> Result<bool> {
        Ok(self.get_in(ks, key)?.is_some())
    }

    /// [`scan`](Self::scan) in keyspace `ks` (an error as [`get_in`](Self::get_in)).
    pub fn scan_in<K: AsRef<[u8]>>(
        &mut self,
        ks: &Keyspace,
        range: impl RangeBounds<K>,
    ) -> Result<TransactionScan> {
        self.scan_at(ks.as_store(), owned_range(range))
    }

    /// [`scan_prefix`](Self::scan_prefix) in keyspace `ks`.
    pub fn scan_prefix_in(
        &mut self,
        ks: &Keyspace,
        prefix: impl AsRef<[u8]>,
    ) -> Result<TransactionScan> {
        let range = prefix_range(prefix.as_ref());
        self.scan_at(ks.as_store(), range)
    }

    /// [`put`](Self::put) in keyspace `ks`: committed in the same log record as every other
    /// write of the transaction, whatever keyspace it is in. A keyspace of another store,
    /// or one dropped before the commit, fails the commit.
    pub fn put_in(&mut self, ks: &Keyspace, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.part(ks.as_store()).put(key.as_ref(), value.as_ref());
    }

    /// [`delete`](Self::delete) in keyspace `ks`.
    pub fn delete_in(&mut self, ks: &Keyspace, key: impl AsRef<[u8]>) {
        self.part(ks.as_store()).delete(key.as_ref());
    }

    /// [`delete_range`](Self::delete_range) in keyspace `ks`.
    pub fn delete_range_in(
        &mut self,
        ks: &Keyspace,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
    ) {
        self.part(ks.as_store())
            .delete_range(start.as_ref(), end.as_ref());
    }
}
