#!/usr/bin/env bash
# What depending on genmcp costs: the crates a server on it compiles
# (`cargo tree -e normal`, unique packages, the server itself included) for
# each feature set, against a bound that makes CI fail when it grows
# (docs/dependencies.md).
#
#   scripts/deps.sh            # count and check every set
#   scripts/deps.sh --build    # also time a clean release build of each (slow)
#   scripts/deps.sh --compare  # also count the comparison servers (rmcp with
#                              # axum; actix-web alone), which need the
#                              # crates.io index; never checked against a bound
#   scripts/deps.sh --only=minimal,rmcp   # only these sets
#
# Each set is a throwaway server crate under ${CARGO_TARGET_DIR:-target}/deps/
# depending on this checkout by path, pinned by a copy of Cargo.lock.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
build=""
compare=""
only=""
for arg in "$@"; do
  case "$arg" in
    --build) build=1 ;;
    --compare) compare=1 ;;
    --only=*) only=",${arg#--only=}," ;;
    *) echo "usage: $0 [--build] [--compare] [--only=SET,SET...]" >&2; exit 2 ;;
  esac
done

# The tokio features genmcp itself uses, for the actix-web comparison.
TOKIO='tokio = { version = "1", features = ["sync", "time", "macros", "rt", "io-util", "io-std", "signal", "rt-multi-thread", "net"] }'

# name | dependency lines (\n between) | bound (crates; "-" for none) | lock
# ("repo": a copy of this checkout's Cargo.lock; "fresh": resolved anew)
sets=(
  "minimal|genmcp = { path = \"$ROOT\", default-features = false }|137|repo"
  "default|genmcp = { path = \"$ROOT\" }|172|repo"
  "redis|genmcp = { path = \"$ROOT\", default-features = false, features = [\"redis\"] }|152|repo"
  "jwt|genmcp = { path = \"$ROOT\", default-features = false, features = [\"jwt\"] }|181|repo"
  "skills|genmcp = { path = \"$ROOT\", default-features = false, features = [\"skills\"] }|143|repo"
  "otel|genmcp = { path = \"$ROOT\", default-features = false, features = [\"otel\"] }|178|repo"
  "all|genmcp = { path = \"$ROOT\", features = [\"jwt\", \"otel\", \"redis\", \"schema-validation\", \"skills\"] }|270|repo"
)
if [ -n "$compare" ]; then
  sets+=(
    "rmcp|rmcp = { version = \"=3.11.0\", features = [\"server\", \"transport-streamable-http-server\", \"macros\"] }\naxum = \"0.8\"\ntokio = { version = \"1\", features = [\"full\"] }|-|fresh"
    "actix-web|actix = \"0.13\"\nactix-rt = \"2\"\nactix-web = { version = \"4\", default-features = false }\n$TOKIO\nserde_json = \"1\"|-|repo"
  )
fi

status=0
for set in "${sets[@]}"; do
  IFS='|' read -r name dep bound lock <<<"$set"
  if [ -n "$only" ] && [[ "$only" != *",$name,"* ]]; then continue; fi
  dir="$TARGET/deps/$name"
  mkdir -p "$dir/src"
  cat >"$dir/Cargo.toml" <<TOML
[package]
name = "deps-$name"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
$(printf '%b' "$dep")

[workspace]
TOML
  echo 'fn main() {}' >"$dir/src/main.rs"
  if [ "$lock" = repo ]; then
    cp "$ROOT/Cargo.lock" "$dir/Cargo.lock"
  elif [ ! -f "$dir/Cargo.lock" ]; then
    (cd "$dir" && cargo generate-lockfile --quiet)
  fi
  crates=$(cd "$dir" && cargo tree -e normal --prefix none 2>/dev/null \
    | sed 's/ (\*)//' | sort -u | wc -l)
  if [ "$crates" -le 1 ]; then
    echo "deps: $name: cargo tree failed" >&2
    (cd "$dir" && cargo tree -e normal >/dev/null) || true
    status=1
    continue
  fi
  line="deps: $name: $crates crates"
  [ "$bound" != - ] && line="$line (bound $bound)"
  if [ -n "$build" ]; then
    rm -rf "$dir/target"
    load_before=$(cut -d' ' -f1 /proc/loadavg)
    # Wall time depends on what else the machine runs; the CPU time (user +
    # system, of cargo and every compiler it starts) much less.
    times=$( { TIMEFORMAT='%R %U %S'; time (cd "$dir" && CARGO_TARGET_DIR="$dir/target" cargo build --release --quiet); } 2>&1 | tail -1)
    read -r wall user sys <<<"$times"
    cpu=$(python3 -c "print(round($user + $sys))")
    line="$line, clean release build: ${cpu} CPU-s, ${wall%.*} s wall (load $load_before -> $(cut -d' ' -f1 /proc/loadavg), $(nproc) CPUs)"
    rm -rf "$dir/target"
  fi
  echo "$line"
  if [ "$bound" != - ] && [ "$crates" -gt "$bound" ]; then
    echo "deps: $name grew past its bound: $crates > $bound" >&2
    status=1
  fi
done
exit "$status"
