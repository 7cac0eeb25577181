#!/usr/bin/env bash
# Installs what geoquota needs on a fresh machine, idempotently:
#   - pnpm (pinned by package.json's packageManager) and the node packages (frozen lockfile);
#   - redis-server, openssl, spin, gcc and promtool (Debian's packages) when missing;
#   - the real Toxiproxy server, built from its Go module into .bin/ when missing;
#   - faketime, and a redis-server built with libc malloc into .bin/ (clock-fault tests) when missing.
# Called by both README commands; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

PNPM_VERSION=$(node -p 'require("./package.json").packageManager.split("@")[1]')
TOXIPROXY_VERSION=v2.12.0

say() { printf '[bootstrap] %s\n' "$*" >&2; }
# apt_install PACKAGE (Debian), shared with scripts/test-under-load.sh.
# shellcheck source=lib/apt.sh
APT_LOG_PREFIX="[bootstrap]"
source scripts/lib/apt.sh
die() { printf '[bootstrap] error: %s\n' "$*" >&2; exit 1; }

command -v node >/dev/null || die "Node.js 20+ is required (https://nodejs.org); not found on PATH"
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' \
  || die "Node.js 20+ is required, found $(node --version)"

# --- pnpm, pinned, under .bin/pnpm (scripts/lib/pnpm.sh says why) -------------
# shellcheck source=lib/pnpm.sh
source scripts/lib/pnpm.sh
gq_ensure_pnpm "$ROOT" || die "could not install pnpm@$PNPM_VERSION (the messages above say why)"

# --- node packages ------------------------------------------------------------
if [ ! -f node_modules/.modules.yaml ] || [ pnpm-lock.yaml -nt node_modules/.modules.yaml ] || [ -n "${GQ_FORCE_INSTALL:-}" ]; then
  say "installing node packages (pnpm install --frozen-lockfile)"
  pnpm install --frozen-lockfile --reporter=append-only || die "pnpm install failed (its messages are above)"
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

# --- Debian tools the tests use ---------------------------------------------------
# openssl: the TLS tests make their certificates; spin + a C compiler: the
# Promela model check (model/); promtool (Debian's prometheus): the alert rules.
need_tool() { # need_tool COMMAND PACKAGE
  command -v "$1" >/dev/null && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing Debian's $2 (for $1)"
    apt_install "$2"
  else
    die "$1 not found: install it (Debian/Ubuntu: 'sudo apt-get install $2')"
  fi
}
need_tool openssl openssl
need_tool spin spin
need_tool cc gcc
need_tool promtool prometheus
# nginx: examples/nginx is tested with Debian's real nginx (auth_request).
need_tool nginx nginx

# --- A redis-server whose clock a test can step (the clock-fault tests) ------------
# Debian's redis-server (jemalloc) aborts under libfaketime 0.9.10 ("unexpected
# recursive calls to clock_gettime()"). The same release built from Debian's source
# package with libc malloc runs under it, its TIME following FAKETIME_TIMESTAMP_FILE
# (re-read on every call with FAKETIME_NO_CACHE=1): test/clock-step.int.test.ts.
need_tool faketime faketime
mkdir -p .bin
if [ -z "${GQ_REDIS_FAKETIME_SERVER:-}" ] && [ ! -x .bin/redis-server-libc ]; then
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null \
    || die "no .bin/redis-server-libc: build Redis with 'make MALLOC=libc' and put its redis-server there (or in GQ_REDIS_FAKETIME_SERVER)"
  # Source packages need a deb-src entry; added once, for Debian's own archive only.
  if ! grep -rqs '^Types: deb-src\|^deb-src ' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    say "adding a deb-src entry for Debian's source packages"
    suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
    printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$suite" "$suite" >/etc/apt/sources.list.d/geoquota-deb-src.sources
    apt_updated=""
  fi
  if [ -z "$apt_updated" ]; then apt-get update -qq >/dev/null 2>&1 || die "apt-get update failed"; apt_updated=1; fi
  say "building redis-server with libc malloc from Debian's redis source package (for libfaketime)"
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get source --download-only -qq redis >/dev/null 2>&1 && tar xzf redis_*.orig.tar.gz \
    && cd redis-*/ && make -j2 MALLOC=libc BUILD_TLS=no >"$tmp/make.log" 2>&1) \
    || { tail -20 "$tmp/make.log" 2>/dev/null >&2; rm -rf "$tmp"; die "building redis-server with libc malloc failed"; }
  cp "$tmp"/redis-*/src/redis-server .bin/redis-server-libc
  rm -rf "$tmp"
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
# --- The Envoy RLS client and API descriptor (Go: Envoy's generated API module) ------
# test/go-rls-client pins github.com/envoyproxy/go-control-plane/envoy and grpc-go in its
# go.mod/go.sum. rls-client drives the RLS in the tests as a client nobody here wrote;
# rlqs-client acts as Envoy's rate_limit_quota filter (RLQS streams, local token buckets);
# rls-descriptor prints the API's FileDescriptorSet (packages/rls/proto, checked by a test).
# Built once: the Go build is CPU-heavy.
go_rls=test/go-rls-client
go_rls_stale() { # $1: a binary in .bin; stale when absent or older than the module's sources
  [ ! -x ".bin/$1" ] || [ "$go_rls/go.sum" -nt ".bin/$1" ] \
    || [ -n "$(find "$go_rls" -name '*.go' -newer ".bin/$1" 2>/dev/null)" ]
}
if go_rls_stale rls-client || go_rls_stale rls-descriptor || go_rls_stale rlqs-client; then
  command -v go >/dev/null || die "the Go toolchain (1.22+) is needed to build the Envoy RLS client: https://go.dev/dl"
  say "building the Envoy RLS client from Envoy's Go API module (go build)"
  (cd "$go_rls" && GOFLAGS=-mod=readonly go build -o "$ROOT/.bin/rls-client" ./cmd/rls-client \
    && GOFLAGS=-mod=readonly go build -o "$ROOT/.bin/rls-descriptor" ./cmd/rls-descriptor \
    && GOFLAGS=-mod=readonly go build -o "$ROOT/.bin/rlqs-client" ./cmd/rlqs-client) \
    || die "go build of $go_rls failed (its messages are above)"
fi
say "ready: node $(node --version), pnpm $(pnpm --version), $(redis-server --version | cut -d' ' -f1-3), toxiproxy $(.bin/toxiproxy-server -version 2>/dev/null | head -1 || echo "${GQ_TOXIPROXY_SERVER:-}")"
