#!/bin/bash
# Instructions per frame of a server's stream path, counted by callgrind, which
# the noise of a shared machine does not move (docs/benchmark.md, "Counting
# instructions and CPU").
#
# usage: scripts/irframe.sh GENMCP_BIN PORT [STREAMS] [EVENTS] [baseline|actor-hop|actor-hop-handler]
#
# Starts `GENMCP_BIN serve` (or, with `baseline`, `GENMCP_BIN bench-baseline`;
# with an actor hop, `GENMCP_BIN bench-baseline --baseline actor-hop` or
# `actor-hop-handler`) under callgrind on 127.0.0.1:PORT, warms it with one round of STREAMS x 100,
# zeroes the counters, drives one round of STREAMS x EVENTS with
# `GENMCP_BIN bench --url`, dumps the counters and prints instructions per
# frame (the listens and the tool call of that round included).
set -euo pipefail
BIN=$1; PORT=$2; S=${3:-100}; E=${4:-1000}; MODE=${5:-genmcp}
OUT=$(mktemp -d)
if [ "$MODE" = baseline ]; then
  valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.%p" "$BIN" bench-baseline --port "$PORT" > "$OUT/server.log" 2>&1 &
elif [ "$MODE" = actor-hop ] || [ "$MODE" = actor-hop-handler ]; then
  valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.%p" "$BIN" bench-baseline --port "$PORT" --baseline "$MODE" > "$OUT/server.log" 2>&1 &
else
  valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.%p" "$BIN" serve --port "$PORT" --workers 2 > "$OUT/server.log" 2>&1 &
fi
VPID=$!
trap 'kill "$VPID" 2> /dev/null || true' EXIT
for _ in $(seq 120); do
  curl -s -o /dev/null -X POST "http://127.0.0.1:$PORT/mcp" && break
  sleep 0.5
done
"$BIN" bench --url "http://127.0.0.1:$PORT/mcp" --streams "$S" --events 100 --rounds 1 > /dev/null 2>&1
callgrind_control -z "$VPID" > /dev/null 2>&1
"$BIN" bench --url "http://127.0.0.1:$PORT/mcp" --streams "$S" --events "$E" --rounds 1 > "$OUT/bench.log" 2>&1
callgrind_control -d "$VPID" > /dev/null 2>&1
kill "$VPID"; wait "$VPID" 2> /dev/null || true
DUMP=$(ls "$OUT"/cg.*.1)
IR=$(awk '/^totals:/ {print $2}' "$DUMP")
echo "$MODE: $((IR / (S * E))) instructions per frame ($IR over $S x $E frames); profile: $DUMP"
