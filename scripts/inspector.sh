#!/usr/bin/env bash
# Checks genmcp against the MCP Inspector 2.12 (npm @modelcontextprotocol/inspector,
# its CLI mode): the Inspector lists the notes demo's MCP Apps tool with its
# view (`--app-info`), reads the ui:// view, and verifies the conformance
# fixtures' skills (digests and sizes of every file, `--verify`).
#
# Needs: Rust (cargo), Python 3, Node 20 + npm, the npm registry. The
# Inspector needs Node >= 22.19, installed from the npm registry (package
# `node@22`) into .cache/inspector/ beside the pinned Inspector.
#
# Usage: scripts/inspector.sh        (GENMCP_BIN: a server binary to use
#                                     instead of `cargo build --release`)
set -euo pipefail

INSPECTOR_VERSION="2.12.0"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/.cache/inspector"
log() { printf '[inspector.sh] %s\n' "$*" >&2; }

mkdir -p "$CACHE"
[[ -f "$CACHE/package.json" ]] || (cd "$CACHE" && npm init -y >/dev/null)
if ! "$CACHE/node_modules/.bin/node" --version 2>/dev/null | grep -q '^v22\.'; then
  (cd "$CACHE" && npm install --no-audit --no-fund --save-exact node@22) >&2
fi
pkg="$CACHE/node_modules/@modelcontextprotocol/inspector/package.json"
have="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$pkg" 2>/dev/null || true)"
if [[ "$have" != "$INSPECTOR_VERSION" ]]; then
  (cd "$CACHE" && npm install --no-audit --no-fund --save-exact \
    "@modelcontextprotocol/inspector@$INSPECTOR_VERSION") >&2
fi
export PATH="$CACHE/node_modules/.bin:$PATH"
INSPECTOR="$CACHE/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"

if [[ -n "${GENMCP_BIN:-}" ]]; then
  BIN="$GENMCP_BIN"
else
  (cd "$ROOT" && cargo build --release --bin genmcp)
  BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/genmcp"
fi

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }
# Run in this shell, not in a command substitution (a subshell would keep
# the server's pid from PIDS, and the server would outlive the script).
# A server that exits before answering (its probed port taken by another
# process first) is started again on another port, 5 tries.
serve() { # args... ; sets URL once the server answers
  local port pid try
  for try in 1 2 3 4 5; do
    port="$(free_port)"
    "$BIN" serve --host 127.0.0.1 --port "$port" "$@" >/dev/null 2>&1 &
    pid=$!
    PIDS+=("$pid")
    for _ in $(seq 1 300); do
      if python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2)' "$port" 2>/dev/null; then
        URL="http://127.0.0.1:$port/mcp"; return 0
      fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && break
    log "server exited before answering (try $try of 5): $*"
  done
  log "server did not start: $*"; exit 2
}
cli() { timeout 60 node "$INSPECTOR" --cli "$@"; }

status=0
serve --apps
APPS="$URL"
log "inspector $INSPECTOR_VERSION --cli $APPS --method tools/list --app-info"
apps_out="$(cli "$APPS" --method tools/list --app-info)"
echo "$apps_out"
python3 - "$apps_out" <<'PY' || status=1
import json, sys
lines = [json.loads(l) for l in sys.argv[1].splitlines() if l.strip()]
app = [l for l in lines if l.get("toolName") == "show_notes"]
ok = app and app[0].get("hasApp") and app[0].get("resourceUri") == "ui://notes/board" \
    and app[0].get("resourceMimeType") == "text/html;profile=mcp-app"
print("inspector: show_notes lists its view ui://notes/board" if ok else "FAIL: show_notes has no app view")
sys.exit(0 if ok else 1)
PY
log "inspector --cli $APPS --method resources/read --uri ui://notes/board"
read_out="$(cli "$APPS" --method resources/read --uri ui://notes/board)"
python3 - "$read_out" <<'PY' || status=1
import json, sys
c = json.loads(sys.argv[1])["contents"][0]
ok = c.get("mimeType") == "text/html;profile=mcp-app" and c.get("text", "").startswith("<!doctype html>")
print("inspector: read ui://notes/board (%d bytes of HTML)" % len(c.get("text", "")) if ok else "FAIL: %r" % c)
sys.exit(0 if ok else 1)
PY

serve --conformance
SKILLS="$URL"
log "inspector --cli $SKILLS --method skills/list --verify"
cli "$SKILLS" --method skills/list --verify || status=1

echo "inspector: $([[ $status == 0 ]] && echo 3 || echo "<3") passed, $([[ $status == 0 ]] && echo 0 || echo 1) failed"
exit "$status"
