//! `bench engine --keyspaces K`: K keyspaces loaded at once against one keyspace holding the
//! same keys, and absent gets in one of the K against a store of the same keys in one
//! keyspace (issue 38's targets).
//!
//! ```text
//! parent ── child "one":  fresh store, K threads, thread i puts keys i·N/K .. (i+1)·N/K
//!        │                 into the default keyspace, final flush  ─► puts/s, VmHWM
//!        ├─ child "many": fresh store, K threads, thread i puts the same keys into keyspace
//!        │                 ks<i>, final flush                       ─► puts/s, VmHWM
//!        ├─ in process:   a store of ks0's keys (0 .. N/K) in its one keyspace, one thread
//!        └─ the three reopened, compactions settled; --rounds rounds alternating which goes
//!           first: --lookups absent gets in ks0, in the same-keys store, and in the "one"
//!           store (all N keys; shown, not a target) ─► medians, ratios; then again with
//!           each compacted to one run (the same shape: only the keyspace differs)
//! ```
//! Each load runs in its own child process so that its peak resident set (VmHWM) is its
//! own. Keys and values are the normal load's (`bench_data::key`, `fill_value`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use filterstore::{Options, Store};
use filterstore_cli::bench::median;

use super::lookups::lookups;
use super::process::peak_rss_kib;
use crate::cli::bench_data::{fill_value, key};
use crate::cli::{CliError, Exit};

/// Issue 38's targets: many ÷ one puts/s at least, peak RSS at most, absent get time at most.
const PUTS_TARGET: f64 = 0.9;
const RSS_TARGET: f64 = 1.2;
const GET_TARGET: f64 = 1.05;

/// What `--keyspaces` runs.
pub(super) struct KeyspacesRun<'a> {
    /// Parent of the stores (`one`, `many`, `same`).
    pub root: &'a Path,
    pub opts: Options,
    pub n: u64,
    pub k: u64,
    pub lookups: u64,
    pub rounds: usize,
    pub value_bytes: usize,
    pub compressibility: f64,
    pub seed: u64,
    pub json: bool,
    /// The command line to run a side with (this process's arguments).
    pub args: Vec<std::ffi::OsString>,
}

/// Keys `lo .. hi` of thread `i` of `k` over `n` keys.
fn share(n: u64, k: u64, i: u64) -> (u64, u64) {
    (i * n / k, (i + 1) * n / k)
}

