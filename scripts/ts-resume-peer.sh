#!/usr/bin/env bash
# 2025-era resumption peer test: the TypeScript MCP SDK
# (@modelcontextprotocol/sdk 1.32.2, StreamableHTTPClientTransport) against
# `genmcp serve --max-stream-duration 2`: the server closes the GET stream
# every 2 s, the SDK resumes it with Last-Event-ID, and every
# resources/updated arrives once and in order (tests/ts_resume/peer.mjs).
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
CACHE="$ROOT/.cache/ts-resume-peer"
SDK="1.32.2"

log() { printf '[ts-resume-peer.sh] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

GENMCP_BIN="${GENMCP_BIN:-target/debug/genmcp}"
[[ "$GENMCP_BIN" = /* ]] || GENMCP_BIN="$ROOT/$GENMCP_BIN"
[[ -x "$GENMCP_BIN" ]] || die "server binary not found or not executable: $GENMCP_BIN
  build it first with: cargo build --bin genmcp   (or set GENMCP_BIN)"
export GENMCP_BIN

command -v node >/dev/null 2>&1 || die "node not found (need Node >= 18)"
command -v npm >/dev/null 2>&1 || die "npm not found"
command -v redis-server >/dev/null 2>&1 || die "redis-server not found (the fleet check runs one)"
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' \
  || die "node $(node -v) is too old; the sdk needs Node >= 18"

want_stamp="$(sha256sum "$ROOT/tests/ts_resume/package.json" | cut -d' ' -f1)"
stamp_file="$CACHE/.ts-resume-peer-stamp"
installed() {
  [[ -f "$stamp_file" && "$(cat "$stamp_file")" == "$want_stamp" ]] || return 1
  [[ "$(node -p "require('$CACHE/node_modules/@modelcontextprotocol/sdk/package.json').version" 2>/dev/null)" == "$SDK" ]]
}
if installed; then
  log "reusing $CACHE (@modelcontextprotocol/sdk $SDK)"
else
  log "installing @modelcontextprotocol/sdk $SDK into $CACHE"
  rm -rf "$CACHE"
  mkdir -p "$CACHE"
  cp "$ROOT/tests/ts_resume/package.json" "$CACHE/package.json"
  (cd "$CACHE" && npm install --no-audit --no-fund --loglevel=error) || die "npm install failed"
  printf '%s\n' "$want_stamp" > "$stamp_file"
fi
cp "$ROOT/tests/ts_resume/peer.mjs" "$ROOT/tests/ts_resume/fleet.mjs" "$CACHE/"
log "running tests/ts_resume/peer.mjs against $GENMCP_BIN"
node "$CACHE/peer.mjs"
log "running tests/ts_resume/fleet.mjs against three $GENMCP_BIN --bus nodes"
node "$CACHE/fleet.mjs"
