#!/usr/bin/env bash
# 2025-era peer test: drive `genmcp serve` with the official Python MCP SDK 1.x
# (PyPI mcp==1.26.0), which speaks 2025-11-25 (initialize, sessions, GET stream).
#
# Needs only: Python >= 3.10 (3.11 verified) with the venv module, and PyPI.
# Builds nothing: it uses an already-built server binary.
#
# Usage: scripts/python-legacy-peer.sh [extra pytest args...]
#
# Environment:
#   GENMCP_BIN   server binary (default: target/debug/genmcp; build it with
#                `cargo build --bin genmcp`)
#   PYTHON       interpreter used to create the venv (default: python3)
#
# The venv lives in .cache/python-legacy-peer/venv (git-ignored). It is reused when
# its stamp matches tests/python_legacy/requirements.txt + constraints.txt, and
# rebuilt from scratch otherwise.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/.cache/python-legacy-peer"
VENV="$CACHE/venv"
REQS="$ROOT/tests/python_legacy/requirements.txt"
CONSTRAINTS="$ROOT/tests/python_legacy/constraints.txt"
PYTHON="${PYTHON:-python3}"

log() { printf '[python-legacy-peer.sh] %s\n' "$*" >&2; }
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
  || die "$PYTHON is $("$PYTHON" -V 2>&1); mcp 1.26.0 needs Python >= 3.10"

want_stamp="$(cat "$REQS" "$CONSTRAINTS" | sha256sum | cut -d' ' -f1)"
stamp_file="$VENV/.python-peer-stamp"

venv_ok() {
  [[ -x "$VENV/bin/python" ]] || return 1
  [[ -f "$stamp_file" && "$(cat "$stamp_file")" == "$want_stamp" ]] || return 1
  "$VENV/bin/python" - <<'PY' >/dev/null 2>&1
import importlib.metadata as m, sys
sys.exit(0 if m.version("mcp") == "1.26.0" else 1)
PY
}

if venv_ok; then
  log "reusing $VENV (mcp 1.26.0)"
else
  log "creating $VENV with $("$PYTHON" -V 2>&1)"
  rm -rf "$VENV"
  mkdir -p "$CACHE"
  "$PYTHON" -m venv "$VENV" || die "could not create a venv (on Debian: apt-get install python3-venv)"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r "$REQS" -c "$CONSTRAINTS"
  venv_ok_version="$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))')"
  [[ "$venv_ok_version" == "1.26.0" ]] || die "installed mcp is $venv_ok_version, want 1.26.0"
  printf '%s\n' "$want_stamp" > "$stamp_file"
fi

# ------------------------------------------------------------------ tests
cd "$ROOT"
export PYTHONDONTWRITEBYTECODE=1
log "running pytest against $GENMCP_BIN"
exec "$VENV/bin/python" -m pytest -q tests/python_legacy "$@"
