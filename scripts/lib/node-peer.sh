# Sourced by the scripts that run a Node.js peer against genmcp
# (ts-stdio-peer.sh, ts-resume-peer.sh, apps-host.sh). The caller sets ROOT
# (the repository) and defines log() and die() first.

# The server binary: GENMCP_BIN, else target/debug/genmcp (under
# CARGO_TARGET_DIR when set); exported as GENMCP_BIN. Builds nothing.
genmcp_bin() {
  GENMCP_BIN="${GENMCP_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/genmcp}"
  [[ "$GENMCP_BIN" = /* ]] || GENMCP_BIN="$ROOT/$GENMCP_BIN"
  [[ -x "$GENMCP_BIN" ]] || die "server binary not found or not executable: $GENMCP_BIN
  build it first with: cargo build --bin genmcp   (or set GENMCP_BIN)"
  export GENMCP_BIN
}

# npm_install NAME DIR MODULE [VERSION]: installs DIR/package.json into
# $ROOT/.cache/NAME (git-ignored) unless that was done for the same
# package.json and node_modules/MODULE is there (at VERSION, when given).
# Needs Node >= 18 with npm and the npm registry. Sets CACHE.
npm_install() {
  local name="$1" dir="$2" module="$3" version="${4:-}"
  command -v node >/dev/null 2>&1 || die "node not found (need Node >= 18)"
  command -v npm >/dev/null 2>&1 || die "npm not found"
  node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' \
    || die "node $(node -v) is too old; need Node >= 18"
  CACHE="$ROOT/.cache/$name"
  local want stamp have
  want="$(sha256sum "$dir/package.json" | cut -d' ' -f1)"
  stamp="$CACHE/.package-stamp"
  have="$(node -p "require('$CACHE/node_modules/$module/package.json').version" 2>/dev/null || true)"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -n "$have" && ( -z "$version" || "$have" == "$version" ) ]]; then
    log "reusing $CACHE ($module $have)"
    return
  fi
  log "installing $dir/package.json into $CACHE"
  rm -rf "$CACHE"
  mkdir -p "$CACHE"
  cp "$dir/package.json" "$CACHE/package.json"
  local try
  for try in 1 2 3; do
    (cd "$CACHE" && npm install --no-audit --no-fund --loglevel=error --fetch-retries=5) && break
    [[ "$try" == 3 ]] && die "npm install failed (3 tries)"
    log "npm install failed (try $try of 3); again"
    rm -rf "$CACHE/node_modules"
    sleep $((try * 5))
  done
  printf '%s\n' "$want" > "$stamp"
}
