//! Group commit: writers that arrive while a log write is in progress wait in a queue, and
//! the next leader commits all of them with one log write. The idea is LevelDB's writers
//! queue (`DBImpl::Write`, `BuildBatchGroup`) and RocksDB's `WriteThread`. The fsync of
//! synced writes (`SyncPolicy::EveryWrite`, or [`WriteOptions::sync`](super::WriteOptions))
//! is not made here, under the writer lock, but after it (`durable.rs`): each synced writer
//! waits for an fsync that covers its group, and writers that did not ask for one return
//! without waiting for it.
//!
//! ```text
//! writer ─► nobody leads? ─ yes ─► leads at once (its record encoded under the writer lock)
//!                └───────── no ──► encodes its record, joins the queue, parks until its group
//!                                  is committed, or until it is the queue's front and
//!                                  nobody leads (then it leads); the queue's front watches
//!                                  for the lead to come free for up to 200 µs (while at
//!                                  most 4 writers wait) before it parks
//! leader ─► writer lock ─► make_room (backpressure, memtable switch: the leader waits for
//!           the group) ─► takes the queue's front into its group (1 MiB of records, or the
//!           first record + 128 KiB when that is small) ─► one log write of every record
//!           (no fsync) ─► memtable inserts, in log order ─► writer lock released ─► every
//!           writer of the group gets the group's result; the queue's new front is woken to
//!           lead ─► each synced writer of the group waits until an fsync covers the group
//!           (`durable.rs`; one of them makes it when none is in flight)
//! ```
//!
//! - **Two paths.** While every write follows the store's `SyncPolicy` (all synced under
//!   `EveryWrite`, none otherwise), the leader fsyncs its group itself, under the writer
//!   lock, before the memtable inserts: nobody could wait behind that fsync but writers
//!   that need one too, and measured from 4 threads under `EveryWrite` this is 1.5–2× the
//!   puts/s of the fsync outside the lock (on this disk, an fsync that runs while the next
//!   group is written takes longer, and the hand-over needs a wake-up). The first write
//!   whose `WriteOptions` differ from the policy switches the store to the fsync outside
//!   the lock (`durable.rs`) for good; both paths keep the watermark of `durable.rs`.
//! - **Durability.** No writer returns `Ok` before its record is in the log under the store's
//!   [`SyncPolicy`](super::SyncPolicy) or its own `WriteOptions`: a synced write after an
//!   fsync that covers it (and every record before it, in every log). A failed write fails
//!   every writer of the group, a failed fsync every synced writer it was to cover (each
//!   gets a copy of the error); either poisons the store, and the writers queued behind
//!   then fail as poisoned. Unsynced writers of a group whose fsync fails have returned
//!   `Ok` already: their writes were never promised durable.
//! - **Atomicity.** Each writer's batch stays one WAL record; a group is those records one
//!   after another (format.md, "Write-ahead log"). A crash in the middle of a group's write
//!   leaves whole records before the tear, each a whole batch, none acknowledged.
//! - **Visibility.** The memtable inserts happen after the log write, under one state lock,
//!   in log order. With the fsync under the writer lock they come after it too: a `get`
//!   running while a group's fsync is in flight does not see the group's writes, and once
//!   it sees one it is durable (LevelDB's order). With the fsync outside the lock they come
//!   before it: a `get` (or a snapshot) may see a synced write whose fsync is still in
//!   flight (its writer has not returned, and a power cut may still lose it, as it may any
//!   write not yet acknowledged). That is the price of unsynced writers not waiting behind
//!   an fsync: the memtable is applied in log order, so a later unsynced write could not
//!   become visible (and return) before an earlier synced one otherwise.
//! - **Sequence numbers.** On both paths the leader numbers the group's records under the
//!   writer lock, in log order, from the store's last commit sequence number (a queued
//!   writer's record, encoded before its turn, gets its number and CRCs then:
//!   `wal::stamp_seqs`), and raises the state's `seq` with the memtable inserts, under the
//!   same state lock and still under the writer lock: a snapshot sees exactly the writes
//!   numbered up to the `seq` it takes under that lock. Where the fsync is made does not
//!   change the numbering or the order in which writes become visible.
//! - **Transactions.** A transaction's write carries its check (`tx/window.rs`): the
//!   leader makes it, in log order, before it numbers the record, against the window of keys
//!   written since the transaction's snapshot, which holds the earlier records of the same
//!   group too; a refused record is left out of the group (its writer gets
//!   `Error::Conflict`), the others are written as usual. While transactions are open every
//!   numbered record's keys join the window. See docs/engine.md, "Transactions".
//! - **Hand-over.** The queue's front yields its core in a loop, watching the lead, instead
//!   of parking at once: the lead passes to it as soon as the leader before it is done,
//!   without a wake-up (a futex wake and a scheduler round trip, tens of microseconds on an
//!   idle core and milliseconds on a busy one) per group. Only one writer watches; the
//!   others park.
//! - **Lock order.** The queue's lock is a leaf: taken alone, or under the writer lock, never
//!   held while another lock is taken (so is the durable watermark's, `durable.rs`). Only
//!   the leader holds the writer lock for writes; `flush`, `sync` and recovery take it as
//!   before and so wait for a group in progress. No writer waits for an fsync while it
//!   holds the writer lock (but for the first synced record of a new log, whose directory
//!   entry the leader makes durable under it: once per memtable).

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::Thread;
use std::time::{Duration, Instant};

