#!/usr/bin/env bash
# Builds and runs a server on genmcp with no optional feature
# (scripts/minimal_server/main.rs): it must start, serve a tool whose schema
# is not checked, and run a task to completion in this one process. A crate
# of its own under ${CARGO_TARGET_DIR:-target}/minimal-server/, outside the
# workspace (whose tests always have every feature), pinned by a copy of
# Cargo.lock.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
dir="$TARGET/minimal-server"
mkdir -p "$dir/src"
cat >"$dir/Cargo.toml" <<TOML
[package]
name = "minimal-server"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
genmcp = { path = "$ROOT", default-features = false }
serde_json = "1"
tokio = { version = "1", features = ["time"] }

[workspace]
TOML
cp "$ROOT/scripts/minimal_server/main.rs" "$dir/src/main.rs"
cp "$ROOT/Cargo.lock" "$dir/Cargo.lock"
cd "$dir"
CARGO_TARGET_DIR="$TARGET" cargo run --quiet
