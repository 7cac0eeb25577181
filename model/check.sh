#!/usr/bin/env bash
# Compiles and runs one Spin verification of model/geoquota.pml by hand
# (test/model-check.test.ts runs the npm-test set, scripts/model-full.sh the
# larger one).
#   model/check.sh <workdir> <2|3> [exhaustive|bitstate] [pan options...]
# The run's slice and planted variant come from the environment (GQ_PLANT,
# GQ_LEASED, GQ_LOSS, GQ_POLICY, GQ_LOANS, GQ_OFFS, GQ_CNEW, GQ_COLD, GQ_ROLD, GQ_RNEW,
# GQ_LCODE, GQ_EXPIRY, GQ_FAILOVER: see the model's
# header and model/README.md "Runs"). GQ_MODEL_DEFS adds spin -D defines
# (e.g. "-DEPS=2" for the fine time grain), GQ_MODEL_MEMLIM_MB the memory
# limit of pan (default 3500: a single run stays under 4 GB on the shared
# machine). Generated files (pan.c, pan, *.trail) stay in <workdir> (use
# .tmp/..., git-ignored); pan is rebuilt only when the model or the defines
# changed. The last line is always
#   RESULT <verdict> states <n> depth <n> seconds <s> (<slice>)
# and when pan finds an error the trail is replayed (pan -r), its steps
# printed, and TRAIL_LENGTH <steps> before it.
# Exit status (never hidden: a memory abort or a cut search is not a pass):
#   0  the whole state space searched, no error ("Full statespace search",
#      errors: 0, no "max search depth too small", no memory abort)
#   1  pan found an error (a counterexample trail: what a plant must give)
#   3  the search was incomplete: depth truncated, memory limit reached,
#      pan crashed or printed no verdict (a bitstate run also ends here
#      when it was cut by depth)
#   2  a tool or usage error
# Example: GQ_PLANT=1 GQ_LEASED=0 GQ_LOSS=0 GQ_POLICY=0 model/check.sh .tmp/m 2
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[ "$#" -ge 2 ] || { echo "usage: $0 <workdir> <2|3> [exhaustive|bitstate] [pan options...]" >&2; exit 2; }
work="$1"; n="$2"; mode="${3:-exhaustive}"; shift 2; [ "$#" -gt 0 ] && shift
case "$n" in 2|3) ;; *) echo "check.sh: regions must be 2 or 3, not $n" >&2; exit 2 ;; esac
for tool in spin gcc; do
  command -v "$tool" >/dev/null || { echo "check.sh: $tool not found (scripts/bootstrap.sh installs it)" >&2; exit 2; }
done
memlim="${GQ_MODEL_MEMLIM_MB:-3500}"
case "$memlim" in ''|*[!0-9]*) echo "check.sh: GQ_MODEL_MEMLIM_MB must be a number of MB, not '$memlim'" >&2; exit 2 ;; esac
case "$mode" in
  exhaustive) cflags="-DSAFETY -DNOFAIR -DNOREDUCE -DCOLLAPSE -DMEMLIM=$memlim"; def=(-m3000000 -w24) ;;
  bitstate) cflags="-DSAFETY -DNOFAIR -DNOREDUCE -DBITSTATE -DMEMLIM=$memlim"; def=(-m120 -w27) ;;
  *) echo "check.sh: unknown mode $mode (exhaustive or bitstate)" >&2; exit 2 ;;
esac
read -r -a defs <<<"${GQ_MODEL_DEFS:-}"
for d in ${defs[@]+"${defs[@]}"}; do
  case "$d" in -D[A-Z_]*=[0-9]*) ;; *) echo "check.sh: GQ_MODEL_DEFS takes -DNAME=number words, not '$d'" >&2; exit 2 ;; esac
done
tag="$(printf '%s' "${defs[*]+${defs[*]}}" | tr -c 'A-Za-z0-9' '_')"
dir="$work/n$n-$mode${tag:+-$tag}"
mkdir -p "$dir"
stamp="spin -a -DN=$n ${defs[*]+${defs[*]}} | gcc -O1 $cflags"
if ! cmp -s "$here/geoquota.pml" "$dir/geoquota.pml" || [ ! -x "$dir/pan" ] ||
  [ "$(cat "$dir/build" 2>/dev/null)" != "$stamp" ]; then
  rm -f "$dir/pan"
  cp "$here/geoquota.pml" "$dir/"
  (cd "$dir" && spin -a -DN="$n" ${defs[@]+"${defs[@]}"} geoquota.pml >spin.out 2>&1) || { cat "$dir/spin.out" >&2; exit 2; }
  # shellcheck disable=SC2086
  (cd "$dir" && gcc -O1 -w $cflags -o pan pan.c) || exit 2
  printf '%s\n' "$stamp" >"$dir/build"
fi
cd "$dir"
rm -f geoquota.pml.trail
[ "$#" -gt 0 ] && def=("$@")
slice="n=$n ${defs[*]+${defs[*]} }plant=${GQ_PLANT:-0} leased=${GQ_LEASED:-2} loans=${GQ_LOANS:-1} loss=${GQ_LOSS:-1} policy=${GQ_POLICY:-1} offs=${GQ_OFFS:-0} cnew=${GQ_CNEW:-1} cold=${GQ_COLD:-1} rold=${GQ_ROLD:-1} rnew=${GQ_RNEW:-1} lcode=${GQ_LCODE:-0} expiry=${GQ_EXPIRY:-0} failover=${GQ_FAILOVER:-0}"
started=$(date +%s.%N)
set +e
./pan "${def[@]}" >pan.out 2>&1
rc=$?
set -e
seconds=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
grep -v '^pan: wrote\|^\s*$' pan.out || true
states=$(sed -n 's/^ *\([0-9][0-9]*\) states, stored.*/\1/p' pan.out | head -1)
depth=$(sed -n 's/.*depth reached \([0-9][0-9]*\).*/\1/p' pan.out | head -1)
errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' pan.out | head -1)
verdict=complete; status=0
if [ -f geoquota.pml.trail ] || { [ -n "$errors" ] && [ "$errors" != 0 ]; }; then
  verdict=counterexample; status=1
  if [ -f geoquota.pml.trail ]; then
    echo "== counterexample (pan -r)"
    ./pan -r 2>&1 | grep '^MSC:' | sed 's/^MSC: //' || true
    echo "TRAIL_LENGTH $(grep -c '^[0-9]' geoquota.pml.trail)"
  fi
elif grep -q 'max search depth too small' pan.out; then
  verdict=truncated; status=3
elif grep -q 'reached -DMEMLIM bound\|out of memory\|memory exhausted' pan.out; then
  verdict=memory-abort; status=3
elif [ "$rc" -ne 0 ] || [ -z "$errors" ]; then
  verdict="pan-failed(exit $rc)"; status=3
elif [ "$mode" = exhaustive ] && ! grep -q 'Full statespace search' pan.out; then
  verdict=incomplete; status=3
fi
echo "RESULT $verdict states ${states:-?} depth ${depth:-?} seconds $seconds ($slice)"
exit "$status"
