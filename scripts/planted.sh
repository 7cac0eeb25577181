#!/usr/bin/env bash
# The planted-bug table (test/planted/README.md): every row's patch, applied
# alone to a copy of the repository, must make that row's tests fail.
# Arguments: [--jobs 1|2] [row id ...] (default: every row, two at a time).
set -euo pipefail
cd "$(dirname "$0")/.."
exec node scripts/planted.mjs "$@"
