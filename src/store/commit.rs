//! Group commit: writers that arrive while a log write (and, with `SyncPolicy::EveryWrite`,
//! its fsync) is in progress wait in a queue, and the next leader commits all of them with
//! one log write and one fsync. The idea is LevelDB's writers queue (`DBImpl::Write`,
//! `BuildBatchGroup`) and RocksDB's `WriteThread`.
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
//!           first record + 128 KiB when that is small) ─► one log write of every record, one
//!           fsync ─► memtable inserts, in log order ─► writer lock released ─► every writer
//!           of the group gets the group's result; the queue's new front is woken to lead
//! ```
//!
//! - **Durability.** No writer returns `Ok` before its record is in the log under the store's
//!   [`SyncPolicy`](super::SyncPolicy): with `EveryWrite`, after the group's fsync. A failed
//!   write or fsync fails every writer of the group (each gets a copy of the error) and
//!   poisons the store; the writers queued behind it then fail as poisoned.
//! - **Atomicity.** Each writer's batch stays one WAL record; a group is those records one
//!   after another (format.md, "Write-ahead log"). A crash in the middle of a group's write
//!   leaves whole records before the tear, each a whole batch, none acknowledged.
//! - **Visibility.** The memtable inserts happen after the log write (and fsync), under one
//!   state lock, in log order: a `get` running while a group's fsync is in flight does not
//!   see the group's writes, and once it sees one it is durable (LevelDB's order).
//! - **Sequence numbers.** The leader numbers the group's records under the writer lock, in
//!   log order, from the store's last commit sequence number (a queued writer's record,
//!   encoded before its turn, gets its number and CRCs then: `wal::stamp_seqs`), and raises
//!   the state's `seq` with the memtable inserts: a snapshot sees exactly the writes numbered
//!   up to the `seq` it takes under the same lock.
//! - **Hand-over.** The queue's front yields its core in a loop, watching the lead, instead
//!   of parking at once: the lead passes to it as soon as the leader before it is done,
//!   without a wake-up (a futex wake and a scheduler round trip, tens of microseconds on an
//!   idle core and milliseconds on a busy one) per group. Only one writer watches; the
//!   others park.
//! - **Lock order.** The queue's lock is a leaf: taken alone, or under the writer lock, never
//!   held while another lock is taken. Only the leader holds the writer lock for writes;
//!   `flush`, `sync` and recovery take it as before and so wait for a group in progress.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::Thread;
use std::time::{Duration, Instant};

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

/// One write: key and value (`None` for a delete) pairs, applied atomically.
pub(super) type Ops<'a> = [(&'a [u8], Option<&'a [u8]>)];

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
}

/// A writer waiting in the queue.
struct Waiter {
    ticket: u64,
    /// Its encoded WAL record.
    record: Vec<u8>,
    /// Key and value bytes.
    bytes: usize,
    thread: Thread,
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
}

