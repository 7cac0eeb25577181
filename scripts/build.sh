#!/usr/bin/env bash
# Builds every package to dist/ (JavaScript + declarations, tsc project
# references, incremental: a second run with nothing changed takes seconds)
# and puts the Lua scripts and their library (lua/lib/) inside the redis
# package (packages/redis/lua/, git-ignored; the top-level lua/ stays their
# source). Processes (the CLI and everything it spawns) run the built files,
# bundled by scripts/bundle.mjs into one file per command
# (packages/cli/dist/bundle/); tests import the sources.
# Self-sufficient (`npm run build` on its own): the pinned pnpm first on PATH,
# as test.sh and demo.sh have it, and the packages installed on a fresh clone.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/pnpm.sh && gq_ensure_pnpm
[ -e node_modules/.modules.yaml ] || bash scripts/bootstrap.sh
pnpm exec tsc -b tsconfig.build.json
rm -rf packages/redis/lua && mkdir -p packages/redis/lua/lib && cp lua/*.lua packages/redis/lua/
cp lua/lib/*.lua packages/redis/lua/lib/
cp packages/bench/src/*.mjs packages/bench/dist/
node scripts/bundle.mjs
