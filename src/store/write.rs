//! The write path: WAL append and memtable insert, with backpressure when the background
//! threads fall behind.
//!
//! Before a write, [`Inner::make_room`] decides, like LevelDB's `MakeRoomForWrite` and
//! RocksDB's L0 slowdown and stop triggers:
//! 1. L0 holds `l0_stop` tables or more: the write waits until a compaction brings L0 below
//!    it (counted as stop time).
//! 2. L0 holds `l0_slowdown` tables or more: the write is held to `slowdown_bytes_per_sec`
//!    (a sleep, once at least a millisecond is owed; counted as slowdown time).
//! 3. The memtable is full and the previous one is still being sealed: the write waits for
//!    that seal (counted as memtable wait).
//! 4. The memtable is full: it becomes immutable, a new log starts, and the flush thread is
//!    woken. The write goes on at once.
//!
//! (1) and (2) apply only with automatic compaction on: without it nothing would relieve
//! them. A `put` never seals or compacts itself.

use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{wal_path, Imm, Inner, Store, SyncPolicy, WriteOptions, Writer};
use crate::error::{Error, Result};
use crate::memtable::Memtable;
use crate::wal::{Op, OwnedOp, WalWriter, WriteBatch};

impl Store {
    /// Stores `value` under `key`: anything that is bytes (`&[u8]`, `Vec<u8>`, `&str`,
    /// `String`, arrays), durable as the store's [`SyncPolicy`] says.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let store = filterstore::Store::open(dir.path(), Default::default())?;
    /// store.put("k", "v")?;
    /// store.put(b"bytes", vec![1, 2, 3])?;
    /// assert_eq!(store.get("k")?.unwrap(), b"v");
    /// store.delete(String::from("k"))?;
    /// assert_eq!(store.get(b"k")?, None);
    /// # Ok::<(), filterstore::Error>(())
    /// ```
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_opt(key, value, &WriteOptions::default())
    }

    /// Stores `value` under `key`, durable as `opts` says (see [`WriteOptions`]).
    pub fn put_opt(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        opts: &WriteOptions,
    ) -> Result<()> {
        let sync = self.inner.synced(opts);
        let exp = self.inner.expiry(0, opts);
        self.inner
            .apply(&[Op::put(key.as_ref(), value.as_ref(), exp)], sync)
    }

    /// Stores `value` under `key` for `ttl`: from then on (by [`Options::clock`]) the key
    /// reads as absent, and compaction reclaims the entry (docs/engine.md, "Expiry").
    /// The same as [`put_opt`](Self::put_opt) with [`WriteOptions::ttl`].
    ///
    /// [`Options::clock`]: super::Options::clock
    pub fn put_with_ttl(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        ttl: Duration,
    ) -> Result<()> {
        self.put_opt(key, value, &WriteOptions::default().ttl(ttl))
    }

    /// Removes `key` (a no-op for an absent key, but still logged).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_opt(key, &WriteOptions::default())
    }

    /// Removes `key`, durable as `opts` says (see [`WriteOptions`]).
    pub fn delete_opt(&self, key: impl AsRef<[u8]>, opts: &WriteOptions) -> Result<()> {
        let sync = self.inner.synced(opts);
        self.inner.apply(&[Op::Delete(key.as_ref())], sync)
    }

    /// Removes every key `k` with `start <= k < end` (half-open, as RocksDB's
    /// `DeleteRange`), with one log record and one range tombstone whatever the number of
    /// keys: reads stop seeing them at once, compaction reclaims their bytes (at once with
    /// [`compact_range`](Store::compact_range)). A range with `start >= end` removes nothing.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let store = filterstore::Store::open(dir.path(), Default::default())?;
    /// for k in ["a1", "b1", "b2", "c1"] {
    ///     store.put(k, "v")?;
    /// }
    /// store.delete_range("b", "c")?;
    /// let keys: Vec<_> = store.scan::<&[u8]>(..).map(|r| r.unwrap().0).collect();
    /// assert_eq!(keys, [b"a1".to_vec(), b"c1".to_vec()]);
    /// store.put("b3", "v")?; // a later write survives
    /// assert_eq!(store.get("b3")?.unwrap(), b"v");
    /// # Ok::<(), filterstore::Error>(())
    /// ```
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        self.delete_range_opt(start, end, &WriteOptions::default())
    }

    /// [`delete_range`](Self::delete_range), durable as `opts` says.
    pub fn delete_range_opt(
        &self,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
        opts: &WriteOptions,
    ) -> Result<()> {
        let (start, end) = (start.as_ref(), end.as_ref());
        if start >= end {
            return self.inner.check_writable();
        }
        let sync = self.inner.synced(opts);
        self.inner.apply(&[Op::DeleteRange(start, end)], sync)
    }

    /// Removes every key that starts with `prefix` (one range tombstone, as
    /// [`delete_range`](Self::delete_range)).
    pub fn delete_prefix(&self, prefix: impl AsRef<[u8]>) -> Result<()> {
        self.delete_prefix_opt(prefix, &WriteOptions::default())
    }

    /// [`delete_prefix`](Self::delete_prefix), durable as `opts` says.
    pub fn delete_prefix_opt(&self, prefix: impl AsRef<[u8]>, opts: &WriteOptions) -> Result<()> {
        let prefix = prefix.as_ref();
        let end =
            crate::tombstone::prefix_end(prefix).unwrap_or_else(crate::tombstone::key_space_end);
        self.delete_range_opt(prefix, end, opts)
    }

    /// Applies a batch atomically: after a crash either all of it or none of it is there.
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.write_opt(batch, &WriteOptions::default())
    }

    /// Applies a batch atomically, durable as `opts` says (see [`WriteOptions`]).
    pub fn write_opt(&self, batch: WriteBatch, opts: &WriteOptions) -> Result<()> {
        self.write_checked(batch, opts, None)
    }

    /// [`write_opt`](Self::write_opt), checked for conflicts as a transaction's commit
    /// (`tx`) when given.
    pub(super) fn write_checked(
        &self,
        batch: WriteBatch,
        opts: &WriteOptions,
        tx: Option<&std::sync::Arc<super::tx::TxCheck>>,
    ) -> Result<()> {
        let ids = self.inner.batch_ids(&batch)?;
        let ops: Vec<Op<'_>> = batch
            .ops
            .iter()
            .map(|op| match *op {
                OwnedOp::Put(ref k, ref v) => Op::put(k, v, self.inner.expiry(0, opts)),
                // Its time to live, in milliseconds, until now (`WriteBatch::put_with_ttl`).
                OwnedOp::PutExpiring(ref k, ref v, ttl) => {
                    Op::put(k, v, self.inner.expiry(ttl, opts))
                }
                ref op => op.as_op(),
            })
            .collect();
        let sync = self.inner.synced(opts);
        let ids = match &ids {
            Some(ids) => super::commit::Ids::Each(ids),
            None => super::commit::Ids::One(self.inner.tree.id),
        };
        let ops = super::commit::Ops { ops: &ops, ids };
        self.inner.apply_checked(ops, sync, tx)
    }

    /// fsyncs the logs: every write so far becomes durable.
    pub fn sync(&self) -> Result<()> {
        let inner = &self.inner;
        inner.check_writable()?;
        let r = inner.sync_all();
        inner.poison_on_err(r)
    }

    /// Seals the memtable into an L0 table (its filter built in parallel) and waits until
    /// that table is durable. Compactions it may call for run in the background. On the
    /// store, every keyspace's memtable is sealed; on a [`Keyspace`](super::Keyspace), its
    /// own.
    pub fn flush(&self) -> Result<()> {
        let inner = &self.inner;
        inner.check_writable()?;
        let target = {
            let mut w = inner.lock_writer();
            inner.check_writable()?;
            let slots: Vec<usize> = if inner.tree.id == 0 {
                let st = inner.read_state();
                (0..st.trees.len())
                    .filter(|&s| st.trees[s].id.is_some())
                    .collect()
            } else {
                vec![inner.tree.slot]
            };
            inner.switch_trees(&mut w, &slots)?
        };
        inner.wait_sealed(target)
    }
}

