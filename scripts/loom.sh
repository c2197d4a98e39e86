#!/usr/bin/env bash
# Model-checks the data-path queue (src/queue/) with loom: every interleaving
# of the models in src/queue/loom.rs, up to LOOM_MAX_PREEMPTIONS preemptions.
#
#   scripts/loom.sh                 # all queue models
#   scripts/loom.sh the_reader      # only the models whose name starts with "the_reader"
#
# The models build with the crate's `loom` feature (test builds only): it swaps
# the queue's primitives for loom's and rebuilds only this crate, so the normal
# target directory's dependencies are reused. Loom itself is compiled with
# optimisations (Cargo.toml, [profile.dev.package.loom]) so the models finish in
# a few minutes even in a debug build.
set -euo pipefail
cd "$(dirname "$0")/.."

export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}"
# Loom prints the failing interleaving's location on a failure.
export LOOM_LOCATION=1

filter="queue::loom${1:+::}${1:-}"
cmd=(cargo test -p genmcp --features loom --lib "$filter")
echo "+ LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS ${cmd[*]}"
"${cmd[@]}"