use super::tx::TxCheck;
use super::{Inner, SyncPolicy, Writer};
use crate::counters::Sharded;
use crate::error::{Error, Result};
use crate::wal;

/// A group takes at most this many bytes of records...
const MAX_GROUP_BYTES: usize = 1 << 20;
/// ...and, when the leader's own record is at most this large, at most this many more than
/// it: a small write is not held up to write a large group (LevelDB's rule).
const SMALL_RECORD_BYTES: usize = 128 << 10;

/// How long the writer at the queue's front (the next leader) watches for the lead to come
/// free, yielding its core, before it parks: about one fsync of a fast disk. RocksDB's
/// `WriteThread` waits the same way (`enable_write_thread_adaptive_yield`).
const FRONT_WATCH: Duration = Duration::from_micros(200);

/// The front stops watching once more writers than this wait: they need the cores to get
/// to the queue, and their group is large enough that one wake-up more costs little.
const WATCH_MAX_WAITING: usize = 4;

/// Waits, yielding, until nobody leads (`true`), or [`FRONT_WATCH`] has passed or more than
/// [`WATCH_MAX_WAITING`] writers wait (`false`).
fn watch_for_lead(leading: &AtomicBool, waiting: &AtomicUsize) -> bool {
    let end = Instant::now() + FRONT_WATCH;
    loop {
        if !leading.load(SeqCst) {
            return true;
        }
        if Instant::now() >= end || waiting.load(Relaxed) > WATCH_MAX_WAITING {
            return false;
        }
        std::thread::yield_now();
    }
}

mod ops;
pub(super) use self::ops::{Ids, Ops};

/// The writers queue (see the module docs), with its counters.
#[derive(Default)]
pub(super) struct CommitQueue {
    /// A leader is committing. Whoever sets it leads: a writer that finds the queue empty, or
    /// the writer at the queue's front once the leader before it is done.
    leading: AtomicBool,
    queue: Mutex<Queue>,
    /// `queue.pending.len()`, readable without the lock.
    waiting: AtomicUsize,
    /// Groups committed (counter 0) and the writes in them (counter 1), counted without a
    /// locked instruction.
    counts: Sharded<2>,
    /// What an fsync covered (`durable.rs`).
    pub(super) durable: super::durable::Durable,
    /// A write asked for other durability than the store's policy: from then on, fsyncs are
    /// made outside the writer lock (see "Two paths" in the module docs).
    pub(super) per_write: AtomicBool,
}

/// Writers that wait, numbered by tickets in arrival order (a writer that leads at once needs
/// none); groups are committed in ticket order.
#[derive(Default)]
struct Queue {
    /// Writers waiting to be taken into a group, in ticket order.
    pending: VecDeque<Waiter>,
    /// The next ticket to hand out.
    next: u64,
    /// Every ticket below this is committed (or failed).
    done: u64,
    /// Groups that failed, with their error. Each failure poisons the store, after which
    /// writers are refused before they queue, so this stays a few entries long.
    failed: Vec<(Range<u64>, Arc<Error>)>,
    /// The log position after the last committed group that held a synced write: what a
    /// synced writer of a group up to `done` waits to see durable (`durable.rs`).
    synced_end: u64,
}

/// A writer waiting in the queue.
struct Waiter {
    ticket: u64,
    /// Its encoded WAL record.
    record: Vec<u8>,
    /// Key and value bytes.
    bytes: usize,
    /// It returns only once its record is durable.
    sync: bool,
    thread: Thread,
    /// A transaction's check, made by the leader before the record is numbered
    /// (`tx/window.rs`); a refused record is left out of the group.
    tx: Option<Arc<TxCheck>>,
    refused: bool,
    /// The sequence number the leader gave the record.
    seq: u64,
}

impl Queue {
    /// What a committed (or failed) ticket's writer returns.
    fn outcome(&self, ticket: u64) -> Result<()> {
        match self.failed.iter().find(|(r, _)| r.contains(&ticket)) {
            Some((_, e)) => Err(e.duplicate()),
            None => Ok(()),
        }
    }
}

impl CommitQueue {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the lead if nobody has it.
    fn try_lead(&self) -> bool {
        self.leading
            .compare_exchange(false, true, SeqCst, Relaxed)
            .is_ok()
    }

    /// (groups committed, writes in them).
    pub(super) fn counts(&self) -> (u64, u64) {
        (self.counts.get(0), self.counts.get(1))
    }

    /// Writers waiting in the queue (tests force contention with it).
    #[cfg(test)]
    pub(super) fn queued(&self) -> usize {
        self.lock().pending.len()
    }

