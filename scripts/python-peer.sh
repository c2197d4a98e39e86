#!/usr/bin/env bash
# Independent-peer test: drive a running genmcp server with the official
# Python MCP SDK (PyPI mcp==2.3.0) over Streamable HTTP at 2026-07-28.
# scripts/python-legacy-peer.sh runs the same with the 2025-era SDK (mcp 1.26.0).
#
# Needs only: Python >= 3.10 (3.11 verified) with the venv module, and PyPI.
# Builds nothing: it uses an already-built server binary.
#
# Usage: scripts/python-peer.sh [extra pytest args...]
#
# Environment:
#   GENMCP_BIN   server binary (default: target/debug/genmcp; build it with
#                `cargo build --bin genmcp`)
#   PYTHON       interpreter used to create the venv (default: python3)
#   PEER_SUITE   the test folder under tests/ (default: python)
#   PEER_MCP     the pinned mcp version it needs (default: 2.3.0)
#
# The venv lives in .cache/<script name>/venv (git-ignored). It is reused when
# its stamp matches tests/$PEER_SUITE/requirements.txt + constraints.txt, and
# rebuilt from scratch otherwise.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SUITE="${PEER_SUITE:-python}"
MCP="${PEER_MCP:-2.3.0}"
NAME="${PEER_NAME:-python-peer}"
CACHE="$ROOT/.cache/$NAME"
VENV="$CACHE/venv"
REQS="$ROOT/tests/$SUITE/requirements.txt"
CONSTRAINTS="$ROOT/tests/$SUITE/constraints.txt"
PYTHON="${PYTHON:-python3}"

log() { printf '[%s.sh] %s\n' "$NAME" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# ------------------------------------------------------------ server binary
GENMCP_BIN="${GENMCP_BIN:-target/debug/genmcp}"
[[ "$GENMCP_BIN" = /* ]] || GENMCP_BIN="$ROOT/$GENMCP_BIN"
if [[ ! -x "$GENMCP_BIN" ]]; then
  die "server binary not found or not executable: $GENMCP_BIN
  build it first with: cargo build --bin genmcp   (or set GENMCP_BIN)"
fi
export GENMCP_BIN

# ------------------------------------------------------------------- venv
command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found (need Python >= 3.10)"
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' \
  || die "$PYTHON is $("$PYTHON" -V 2>&1); mcp $MCP needs Python >= 3.10"

want_stamp="$(cat "$REQS" "$CONSTRAINTS" | sha256sum | cut -d' ' -f1)"
stamp_file="$VENV/.python-peer-stamp"

venv_ok() {
  [[ -x "$VENV/bin/python" ]] || return 1
  [[ -f "$stamp_file" && "$(cat "$stamp_file")" == "$want_stamp" ]] || return 1
  "$VENV/bin/python" - "$MCP" <<'PY' >/dev/null 2>&1
import importlib.metadata as m, sys
sys.exit(0 if m.version("mcp") == sys.argv[1] else 1)
PY
}

if venv_ok; then
  log "reusing $VENV (mcp $MCP)"
else
  log "creating $VENV with $("$PYTHON" -V 2>&1)"
  rm -rf "$VENV"
  mkdir -p "$CACHE"
  "$PYTHON" -m venv "$VENV" || die "could not create a venv (on Debian: apt-get install python3-venv)"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r "$REQS" -c "$CONSTRAINTS"
  venv_ok_version="$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))')"
  [[ "$venv_ok_version" == "$MCP" ]] || die "installed mcp is $venv_ok_version, want $MCP"
  printf '%s\n' "$want_stamp" > "$stamp_file"
fi

# ------------------------------------------------------------------ tests
cd "$ROOT"
export PYTHONDONTWRITEBYTECODE=1
log "running pytest against $GENMCP_BIN"
exec "$VENV/bin/python" -m pytest -q "tests/$SUITE" "$@"
