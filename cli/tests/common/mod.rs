//! Helpers shared by the command line's integration tests: the engine tests' helpers
//! (`tests/common/mod.rs` of the library: `Rng`, `NoSyncFs`, `StableReaders`), and a runner of
//! the built `store` binary.
#![allow(dead_code)]

#[path = "../../../tests/common/mod.rs"]
mod engine;
#[allow(unused_imports)]
pub use engine::*;

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// What a run of the `store` binary produced.
pub struct Output {
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Output {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
    pub fn lines(&self) -> Vec<String> {
        self.text().lines().map(str::to_string).collect()
    }
}

/// Runs the built `store` binary with `args` and `stdin` piped in, `FILTERSTORE_DIR` unset
/// unless `dir_env` sets it, in `cwd` when given; a run longer than `timeout` is killed and
/// fails the test (a hang must not stall the suite), and so does a panic (exit 101).
pub fn run_store(
    args: &[&str],
    stdin: &[u8],
    dir_env: Option<&Path>,
    cwd: Option<&Path>,
    timeout: Duration,
) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_store"));
    cmd.args(args)
        .env_remove("FILTERSTORE_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(d) = dir_env {
        cmd.env("FILTERSTORE_DIR", d);
    }
    if let Some(c) = cwd {
        cmd.current_dir(c);
    }
    let mut child = cmd.spawn().expect("spawn store");
    let mut sin = child.stdin.take().unwrap();
    let input = stdin.to_vec();
    let writer = thread::spawn(move || {
        let _ = sin.write_all(&input); // the binary may exit before reading it all
    });
    let read_all = |mut r: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut b = Vec::new();
            r.read_to_end(&mut b).unwrap();
            b
        })
    };
    let out_t = read_all(Box::new(child.stdout.take().unwrap()));
    let err_t = read_all(Box::new(child.stderr.take().unwrap()));
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            panic!("store {args:?} hung for more than {timeout:?}");
        }
        thread::sleep(Duration::from_millis(5));
    };
    writer.join().unwrap();
    let out = Output {
        code: status.code().expect("killed by a signal"),
        stdout: out_t.join().unwrap(),
        stderr: String::from_utf8_lossy(&err_t.join().unwrap()).into_owned(),
    };
    assert_ne!(out.code, 101, "store {args:?} panicked: {}", out.stderr);
    out
}

/// Runs `store --dir DIR ARGS...` with nothing on stdin (a minute at most).
pub fn store_dir(dir: &Path, args: &[&str]) -> Output {
    let d = dir.to_str().unwrap();
    let mut all = vec!["--dir", d];
    all.extend_from_slice(args);
    run_store(&all, b"", None, None, Duration::from_secs(60))
}

/// The output of a run that must succeed.
#[track_caller]
pub fn ok(o: Output) -> String {
    assert_eq!(o.code, 0, "stderr: {}", o.stderr);
    o.text()
}