    /// Whether a leader is committing (tests wait for it).
    #[cfg(test)]
    pub(super) fn leading_now(&self) -> bool {
        self.leading.load(SeqCst)
    }
}

/// The leader's own write: still as the caller's ops (it led at once) or already encoded in
/// the queue's front (it waited, then became the front).
#[derive(Clone, Copy)]
enum Own<'a> {
    /// The ops, and a transaction's check of them.
    Ops(Ops<'a>, Option<&'a TxCheck>),
    Queued,
}

/// The group a leader commits: the waiters it took from the queue (the leader's own write
/// first when it waited).
struct Group<'a> {
    inner: &'a Inner,
    taken: Vec<Waiter>,
    /// Set once the group's writers have their result; a leader that unwinds before that
    /// (a bug) fails them instead of leaving them parked.
    finished: bool,
}

impl Inner {
    /// Commits one write through the queue. `bytes`: its key and value bytes; `record_len`:
    /// a bound on the length of its encoded WAL record (which the caller checked against the
    /// limit); `sync`: it returns only once its record is durable; `tx`: a transaction's
    /// check, which the leader makes before it numbers the write (the write is left out,
    /// and this returns its error, when the check fails).
    pub(super) fn commit(
        &self,
        ops: Ops<'_>,
        bytes: usize,
        record_len: usize,
        sync: bool,
        tx: Option<&Arc<TxCheck>>,
    ) -> Result<()> {
        let c = &self.commit;
        let verdict = || tx.map_or(Ok(()), |t| t.outcome());
        if c.try_lead() {
            // Nobody is writing: lead at once, without copying the record. Writers may be
            // queued (the leader before woke the front, which has not run yet): this leader
            // takes them into its group rather than wait for that hand-over.
            let own = Own::Ops(ops, tx.map(|t| &**t));
            let end = self.lead(own, None, bytes, record_len, sync)?;
            verdict()?;
            return self.durable_after(sync, end);
        }
        let mut record = Vec::with_capacity(record_len);
        // Numbered by the leader that takes it into its group.
        wal::encode_record_in(&mut record, 0, ops.len(), ops.iter())?;
        let ticket = {
            let mut q = c.lock();
            let t = q.next;
            q.next += 1;
            q.pending.push_back(Waiter {
                ticket: t,
                record,
                bytes,
                sync,
                thread: std::thread::current(),
                tx: tx.cloned(),
                refused: false,
                seq: 0,
            });
            c.waiting.store(q.pending.len(), SeqCst);
            t
        };
        loop {
            let mut q = c.lock();
            if q.done > ticket {
                let end = q.synced_end;
                q.outcome(ticket)?;
                drop(q);
                verdict()?;
                return self.durable_after(sync, end);
            }
            // The lead is taken under the queue's lock, so no other leader can take this write
            // into its group in between. A leader gives up the lead before it looks at the
            // queue, and this writer queued before it tries to take the lead: one of the two
            // sees the other.
            if q.pending.front().is_some_and(|w| w.ticket == ticket) && c.try_lead() {
                let mine = q.pending.pop_front();
                c.waiting.store(q.pending.len(), SeqCst);
                drop(q);
                let end = self.lead(Own::Queued, mine, bytes, record_len, sync)?;
                verdict()?;
                return self.durable_after(sync, end);
            }
            let front = q.pending.front().is_some_and(|w| w.ticket == ticket);
            drop(q);
            // The next leader watches for the lead to come free rather than wait to be
            // woken (a wake-up costs a scheduler round trip per group).
            if front && watch_for_lead(&c.leading, &c.waiting) {
                continue;
            }
            // Woken by the leader that committed this write, or by the one that left this
            // write at the queue's front. A spurious wake-up just looks again.
            std::thread::park();
        }
    }

    /// After its group committed: a synced writer waits until the log is durable up to
    /// `end` (a position at or after its group's end).
    fn durable_after(&self, sync: bool, end: u64) -> Result<()> {
        if sync {
            self.wait_durable(end)
        } else {
            Ok(())
        }
    }

    /// Commits a group: the leader's own write and the writers queued behind it.
    /// `mine`: the leader's own write when it waited in the queue. Returns the log position
    /// after the group.
    fn lead(
        &self,
        own: Own<'_>,
        mine: Option<Waiter>,
        own_bytes: usize,
        own_len: usize,
        own_sync: bool,
    ) -> Result<u64> {
        let c = &self.commit;
        let mut group = Group {
            inner: self,
            taken: Vec::new(),
            finished: false,
        };
        let mut own_len = own_len;
        if let Some(mine) = mine {
            own_len = mine.record.len();
            group.taken.push(mine);
        }
        let mut guard = self.lock_writer();
        let w = &mut *guard;
        let room = self.make_room(w, own_bytes);
        // Nobody queued: no lock to take (one who queues just after this is woken as the
        // next leader).
        if c.waiting.load(SeqCst) > 0 {
            let mut q = c.lock();
            let limit = if own_len <= SMALL_RECORD_BYTES {
                own_len + SMALL_RECORD_BYTES
            } else {
                MAX_GROUP_BYTES
            };
            let mut size = own_len;
            while let Some(next) = q.pending.front() {
                if size + next.record.len() > limit {
                    break;
                }
                size += next.record.len();
                group.taken.extend(q.pending.pop_front());
            }
            c.waiting.store(q.pending.len(), SeqCst);
        }
        let sync = own_sync || group.taken.iter().any(|t| t.sync);
        let r = room.and_then(|()| self.write_group(w, own, own_bytes, &mut group.taken, sync));
        drop(guard);
        let writes = group.taken.len() + usize::from(matches!(own, Own::Ops(..)));
        group.finish(&r, writes, sync);
        r
    }

