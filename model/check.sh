#!/usr/bin/env bash
# Compiles and runs one Spin verification of model/geoquota.pml by hand
# (test/model-check.test.ts runs the whole set).
#   model/check.sh <workdir> <2|3> [exhaustive|bitstate] [pan options...]
# The run's slice and planted variant come from the environment (GQ_PLANT,
# GQ_LEASED, GQ_LOSS, GQ_POLICY, GQ_LOANS, GQ_OFFS, GQ_CNEW: see the model's
# header and model/README.md "Runs"). Generated files (pan.c, pan, *.trail)
# stay in <workdir> (use .tmp/..., git-ignored); pan is rebuilt only when the
# model changed. When pan finds an error, the trail is replayed (pan -r) and
# its steps printed, then:
#   TRAIL_LENGTH <steps>
# Exit status: 0 when pan ran (whatever it found), 2 on a tool error.
# Example: GQ_PLANT=1 GQ_LEASED=0 GQ_LOSS=0 GQ_POLICY=0 model/check.sh .tmp/m 2
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[ "$#" -ge 2 ] || { echo "usage: $0 <workdir> <2|3> [exhaustive|bitstate] [pan options...]" >&2; exit 2; }
work="$1"; n="$2"; mode="${3:-exhaustive}"; shift 2; [ "$#" -gt 0 ] && shift
case "$n" in 2|3) ;; *) echo "check.sh: regions must be 2 or 3, not $n" >&2; exit 2 ;; esac
for tool in spin gcc; do
  command -v "$tool" >/dev/null || { echo "check.sh: $tool not found (scripts/bootstrap.sh installs it)" >&2; exit 2; }
done
case "$mode" in
  exhaustive) cflags="-DSAFETY -DNOFAIR -DNOREDUCE -DCOLLAPSE -DMEMLIM=${GQ_MODEL_MEMLIM_MB:-3000}"; def=(-m3000000 -w24) ;;
  bitstate) cflags="-DSAFETY -DNOFAIR -DNOREDUCE -DBITSTATE"; def=(-m120 -w27) ;;
  *) echo "check.sh: unknown mode $mode (exhaustive or bitstate)" >&2; exit 2 ;;
esac
dir="$work/n$n-$mode"
mkdir -p "$dir"
if ! cmp -s "$here/geoquota.pml" "$dir/geoquota.pml" || [ ! -x "$dir/pan" ]; then
  cp "$here/geoquota.pml" "$dir/"
  (cd "$dir" && spin -a -DN="$n" geoquota.pml >spin.out 2>&1) || { cat "$dir/spin.out" >&2; exit 2; }
  # shellcheck disable=SC2086
  (cd "$dir" && gcc -O1 -w $cflags -o pan pan.c) || exit 2
fi
cd "$dir"
rm -f geoquota.pml.trail
[ "$#" -gt 0 ] && def=("$@")
./pan "${def[@]}" | grep -v '^pan: wrote\|^\s*$' || true
if [ -f geoquota.pml.trail ]; then
  echo "== counterexample (pan -r)"
  ./pan -r 2>&1 | grep '^MSC:' | sed 's/^MSC: //' || true
  echo "TRAIL_LENGTH $(grep -c '^[0-9]' geoquota.pml.trail)"
fi
