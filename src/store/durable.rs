//! Per-write durability: the fsync of a synced write is made outside the writer lock, so
//! that writers which did not ask for one never wait behind it.
//!
//! Positions count the log record bytes this handle appended, across its logs. The commit
//! leader (under the writer lock, `commit.rs`) appends its group and advances `written`,
//! the position up to which the records reached the operating system; a synced writer then
//! waits, without the writer lock, until `durable` (the position an fsync covered) reaches
//! the end of its group:
//!
//! ```text
//! synced writer ─► durable ≥ its end? ─ yes ─► returns Ok
//!                   └ no ─► an fsync in flight? ─ yes ─► waits for it, looks again
//!                            └ no ─► becomes the sync leader: takes `written`, fsyncs
//!                                    the logs left behind by a switch, then the current
//!                                    one, sets `durable` to what it took, wakes the others
//! ```
//!
//! Every writer that appends while an fsync is in flight is covered by the next one: one
//! fsync per round, as many groups as arrived in it (the group commit of the fsync; the
//! writers queue of `commit.rs` still groups the log writes). A failed fsync fails every
//! synced writer it was to cover, and poisons the store.
//!
//! The directory entry of a new log is made durable by the commit leader, under the writer
//! lock, before the first synced record in that log is counted as written (once per log).

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::Inner;
use crate::error::{Error, Result};
use crate::io::SyncHandle;

/// The durable watermark and the fsync in flight (see the module docs).
#[derive(Default)]
pub(super) struct Durable {
    state: Mutex<State>,
    cv: Condvar,
}

#[derive(Default)]
struct State {
    /// Record bytes appended to the logs (buffered ones included)...
    appended: u64,
    /// ...of which the operating system has these...
    written: u64,
    /// ...of which an fsync covered these.
    durable: u64,
    /// A sync leader is fsyncing.
    syncing: bool,
    /// The current log's fsync handle (`None`: fsync through the writer, under its lock).
    current: Option<Arc<dyn SyncHandle>>,
    /// Earlier logs with bytes written since the last fsync: fsynced before the current one,
    /// so that what survives a power cut is a prefix of the writes.
    behind: Vec<Arc<dyn SyncHandle>>,
    /// The failed fsync that poisoned the store.
    error: Option<Arc<Error>>,
    /// Synced writers waiting for the fsync in flight (tests wait for them).
    waiting: usize,
}

impl Durable {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The commit leader appended `bytes` of records, which reached the operating system when
    /// `written` (a buffered log holds them otherwise). Returns the position after them.
    pub(super) fn appended(&self, bytes: usize, written: bool) -> u64 {
        let mut st = self.lock();
        st.appended += bytes as u64;
        if written {
            st.written = st.appended;
        }
        st.appended
    }

    /// A new log starts (its records follow every earlier one): `handle` fsyncs it. Called
    /// under the writer lock, after the old log's buffered records were written out.
    pub(super) fn new_log(&self, handle: Option<Arc<dyn SyncHandle>>) {
        let mut st = self.lock();
        st.written = st.appended;
        if st.durable < st.written {
            if let Some(old) = st.current.take() {
                st.behind.push(old);
            }
        }
        st.current = handle;
    }

    /// Synced writers waiting for the fsync in flight.
    #[cfg(test)]
    pub(super) fn waiting(&self) -> usize {
        self.lock().waiting
    }

    /// Every record written so far is durable (an fsync of every log under the writer lock).
    pub(super) fn all_synced(&self) {
        let mut st = self.lock();
        st.durable = st.durable.max(st.written);
        st.behind.clear();
    }
}

impl Inner {
    /// Waits until the records up to `end` are durable, fsyncing them when no other writer
    /// is (see the module docs).
    pub(super) fn wait_durable(&self, end: u64) -> Result<()> {
        let d = &self.commit.durable;
        let mut st = d.lock();
        loop {
            if st.durable >= end {
                return Ok(());
            }
            if let Some(e) = &st.error {
                return Err(e.duplicate());
            }
            if !st.syncing {
                break;
            }
            st.waiting += 1;
            st = d.cv.wait(st).unwrap_or_else(|p| p.into_inner());
            st.waiting -= 1;
        }
        st.syncing = true;
        let upto = st.written;
        debug_assert!(upto >= end, "a synced record was counted as written");
        let behind = std::mem::take(&mut st.behind);
        let current = st.current.clone();
        drop(st);
        let r = match current {
            Some(h) => behind
                .iter()
                .chain(std::iter::once(&h))
                .try_for_each(|f| f.sync())
                .map_err(|e| Error::io(&self.dir, e)),
            // No handle: fsync every log through the writer (which takes its lock).
            None => self.sync_all(),
        };
        let mut st = d.lock();
        st.syncing = false;
        match &r {
            Ok(()) => st.durable = st.durable.max(upto),
            Err(e) => {
                st.error.get_or_insert_with(|| Arc::new(e.duplicate()));
            }
        }
        d.cv.notify_all();
        drop(st);
        self.poison_on_err(r)
    }
}