impl Inner {
    /// Under the writer lock `w`, so at one instant of the commit order: makes the
    /// non-empty memtable of each tree in `slots` immutable (first waiting for the tree's
    /// immutable one to be sealed). Returns the number [`wait_sealed`](Self::wait_sealed)
    /// waits for: then every write committed before this call is in a table.
    pub(super) fn switch_trees(&self, w: &mut Writer, slots: &[usize]) -> Result<u64> {
        for &slot in slots {
            let empty = self.read_state().tree(slot).mem.is_empty();
            if !empty {
                self.wait_for_imm_slot(slot)?;
                let r = self.switch_memtable(w, slot);
                self.poison_on_err(r)?;
            }
        }
        Ok(self.lock_bg().queued)
    }

    /// `expires_at` of a put with a time to live of `ttl_ms` milliseconds (0: none of its
    /// own), written with `opts`: its own, else the write's, else the store's default, else
    /// none (0).
    pub(super) fn expiry(&self, ttl_ms: u64, opts: &WriteOptions) -> u64 {
        let ttl = match (ttl_ms, opts.ttl.or(self.opts.default_ttl)) {
            (0, None) => return 0,
            (0, Some(d)) => d,
            (ms, _) => Duration::from_millis(ms),
        };
        crate::expiry::expires_at(self.opts.clock.now_millis(), ttl)
    }

