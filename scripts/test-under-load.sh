#!/usr/bin/env bash
# The whole test command (scripts/test.sh, i.e. `npm test`) with a CPU hog on
# both cores beside it (`stress-ng --cpu 2`, Debian's; installed when missing),
# then the figures: wall time, tests passed/failed, the load average sampled
# every 5 s. Exits with the suite's status. stress-ng is stopped on every exit
# (success, failure, Ctrl-C, SIGTERM).
#
#   bash scripts/test-under-load.sh                 # the whole suite under load
#   bash scripts/test-under-load.sh -- test/x.test.ts  # args after -- go to scripts/test.sh (vitest only)
#
# GQ_STRESS_CPUS sets the number of stress-ng CPU workers (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '[under-load] %s\n' "$*" >&2; }
die() { printf '[under-load] error: %s\n' "$*" >&2; exit 1; }
APT_LOG_PREFIX="[under-load]"
# shellcheck source=lib/apt.sh
source scripts/lib/apt.sh

if [ "${1:-}" = "--" ]; then shift; elif [ "$#" -gt 0 ]; then
  die "unexpected argument '$1': pass test arguments after --, e.g. scripts/test-under-load.sh -- test/x.test.ts"
fi
cpus="${GQ_STRESS_CPUS:-2}"
[[ "$cpus" =~ ^[1-9][0-9]?$ ]] || die "GQ_STRESS_CPUS: expected an integer 1..99, got '$cpus'"

if ! command -v stress-ng >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing Debian's stress-ng"
    apt_install stress-ng
  else
    die "stress-ng not found: install it (Debian/Ubuntu: 'sudo apt-get install stress-ng')"
  fi
fi

mkdir -p .tmp
log=.tmp/test-under-load.log
loads=.tmp/test-under-load.loadavg
: >"$loads"
stress_pid=""
sampler_pid=""
test_pid=""
cleanup() {
  # The test command runs in its own process group (setsid): end all of it
  # (vitest, the servers it started) when this script is interrupted.
  if [ -n "$test_pid" ]; then kill -TERM -- "-$test_pid" 2>/dev/null || true; wait "$test_pid" 2>/dev/null || true; fi
  # stress-ng forwards SIGTERM to its workers and waits for them.
  if [ -n "$stress_pid" ]; then kill -TERM "$stress_pid" 2>/dev/null || true; wait "$stress_pid" 2>/dev/null || true; fi
  if [ -n "$sampler_pid" ]; then kill "$sampler_pid" 2>/dev/null || true; wait "$sampler_pid" 2>/dev/null || true; fi
  stress_pid="" sampler_pid="" test_pid=""
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM

# --timeout: a safety net should this script be SIGKILLed (no trap runs then).
stress-ng --cpu "$cpus" --timeout 4h --quiet &
stress_pid=$!
( while :; do cut -d' ' -f1 /proc/loadavg >>"$loads"; sleep 5; done ) &
sampler_pid=$!
say "stress-ng --cpu $cpus running (pid $stress_pid); the test command's output goes to $log too"

start=$(date +%s)
status=0
# In the background and awaited, so a signal's trap runs at once (bash defers
# traps while a foreground command runs); tail shows the output as it comes.
: >"$log"
setsid bash scripts/test.sh "$@" >"$log" 2>&1 &
test_pid=$!
tail -n +1 -f --pid="$test_pid" "$log" &
tail_pid=$!
wait "$test_pid" || status=$?
test_pid=""
wait "$tail_pid" 2>/dev/null || true
end=$(date +%s)
cleanup

wall=$((end - start))
# The full run ends with "tests: N passed, M failed"; a vitest-only run (args) with "Tests  N passed (…)".
summary=$(grep -E '^tests: [0-9]+ passed' "$log" | tail -1 || true)
if [ -z "$summary" ]; then
  summary=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^ *Tests +' | tail -1 | sed 's/^ *Tests */tests: /' || true)
fi
load=$(awk 'NR == 1 { min = max = $1 } { s += $1; if ($1 < min) min = $1; if ($1 > max) max = $1 }
  END { if (NR) printf "1-min load average over %d samples: min %.2f, mean %.2f, max %.2f", NR, min, s / NR, max }' "$loads")
printf '\n== under load (stress-ng --cpu %s)\n' "$cpus"
printf 'wall time: %dm%02ds\n' $((wall / 60)) $((wall % 60))
printf '%s\n' "${summary:-tests: no summary line found in $log}"
printf '%s\n' "${load:-load average: no samples}"
printf 'exit status: %d\n' "$status"
exit "$status"
