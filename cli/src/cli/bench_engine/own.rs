//! `bench engine --workload sync-mix`, `snapshot`, `sessions` and `tx`: the engine's own
//! workloads beside YCSB's, parsed from the same `--workload` list and run before them; and
//! the parsers of the command's other values.

use std::path::Path;

use filterstore::{Compression, SyncPolicy};

use super::{sessions, snapshot, sync_mix, tx, BenchEngine};
use crate::cli::CliError;

/// One `--workload` value: YCSB mixes, or one of the engine's own workloads.
#[derive(Clone, Debug)]
pub(super) enum EngineWorkload {
    Ycsb(crate::cli::bench_ycsb::Workloads),
    SyncMix,
    Snapshot,
    Sessions,
    Tx,
}

/// `--value-compressibility`: a fraction in [0, 1).
pub(super) fn parse_compressibility(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(c) if (0.0..1.0).contains(&c) => Ok(c),
        _ => Err("give a fraction from 0 (random values) to below 1".into()),
    }
}

/// `--sync`: a [`SyncPolicy`] by name.
pub(super) fn parse_sync(s: &str) -> Result<SyncPolicy, String> {
    match s {
        "every-write" => Ok(SyncPolicy::EveryWrite),
        "on-flush" => Ok(SyncPolicy::OnFlush),
        "buffered" => Ok(SyncPolicy::Buffered),
        _ => Err("expected every-write, on-flush or buffered".into()),
    }
}

pub(super) fn parse_workload(s: &str) -> Result<EngineWorkload, String> {
    match s {
        "sync-mix" => Ok(EngineWorkload::SyncMix),
        "snapshot" => Ok(EngineWorkload::Snapshot),
        "sessions" => Ok(EngineWorkload::Sessions),
        "tx" => Ok(EngineWorkload::Tx),
        _ => crate::cli::bench_ycsb::parse_workloads(s)
            .map(EngineWorkload::Ycsb)
            .map_err(|e| format!("{e}, or sync-mix, snapshot, sessions or tx")),
    }
}

impl BenchEngine {
    /// Runs the `sync-mix`, `snapshot`, `sessions` and `tx` workloads asked for, once per compression choice,
    /// in `root`.
    pub(super) fn own_workloads(
        &self,
        root: &Path,
        choices: &[Compression],
    ) -> Result<(), CliError> {
        for w in &self.workload {
            for &c in choices {
                let root = root.join(c.name());
                std::fs::create_dir_all(&root).map_err(filterstore::Error::from)?;
                let rounds = |d| self.rounds.map_or(d, |r| r as usize);
                let report = match w {
                    EngineWorkload::Ycsb(_) => continue,
                    EngineWorkload::SyncMix => sync_mix::sync_mix(&sync_mix::SyncMix {
                        root: &root,
                        opts: self.options(c),
                        threads: self.threads,
                        ops: self.ops.unwrap_or(20_000).max(1),
                        synced_every: u64::from(self.synced_every),
                        rounds: rounds(3),
                        value_bytes: self.value_bytes,
                        seed: self.seed,
                    })?,
                    EngineWorkload::Snapshot => snapshot::snapshot(&snapshot::SnapshotRun {
                        root: &root,
                        opts: self.options(c),
                        filter: format!(
                            "{} at ε {}, compression {}",
                            self.filter,
                            self.fpr,
                            c.name()
                        ),
                        n: self.count.max(1),
                        lookups: self.lookups.max(1),
                        rounds: rounds(2),
                        value_bytes: self.value_bytes,
                        seed: self.seed,
                    })?,
                    EngineWorkload::Sessions => sessions::sessions(&sessions::Sessions {
                        root: &root,
                        opts: self.options(c),
                        n: self.count.max(1),
                        rate: self.ops.unwrap_or(50_000).max(1),
                        minutes: 10,
                        lookups: self.lookups.max(20),
                        rounds: rounds(3),
                        value_bytes: self.value_bytes,
                        seed: self.seed,
                    })?,
                    EngineWorkload::Tx => tx::tx(&tx::TxRun {
                        root: &root,
                        opts: self.options(c),
                        n: self.count.max(2),
                        threads: self.threads,
                        ops: self.ops.unwrap_or(200_000).max(1),
                        rounds: rounds(3),
                        value_bytes: self.value_bytes,
                        seed: self.seed,
                    })?,
                };
                crate::cli::println(report)?;
            }
        }
        Ok(())
    }
}
