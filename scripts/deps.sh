#!/usr/bin/env bash
# What depending on genmcp costs: the crates a server on it compiles
# (`cargo tree -e normal`, unique packages, the server itself included) for
# each feature set, against a bound that makes CI fail when it grows
# (docs/dependencies.md).
#
#   scripts/deps.sh            # count and check every set
#   scripts/deps.sh --build    # also time a clean build of each (slow)
#
# Each set is a throwaway server crate under ${CARGO_TARGET_DIR:-target}/deps/
# depending on this checkout by path, pinned by a copy of Cargo.lock.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
build=""
[ "${1:-}" = "--build" ] && build=1

# name | dependency line | bound (crates)
sets=(
  "minimal|genmcp = { path = \"$ROOT\", default-features = false }|999"
  "default|genmcp = { path = \"$ROOT\" }|999"
  "redis|genmcp = { path = \"$ROOT\", default-features = false, features = [\"redis\"] }|999"
  "jwt|genmcp = { path = \"$ROOT\", default-features = false, features = [\"jwt\"] }|999"
  "all|genmcp = { path = \"$ROOT\", features = [\"jwt\", \"redis\", \"schema-validation\"] }|999"
)

status=0
for set in "${sets[@]}"; do
  IFS='|' read -r name dep bound <<<"$set"
  dir="$TARGET/deps/$name"
  mkdir -p "$dir/src"
  cat >"$dir/Cargo.toml" <<TOML
[package]
name = "deps-$name"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
$dep

[workspace]
TOML
  echo 'fn main() {}' >"$dir/src/main.rs"
  cp "$ROOT/Cargo.lock" "$dir/Cargo.lock"
  crates=$(cd "$dir" && cargo tree -e normal --prefix none 2>/dev/null \
    | sed 's/ (\*)//' | sort -u | wc -l)
  if [ "$crates" -le 1 ]; then
    echo "deps: $name: cargo tree failed" >&2
    (cd "$dir" && cargo tree -e normal >/dev/null) || true
    status=1
    continue
  fi
  line="deps: $name: $crates crates (bound $bound)"
  if [ -n "$build" ]; then
    start=$(date +%s)
    (cd "$dir" && CARGO_TARGET_DIR="$dir/target" cargo build --release --quiet)
    line="$line, clean release build $(( $(date +%s) - start )) s"
    rm -rf "$dir/target"
  fi
  echo "$line"
  if [ "$crates" -gt "$bound" ]; then
    echo "deps: $name grew past its bound: $crates > $bound" >&2
    status=1
  fi
done
exit "$status"
