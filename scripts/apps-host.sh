#!/usr/bin/env bash
# Renders the notes demo's MCP Apps view (genmcp serve --apps) in a real
# browser: tests/apps-host/ is a minimal MCP Apps web host (host page, sandbox
# proxy on another origin, the CSP from _meta.ui.csp, the ui/initialize ->
# ui/notifications/initialized handshake, then tool-input and tool-result),
# driven in headless Chromium by playwright-core. It checks that the view
# shows the notes of the tool result (DOM) and saves a screenshot.
#
# Needs: Node >= 18 with npm, the npm registry, Chromium (the Debian package
# `chromium`, installed with apt-get when absent). Builds nothing unless
# GENMCP_BIN is unset and target/debug/genmcp is missing.
#
# Environment:
#   GENMCP_BIN   server binary (default: target/debug/genmcp)
#   SCREENSHOT   where to save the screenshot (default: .cache/apps-host/notes-board.png)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf '[apps-host.sh] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# shellcheck source=lib/node-peer.sh
source "$ROOT/scripts/lib/node-peer.sh"
if [[ -z "${GENMCP_BIN:-}" && ! -x "${CARGO_TARGET_DIR:-$ROOT/target}/debug/genmcp" ]]; then
  (cd "$ROOT" && cargo build --bin genmcp --quiet)
fi
genmcp_bin

CHROMIUM="$(command -v chromium || true)"
if [[ -z "$CHROMIUM" ]]; then
  SUDO=""
  if [[ "$(id -u)" != 0 ]]; then SUDO="sudo"; fi
  log "installing chromium (apt-get)"
  for try in 1 2 3; do
    $SUDO apt-get -o Acquire::Retries=5 update -qq &&
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o Acquire::Retries=5 install -y -qq chromium >/dev/null &&
      break
    log "apt-get install chromium failed (try $try of 3)"
    sleep $((try * 5))
  done
  CHROMIUM="$(command -v chromium)" || die "chromium did not install"
fi
export CHROMIUM

# The browser is Debian's; playwright-core downloads none.
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
npm_install apps-host "$ROOT/tests/apps-host" playwright-core
export APPS_HOST_CACHE="$CACHE"
export SCREENSHOT="${SCREENSHOT:-$CACHE/notes-board.png}"

# A server that exits before answering (its probed port taken by another
# process first) is started again on another port, 5 tries.
SERVER=""
trap 'if [[ -n "$SERVER" ]]; then kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; fi' EXIT
UP=""
for try in 1 2 3 4 5; do
  PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
  "$GENMCP_BIN" serve --host 127.0.0.1 --port "$PORT" --apps >/dev/null 2>&1 &
  SERVER=$!
  for _ in $(seq 1 300); do
    if python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2)' "$PORT" 2>/dev/null; then
      UP=1
      break
    fi
    kill -0 "$SERVER" 2>/dev/null || break
    sleep 0.1
  done
  [[ -n "$UP" ]] && break
  kill -0 "$SERVER" 2>/dev/null && die "genmcp serve --apps did not answer within 30 s"
  log "genmcp serve --apps exited before answering (try $try of 5)"
done
[[ -n "$UP" ]] || die "genmcp serve --apps did not start"
export GENMCP_URL="http://127.0.0.1:$PORT/mcp"
log "host page against genmcp serve --apps at $GENMCP_URL ($("$CHROMIUM" --version 2>/dev/null | head -1))"
node "$ROOT/tests/apps-host/run.mjs"
