#!/usr/bin/env bash
# The main job: bootstrap, then the geoquota demo (a local multi-region cluster with traffic).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
# The pinned pnpm lives under .bin/pnpm: put it first on PATH here too.
source scripts/lib/pnpm.sh && gq_ensure_pnpm
bash scripts/build.sh
exec node packages/cli/bin/geoquota.mjs demo "$@"
