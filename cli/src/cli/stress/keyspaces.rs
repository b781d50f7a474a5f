//! `--keyspaces K --kill`: batches that span keyspaces, checked for torn batches and lost
//! acknowledged writes after each SIGKILL (issue 38).
//!
//! ```text
//! parent ── spawns ─► child: K keyspaces ks0..; --threads threads, each writing batches
//!   ▲                  (fsynced, SyncPolicy::EveryWrite) of puts into 2 to K keyspaces,
//!   │                  1 to 3 keys in each, from the thread's own keys (so keys are
//!   │                  overwritten and tables flushed and compacted in every keyspace);
//!   │                  every value carries its batch id, keyspace and key; prints
//!   │                  "W id ks:slot ..." before a batch and "A id" once it is acknowledged
//!   └── SIGKILL at a random moment, reopen, check: every key reads the batch that last
//!       wrote it among the acknowledged ones (else a lost acknowledged write) or the
//!       thread's batch in flight; each batch in flight is there in every keyspace whole or
//!       not at all (else a torn batch); a scan of every keyspace shows nothing else, the
//!       default keyspace nothing; verify; then the next child
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use filterstore::{Keyspace, Store, SyncPolicy, WriteBatch};

use super::emit;
use super::workload::{options, Rng, Tally};
use super::{on_lanes, Stress};
use crate::cli::{error_chain, CliError, Exit, Global};

/// Keys of each thread in each keyspace.
const SLOTS: u64 = 300;

/// A key of the model: (keyspace index, key).
type At = (usize, Vec<u8>);

fn space(i: usize) -> String {
    format!("ks{i}")
}

fn key(lane: u64, slot: u64) -> Vec<u8> {
    format!("t{lane:02}/{slot:04}").into_bytes()
}

/// The value batch `id` puts under `key` in keyspace `ks`: the batch id in 16 hex digits,
/// the keyspace and the key, padded by a length drawn from them.
fn value(id: u64, ks: usize, key: &[u8]) -> Vec<u8> {
    let mut v = format!("{id:016x} ks{ks} ").into_bytes();
    v.extend_from_slice(key);
    let h = filterstore::hash::key_hash(&v);
    v.push(b' ');
    v.extend(std::iter::repeat_n(
        b'a' + (h % 26) as u8,
        (h % 150) as usize,
    ));
    v
}

/// The batch id of a value read at `ks`/`key`, or `None` when the value is not one `value`
/// made for that place.
fn batch_of(v: &[u8], ks: usize, key: &[u8]) -> Option<u64> {
    let id = u64::from_str_radix(std::str::from_utf8(v.get(..16)?).ok()?, 16).ok()?;
    (value(id, ks, key) == v).then_some(id)
}

/// What the parent counts over the soak.
#[derive(Default)]
pub(super) struct KsFigures {
    acked: u64,
    in_flight: u64,
    applied: u64,
    torn: u64,
    lost: u64,
}

impl KsFigures {
    pub(super) fn line(&self, k: u64) -> String {
        format!(
            ", batches acknowledged {} across {k} keyspaces, in flight at a kill {} ({} there whole), torn batches {}, lost acknowledged writes {}",
            self.acked, self.in_flight, self.applied, self.torn, self.lost
        )
    }
}

impl Stress {
    /// The child of `--keyspaces --kill`: batches across keyspaces until killed. Batch ids:
    /// the child's round (`--version-base`) in the top 24 bits, the lane in the next 8, a
    /// count below.
    pub(super) fn keyspace_child(&self, g: &Global, k: u64) -> Result<Exit, CliError> {
        let store = Store::open(g.dir(), options(SyncPolicy::EveryWrite))?;
        let spaces: Vec<Keyspace> = (0..k as usize)
            .map(|i| store.keyspace(&space(i)))
            .collect::<Result<_, _>>()?;
        let stop_at = Instant::now() + Duration::from_secs(self.duration.max(1) * 2 + 10);
        on_lanes(self.threads, |lane| {
            let mut rng = Rng::new(self.lane_seed(lane));
            for n in 0u64.. {
                if Instant::now() >= stop_at {
                    break;
                }
                let id = self.version_base << 40 | lane << 32 | n;
                // 2 to K keyspaces: each with probability ½, then the first two not taken.
                let mut take: Vec<bool> = (0..k).map(|_| rng.below(2) == 1).collect();
                let short = 2usize.saturating_sub(take.iter().filter(|&&x| x).count());
                take.iter_mut()
                    .filter(|x| !**x)
                    .take(short)
                    .for_each(|x| *x = true);
                let mut batch = WriteBatch::new();
                let mut line = format!("W {id:016x}");
                for (ks, _) in take.iter().enumerate().filter(|(_, &x)| x) {
                    for _ in 0..1 + rng.below(3) {
                        let slot = rng.below(SLOTS);
                        let k = key(lane, slot);
                        batch.put_in(&spaces[ks], k.clone(), value(id, ks, &k));
                        line.push_str(&format!(" {ks}:{slot}"));
                    }
                }
                line.push('\n');
                emit(&line);
                store.write(batch)?;
                emit(&format!("A {id:016x}\n"));
            }
            Ok(())
        })?;
        Ok(Exit::Success)
    }

