#!/usr/bin/env bash
# 2025-era peer test: drive `genmcp serve` with the official Python MCP SDK 1.x
# (PyPI mcp==1.26.0), which speaks 2025-11-25: over HTTP (initialize, sessions,
# GET stream; test_legacy_peer.py) and over stdio, its `stdio_client` launching
# `genmcp serve --stdio` as a desktop host does (test_stdio_peer.py).
# The same harness as scripts/python-peer.sh (see there for GENMCP_BIN, PYTHON),
# with tests/python_legacy and its own venv in .cache/python-legacy-peer.
#
# Usage: scripts/python-legacy-peer.sh [extra pytest args...]
set -euo pipefail
export PEER_SUITE=python_legacy PEER_MCP=1.26.0 PEER_NAME=python-legacy-peer
exec bash "$(dirname "${BASH_SOURCE[0]}")/python-peer.sh" "$@"
