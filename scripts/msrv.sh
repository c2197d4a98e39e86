#!/usr/bin/env bash
# The minimum supported Rust version (`rust-version` in Cargo.toml) checked:
#
# 1. every crate a user of either package compiles declares a
#    `rust-version` no newer than ours (from `cargo metadata`);
# 2. with that toolchain itself: `cargo +VERSION check` of the library
#    (no features, and every feature) and of the `genmcp` command. The
#    toolchain is installed with rustup (minimal profile) when it is missing.
#
# When rustup cannot install the toolchain (no network to its server), step 2
# is replaced by what can be checked without it, and the script says so:
# clippy's `incompatible_msrv` lint (standard-library items newer than
# `rust-version`; `cargo clippy -- -D warnings` in CI denies it) on both
# packages with every feature. Tests, benches and dev-dependencies are not
# covered: the promise is for code that depends on genmcp.
#
#   scripts/msrv.sh
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET="${CARGO_TARGET_DIR:-$PWD/target}"

msrv=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
cli_msrv=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' cli/Cargo.toml | head -1)
if [ -z "$msrv" ] || [ "$msrv" != "$cli_msrv" ]; then
  echo "msrv: Cargo.toml and cli/Cargo.toml must declare one rust-version (got '$msrv' and '$cli_msrv')" >&2
  exit 1
fi

echo "msrv: $msrv; the rust-version of every crate a user compiles"
cargo metadata --format-version 1 --all-features --locked | python3 -c '
import json, sys
msrv = sys.argv[1]
def version(text):
    parts = [int(p) for p in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))
meta = json.load(sys.stdin)
packages = {p["id"]: p for p in meta["packages"]}
nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
# Normal and build dependencies reachable from the two packages: what a
# dependent compiles (dev-dependencies are not).
seen, stack = set(), list(meta["workspace_members"])
while stack:
    node = stack.pop()
    if node in seen:
        continue
    seen.add(node)
    for dep in nodes[node]["deps"]:
        if any(kind["kind"] in (None, "build") for kind in dep["dep_kinds"]):
            stack.append(dep["pkg"])
newer = sorted(
    (packages[i]["name"], packages[i]["version"], packages[i]["rust_version"])
    for i in seen
    if packages[i]["rust_version"] and version(packages[i]["rust_version"]) > version(msrv)
)
declared = sum(1 for i in seen if packages[i]["rust_version"])
print(f"msrv: {len(seen)} crates, {declared} declare a rust-version, {len(newer)} newer than {msrv}")
for name, ver, rv in newer:
    print(f"msrv: {name} {ver} needs Rust {rv}", file=sys.stderr)
sys.exit(1 if newer else 0)
' "$msrv"

if rustup toolchain list | grep -q "^$msrv" || rustup toolchain install "$msrv" --profile minimal >/dev/null 2>&1; then
  echo "msrv: cargo +$msrv check (the library with no feature and with every feature; the genmcp command)"
  export CARGO_TARGET_DIR="$TARGET/msrv"
  cargo "+$msrv" check --locked --quiet -p genmcp --no-default-features
  cargo "+$msrv" check --locked --quiet -p genmcp --all-features
  cargo "+$msrv" check --locked --quiet -p genmcp-cli --lib --bins
  echo "msrv: Rust $msrv builds both packages"
else
  echo "msrv: rustup could not install Rust $msrv here; checking with clippy's incompatible_msrv instead"
  cargo clippy --locked --quiet -p genmcp --all-features -- -D clippy::incompatible_msrv
  cargo clippy --locked --quiet -p genmcp-cli --lib --bins -- -D clippy::incompatible_msrv
  echo "msrv: no standard-library item newer than $msrv (language features were not checked)"
fi
