#!/usr/bin/env bash
# The pinned pnpm, installed under the project (.bin/pnpm) so that no global
# state matters: not a corepack shim at /usr/bin/pnpm (where `npm install -g`
# fails with EEXIST), not a corepack that cannot verify its download, not a
# global pnpm of another version, not a missing write permission on the global
# prefix. Sourced by bootstrap.sh, test.sh and demo.sh; usable on its own:
#   source scripts/lib/pnpm.sh && gq_ensure_pnpm   # puts the pinned pnpm first on PATH
# Every failing step prints the underlying tool's own message.

# gq_ensure_pnpm [ROOT]: make `pnpm` on PATH the version in package.json's packageManager.
gq_ensure_pnpm() {
  local root=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
  local want prefix bin have log
  want=$(node -p 'require(process.argv[1]).packageManager.split("@")[1]' "$root/package.json") || {
    printf '[bootstrap] error: cannot read packageManager from %s/package.json\n' "$root" >&2; return 1; }
  prefix="$root/.bin/pnpm"
  bin="$prefix/node_modules/.bin"
  if [ -x "$bin/pnpm" ] && [ "$("$bin/pnpm" --version 2>/dev/null)" = "$want" ]; then
    export PATH="$bin:$PATH"; return 0
  fi
  printf '[bootstrap] installing pnpm@%s under .bin/pnpm (npm install --prefix)\n' "$want" >&2
  mkdir -p "$prefix"
  log=$(mktemp)
  # --prefix keeps it out of the global prefix; no package.json is written at the root.
  if npm install --prefix "$prefix" --no-save --no-audit --no-fund --loglevel=error "pnpm@$want" >"$log" 2>&1 \
     && [ "$("$bin/pnpm" --version 2>/dev/null)" = "$want" ]; then
    rm -f "$log"; export PATH="$bin:$PATH"; return 0
  fi
  printf '[bootstrap] npm install --prefix %s pnpm@%s failed:\n' "$prefix" "$want" >&2
  sed 's/^/[bootstrap]   /' "$log" >&2
  rm -f "$log"
  # Last resort: a pnpm already on PATH at the pinned version (a corepack shim
  # that cannot download reports an error here, not a version).
  have=$(pnpm --version 2>&1 | tail -n 1) || true
  if [ "$have" = "$want" ]; then
    printf '[bootstrap] using the pnpm on PATH (%s), which has the pinned version\n' "$(command -v pnpm)" >&2
    return 0
  fi
  printf '[bootstrap] error: could not install pnpm@%s; the pnpm on PATH (%s) says: %s\n' \
    "$want" "$(command -v pnpm || echo none)" "${have:-nothing}" >&2
  return 1
}
