//! A write's operations with their keyspace ids, as the group commit takes them.

use crate::wal;

/// One write: its operations, each in a keyspace (by id), applied atomically.
#[derive(Clone, Copy)]
pub(in crate::store) struct Ops<'a> {
    pub(in crate::store) ops: &'a [wal::Op<'a>],
    pub(in crate::store) ids: Ids<'a>,
}

/// The keyspace ids of a write's operations.
#[derive(Clone, Copy)]
pub(in crate::store) enum Ids<'a> {
    /// Every op's.
    One(u32),
    /// Each op's (as many as the ops).
    Each(&'a [u32]),
}

impl<'a> Ops<'a> {
    /// The ops `ops`, all in keyspace `id`.
    pub(in crate::store) fn one(id: u32, ops: &'a [wal::Op<'a>]) -> Ops<'a> {
        Ops {
            ops,
            ids: Ids::One(id),
        }
    }

    pub(in crate::store) fn len(&self) -> usize {
        self.ops.len()
    }

    /// Each op with its keyspace id.
    pub(in crate::store) fn iter(self) -> impl Iterator<Item = (u32, wal::Op<'a>)> {
        self.ops.iter().enumerate().map(move |(i, op)| {
            let id = match self.ids {
                Ids::One(id) => id,
                Ids::Each(ids) => ids.get(i).copied().unwrap_or(0),
            };
            (id, *op)
        })
    }
}