    /// Whether a write made with `opts` returns only once durable.
    pub(super) fn synced(&self, opts: &WriteOptions) -> bool {
        let by_policy = self.opts.sync == SyncPolicy::EveryWrite;
        let sync = opts.sync.unwrap_or(by_policy);
        if sync != by_policy {
            self.commit.per_write.store(true, SeqCst);
        }
        sync
    }

    /// Checks a write and commits it through the writers queue (`commit.rs`): its record
    /// is in the log (fsynced with `sync`) and its operations in the memtable when this
    /// returns `Ok`.
    pub(super) fn apply(&self, ops: &[Op<'_>], sync: bool) -> Result<()> {
        self.apply_checked(super::commit::Ops::one(self.tree.id, ops), sync, None)
    }

    /// [`apply`](Self::apply), with a transaction's check made by the commit leader before
    /// the write is numbered (`tx/window.rs`).
    pub(super) fn apply_checked(
        &self,
        ops: super::commit::Ops<'_>,
        sync: bool,
        tx: Option<&Arc<super::tx::TxCheck>>,
    ) -> Result<()> {
        self.check_writable()?;
        self.check_live()?;
        let mut bytes = 0;
        for op in ops.ops {
            let (k, v) = match *op {
                Op::Put(k, v) | Op::PutExpiring(k, v, _) => (k, Some(v)),
                Op::Delete(k) => (k, None),
                Op::DeleteRange(s, e) => {
                    // The end may be one byte longer than a key (`key_space_end`).
                    if e.len() > crate::tombstone::file::MAX_END_LEN {
                        return Err(Error::TooLarge {
                            what: "range end",
                            len: e.len(),
                            max: crate::tombstone::file::MAX_END_LEN,
                        });
                    }
                    (s, None)
                }
            };
            if k.len() > crate::codec::MAX_KEY_LEN {
                return Err(Error::TooLarge {
                    what: "key",
                    len: k.len(),
                    max: crate::codec::MAX_KEY_LEN,
                });
            }
            if let Some(v) = v {
                if v.len() > crate::codec::MAX_VALUE_LEN {
                    return Err(Error::TooLarge {
                        what: "value",
                        len: v.len(),
                        max: crate::codec::MAX_VALUE_LEN,
                    });
                }
            }
            bytes += op.bytes();
        }
        if ops.ops.is_empty() {
            return Ok(());
        }
        // A bound on the record's payload (an op adds a tag and two length varints of at
        // most 3 and 4 bytes, and an expiry of 8, to its key and value); the exact length
        // only near the limit.
        let mut len = bytes + 16 * ops.len() + 10;
        if len > crate::wal::MAX_RECORD_LEN {
            len = crate::wal::payload_len(ops.iter());
            if len > crate::wal::MAX_RECORD_LEN {
                return Err(Error::TooLarge {
                    what: "write batch",
                    len,
                    max: crate::wal::MAX_RECORD_LEN,
                });
            }
        }
        self.commit(ops, bytes, crate::wal::RECORD_HEADER_LEN + len, sync, tx)
    }

    /// Starts a new log for the memtable.
    pub(super) fn new_log(&self, w: &mut Writer) -> Result<()> {
        let n = self.alloc_file()?;
        let mut wal = WalWriter::create(&*self.fs, &wal_path(&self.dir, n))?;
        wal.set_buffered(self.opts.sync == SyncPolicy::Buffered);
        self.commit.durable.new_log(wal.sync_handle());
        w.wal = Some(wal);
        w.wal_dir_synced = false;
        w.wal_number = n;
        self.lock_logs().push(n);
        Ok(())
    }

    /// Backpressure before a write of `bytes` (see the module docs).
    pub(super) fn make_room(&self, w: &mut Writer, bytes: usize) -> Result<()> {
        let auto = self.opts.compaction_trigger.is_some();
        let mut slowed = false;
        loop {
            self.check_writable()?;
            let (l0, full) = {
                let st = self.read_state();
                let l0 = st.tree(self.tree.slot).current.l0_count();
                (l0, self.switch_due(&st, w))
            };
            if auto && l0 >= self.opts.l0_stop {
                let t = Instant::now();
                self.want_compaction();
                {
                    let mut bg = self.lock_bg();
                    while bg.error.is_none() && self.current().l0_count() >= self.opts.l0_stop {
                        bg = self.bg_cv.wait(bg).unwrap_or_else(|p| p.into_inner());
                    }
                }
                let ns = t.elapsed().as_nanos() as u64;
                self.counters.stop_ns.fetch_add(ns, Relaxed);
                continue;
            }
            if auto && l0 >= self.opts.l0_slowdown && !slowed {
                slowed = true;
                w.delay_debt_ns += bytes as f64 * 1e9 / self.opts.slowdown_bytes_per_sec as f64;
                if w.delay_debt_ns >= 1e6 {
                    let d = Duration::from_nanos(w.delay_debt_ns as u64);
                    w.delay_debt_ns = 0.0;
                    std::thread::sleep(d);
                    self.counters
                        .slowdown_ns
                        .fetch_add(d.as_nanos() as u64, Relaxed);
                }
                continue;
            }
            let Some(slot) = full else {
                return Ok(());
            };
            if self.read_state().tree(slot).imm.is_some() {
                // Its seal may settle what was due (a keyspace holding the oldest log).
                self.wait_for_imm_slot(slot)?;
                continue;
            }
            let r = self.switch_memtable(w, slot);
            return self.poison_on_err(r);
        }
    }

    /// Adds the slowdown owed for `bytes` written beside the leader's own write in a group
    /// (paid by a later [`make_room`](Self::make_room)), while L0 is at its slowdown size.
    pub(super) fn owe_slowdown(&self, w: &mut Writer, bytes: usize) {
        let auto = self.opts.compaction_trigger.is_some();
        if auto && self.current().l0_count() >= self.opts.l0_slowdown {
            w.delay_debt_ns += bytes as f64 * 1e9 / self.opts.slowdown_bytes_per_sec as f64;
        }
    }

    /// Waits (counting the time) until no immutable memtable waits to be sealed.
    pub(super) fn wait_for_imm_slot(&self, slot: usize) -> Result<()> {
        if self.read_state().tree(slot).imm.is_none() {
            return Ok(());
        }
        let t = Instant::now();
        let mut bg = self.lock_bg();
        while bg.error.is_none() && self.read_state().tree(slot).imm.is_some() {
            bg = self.bg_cv.wait(bg).unwrap_or_else(|p| p.into_inner());
        }
        drop(bg);
        let ns = t.elapsed().as_nanos() as u64;
        self.counters.memtable_wait_ns.fetch_add(ns, Relaxed);
        self.check_writable()
    }

    /// Waits until every memtable queued up to number `target` is in a table.
    pub(super) fn wait_sealed(&self, target: u64) -> Result<()> {
        let mut bg = self.lock_bg();
        while bg.sealed < target {
            if let Some(cause) = &bg.error {
                return Err(Error::Poisoned {
                    cause: cause.clone(),
                });
            }
            bg = self.bg_cv.wait(bg).unwrap_or_else(|p| p.into_inner());
        }
        Ok(())
    }

    /// Starts a new log; returns the old one (its writes out of the buffer) and its number.
    fn rotate_log(&self, w: &mut Writer) -> Result<(Option<WalWriter>, u64)> {
        // The old log must hold every write of its memtable before that is sealed.
        if let Some(wal) = &mut w.wal {
            wal.write_out()?;
        }
        let old_wal = w.wal.take();
        let old_no = w.wal_number;
        self.new_log(w)?;
        if self.opts.sync == SyncPolicy::EveryWrite {
            if let Some(wal) = &mut w.wal {
                wal.sync()?;
            }
            self.fs
                .sync_dir(&self.dir)
                .map_err(|e| Error::io(&self.dir, e))?;
            w.wal_dir_synced = true;
        }
        Ok((old_wal, old_no))
    }

    /// Makes the memtable of the tree in `slot` immutable, starts a new log and wakes the
    /// flush thread. The caller made sure no immutable memtable of that tree is waiting.
    pub(super) fn switch_memtable(&self, w: &mut Writer, slot: usize) -> Result<()> {
        // An empty memtable (a keyspace holding the oldest log with nothing in memory)
        // needs no new log: its seal only moves its flushed-log number up to the current
        // log, which holds every write to it from here on.
        let empty = self.read_state().tree(slot).mem.is_empty();
        let (old_wal, old_no) = if empty && w.wal.is_some() {
            (None, w.wal_number - 1)
        } else {
            self.rotate_log(w)?
        };
        let seq = {
            let mut bg = self.lock_bg();
            bg.queued += 1;
            bg.queued
        };
        {
            let mut st = self.state_mut();
            let st = st.tree_mut(slot);
            // The next memtable will likely hold as many entries as this one: room for them
            // up front (plus an eighth), so no put pays for a growth.
            let room = st.mem.len() + st.mem.len() / 8;
            let mem = Arc::new(std::mem::replace(
                &mut st.mem,
                Memtable::with_capacity(room),
            ));
            // Scans that started on this memtable read it from here on (see `scan.rs`).
            let _ = std::mem::take(&mut st.mem_frozen).set(mem.clone());
            st.imm = Some(Arc::new(Imm {
                mem,
                log: old_no,
                wal: Mutex::new(old_wal),
                seq,
            }));
        }
        let _bg = self.lock_bg();
        self.bg_cv.notify_all();
        debug_assert!(!self.shutdown.load(SeqCst));
        Ok(())
    }
}
