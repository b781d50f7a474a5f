//! `--kill`: the parent that runs children and kills them at random moments, and the child
//! that writes, announcing each write and its acknowledgement on stdout.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use filterstore::{Store, SyncPolicy};

use super::check::check_reopened;
use super::emit;
use super::workload::{options, value, Model, Rng, Tally, Workload, Write1};
use super::{on_lanes, Stress, LANE_VERSION_BITS};
use crate::cli::{CliError, Exit, Global};

impl Stress {
    /// The child of `--kill`: writes until killed, announcing each write on stdout. Write ids
    /// are unique over the lanes: lane `l`'s `n`-th write is `n × lanes + l`.
    pub(super) fn child(&self, g: &Global) -> Result<Exit, CliError> {
        let dir = g.dir();
        let lanes = self.threads;
        // A safety stop, should the parent never kill this process.
        let stop_at = Instant::now() + Duration::from_secs(self.duration.max(1) * 2 + 10);
        let total_ops = AtomicU64::new(0);
        let lane_run = |lane: u64, shared: Option<&Store>| -> Result<(), CliError> {
            let version = self.version_base + (lane << LANE_VERSION_BITS);
            let mut w = Workload::new(self.lane_seed(lane), version, false, lane, lanes);
            let mut t = Tally::default();
            let mut n = 0u64;
            let mut announce = |ws: &[Write1], done: bool| {
                if done {
                    emit(&format!("A {}\n", n * lanes + lane));
                    return;
                }
                n += 1;
                let mut l = format!("W {}", n * lanes + lane);
                for (k, v) in ws {
                    let k = String::from_utf8_lossy(k);
                    match v {
                        Some(ver) => l.push_str(&format!(" {k}={ver}")),
                        None => l.push_str(&format!(" {k}=-")),
                    }
                }
                l.push('\n');
                emit(&l);
            };
            let mut stop = |t: &mut Tally| {
                if t.ops.is_multiple_of(256) && t.ops > 0 {
                    // Ops so far (and the commit groups of the shared store), for the
                    // parent's count.
                    let ops = total_ops.fetch_add(256, Relaxed) + 256;
                    emit(&format!("O {ops}\n"));
                    if let Some(s) = shared {
                        let st = s.stats();
                        emit(&format!("G {} {}\n", st.commit_groups, st.commit_writes));
                    }
                }
                for p in t.problems.drain(..) {
                    // The parent counts problems from lines starting with "P ".
                    emit(&format!("P {p}\n"));
                }
                Instant::now() >= stop_at
            };
            w.run(
                &dir,
                shared,
                SyncPolicy::EveryWrite,
                &mut t,
                &mut announce,
                &mut stop,
            )
        };
        if lanes == 1 {
            lane_run(0, None)?;
        } else {
            let store = Store::open(&dir, options(SyncPolicy::EveryWrite))?;
            on_lanes(lanes, |lane| lane_run(lane, Some(&store)))?;
        }
        Ok(Exit::Success)
    }

    /// `--kill`: children killed at random moments, the store checked after each. Returns the
    /// children's commit groups and the writes in them (with several threads).
    pub(super) fn parent(
        &self,
        dir: &Path,
        deadline: Instant,
        t: &mut Tally,
    ) -> Result<Option<(u64, u64)>, CliError> {
        let mut rng = Rng::new(self.seed ^ 0x5eed);
        let mut must = Model::new();
        let mut round = 0u64;
        let mut grouped = (self.threads > 1).then_some((0, 0));
        while Instant::now() < deadline {
            round += 1;
            let args = self.child_args(&[]);
            let lines = super::kill_round(
                dir,
                &args,
                self.seed,
                round,
                round << 32,
                &mut rng,
                deadline,
                t,
            )?;
            let (in_flight, groups) = self.apply_lines(&lines, &mut must, t);
            if let (Some(g), Some(c)) = (&mut grouped, groups) {
                g.0 += c.0;
                g.1 += c.1;
            }
            check_reopened(dir, &must, &in_flight, t)?;
            // What the store shows for the writes in flight is now the truth.
            if !in_flight.is_empty() {
                let s = Store::open(dir, options(SyncPolicy::EveryWrite))?;
                for k in in_flight.iter().flat_map(BTreeMap::keys) {
                    must.insert(k.clone(), s.get(k)?.map(Vec::from));
                }
            }
        }
        Ok(grouped)
    }

    /// Applies the child's acknowledged writes to `must`; returns the writes in flight (at
    /// most one per thread) and the last commit group counts the child reported.
    fn apply_lines(
        &self,
        lines: &[String],
        must: &mut Model,
        t: &mut Tally,
    ) -> (Vec<Model>, Option<(u64, u64)>) {
        let mut pending: BTreeMap<u64, Model> = BTreeMap::new();
        let (mut ops, mut acked) = (0u64, 0u64);
        let mut groups = None;
        for line in lines {
            let mut parts = line.split(' ');
            let tag = parts.next();
            let mut num = || parts.next().and_then(|s| s.parse::<u64>().ok());
            match tag {
                Some("W") => {
                    let id = num().unwrap_or(0);
                    let ops = line
                        .split(' ')
                        .skip(2)
                        .filter_map(|p| p.split_once('='))
                        .map(|(k, v)| {
                            let k = k.as_bytes().to_vec();
                            let v = v.parse::<u64>().ok().map(|ver| value(&k, ver));
                            (k, v)
                        })
                        .collect::<Model>();
                    pending.insert(id, ops);
                }
                Some("A") => {
                    let id = num().unwrap_or(0);
                    match pending.remove(&id) {
                        Some(writes) => {
                            acked += 1;
                            must.extend(writes);
                        }
                        None => t.problem(format!("child protocol: ack {id} for no write")),
                    }
                }
                Some("O") => ops = ops.max(num().unwrap_or(0)),
                Some("G") => {
                    if let (Some(g), Some(w)) = (num(), num()) {
                        groups = Some((g, w));
                    }
                }
                Some("P") => t.problem(format!("child: {}", &line[2.min(line.len())..])),
                _ => {}
            }
        }
        // Ops reported so far, or at least the acknowledged writes.
        t.ops += ops.max(acked);
        (pending.into_values().collect(), groups)
    }
}
