#!/usr/bin/env bash
# The fault-injection suite (docs/faults.md), long form: the same test binary
# as `cargo test --test faults`, with the nemeses striking round after round
# for N minutes on one Redis server (every single-server nemesis), then N/5
# minutes (at least one) of master failovers on a Redis Cluster with replicas.
#
#   scripts/faults.sh --minutes 30            # the long run
#   scripts/faults.sh --minutes 30 --seed 7   # another schedule
#   scripts/faults.sh                          # the short form (one round each)
#   scripts/faults.sh --nemeses kill-node,stop-node --minutes 5   # some nemeses only
#   scripts/faults.sh --nemeses none           # a calm run: the workload alone
#   scripts/faults.sh --report                 # only the summary of the last runs
#                                              # (.ci/run, after `cargo test` ran the short form)
#
# Prints each run's summary (operations by kind and outcome, nemesis events,
# violations) and ends with one line:
#   FAULTS: <ops> ops, <nemesis events> nemesis events, <violations> violations
# The histories, summaries and node logs stay in
# ${CARGO_TARGET_DIR:-target}/tmp/faults/<single|cluster>-<seed>/.
# Needs redis-server and redis-cli (GENMCP_REDIS_SERVER / GENMCP_REDIS_CLI).
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=""
seed=""
report_only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --nemeses) export GENMCP_FAULTS_NEMESES="$2"; shift 2 ;;
    --report) report_only=1; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ -n "$minutes" ]; then export GENMCP_FAULTS_MINUTES="$minutes"; fi
if [ -n "$seed" ]; then export GENMCP_FAULTS_SEED="$seed"; fi

status=0
if [ -z "$report_only" ]; then
  # One test at a time: they share the machine with the nodes they start.
  cargo test --test faults -- --nocapture --test-threads 1 || status=$?
fi

target="${CARGO_TARGET_DIR:-$PWD/target}"
ops=0; events=0; violations=0
for summary in "$target"/tmp/faults/*-"${seed:-28}"/summary.txt; do
  [ -e "$summary" ] || continue
  echo "== $summary"
  sed -n '1,/^violations:/p' "$summary"
  ops=$((ops + $(grep -E '^[A-Za-z]+: ok' "$summary" | awk -F'[ ,]+' '{s += $3 + $5 + $7} END {print s + 0}')))
  events=$((events + $(grep '^nemesis events:' "$summary" | grep -oE 'x[0-9]+' | tr -d x | awk '{s += $1} END {print s + 0}')))
  violations=$((violations + $(grep '^violations:' "$summary" | awk -F'[ ,]+' '{print $2}')))
done
if [ "$ops" = 0 ]; then
  echo "FAULTS: no run found under $target/tmp/faults" >&2
  exit 1
fi
echo "FAULTS: $ops ops, $events nemesis events, $violations violations"
exit "$status"
