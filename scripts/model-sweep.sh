#!/bin/sh
# The full sweep of the snapshot model test (tests/snapshot.rs, `snapshot_model_sweep`):
# every filter kind (bloom, blocked-bloom, cuckoo, fuse, global, none) × block form (raw,
# LZ4, and zstd when built with it) × block cache on and off × `mmap_reads` on and off, each
# with MODEL_SWEEP_SEEDS seeds (default 4) of MODEL_SWEEP_STEPS random steps (default 3000):
# puts, deletes, batches, snapshots checked against BTreeMap clones, store and snapshot scans
# forward, backward and from both ends, flushes, compactions, refilters and reopens.
# `cargo test --release` runs an 18-configuration slice of it (`snapshots_match_btreemap_clones`).
#
#   scripts/model-sweep.sh                     # 72 configurations × 4 seeds
#   MODEL_SWEEP_SEEDS=20 scripts/model-sweep.sh
#   MODEL_SWEEP_FIRST_SEED=5000 scripts/model-sweep.sh   # other seeds
#   MODEL_SWEEP_CONFIG=38 scripts/model-sweep.sh         # configuration 38 alone
#
# Extra arguments go to cargo (e.g. --no-default-features for a build without zstd).
set -eu
cd "$(dirname "$0")/.."
exec cargo test --release "$@" --test snapshot -- --ignored --nocapture snapshot_model_sweep
