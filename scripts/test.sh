#!/usr/bin/env bash
# The whole test suite, as the README's second command and CI run it:
# bootstrap (installs what is missing), typecheck, lint, circular-import check,
# then every vitest tier (unit, simulation, real Redis, real Toxiproxy, bench smoke).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
step() { printf '\n== %s\n' "$*"; }
step "typecheck (tsc --noEmit, strict)"
pnpm exec tsc -p tsconfig.json --noEmit
step "lint + format check (biome)"
pnpm exec biome check .
step "circular imports (madge)"
pnpm exec madge --circular --extensions ts --ts-config tsconfig.json packages test
step "tests (vitest: every package and test/)"
pnpm exec vitest run "$@"
