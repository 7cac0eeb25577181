#!/usr/bin/env bash
# The whole test suite, as the README's second command and CI run it:
# bootstrap (installs what is missing), build, typecheck, lint, circular-import check,
# then every vitest tier (unit, simulation, real Redis, real Toxiproxy, bench smoke),
# then the planted-bug table (each planted bug must be caught).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
# The pinned pnpm lives under .bin/pnpm: put it first on PATH here too.
source scripts/lib/pnpm.sh && gq_ensure_pnpm
step() { printf '\n== %s\n' "$*"; }
mkdir -p .tmp
# Processes the tests spawn (the CLI, local clusters) run the built JS: build
# first (incremental; seconds when nothing changed).
step "build (tsc -b: dist/ of every package, the Lua into the redis package)"
bash scripts/build.sh
if [ "$#" -gt 0 ]; then
  # `npm test -- <vitest args>`: just vitest, as asked.
  exec pnpm exec vitest run "$@"
fi
step "typecheck (tsc --noEmit, strict)"
pnpm exec tsc -p tsconfig.json --noEmit
step "lint + format check (biome)"
pnpm exec biome check .
step "circular imports (madge)"
pnpm exec madge --circular --extensions ts --ts-config tsconfig.json packages test
projects=()
for dir in packages/*/; do projects+=(--project "$(basename "$dir")"); done
step "package tests: unit, simulation, real Redis, real Toxiproxy (files in parallel)"
status=0
pnpm exec vitest run "${projects[@]}" --reporter=default --reporter=json --outputFile.json=.tmp/vitest-packages.json || status=$?
# The cross-package tests start whole clusters (several processes each); on a
# 2-core machine they run one file at a time so their deadlines stay meaningful.
step "cross-package tests: clusters, chaos, bench smoke (one file at a time)"
pnpm exec vitest run --project integration --no-file-parallelism --reporter=default --reporter=json --outputFile.json=.tmp/vitest-integration.json || status=$?
# Every planted bug must make its own tests fail (test/planted/README.md);
# each row runs only its tests, two rows at a time.
step "planted bugs: each row's patch must make its tests fail"
bash scripts/planted.sh || status=$?
node -e '
const fs = require("fs");
let passed = 0, failed = 0, skipped = 0;
const names = [];
for (const f of [".tmp/vitest-packages.json", ".tmp/vitest-integration.json"]) {
  if (!fs.existsSync(f)) { failed++; names.push(`${f}: missing (that tier did not report)`); continue; }
  const r = JSON.parse(fs.readFileSync(f, "utf8"));
  passed += r.numPassedTests; failed += r.numFailedTests; skipped += r.numPendingTests + r.numTodoTests;
  // A file that failed to load has no assertion results: name the file.
  for (const file of r.testResults) {
    const where = require("path").relative(process.cwd(), file.name);
    const bad = file.assertionResults.filter((a) => a.status === "failed");
    if (file.status === "failed" && bad.length === 0) names.push(`${where}: ${String(file.message || "failed to run").split("\n")[0]}`);
    for (const a of bad) names.push(`${where} > ${a.fullName}: ${String(a.failureMessages[0] || "").split("\n")[0].slice(0, 300)}`);
  }
}
// The end of the log is what a CI excerpt keeps: name every failed test there.
for (const n of names) console.log(`failed  ${n}`);
console.log(`\ntests: ${passed} passed, ${failed} failed` + (skipped ? `, ${skipped} skipped` : ""));
'
exit "$status"
