#!/usr/bin/env bash
# 2025-era resumption peer test: the TypeScript MCP SDK
# (@modelcontextprotocol/sdk 1.32.2, StreamableHTTPClientTransport) against
# `genmcp serve --max-stream-duration 2`: the server closes the GET stream
# every 2 s, the SDK resumes it with Last-Event-ID, and every
# resources/updated arrives once and in order (tests/ts_resume/peer.mjs);
# then the same over three `--bus` nodes behind a round-robin proxy
# (tests/ts_resume/fleet.mjs), the node serving the GET stream killed while
# updates are published and the stream resumed on another node
# (fleet_kill.mjs), the node holding the GET stream drained and the stream
# taken over where the SDK resumes (fleet_drain.mjs), and tool call replies
# closed at
# `--max-stream-duration 0.05` and resumed on other nodes, every progress
# notification once and in order, then the result (fleet_post.mjs).
# Exits non-zero on any failed check.
#
# Needs only: Node >= 18 with npm, and the npm registry.
# Builds nothing: it uses an already-built server binary.
#
# Environment:
#   GENMCP_BIN   server binary (default: target/debug/genmcp; build it with
#                `cargo build --bin genmcp`)
#
# The packages live in .cache/ts-resume-peer (git-ignored), reinstalled when
# tests/ts_resume/package.json changes.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SDK="1.32.2"

log() { printf '[ts-resume-peer.sh] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# shellcheck source=lib/node-peer.sh
source "$ROOT/scripts/lib/node-peer.sh"
genmcp_bin
npm_install ts-resume-peer "$ROOT/tests/ts_resume" @modelcontextprotocol/sdk "$SDK"
cp "$ROOT/tests/ts_resume/peer.mjs" "$ROOT/tests/ts_resume/lib.mjs" "$ROOT/tests/ts_resume/client.mjs" \
  "$ROOT/tests/ts_resume/fleet.mjs" \
  "$ROOT/tests/ts_resume/fleet_kill.mjs" "$ROOT/tests/ts_resume/fleet_drain.mjs" \
  "$ROOT/tests/ts_resume/fleet_post.mjs" "$CACHE/"
log "running tests/ts_resume/peer.mjs against $GENMCP_BIN"
node "$CACHE/peer.mjs"
log "running tests/ts_resume/fleet.mjs against three $GENMCP_BIN --bus nodes"
node "$CACHE/fleet.mjs"
log "running tests/ts_resume/fleet_kill.mjs: the node serving the GET stream killed"
node "$CACHE/fleet_kill.mjs"
log "running tests/ts_resume/fleet_drain.mjs: the node holding the GET stream drained"
node "$CACHE/fleet_drain.mjs"
log "running tests/ts_resume/fleet_post.mjs: tool call replies resumed on other nodes"
node "$CACHE/fleet_post.mjs"