    /// Appends the group's records to the log (one write; with `sync`, one that reaches the
    /// operating system, in reserved space, for an fsync after the writer lock) and inserts
    /// its writes into the memtable, in log order. Returns the log position after the group.
    fn write_group(
        &self,
        w: &mut Writer,
        own: Own<'_>,
        own_bytes: usize,
        taken: &mut [Waiter],
        sync: bool,
    ) -> Result<u64> {
        // The queued records are this process's own encoding; one that does not decode is a
        // bug, reported before anything is written.
        for t in taken.iter() {
            wal::for_each_op(&t.record, |_| {}).map_err(|e| {
                Error::Internal(format!("a queued write's log record does not decode: {e}"))
            })?;
        }
        let followers = match own {
            Own::Ops(..) => &*taken,
            Own::Queued => taken.get(1..).unwrap_or_default(),
        };
        let follower_bytes = followers.iter().map(|t| t.bytes).sum();
        if !followers.is_empty() {
            self.owe_slowdown(w, follower_bytes);
        }
        if w.wal.is_none() {
            let r = self.new_log(w);
            self.poison_on_err(r)?;
        }
        let Writer {
            wal,
            wal_dir_synced,
            record,
            group,
            window,
            ..
        } = w;
        // The group's sequence numbers, in log order: the leader's own record first. A
        // transaction is checked against the window (which holds the earlier writes of this
        // group too) before it gets its number; a refused one is left out. While
        // transactions are open, every write's keys join the window (`tx/window.rs`).
        let recording = self.txs.active.load(SeqCst) > 0;
        let first = self.last_seq.load(SeqCst) + 1;
        let mut last = first - 1;
        let mut own_in = false;
        if let Own::Ops(ops, check) = own {
            if check.is_none_or(|c| window.admit(c)) {
                wal::encode_record_in(record, first, ops.len(), ops.iter())?;
                last = first;
                own_in = true;
                if recording {
                    ops.iter().for_each(|(_, op)| window.record_op(op, first));
                }
            }
        }
        let mut accepted = 0;
        for t in taken.iter_mut() {
            if t.tx.as_deref().is_some_and(|c| !window.admit(c)) {
                t.refused = true;
                continue;
            }
            accepted += 1;
            last = wal::stamp_seqs(&mut t.record, last + 1);
            t.seq = last;
            if recording {
                wal::for_each_op(&t.record, |op| window.record_op(op, last))?;
            }
        }
        // Handed out, written or not: a failed write poisons the store, and a record that
        // reached the disk keeps its number at the next open.
        self.last_seq.store(last, SeqCst);
        let taken = &*taken;
        let in_group = || taken.iter().filter(|t| !t.refused);
        // One record as it is, or every record of the group one after another.
        let out: &[u8] = match (own_in, accepted) {
            (true, 0) => record,
            (false, 1) => in_group().next().map_or(&[][..], |t| &t.record),
            _ => {
                group.clear();
                if own_in {
                    group.extend_from_slice(record);
                }
                for t in in_group() {
                    group.extend_from_slice(&t.record);
                }
                group
            }
        };
        // Mixed durability: the fsync comes after the writer lock (`durable.rs`); the
        // directory entry of a new log first, under it (once per log). Otherwise (every
        // write as the policy says) the fsync is made here ("Two paths" above).
        let outside = self.commit.per_write.load(SeqCst);
        // With the fsync outside, unsynced records also land in reserved space: an fsync
        // then has no file size to record (no journal commit on ext4) however many unsynced
        // records were appended since the last one.
        let buffered = self.opts.sync == SyncPolicy::Buffered;
        let r = match wal {
            _ if out.is_empty() => Ok(()),
            Some(wal) if outside && (sync || !buffered) => wal.append_for_sync(out),
            Some(wal) => wal.append(out, sync),
            None => Ok(()),
        };
        self.poison_on_err(r)?;
        let written = sync || !buffered;
        if sync && !*wal_dir_synced {
            let r = self
                .fs
                .sync_dir(&self.dir)
                .map_err(|e| Error::io(&self.dir, e));
            self.poison_on_err(r)?;
            *wal_dir_synced = true;
        }
        let end = self.commit.durable.appended(out.len(), written);
        if sync && !outside {
            // Fsynced above, and every earlier record with it: nothing is left unsynced (a
            // policy that syncs every write left no unsynced bytes in an earlier log).
            self.commit.durable.all_synced();
        }
        let user_bytes = own_bytes + follower_bytes;
        let c = &self.counters;
        c.wal_bytes.fetch_add(out.len() as u64, Relaxed);
        c.user_bytes.fetch_add(user_bytes as u64, Relaxed);
        let mut st = self.state_mut();
        if let (Own::Ops(ops, _), true) = (own, own_in) {
            for (id, op) in ops.iter() {
                st.apply(id, op);
            }
        }
        for t in in_group() {
            // Decoded above: cannot fail.
            wal::for_each_op_in(&t.record, |id, op| st.apply(id, op))?;
        }
        st.seq = last;
        // Read under the state lock, after the group became visible: a transaction counted
        // in `active` before it took its snapshot (`Registry::begin`) either took it after
        // this (and sees the group) or is counted here.
        let open = self.txs.active.load(SeqCst) > 0;
        drop(st);
        if open && !recording {
            if let (Own::Ops(ops, _), true) = (own, own_in) {
                ops.iter().for_each(|(_, op)| window.record_op(op, first));
            }
            for t in in_group() {
                wal::for_each_op(&t.record, |op| window.record_op(op, t.seq))?;
            }
        }
        let oldest = if open { self.txs.oldest() } else { None };
        window.prune(oldest, last, self.opts.transaction_window_bytes);
        Ok(end)
    }
}

