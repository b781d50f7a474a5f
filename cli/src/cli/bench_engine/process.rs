//! What `bench engine` reads of its own process: memory, CPU time, and the store's bytes
//! on disk.

use std::path::Path;

/// A `/proc/self/status` field in KiB (0 when unknown).
pub(super) fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Peak resident set of this process in KiB (VmHWM).
pub(super) fn peak_rss_kib() -> u64 {
    status_kib("VmHWM:")
}

/// Bytes of the files in `dir` (not below).
pub(super) fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// CPU time of this process's threads so far, in seconds.
pub(super) fn process_cpu_s() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}
