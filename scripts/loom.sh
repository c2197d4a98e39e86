#!/usr/bin/env bash
# Model-checks the data-path queue (src/queue/) with loom: every interleaving
# of the models in src/queue/loom.rs, up to LOOM_MAX_PREEMPTIONS preemptions.
#
#   scripts/loom.sh                 # all queue models
#   scripts/loom.sh the_reader      # only the models whose name starts with "the_reader"
#
# Builds in its own target directory (LOOM_TARGET_DIR, default target/loom) so
# the `--cfg genmcp_loom` build does not invalidate the normal one.
set -euo pipefail
cd "$(dirname "$0")/.."

export RUSTFLAGS="--cfg genmcp_loom ${RUSTFLAGS:-}"
export CARGO_TARGET_DIR="${LOOM_TARGET_DIR:-target/loom}"
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}"
# Loom prints the failing interleaving's location on a failure.
export LOOM_LOCATION=1

filter="queue::loom${1:+::}${1:-}"
cmd=(cargo test --release --lib "$filter")
echo "+ RUSTFLAGS=\"$RUSTFLAGS\" CARGO_TARGET_DIR=$CARGO_TARGET_DIR LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS ${cmd[*]}"
"${cmd[@]}"