impl Group<'_> {
    /// Hands the group's result to its writers, gives up the lead and wakes the queue's
    /// front (the next leader). `writes`: the group's writes, the leader's own included;
    /// `r`: the log position after the group; `sync`: the group holds a synced write.
    fn finish(&mut self, r: &Result<u64>, writes: usize, sync: bool) {
        self.finished = true;
        let c = &self.inner.commit;
        if r.is_ok() {
            c.counts.add(0, 1);
            c.counts.add(1, writes as u64);
        }
        if let (Some(first), Some(last)) = (self.taken.first(), self.taken.last()) {
            let tickets = first.ticket..last.ticket + 1;
            let mut q = c.lock();
            q.done = tickets.end;
            match r {
                Ok(end) if sync => q.synced_end = q.synced_end.max(*end),
                Ok(_) => {}
                Err(e) => q.failed.push((tickets, Arc::new(e.duplicate()))),
            }
        }
        c.leading.store(false, SeqCst);
        if c.waiting.load(SeqCst) > 0 {
            let next = c.lock().pending.front().map(|w| w.thread.clone());
            if let Some(t) = next {
                t.unpark();
            }
        }
        if !self.taken.is_empty() {
            let me = std::thread::current().id();
            for w in &self.taken {
                if w.thread.id() != me {
                    w.thread.unpark();
                }
            }
        }
    }
}

