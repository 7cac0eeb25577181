#!/usr/bin/env bash
# Installs what geoquota needs on a fresh machine, idempotently:
#   - pnpm (pinned by package.json's packageManager) and the node packages (frozen lockfile);
#   - redis-server (Debian's package) when missing;
#   - the real Toxiproxy server, built from its Go module into .bin/ when missing.
# Called by both README commands; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

PNPM_VERSION=$(node -p 'require("./package.json").packageManager.split("@")[1]')
TOXIPROXY_VERSION=v2.12.0

say() { printf '[bootstrap] %s\n' "$*" >&2; }
apt_updated=""
apt_install() { # apt_install PACKAGE: Debian's package, with one `apt-get update` per run
  export DEBIAN_FRONTEND=noninteractive
  if [ -z "$apt_updated" ]; then apt-get update -qq >/dev/null || die "apt-get update failed"; apt_updated=1; fi
  apt-get install -y -qq "$1" >/dev/null || die "apt-get install $1 failed"
}
die() { printf '[bootstrap] error: %s\n' "$*" >&2; exit 1; }

command -v node >/dev/null || die "Node.js 20+ is required (https://nodejs.org); not found on PATH"
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' \
  || die "Node.js 20+ is required, found $(node --version)"

# --- pnpm, pinned -----------------------------------------------------------
if ! command -v pnpm >/dev/null || [ "$(pnpm --version 2>/dev/null)" != "$PNPM_VERSION" ]; then
  say "installing pnpm@$PNPM_VERSION"
  if command -v corepack >/dev/null && corepack enable >/dev/null 2>&1 && corepack prepare "pnpm@$PNPM_VERSION" --activate >/dev/null 2>&1 \
     && [ "$(pnpm --version 2>/dev/null)" = "$PNPM_VERSION" ]; then
    :
  else
    npm install -g "pnpm@$PNPM_VERSION" >/dev/null 2>&1 || die "could not install pnpm@$PNPM_VERSION with npm"
  fi
fi

# --- node packages ------------------------------------------------------------
if [ ! -f node_modules/.modules.yaml ] || [ pnpm-lock.yaml -nt node_modules/.modules.yaml ] || [ -n "${GQ_FORCE_INSTALL:-}" ]; then
  say "installing node packages (pnpm install --frozen-lockfile)"
  pnpm install --frozen-lockfile --reporter=silent || die "pnpm install failed"
fi

# --- redis-server ---------------------------------------------------------------
if ! command -v redis-server >/dev/null && [ -z "${GQ_REDIS_SERVER:-}" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing Debian's redis-server"
    apt_install redis-server
    # The package may start a system instance on 6379; the tests start their own.
  else
    die "redis-server not found: install it (Debian/Ubuntu: 'sudo apt-get install redis-server'; macOS: 'brew install redis') or set GQ_REDIS_SERVER to its path"
  fi
fi

# --- openssl (the TLS transport tests make their certificates with it) -----------
if ! command -v openssl >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing Debian's openssl"
    apt_install openssl
  else
    die "openssl not found: install it (Debian/Ubuntu: 'sudo apt-get install openssl')"
  fi
fi

# --- Toxiproxy server -----------------------------------------------------------
mkdir -p .bin
if [ -z "${GQ_TOXIPROXY_SERVER:-}" ] && [ ! -x .bin/toxiproxy-server ]; then
  if command -v toxiproxy-server >/dev/null; then
    ln -sf "$(command -v toxiproxy-server)" .bin/toxiproxy-server
  elif command -v go >/dev/null; then
    say "building Toxiproxy $TOXIPROXY_VERSION from its Go module (go install)"
    tmp=$(mktemp -d)
    GOBIN="$tmp" GOFLAGS=-mod=mod go install "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION" \
      || { rm -rf "$tmp"; die "go install of Toxiproxy failed"; }
    mv "$tmp/server" .bin/toxiproxy-server
    rm -rf "$tmp"
  else
    die "no Toxiproxy server: install Go 1.22+ (https://go.dev/dl) and re-run, or put a toxiproxy-server binary on PATH or in GQ_TOXIPROXY_SERVER"
  fi
fi
say "ready: node $(node --version), pnpm $(pnpm --version), $(redis-server --version | cut -d' ' -f1-3), toxiproxy $(.bin/toxiproxy-server -version 2>/dev/null | head -1 || echo "${GQ_TOXIPROXY_SERVER:-}")"
