//! Which query kernel a filter runs: what the CPU has, and the `FILTERSTORE_KERNEL` switch.
//!
//! Blocked-bloom (layout version 2) queries run on one of three kernels: portable scalar
//! code, AVX2 or AVX-512F. Left alone, a view takes the fastest this CPU has for its k
//! (`simd::blocked_v2`). The environment variable [`KERNEL_ENV`] (`scalar`, `avx2` or
//! `avx512`), read once per process, caps the choice, so that each kernel can be measured on
//! a machine that has a faster one; a kernel the CPU lacks is never run (the next one down
//! is). [`Filter::kernel`](super::Filter::kernel) says which kernel a filter runs, and
//! [`kernel_summary`] says it for reports (`store bench`, the peers' filter race).

use std::sync::OnceLock;

use super::blocked_layout::MAX_K;
pub use super::simd::Kernel;

/// The environment variable that caps the query kernel: `scalar`, `avx2` or `avx512`
/// (anything else, or unset: the fastest the CPU has).
pub const KERNEL_ENV: &str = "FILTERSTORE_KERNEL";

/// [`KERNEL_ENV`] as read at the first call (later changes to the environment are not seen);
/// empty counts as unset.
fn raw_setting() -> &'static Option<String> {
    static RAW: OnceLock<Option<String>> = OnceLock::new();
    RAW.get_or_init(|| {
        std::env::var(KERNEL_ENV)
            .ok()
            .filter(|s| !s.trim().is_empty())
    })
}

/// The cap [`KERNEL_ENV`] sets, read once per process: `None` when it is unset or names no
/// kernel (queries then run on the fastest kernel the CPU has).
pub fn kernel_setting() -> Option<Kernel> {
    raw_setting().as_deref().and_then(Kernel::parse)
}

/// The kernel a blocked-bloom filter (layout version 2) with `k` probes runs on here, under
/// [`kernel_setting`].
pub fn blocked_kernel(k: u32) -> Kernel {
    super::simd::blocked_v2(k, kernel_setting()).map_or(Kernel::Scalar, |s| s.which)
}

/// One line for reports: the kernel blocked-bloom queries run on, per range of k, and why,
/// e.g. `blocked-bloom kernel: avx2 for k <= 8, avx512 for k 9..=30 (auto; CPU: avx2 avx512)`.
pub fn kernel_summary() -> String {
    let mut parts: Vec<(u32, u32, Kernel)> = Vec::new();
    for k in 1..=MAX_K {
        let which = blocked_kernel(k);
        match parts.last_mut() {
            Some((_, hi, w)) if *w == which => *hi = k,
            _ => parts.push((k, k, which)),
        }
    }
    let ranges: Vec<String> = parts
        .iter()
        .map(|&(lo, hi, w)| match (parts.len(), lo, hi) {
            (1, _, _) => format!("{w}"),
            (_, 1, hi) => format!("{w} for k <= {hi}"),
            (_, lo, hi) if hi == MAX_K => format!("{w} for k >= {lo}"),
            (_, lo, hi) => format!("{w} for k {lo}..={hi}"),
        })
        .collect();
    let why = match raw_setting() {
        None => "auto".to_string(),
        Some(s) => match Kernel::parse(s) {
            Some(k) => format!("{KERNEL_ENV}={k}"),
            None => format!("{KERNEL_ENV}={s:?} names no kernel: auto"),
        },
    };
    let cpu: Vec<&str> = [Kernel::Avx2, Kernel::Avx512]
        .into_iter()
        .filter(|k| k.available())
        .map(Kernel::name)
        .collect();
    let cpu = if cpu.is_empty() {
        "no SIMD kernel".to_string()
    } else {
        cpu.join(" ")
    };
    format!(
        "blocked-bloom kernel: {} ({why}; CPU: {cpu})",
        ranges.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for k in Kernel::ALL {
            assert_eq!(Kernel::parse(k.name()), Some(k));
            assert_eq!(
                Kernel::parse(&format!(" {} ", k.name().to_uppercase())),
                Some(k)
            );
        }
        assert_eq!(Kernel::parse("sse"), None);
        assert_eq!(Kernel::parse(""), None);
        assert!(Kernel::Scalar.available());
        assert!(kernel_summary().starts_with("blocked-bloom kernel: "));
    }
}
