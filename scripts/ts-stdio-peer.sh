#!/usr/bin/env bash
# 2025-era stdio peer test: the TypeScript MCP SDK (@modelcontextprotocol/sdk
# 1.32.2) launches `genmcp serve --stdio` with its StdioClientTransport, as a
# desktop host does, and checks initialize, tools, pushed list changes,
# resources/subscribe, logging, elicitation and a clean exit
# (tests/ts_stdio/peer.mjs). Exits non-zero on any failed check.
#
# Needs only: Node >= 18 with npm, and the npm registry.
# Builds nothing: it uses an already-built server binary.
#
# Environment:
#   GENMCP_BIN   server binary (default: target/debug/genmcp; build it with
#                `cargo build --bin genmcp`)
#
# The packages live in .cache/ts-stdio-peer (git-ignored), reinstalled when
# tests/ts_stdio/package.json changes.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SDK="1.32.2"

log() { printf '[ts-stdio-peer.sh] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# shellcheck source=lib/node-peer.sh
source "$ROOT/scripts/lib/node-peer.sh"
genmcp_bin
npm_install ts-stdio-peer "$ROOT/tests/ts_stdio" @modelcontextprotocol/sdk "$SDK"
cp "$ROOT/tests/ts_stdio/peer.mjs" "$CACHE/peer.mjs"
log "running tests/ts_stdio/peer.mjs against $GENMCP_BIN"
exec node "$CACHE/peer.mjs"