impl Drop for Group<'_> {
    fn drop(&mut self) {
        if !self.finished {
            // Only reached by unwinding out of `lead`: fail the group rather than leave its
            // writers parked.
            let e = Error::Internal("a writer panicked while committing its group".into());
            self.inner.poison(&e);
            self.finish(&Err(e), 0, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use crate::io::{FaultFs, EIO};
    use crate::{Error, Options, Store, SyncPolicy};

    const WAIT: Duration = Duration::from_secs(20);

    fn open(dir: &std::path::Path, fs: &FaultFs) -> Store {
        Store::open(
            dir,
            Options {
                sync: SyncPolicy::EveryWrite,
                compaction_trigger: None,
                fs: Arc::new(fs.clone()),
                ..Options::default()
            },
        )
        .unwrap()
    }

    /// A store whose fsyncs are made outside the writer lock (as after a first write with
    /// `WriteOptions` other than its policy).
    fn open_mixed(dir: &std::path::Path, fs: &FaultFs) -> Store {
        let store = open(dir, fs);
        store
            .inner
            .commit
            .per_write
            .store(true, std::sync::atomic::Ordering::SeqCst);
        store
    }

    /// Waits until `n` writers wait in the store's queue (a state, not a time: the limit
    /// only turns a hang into a failure).
    fn wait_queued(store: &Store, n: usize) {
        let end = Instant::now() + WAIT;
        while store.inner.commit.queued() < n {
            assert!(Instant::now() < end, "{n} writers never queued");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Waits until `n` synced writers wait for the fsync in flight.
    fn wait_durable_waiters(store: &Store, n: usize) {
        let end = Instant::now() + WAIT;
        while store.inner.commit.durable.waiting() < n {
            assert!(
                Instant::now() < end,
                "{n} synced writers never waited for the fsync"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Waits until `h` is done (a state: the limit only turns a hang into a failure).
    fn finishes<T>(h: &std::thread::ScopedJoinHandle<'_, T>) -> bool {
        let end = Instant::now() + WAIT;
        while !h.is_finished() {
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    fn held(fs: &FaultFs, n: usize) {
        assert_eq!(fs.wait_held_log_syncs(n, WAIT), n, "log fsyncs held");
    }

    fn wal_syncs(fs: &FaultFs) -> usize {
        let logs = fs.sync_log();
        logs.iter()
            .filter(|p| p.extension().is_some_and(|e| e == "wal"))
            .count()
    }

    /// Writers that queue while a group is being written are committed as the next group,
    /// with one log write and one fsync.
    #[test]
    fn writers_queued_behind_a_leader_commit_as_one_group() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new();
        let store = open(dir.path(), &fs);
        store.put(b"warm", b"0").unwrap();
        std::thread::scope(|s| {
            // The writer lock held here stands for a group in progress: `a` leads and waits
            // for the lock; b, c and d queue behind it.
            let held = store.inner.lock_writer();
            let a = s.spawn(|| store.put(b"a", b"1"));
            let end = Instant::now() + WAIT;
            while !store
                .inner
                .commit
                .leading
                .load(std::sync::atomic::Ordering::SeqCst)
            {
                assert!(Instant::now() < end, "a never led");
                std::thread::sleep(Duration::from_millis(1));
            }
            let others: Vec<_> = [b"b", b"c", b"d"]
                .into_iter()
                .map(|k| {
                    let store = &store;
                    s.spawn(move || store.put(k, b"2"))
                })
                .collect();
            wait_queued(&store, 3);
            drop(held);
            a.join().unwrap().unwrap();
            for h in others {
                h.join().unwrap().unwrap();
            }
        });
        let st = store.stats();
        assert_eq!((st.commit_groups, st.commit_writes), (2, 5));
        assert_eq!(wal_syncs(&fs), 2, "one fsync per group");
        drop(store);
        let store = open(dir.path(), &fs);
        for k in [&b"a"[..], b"b", b"c", b"d", b"warm"] {
            assert!(store.get(k).unwrap().is_some(), "lost at reopen");
        }
    }

    /// Synced writers that arrive while a log fsync is in flight are covered by the next
    /// fsync, one for all of them; none of them returns before it.
    #[test]
    fn writers_behind_an_fsync_in_flight_share_the_next_fsync() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new();
        let store = open_mixed(dir.path(), &fs);
        store.put(b"warm", b"0").unwrap();
        fs.hold_log_syncs();
        std::thread::scope(|s| {
            let a = s.spawn(|| store.put(b"a", b"1"));
            held(&fs, 1);
            let others: Vec<_> = [b"b", b"c", b"d"]
                .into_iter()
                .map(|k| {
                    let store = &store;
                    s.spawn(move || store.put(k, b"2"))
                })
                .collect();
            wait_durable_waiters(&store, 3);
            fs.pass_log_sync(None);
            a.join().unwrap().unwrap();
            // One of b, c, d fsyncs for all three; that fsync is held: none has returned.
            held(&fs, 1);
            assert!(others.iter().all(|h| !h.is_finished()));
            fs.pass_log_sync(None);
            // Should they not have shared it, the others go through as well.
            fs.release_log_syncs();
            for h in others {
                h.join().unwrap().unwrap();
            }
        });
        assert_eq!(
            wal_syncs(&fs),
            3,
            "one fsync for the writers behind the first"
        );
        drop(store);
        let store = open(dir.path(), &fs);
        for k in [&b"a"[..], b"b", b"c", b"d", b"warm"] {
            assert!(store.get(k).unwrap().is_some(), "lost at reopen");
        }
    }

    /// Writers that do not ask for an fsync do not wait for one in flight (which today's
    /// commit leader would have held the writer lock through), and are visible at once; the
    /// synced writer returns only after its fsync.
    #[test]
    fn unsynced_writers_do_not_wait_behind_an_fsync() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new();
        let store = open_mixed(dir.path(), &fs);
        let no_sync = crate::WriteOptions::default().sync(false);
        fs.hold_log_syncs();
        std::thread::scope(|s| {
            let a = s.spawn(|| store.put(b"a", b"1"));
            held(&fs, 1);
            let unsynced = s.spawn(|| {
                for i in 0..100u32 {
                    store.put_opt(i.to_be_bytes(), b"u", &no_sync)?;
                }
                let mut batch = crate::WriteBatch::new();
                batch.put("b1", "x").delete("b2");
                store.write_opt(batch, &no_sync)?;
                store.delete_opt("gone", &no_sync)
            });
            assert!(
                finishes(&unsynced),
                "an unsynced writer waited for the fsync"
            );
            unsynced.join().unwrap().unwrap();
            assert_eq!(
                store.get(99u32.to_be_bytes()).unwrap().map(Vec::from),
                Some(b"u".to_vec())
            );
            assert_eq!(store.get("b1").unwrap().map(Vec::from), Some(b"x".to_vec()));
            assert!(!a.is_finished(), "a synced write returned before its fsync");
            assert_eq!(fs.held_log_syncs(), 1);
            fs.release_log_syncs();
            a.join().unwrap().unwrap();
        });
        assert_eq!(wal_syncs(&fs), 1, "the unsynced writes made no fsync");
    }

    /// Writers that arrive while a log fsync is in flight are committed together, with one
    /// fsync, and none of their writes is visible before that fsync is done.
    #[test]
    fn writers_behind_an_fsync_in_flight_commit_as_one_group() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new();
        let store = open(dir.path(), &fs);
        store.put(b"warm", b"0").unwrap();
        fs.hold_log_syncs();
        std::thread::scope(|s| {
            let a = s.spawn(|| store.put(b"a", b"1"));
            held(&fs, 1);
            let others: Vec<_> = [b"b", b"c", b"d"]
                .into_iter()
                .map(|k| {
                    let store = &store;
                    s.spawn(move || store.put(k, b"2"))
                })
                .collect();
            wait_queued(&store, 3);
            fs.pass_log_sync(None);
            a.join().unwrap().unwrap();
            // b, c and d are one group now, its fsync held: nothing of it is visible yet.
            held(&fs, 1);
            for k in [b"b", b"c", b"d"] {
                assert_eq!(store.get(k).unwrap(), None);
            }
            let s0 = store.stats();
            assert_eq!((s0.commit_groups, s0.commit_writes), (2, 2));
            fs.pass_log_sync(None);
            // Should the writers not have been grouped, the others go through as well.
            fs.release_log_syncs();
            for h in others {
                h.join().unwrap().unwrap();
            }
        });
        let st = store.stats();
        assert_eq!((st.commit_groups, st.commit_writes), (3, 5));
        assert_eq!(wal_syncs(&fs), 3, "one fsync per group");
        for k in [&b"a"[..], b"b", b"c", b"d", b"warm"] {
            assert!(store.get(k).unwrap().is_some());
        }
        drop(store);
        let store = open(dir.path(), &fs);
        for k in [&b"a"[..], b"b", b"c", b"d", b"warm"] {
            assert!(store.get(k).unwrap().is_some(), "lost at reopen");
        }
    }

    /// A failed group fsync fails every writer of the group and poisons the store; a power
    /// cut then leaves exactly the acknowledged writes.
    #[test]
    fn a_failed_group_fsync_fails_the_whole_group() {
        failed_fsync_fails_its_writers(false, |st| {
            assert_eq!((st.commit_groups, st.commit_writes), (2, 2));
        });
    }

    /// A failed fsync fails every synced writer it was to cover and poisons the store; a
    /// power cut then leaves exactly the acknowledged writes.
    #[test]
    fn with_the_fsync_outside_the_lock_a_failed_fsync_fails_its_synced_writers() {
        failed_fsync_fails_its_writers(true, |st| {
            // b, c and d were written to the log (in one to three groups); their fsync failed.
            assert_eq!(st.commit_writes, 5);
            assert!((3..=5).contains(&st.commit_groups), "{}", st.commit_groups);
        });
    }

    /// The two tests above: `a` is acknowledged, then the fsync meant to cover the batches
    /// of b, c and d fails; `mixed` puts the fsync outside the writer lock. `counts` checks
    /// the commit counters of each path.
    fn failed_fsync_fails_its_writers(mixed: bool, counts: impl FnOnce(&crate::Stats)) {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new();
        let store = if mixed {
            open_mixed(dir.path(), &fs)
        } else {
            open(dir.path(), &fs)
        };
        store.put(b"warm", b"0").unwrap();
        fs.hold_log_syncs();
        std::thread::scope(|s| {
            let a = s.spawn(|| store.put(b"a", b"1"));
            held(&fs, 1);
            let others: Vec<_> = [b"b", b"c", b"d"]
                .into_iter()
                .map(|k| {
                    let store = &store;
                    s.spawn(move || {
                        let mut batch = crate::WriteBatch::new();
                        batch
                            .put(k.to_vec(), b"2".to_vec())
                            .put(k.repeat(2), b"3".to_vec());
                        store.write(batch)
                    })
                })
                .collect();
            if mixed {
                wait_durable_waiters(&store, 3);
            } else {
                wait_queued(&store, 3);
            }
            fs.pass_log_sync(None);
            a.join().unwrap().unwrap();
            held(&fs, 1);
            fs.pass_log_sync(Some(EIO));
            fs.release_log_syncs();
            for h in others {
                match h.join().unwrap() {
                    Err(Error::Io { source, .. }) => assert_eq!(source.raw_os_error(), Some(EIO)),
                    r => panic!("a writer of the failed group got {r:?}"),
                }
            }
        });
        assert!(matches!(store.put(b"e", b"4"), Err(Error::Poisoned { .. })));
        counts(&store.stats());
        // What a power cut leaves now: exactly the acknowledged writes.
        let image = tempfile::tempdir().unwrap();
        fs.crash_image(image.path(), usize::MAX).unwrap();
        drop(store);
        let after = Store::open(image.path(), Options::default()).unwrap();
        let mut got: Vec<Vec<u8>> = Vec::new();
        for e in after.scan::<&[u8]>(..) {
            got.push(e.unwrap().0.into());
        }
        assert_eq!(got, [b"a".to_vec(), b"warm".to_vec()]);
        // The store itself (nothing lost by a power cut) reopens with every acknowledged
        // write, and each failed batch whole or not at all.
        let store = open(dir.path(), &fs);
        assert!(store.get(b"a").unwrap().is_some() && store.get(b"warm").unwrap().is_some());
        for k in [b"b", b"c", b"d"] {
            let one = store.get(k).unwrap().is_some();
            assert_eq!(
                store.get(k.repeat(2)).unwrap().is_some(),
                one,
                "half a batch"
            );
        }
    }

    /// LevelDB's bound: a group after a small first record holds at most 128 KiB more.
    #[test]
    fn a_small_write_does_not_wait_for_a_large_group() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new();
        let store = open(dir.path(), &fs);
        store.put(b"warm", b"0").unwrap();
        fs.hold_log_syncs();
        let value = vec![7u8; 60_000];
        std::thread::scope(|s| {
            let a = s.spawn(|| store.put(b"a", b"1"));
            held(&fs, 1);
            let others: Vec<_> = [b"b", b"c", b"d", b"e"]
                .into_iter()
                .map(|k| {
                    let (store, value) = (&store, &value);
                    s.spawn(move || store.put(k, value))
                })
                .collect();
            wait_queued(&store, 4);
            fs.release_log_syncs();
            a.join().unwrap().unwrap();
            for h in others {
                h.join().unwrap().unwrap();
            }
        });
        // warm, a, then three 60 kB records (the first + 120 kB), then the fourth.
        let st = store.stats();
        assert_eq!((st.commit_groups, st.commit_writes), (4, 6));
    }

    /// LevelDB's bound: a group after a small first record holds at most 128 KiB more.
    #[test]
    fn a_small_write_does_not_wait_for_a_large_group_behind_a_leader() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new();
        let store = open(dir.path(), &fs);
        store.put(b"warm", b"0").unwrap();
        let value = vec![7u8; 60_000];
        std::thread::scope(|s| {
            // A group in progress (the writer lock held): `a` leads, the others queue.
            let held = store.inner.lock_writer();
            let a = s.spawn(|| store.put(b"a", b"1"));
            let end = Instant::now() + WAIT;
            while !store
                .inner
                .commit
                .leading
                .load(std::sync::atomic::Ordering::SeqCst)
            {
                assert!(Instant::now() < end, "a never led");
                std::thread::sleep(Duration::from_millis(1));
            }
            let others: Vec<_> = [b"b", b"c", b"d", b"e"]
                .into_iter()
                .map(|k| {
                    let (store, value) = (&store, &value);
                    s.spawn(move || store.put(k, value))
                })
                .collect();
            wait_queued(&store, 4);
            drop(held);
            a.join().unwrap().unwrap();
            for h in others {
                h.join().unwrap().unwrap();
            }
        });
        // warm; a with two 60 kB records (a's + 128 kB holds 120 kB, not 180); then the
        // last two (the first 60 kB + 120 kB).
        let st = store.stats();
        assert_eq!((st.commit_groups, st.commit_writes), (3, 6));
    }

    /// With the fsync outside the writer lock, a group is numbered as on the other path:
    /// one sequence number per write, handed out under the writer lock (queued records
    /// stamped), the state's `seq` raised with the memtable inserts, and the numbers kept
    /// at the next open.
    #[test]
    fn with_the_fsync_outside_the_lock_a_group_is_numbered_in_commit_order() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new();
        let store = open_mixed(dir.path(), &fs);
        store.put(b"warm", b"0").unwrap();
        let before = store.last_seq();
        assert!(before >= 1);
        std::thread::scope(|s| {
            let held = store.inner.lock_writer();
            let a = s.spawn(|| store.put(b"a", b"1"));
            let end = Instant::now() + WAIT;
            while !store
                .inner
                .commit
                .leading
                .load(std::sync::atomic::Ordering::SeqCst)
            {
                assert!(Instant::now() < end, "a never led");
                std::thread::sleep(Duration::from_millis(1));
            }
            let others: Vec<_> = [(b"b", true), (b"c", false), (b"d", true)]
                .into_iter()
                .map(|(k, sync)| {
                    let store = &store;
                    let o = crate::WriteOptions::default().sync(sync);
                    s.spawn(move || store.put_opt(k, b"2", &o))
                })
                .collect();
            wait_queued(&store, 3);
            // Nothing of the group is numbered or visible before it commits.
            assert_eq!(store.last_seq(), before);
            drop(held);
            a.join().unwrap().unwrap();
            for h in others {
                h.join().unwrap().unwrap();
            }
        });
        assert_eq!(store.last_seq(), before + 4);
        let snap = store.snapshot();
        assert_eq!(snap.seq(), before + 4);
        for k in [&b"a"[..], b"b", b"c", b"d"] {
            assert!(snap.get(k).unwrap().is_some(), "not visible");
        }
        drop(snap);
        drop(store);
        let store = open(dir.path(), &fs);
        assert_eq!(store.last_seq(), before + 4, "numbers lost at reopen");
    }
}
