#!/usr/bin/env bash
# The main job: bootstrap, then the geoquota demo (a local multi-region cluster with traffic).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec node packages/cli/bin/geoquota.mjs demo "$@"