/// The leader's own write: still as the caller's ops (it led at once) or already encoded in
/// the queue's front (it waited, then became the front).
#[derive(Clone, Copy)]
enum Own<'a> {
    Ops(&'a Ops<'a>),
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
    /// limit).
    pub(super) fn commit(&self, ops: &Ops<'_>, bytes: usize, record_len: usize) -> Result<()> {
        let c = &self.commit;
        if c.try_lead() {
            // Nobody is writing: lead at once, without copying the record. Writers may be
            // queued (the leader before woke the front, which has not run yet): this leader
            // takes them into its group rather than wait for that hand-over.
            return self.lead(Own::Ops(ops), None, bytes, record_len);
        }
        let mut record = Vec::with_capacity(record_len);
        // Numbered by the leader that takes it into its group.
        wal::encode_record(&mut record, 0, ops.len(), ops.iter().copied())?;
        let ticket = {
            let mut q = c.lock();
            let t = q.next;
            q.next += 1;
            q.pending.push_back(Waiter {
                ticket: t,
                record,
                bytes,
                thread: std::thread::current(),
            });
            c.waiting.store(q.pending.len(), SeqCst);
            t
        };
        loop {
            let mut q = c.lock();
            if q.done > ticket {
                return q.outcome(ticket);
            }
            // The lead is taken under the queue's lock, so no other leader can take this write
            // into its group in between. A leader gives up the lead before it looks at the
            // queue, and this writer queued before it tries to take the lead: one of the two
            // sees the other.
            if q.pending.front().is_some_and(|w| w.ticket == ticket) && c.try_lead() {
                let mine = q.pending.pop_front();
                c.waiting.store(q.pending.len(), SeqCst);
                drop(q);
                return self.lead(Own::Queued, mine, bytes, record_len);
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

    /// Commits a group: the leader's own write and the writers queued behind it.
    /// `mine`: the leader's own write when it waited in the queue.
    fn lead(
        &self,
        own: Own<'_>,
        mine: Option<Waiter>,
        own_bytes: usize,
        own_len: usize,
    ) -> Result<()> {
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
        let r = room.and_then(|()| self.write_group(w, own, own_bytes, &mut group.taken));
        drop(guard);
        let writes = group.taken.len() + usize::from(matches!(own, Own::Ops(_)));
        group.finish(&r, writes);
        r
    }

    /// Appends the group's records to the log (one write, one fsync under `EveryWrite`) and
    /// inserts its writes into the memtable, in log order.
    fn write_group(
        &self,
        w: &mut Writer,
        own: Own<'_>,
        own_bytes: usize,
        taken: &mut [Waiter],
    ) -> Result<()> {
        // The queued records are this process's own encoding; one that does not decode is a
        // bug, reported before anything is written.
        for t in taken.iter() {
            wal::for_each_op(&t.record, |_, _| {}).map_err(|e| {
                Error::Internal(format!("a queued write's log record does not decode: {e}"))
            })?;
        }
        let followers = match own {
            Own::Ops(_) => &*taken,
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
            ..
        } = w;
        // The group's sequence numbers, in log order: the leader's own record first.
        let first = self.last_seq.load(SeqCst) + 1;
        let mut last = first - 1;
        if let Own::Ops(ops) = own {
            wal::encode_record(record, first, ops.len(), ops.iter().copied())?;
            last = first;
        }
        for t in taken.iter_mut() {
            last = wal::stamp_seqs(&mut t.record, last + 1);
        }
        // Handed out, written or not: a failed write poisons the store, and a record that
        // reached the disk keeps its number at the next open.
        self.last_seq.store(last, SeqCst);
        let taken = &*taken;
        // One record as it is, or every record of the group one after another.
        let out: &[u8] = match (own, taken) {
            (Own::Ops(_), []) => record,
            (Own::Queued, [only]) => &only.record,
            _ => {
                group.clear();
                if let Own::Ops(_) = own {
                    group.extend_from_slice(record);
                }
                for t in taken {
                    group.extend_from_slice(&t.record);
                }
                group
            }
        };
        let sync = self.opts.sync == SyncPolicy::EveryWrite;
        let r = match wal {
            Some(wal) => wal.append(out, sync),
            None => Ok(()),
        };
        self.poison_on_err(r)?;
        if sync && !*wal_dir_synced {
            let r = self
                .fs
                .sync_dir(&self.dir)
                .map_err(|e| Error::io(&self.dir, e));
            self.poison_on_err(r)?;
            *wal_dir_synced = true;
        }
        let user_bytes = own_bytes + follower_bytes;
        let c = &self.counters;
        c.wal_bytes.fetch_add(out.len() as u64, Relaxed);
        c.user_bytes.fetch_add(user_bytes as u64, Relaxed);
        let mut st = self.state_mut();
        if let Own::Ops(ops) = own {
            for (k, v) in ops {
                st.mem.insert(k, *v);
            }
        }
        for t in taken {
            // Decoded above: cannot fail.
            wal::for_each_op(&t.record, |k, v| st.mem.insert(k, v))?;
        }
        st.seq = last;
        Ok(())
    }
}

impl Group<'_> {
    /// Hands the group's result to its writers, gives up the lead and wakes the queue's
    /// front (the next leader). `writes`: the group's writes, the leader's own included.
    fn finish(&mut self, r: &Result<()>, writes: usize) {
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
            if let Err(e) = r {
                q.failed.push((tickets, Arc::new(e.duplicate())));
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
            self.finish(&Err(e), 0);
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

    /// Waits until `n` writers wait in the store's queue (a state, not a time: the limit
    /// only turns a hang into a failure).
    fn wait_queued(store: &Store, n: usize) {
        let end = Instant::now() + WAIT;
        while store.inner.commit.queued() < n {
            assert!(Instant::now() < end, "{n} writers never queued");
            std::thread::sleep(Duration::from_millis(1));
        }
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
                    s.spawn(move || {
                        let mut batch = crate::WriteBatch::new();
                        batch
                            .put(k.to_vec(), b"2".to_vec())
                            .put(k.repeat(2), b"3".to_vec());
                        store.write(batch)
                    })
                })
                .collect();
            wait_queued(&store, 3);
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
        let st = store.stats();
        assert_eq!((st.commit_groups, st.commit_writes), (2, 2));
        // What a power cut leaves now: exactly the acknowledged writes.
        let image = tempfile::tempdir().unwrap();
        fs.crash_image(image.path(), usize::MAX).unwrap();
        drop(store);
        let after = Store::open(image.path(), Options::default()).unwrap();
        let mut got: Vec<Vec<u8>> = Vec::new();
        for e in after.scan::<&[u8]>(..) {
            got.push(e.unwrap().0);
        }
        assert_eq!(got, [b"a".to_vec(), b"warm".to_vec()]);
        // The store itself (nothing lost by a power cut) reopens with every acknowledged
        // write, and each failed batch whole or not at all.
        let store = open(dir.path(), &fs);
        assert!(store.get(b"a").unwrap().is_some() && store.get(b"warm").unwrap().is_some());
        for k in [b"b", b"c", b"d"] {
            let one = store.get(k).unwrap().is_some();
            assert_eq!(
                store.get(&k.repeat(2)).unwrap().is_some(),
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
}
