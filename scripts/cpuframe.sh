#!/bin/bash
# Server CPU time and system calls per frame of a stream burst, for several
# servers in turn (docs/benchmark.md, "Counting instructions and CPU").
#
# usage: scripts/cpuframe.sh PORT STREAMS SETS SERVER...
#   SERVER is KIND:GENMCP_BIN, KIND one of
#     genmcp       GENMCP_BIN serve --workers 2
#     raw          GENMCP_BIN bench-baseline
#     hop          GENMCP_BIN bench-baseline --baseline actor-hop
#     hop-handler  GENMCP_BIN bench-baseline --baseline actor-hop-handler
#
# For each of SETS sets, each SERVER in turn: starts it on 127.0.0.1:PORT,
# warms it with one round of STREAMS x 100 (`genmcp bench --url`), then
# counts, with `perf stat` attached to the server, CPU time (task-clock) and
# the sendto, recvfrom, epoll_wait and write calls over two rounds of
# STREAMS x (1,000,000 / STREAMS), and prints them per frame (CPU) and per
# 1,000 frames (calls), with the two rounds' frames per second. The load
# generator is the first SERVER's binary (or $CLIENT). Needs `perf` with
# the syscalls tracepoints readable (root, or perf_event_paranoid <= 1).
set -euo pipefail
PORT=$1; S=$2; SETS=$3; shift 3
CLIENT=${CLIENT:-${1#*:}}
URL="http://127.0.0.1:$PORT/mcp"
OUT=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill "$PID" 2> /dev/null; rm -rf "$OUT"' EXIT
EVENTS="syscalls:sys_enter_sendto,syscalls:sys_enter_recvfrom,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_write"
for _ in $(seq "$SETS"); do
  for server in "$@"; do
    kind=${server%%:*}; bin=${server#*:}
    case $kind in
      genmcp) "$bin" serve --port "$PORT" --workers 2 > /dev/null 2>&1 & ;;
      raw) "$bin" bench-baseline --port "$PORT" > /dev/null 2>&1 & ;;
      hop) "$bin" bench-baseline --baseline actor-hop --port "$PORT" > /dev/null 2>&1 & ;;
      hop-handler) "$bin" bench-baseline --baseline actor-hop-handler --port "$PORT" > /dev/null 2>&1 & ;;
      *) echo "unknown server kind: $kind" >&2; exit 2 ;;
    esac
    PID=$!
    for _ in $(seq 100); do
      curl -s -o /dev/null -X POST "$URL" && break
      sleep 0.1
    done
    "$CLIENT" bench --url "$URL" --streams "$S" --events 100 --rounds 1 > /dev/null 2>&1
    perf stat -x, -e "task-clock,$EVENTS" -p "$PID" -o "$OUT/stat" &
    PERF=$!
    sleep 0.2
    "$CLIENT" bench --url "$URL" --streams "$S" --rounds 2 > "$OUT/bench" 2>&1
    kill -INT "$PERF"; wait "$PERF" 2> /dev/null || true
    kill "$PID"; wait "$PID" 2> /dev/null || true
    PID=
    fps=$(grep -E "^[12] \|" "$OUT/bench" | awk '{print $3}' | tr '\n' ' ')
    python3 - "$kind" "$S" "$fps" "$OUT/stat" <<'PY'
import sys
kind, streams, fps, path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
frames = 2 * streams * max(1, 1_000_000 // streams)
v = {}
for line in open(path):
    p = line.strip().split(',')
    if len(p) > 3 and p[0].replace('.', '', 1).isdigit():
        v[p[2]] = float(p[0])
per_k = lambda name: v.get(f"syscalls:sys_enter_{name}", 0) / frames * 1e3
print(f"{kind:12s} cpu {v.get('task-clock', 0) * 1e6 / frames:5.0f} ns/frame"
      f"  per 1,000 frames: sendto {per_k('sendto'):5.1f} recvfrom {per_k('recvfrom'):4.1f}"
      f" epoll_wait {per_k('epoll_wait'):4.1f} write {per_k('write'):4.1f}"
      f"  frames/s {fps}")
PY
  done
done