    /// `--keyspaces K --kill` in `dir` until `deadline`.
    pub(super) fn keyspace_soak(
        &self,
        dir: &Path,
        k: u64,
        deadline: Instant,
        t: &mut Tally,
    ) -> Result<KsFigures, CliError> {
        let mut rng = Rng::new(self.seed ^ 0x6b73);
        let mut must: BTreeMap<At, u64> = BTreeMap::new();
        let mut f = KsFigures::default();
        let mut round = 0u64;
        while Instant::now() < deadline {
            round += 1;
            let args = self.child_args(&["--keyspaces", &k.to_string(), "--kill"]);
            let lines =
                super::kill_round(dir, &args, self.seed, round, round, &mut rng, deadline, t)?;
            let mut pending: BTreeMap<u64, BTreeSet<At>> = BTreeMap::new();
            for line in &lines {
                let mut parts = line.split(' ');
                let (tag, id) = (parts.next(), parts.next());
                let id = id.and_then(|s| u64::from_str_radix(s, 16).ok());
                match (tag, id) {
                    (Some("W"), Some(id)) => {
                        let ats = parts.filter_map(|p| {
                            let (ks, slot) = p.split_once(':')?;
                            let (ks, slot) = (ks.parse().ok()?, slot.parse().ok()?);
                            Some((ks, key(id >> 32 & 0xff, slot)))
                        });
                        pending.insert(id, ats.collect());
                    }
                    (Some("A"), Some(id)) => match pending.remove(&id) {
                        Some(ats) => {
                            f.acked += 1;
                            t.ops += 1;
                            must.extend(ats.into_iter().map(|a| (a, id)));
                        }
                        None => t.problem(format!("child protocol: ack {id:016x} for no batch")),
                    },
                    _ => {}
                }
            }
            f.in_flight += pending.len() as u64;
            check(dir, k, &mut must, &pending, t, &mut f)?;
        }
        Ok(f)
    }
}

/// Reopens the store in `dir` and checks it against `must` and the batches in flight
/// (`pending`); the batches in flight found whole join `must`.
fn check(
    dir: &Path,
    k: u64,
    must: &mut BTreeMap<At, u64>,
    pending: &BTreeMap<u64, BTreeSet<At>>,
    t: &mut Tally,
    f: &mut KsFigures,
) -> Result<(), CliError> {
    if !dir.join(filterstore::store::MANIFEST_NAME).exists() {
        if !must.is_empty() {
            t.problem("the MANIFEST is gone after acknowledged batches".to_string());
        }
        return Ok(());
    }
    let store = match Store::open(dir, options(SyncPolicy::EveryWrite)) {
        Ok(s) => s,
        Err(e) => {
            t.problem(format!("reopen failed: {}", error_chain(&e)));
            return Ok(());
        }
    };
    let spaces: Vec<Option<Keyspace>> = (0..k as usize)
        .map(|i| store.existing_keyspace(&space(i)))
        .collect();
    // The batch each key reads (None: absent or keyspace missing); a value not made for
    // its place is a problem.
    let read = |at: &At, t: &mut Tally| -> Result<Option<u64>, CliError> {
        let Some(ks) = &spaces[at.0] else {
            return Ok(None);
        };
        let Some(v) = ks.get(&at.1)? else {
            return Ok(None);
        };
        let id = batch_of(&v, at.0, &at.1);
        if id.is_none() {
            t.problem(format!("ks{} {} holds a damaged value", at.0, show(&at.1)));
        }
        Ok(id)
    };
    let in_flight_at = |at: &At| {
        pending
            .iter()
            .find(|(_, a)| a.contains(at))
            .map(|(id, _)| *id)
    };
    for (at, &id) in must.iter() {
        t.checked += 1;
        let got = read(at, t)?;
        if got != Some(id) && (got.is_none() || got != in_flight_at(at)) {
            f.lost += 1;
            t.problem(format!(
                "after reopen, ks{} {} reads batch {} but batch {id:016x} was acknowledged",
                at.0,
                show(&at.1),
                got.map_or("none".into(), |g| format!("{g:016x}"))
            ));
        }
    }
    let mut whole = Vec::new();
    for (&id, ats) in pending {
        let mut there = 0;
        for at in ats {
            there += usize::from(read(at, t)? == Some(id));
        }
        if there == ats.len() {
            whole.push(id);
        } else if there > 0 {
            f.torn += 1;
            t.problem(format!(
                "after reopen, batch {id:016x} in flight is torn: {there} of its {} keys are there",
                ats.len()
            ));
        }
    }
    // Nothing else in any keyspace, nothing in the default one.
    for (i, ks) in spaces.iter().enumerate() {
        let Some(ks) = ks else {
            if must.keys().any(|a| a.0 == i) {
                t.problem(format!("keyspace ks{i} is gone after acknowledged batches"));
            }
            continue;
        };
        for e in ks.scan::<&[u8]>(..) {
            let (key, v) = e?;
            let at = (i, key.to_vec());
            let id = batch_of(&v, i, &key);
            if id.is_none() || (id != must.get(&at).copied() && id != in_flight_at(&at)) {
                t.problem(format!(
                    "after reopen, a scan of ks{i} shows {} from batch {id:?}",
                    show(&key)
                ));
            }
        }
    }
    if let Some(e) = store.scan::<&[u8]>(..).next() {
        let (key, _) = e?;
        t.problem(format!("the default keyspace holds {}", show(&key)));
    }
    drop(spaces);
    store.close()?;
    for id in whole {
        f.applied += 1;
        must.extend(pending[&id].iter().map(|a| (a.clone(), id)));
    }
    let r = filterstore::verify::verify_dir(dir)?;
    for p in &r.problems {
        t.problem(format!("verify: {}", error_chain(p)));
    }
    Ok(())
}

fn show(k: &[u8]) -> String {
    String::from_utf8_lossy(k).into_owned()
}
