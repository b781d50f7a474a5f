//! What `tests/parquet.rs` and `cli/tests/parquet.rs` share (through `#[path]`): the
//! interop environment (DataFusion and DuckDB, through their Python wheels in `.venv-interop`
//! at the repository's root), and the files an export wrote.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The repository's root: the nearest ancestor of the test's package holding
/// `tests/interop` (the library's package, or the parent of `cli/`).
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join("tests/interop/requirements.txt").exists())
        .expect("tests/interop above the package")
}

const SETUP: &str = "python3 -m venv .venv-interop && \
                     .venv-interop/bin/pip install -r tests/interop/requirements.txt";

/// The interop environment's Python, or `None` (outside CI only) after saying how to set
/// it up.
pub fn python() -> Option<PathBuf> {
    let root = root();
    let python = root.join(".venv-interop/bin/python");
    let usable = python.exists()
        && Command::new(&python)
            .args(["-c", "import datafusion, duckdb"])
            .status()
            .is_ok_and(|s| s.success());
    if usable {
        return Some(python);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "CI=true but {} cannot import datafusion and duckdb; .ci/run sets it up with: {SETUP}",
            python.display()
        );
    }
    println!("SKIPPED: no interop environment; set it up (from the repository root) with: {SETUP}");
    None
}

/// Runs `cmd`, failing the test if it takes longer than `timeout`; (success, stdout, stderr).
pub fn run_with_timeout(mut cmd: Command, timeout: Duration) -> (bool, String, String) {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            r.read_to_string(&mut s).unwrap();
            s
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            panic!("{cmd:?} ran for more than {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status.success(), out.join().unwrap(), err.join().unwrap())
}

/// The `.parquet` files in `dir`, sorted.
pub fn parquet_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
        .collect();
    v.sort();
    v
}
