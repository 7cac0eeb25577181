#!/usr/bin/env bash
# Compiles and runs one Spin verification of model/geoquota.pml.
#   model/check.sh <workdir> <exhaustive|bounded|plant> [-DNAME[=V] ...]
# The -D flags go to spin (model parameters, one PLANT_*); generated files
# (pan.c, pan, *.trail) stay in <workdir>. Prints pan's report; for a planted
# variant that fails, replays the trail and prints its steps and length:
#   TRAIL_LENGTH <steps>
# Exit status: 0 when pan ran (whatever it found), 2 on a tool error.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[ "$#" -ge 2 ] || { echo "usage: $0 <workdir> <exhaustive|bounded|plant> [-Dflags...]" >&2; exit 2; }
work="$1"; mode="$2"; shift 2
for tool in spin gcc; do
  command -v "$tool" >/dev/null || { echo "check.sh: $tool not found (scripts/bootstrap.sh installs it)" >&2; exit 2; }
done
mkdir -p "$work"
cp "$here/geoquota.pml" "$work/"
cd "$work"
spin -a "$@" geoquota.pml >spin.out 2>&1 || { cat spin.out >&2; exit 2; }
# Memory for the state store: exhaustive runs must finish with full coverage.
mem="${GQ_MODEL_MEMLIM_MB:-3000}"
case "$mode" in
  exhaustive) cflags="-DSAFETY -DNOFAIR -DCOLLAPSE -DMEMLIM=$mem"; run=(./pan -m1000000 -w24) ;;
  bounded) cflags="-DSAFETY -DNOFAIR -DBITSTATE"; run=(./pan -m1000000 -w27) ;;
  plant) cflags="-DSAFETY -DNOFAIR -DCOLLAPSE -DMEMLIM=$mem"; run=(./pan -m1000000 -w24) ;;
  *) echo "check.sh: unknown mode $mode" >&2; exit 2 ;;
esac
# shellcheck disable=SC2086
gcc -O2 -w $cflags -o pan pan.c || exit 2
"${run[@]}" | grep -v '^pan: wrote\|^\s*$' || true
if [ "$mode" = plant ] && [ -f geoquota.pml.trail ]; then
  echo "== counterexample (spin -t)"
  spin -t "$@" geoquota.pml | grep -E 'MSC:|assertion violated' | sed 's/^ *//' || true
  echo "TRAIL_LENGTH $(wc -l <geoquota.pml.trail)"
fi