/// Loads `n` keys into a fresh store in `dir` from `k` threads (thread i into keyspace
/// `ks<i>` when `many`, else into the default keyspace), flushes, and returns the seconds
/// it took.
fn load(dir: &Path, opts: Options, n: u64, k: u64, many: bool, r: &Side) -> Result<f64, CliError> {
    let store = Store::open(dir, opts)?;
    let handles: Vec<Store> = (0..k)
        .map(|i| match many {
            true => store
                .keyspace(&format!("ks{i}"))
                .map(|ks| ks.as_store().clone()),
            false => Ok(store.clone()),
        })
        .collect::<Result<_, _>>()?;
    let t = Instant::now();
    let done = AtomicU64::new(0);
    let finished = AtomicBool::new(false);
    let (done, finished) = (&done, &finished);
    std::thread::scope(|s| {
        s.spawn(|| progress(&store, &handles, n, done, finished, t));
        let workers: Vec<_> = handles
            .iter()
            .enumerate()
            .map(|(i, h)| {
                s.spawn(move || -> filterstore::Result<()> {
                    let mut value = vec![0u8; r.value_bytes];
                    let (lo, hi) = share(n, k, i as u64);
                    for j in lo..hi {
                        fill_value(j, r.compressibility, &mut value);
                        h.put(key(r.seed, j, false), &value)?;
                        if j % 1024 == 0 {
                            done.fetch_add(1024, Relaxed);
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        let r = workers
            .into_iter()
            .try_for_each(|w| w.join().expect("a load thread panicked"));
        finished.store(true, Relaxed);
        r
    })?;
    store.flush()?;
    let secs = t.elapsed().as_secs_f64();
    drop(handles);
    store.close()?;
    Ok(secs)
}

/// Every 5 s until `finished`: puts so far, their rate, the stalls, flushes and compactions,
/// and the tables of each handle's tree.
fn progress(
    store: &Store,
    handles: &[Store],
    n: u64,
    done: &AtomicU64,
    finished: &AtomicBool,
    t: Instant,
) {
    let mut last = Instant::now();
    while !finished.load(Relaxed) {
        std::thread::sleep(std::time::Duration::from_millis(50));
        if last.elapsed().as_secs() < 5 {
            continue;
        }
        last = Instant::now();
        let s = store.stats();
        let d = done.load(Relaxed);
        let tables: Vec<String> = handles
            .iter()
            .map(|h| h.stats().tables.len().to_string())
            .collect();
        eprintln!(
            "bench engine: {d} of {n} puts, {:.0} puts/s; stalls {:.1} s slowed, {:.1} s stopped, {:.1} s waiting for a seal; {} flushes, {} compactions; tables {}",
            d as f64 / t.elapsed().as_secs_f64(),
            s.slowdown_micros as f64 / 1e6,
            s.stop_micros as f64 / 1e6,
            s.memtable_wait_micros as f64 / 1e6,
            s.flushes,
            s.compactions,
            tables.join("+")
        );
    }
}

/// What a side's child needs besides the options.
struct Side {
    value_bytes: usize,
    compressibility: f64,
    seed: u64,
}

/// The child of one side: loads and prints `side SECS PEAK_RSS_KIB` on stdout.
pub(super) fn child(m: &KeyspacesRun, dir: &Path, many: bool) -> Result<Exit, CliError> {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let side = Side {
        value_bytes: m.value_bytes,
        compressibility: m.compressibility,
        seed: m.seed,
    };
    let secs = load(dir, m.opts.clone(), m.n, m.k, many, &side)?;
    crate::cli::println(format_args!(
        "side {} {secs} {}",
        if many { "many" } else { "one" },
        peak_rss_kib()
    ))?;
    Ok(Exit::Success)
}

/// Runs this binary's command line with `--keyspaces-side` and returns (seconds, peak RSS
/// in KiB) of its load.
fn run_side(m: &KeyspacesRun, dir: &Path, many: bool) -> Result<(f64, u64), CliError> {
    let side = if many { "many" } else { "one" };
    eprintln!(
        "bench engine: loading {} keys from {} threads into {side} keyspace(s) in a child",
        m.n, m.k
    );
    let out = Command::new(std::env::current_exe()?)
        .args(&m.args)
        .arg("--keyspaces-side")
        .arg(side)
        .arg("--keyspaces-dir")
        .arg(dir)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let parsed = text.lines().find_map(|l| {
        let mut w = l.strip_prefix("side ")?.split(' ').skip(1);
        Some((w.next()?.parse().ok()?, w.next()?.parse().ok()?))
    });
    match parsed {
        Some(p) if out.status.success() => Ok(p),
        _ => Err(CliError::usage(format_args!(
            "the {side} side's child failed ({}): {}",
            out.status,
            text.trim()
        ))),
    }
}

/// Absent-get figures of one store over the rounds.
#[derive(Default)]
struct Gets {
    ns: Vec<f64>,
    cpu_ns: Vec<f64>,
    probes: f64,
    reads: f64,
    levels: String,
}

/// `o`, when `quiet` without the drains that would merge L0 under timed reads (idle and
/// scan drains).
pub(super) fn quiet_opts(quiet: bool, o: Options) -> Options {
    match quiet {
        true => o.idle_drain(None).scan_drain(false),
        false => o,
    }
}

/// Reopens `dir` quiet ([`quiet_opts`]) and settles its compactions.
fn reopen(dir: &Path, opts: &Options) -> Result<Store, CliError> {
    let s = Store::open(dir, quiet_opts(true, opts.clone()))?;
    s.wait_for_compaction()?;
    Ok(s)
}

/// The whole comparison; returns the report (text or JSON).
pub(super) fn keyspaces(m: &KeyspacesRun) -> Result<String, CliError> {
    let (n, k) = (m.n, m.k);
    let dirs: Vec<PathBuf> = ["one", "many", "same"]
        .iter()
        .map(|s| m.root.join(s))
        .collect();
    let (one_secs, one_rss) = run_side(m, &dirs[0], false)?;
    let (many_secs, many_rss) = run_side(m, &dirs[1], true)?;
    let ks_keys = share(n, k, 0).1;
    eprintln!("bench engine: loading ks0's {ks_keys} keys into a store of one keyspace");
    let side = Side {
        value_bytes: m.value_bytes,
        compressibility: m.compressibility,
        seed: m.seed,
    };
    load(&dirs[2], m.opts.clone(), ks_keys, 1, false, &side)?;
    let one = reopen(&dirs[0], &m.opts)?;
    let many = reopen(&dirs[1], &m.opts)?;
    let same = reopen(&dirs[2], &m.opts)?;
    let ks0 = many
        .existing_keyspace("ks0")
        .ok_or_else(|| CliError::usage("keyspace ks0 is gone after reopen"))?;
    // Present keys of ks0 read back (a store that loses keys fails its promise: exit 3).
    let present = lookups(
        ks0.as_store(),
        m.seed,
        ks_keys,
        m.lookups.min(10_000),
        false,
    )?;
    let targets: [&Store; 3] = [ks0.as_store(), &same, &one];
    let loaded = phase(&targets, m, ks_keys)?;
    eprintln!("bench engine: compacting each to one run");
    for t in targets {
        t.compact()?;
    }
    let compacted = phase(&targets, m, ks_keys)?;
    drop(ks0);
    drop((one, many, same));
    for d in &dirs {
        let _ = std::fs::remove_dir_all(d);
    }
    let absent_found = loaded.found + compacted.found;
    if present.found != m.lookups.min(10_000) || absent_found != 0 {
        return Err(CliError {
            code: Exit::Corrupt,
            message: format!(
                "lookups disagree with the load: {} of {} present keys of ks0 found, {absent_found} absent keys found",
                present.found,
                m.lookups.min(10_000)
            ),
            quiet: false,
        });
    }
    let puts = |secs: f64| n as f64 / secs;
    let puts_ratio = puts(many_secs) / puts(one_secs);
    let rss_ratio = many_rss as f64 / one_rss.max(1) as f64;
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    if m.json {
        let v = serde_json::json!({
            "keyspaces": k, "keys": n, "threads": k, "value_bytes": m.value_bytes,
            "rounds": m.rounds.max(1), "lookups": m.lookups.max(1),
            "load": {
                "one": { "puts_per_s": puts(one_secs), "secs": one_secs, "peak_rss_kib": one_rss },
                "many": { "puts_per_s": puts(many_secs), "secs": many_secs, "peak_rss_kib": many_rss },
            },
            "absent_get": { "as_loaded": loaded.json(), "compacted": compacted.json() },
            "ratios": {
                "puts_per_s": puts_ratio, "peak_rss": rss_ratio,
                "absent_get": loaded.ratio().0, "absent_get_cpu": loaded.ratio().1,
                "absent_get_compacted": compacted.ratio().0,
                "absent_get_compacted_cpu": compacted.ratio().1,
            },
            "targets_met": {
                "puts_per_s": puts_ratio >= PUTS_TARGET, "peak_rss": rss_ratio <= RSS_TARGET,
                "absent_get": loaded.ratio().0 <= GET_TARGET,
                "absent_get_compacted": compacted.ratio().0 <= GET_TARGET,
            },
        });
        return Ok(format!("{v}\n"));
    }
    let mut o = String::new();
    let _ = writeln!(
        o,
        "filterstore bench engine --keyspaces {k} — {n} puts of 16-byte keys and {}-byte values from {k} threads (thread i: keys i·N/{k} .. (i+1)·N/{k}), each side loaded in its own process",
        m.value_bytes
    );
    for (name, secs, rss) in [
        (
            format!("{k} keyspaces (thread i into ks<i>)"),
            many_secs,
            many_rss,
        ),
        ("1 keyspace (the same threads)".into(), one_secs, one_rss),
    ] {
        let _ = writeln!(
            o,
            "load, {name:<34} {:>9.0} puts/s ({secs:.2} s with the final flush), peak RSS {} MiB",
            puts(secs),
            rss / 1024
        );
    }
    for (what, p) in [
        ("as loaded, compactions settled", &loaded),
        ("each compacted to one run", &compacted),
    ] {
        let _ = writeln!(
            o,
            "absent get, {what} ({} keys absent from ks0's {ks_keys}, medians of {} rounds):",
            m.lookups.max(1),
            m.rounds.max(1)
        );
        p.write(&mut o);
    }
    let (l, c) = (loaded.ratio(), compacted.ratio());
    let _ = writeln!(
        o,
        "{k} keyspaces ÷ 1, against issue 38's targets: puts/s {puts_ratio:.3}× (≥ {PUTS_TARGET}×: {}), peak RSS {rss_ratio:.3}× (≤ {RSS_TARGET}×: {}), absent get as loaded {:.3}× (CPU time {:.3}×; ≤ {GET_TARGET}×: {}), compacted {:.3}× (CPU time {:.3}×: {})",
        verdict(puts_ratio >= PUTS_TARGET),
        verdict(rss_ratio <= RSS_TARGET),
        l.0,
        l.1,
        verdict(l.0 <= GET_TARGET),
        c.0,
        c.1,
        verdict(c.0 <= GET_TARGET)
    );
    Ok(o)
}

/// Absent gets in each of `targets` (ks0, the same keys in one keyspace, all keys in one
/// keyspace) over the rounds, the first two alternating which goes first.
fn phase(targets: &[&Store; 3], m: &KeyspacesRun, ks_keys: u64) -> Result<Phase, CliError> {
    let mut p = Phase::default();
    let rounds = m.rounds.max(1);
    for r in 0..rounds {
        eprintln!("bench engine: absent gets, round {} of {rounds}", r + 1);
        let order: [usize; 3] = if r % 2 == 0 { [0, 1, 2] } else { [1, 0, 2] };
        for i in order {
            let l = lookups(targets[i], m.seed, ks_keys, m.lookups.max(1), true)?;
            let g = &mut p.gets[i];
            g.ns.push(l.ns);
            g.cpu_ns.push(l.cpu_ns);
            g.probes = l.probes;
            g.reads = l.reads + l.hits;
            p.found += l.found;
        }
    }
    for (g, t) in p.gets.iter_mut().zip(targets) {
        g.levels = (t.stats().levels.iter())
            .map(|l| format!("L{}:{}", l.level, l.tables))
            .collect::<Vec<_>>()
            .join(" ");
    }
    Ok(p)
}

/// One phase's absent gets: ks0, the same keys in one keyspace, all keys in one keyspace.
#[derive(Default)]
struct Phase {
    gets: [Gets; 3],
    found: u64,
}

impl Phase {
    /// Medians (wall, CPU) of target `i`.
    fn median(&self, i: usize) -> (f64, f64) {
        let g = &self.gets[i];
        (median(&mut g.ns.clone()), median(&mut g.cpu_ns.clone()))
    }

    /// ks0 ÷ the same keys in one keyspace: (wall time, CPU time).
    fn ratio(&self) -> (f64, f64) {
        let (a, b) = (self.median(0), self.median(1));
        (a.0 / b.0, a.1 / b.1)
    }

    fn json(&self) -> serde_json::Value {
        let one = |i: usize| {
            let (ns, cpu) = self.median(i);
            let g = &self.gets[i];
            serde_json::json!({
                "ns": ns, "cpu_ns": cpu, "filter_probes": g.probes,
                "block_reads": g.reads, "levels": g.levels,
            })
        };
        serde_json::json!({ "ks0": one(0), "same_keys": one(1), "all_keys": one(2) })
    }

    fn write(&self, o: &mut String) {
        let names = [
            "ks0 of the K keyspaces",
            "the same keys in one keyspace",
            "all N keys in one keyspace",
        ];
        for (i, name) in names.iter().enumerate() {
            let ((ns, cpu), g) = (self.median(i), &self.gets[i]);
            let _ = writeln!(
                o,
                "  in {name:<31} {ns:>6.0} ns/get ({cpu:.0} ns of CPU time), {:.3} filter probes, {:.4} block reads per get; levels {}",
                g.probes, g.reads, g.levels
            );
        }
    }
}

impl super::BenchEngine {
    /// `--keyspaces K`: the comparison, or (with `--keyspaces-side`) one side's load.
    pub(super) fn keyspaces_mode(&self, k: u64) -> Result<Exit, CliError> {
        let tmp;
        let root = match (&self.keyspaces_dir, &self.work_dir) {
            (Some(d), _) => d.clone(),
            (None, Some(d)) if d.exists() => {
                return Err(CliError::usage(format!(
                    "{} exists; give a directory that does not",
                    d.display()
                )))
            }
            (None, Some(d)) => d.clone(),
            (None, None) => {
                tmp = tempfile::tempdir().map_err(filterstore::Error::from)?;
                tmp.path().join("store")
            }
        };
        let compression = self.compression.first().copied().unwrap_or_default();
        let run = KeyspacesRun {
            root: &root,
            opts: self.options(compression),
            n: self.count.max(k),
            k,
            lookups: self.lookups.max(1),
            rounds: self.rounds.map_or(5, usize::from),
            value_bytes: self.value_bytes,
            compressibility: self.value_compressibility,
            seed: self.seed,
            json: self.json,
            args: std::env::args_os().skip(1).collect(),
        };
        if let Some(side) = &self.keyspaces_side {
            return child(&run, &root, side == "many");
        }
        std::fs::create_dir_all(&root).map_err(filterstore::Error::from)?;
        crate::cli::println(keyspaces(&run)?)?;
        Ok(Exit::Success)
    }
}
