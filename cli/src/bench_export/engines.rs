//! The same queries on DataFusion and DuckDB (through the interop Python): what their
//! Bloom filters let them skip, and the values they return.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use super::{value, EngineCounts, ExportBenchConfig};
use filterstore::{Error, Result};

fn hex(b: &[u8]) -> String {
    b.iter()
        .fold(String::with_capacity(b.len() * 2), |mut s, x| {
            let _ = write!(s, "{x:02x}");
            s
        })
}

pub(super) fn run_engines(
    python: &Path,
    script: &Path,
    dir: &Path,
    root: &Path,
    cfg: &ExportBenchConfig,
    absent: &[[u8; 16]],
    present: &[(u64, [u8; 16])],
) -> Result<EngineCounts> {
    let qfile = root.join("engine-queries.txt");
    let mut text = String::new();
    for (i, k) in absent.iter().take(cfg.engine_queries as usize).enumerate() {
        let modes = if (i as u64) < cfg.engine_off_queries {
            "on,off,duckdb"
        } else {
            "on,duckdb"
        };
        let _ = writeln!(text, "absent {} {modes}", hex(k));
    }
    for (_, k) in present.iter().take(cfg.engine_queries as usize) {
        let _ = writeln!(text, "present {} on,duckdb", hex(k));
    }
    std::fs::write(&qfile, text).map_err(|e| Error::io(&qfile, e))?;
    let start = Instant::now();
    let out = Command::new(python)
        .arg(script)
        .arg(dir)
        .arg(&qfile)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| Error::io(python, e))?;
    if !out.status.success() {
        return Err(Error::InvalidArgument(format!(
            "{} {} failed: {}",
            python.display(),
            script.display(),
            out.status
        )));
    }
    let mut c = EngineCounts {
        secs: start.elapsed().as_secs_f64(),
        ..EngineCounts::default()
    };
    let values: std::collections::HashMap<String, String> = present
        .iter()
        .map(|(i, k)| {
            let mut v = Vec::new();
            value(*i, &mut v);
            (hex(k), hex(&v))
        })
        .collect();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if line.starts_with('#') {
            continue;
        }
        let mut parts = line.split_whitespace();
        let (engine, mode, key) = (
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
        );
        let fields: std::collections::HashMap<&str, &str> =
            parts.filter_map(|p| p.split_once('=')).collect();
        let num = |f: &str| {
            fields
                .get(f)
                .and_then(|x| x.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let got = fields.get("value").copied().unwrap_or("-");
        match values.get(key) {
            Some(want) => {
                c.present += u64::from(engine == "datafusion");
                let exact = u64::from(got == want);
                if engine == "datafusion" {
                    c.df_exact += exact;
                } else {
                    c.duck_exact += exact;
                }
            }
            None => {
                c.absent_rows += u64::from(got != "-");
                match (engine, mode) {
                    ("datafusion", "on") => {
                        c.absent += 1;
                        c.df_in_range += num("stats_matched");
                        c.df_read += num("bloom_matched");
                    }
                    ("datafusion", _) => {
                        c.off_absent += 1;
                        c.df_off_read += num("bloom_matched");
                    }
                    _ => c.duck_read += num("scanned"),
                }
            }
        }
    }
    Ok(c)
}
