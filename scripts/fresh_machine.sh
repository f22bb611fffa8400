#!/usr/bin/env bash
# A simulated fresh machine (docs/quickstart.md, docs/ci-gate.md): a new clone of this checkout's HEAD under
# $FRESH (default /tmp/lme-fresh), an empty HOME (no pip cache, no ~/.cache/lme-harness), PIP_NO_CACHE_DIR=1,
# then the README's commands in the order given (default: `.ci/run`, then `make bench`), each line of output
# time-stamped into $FRESH/<step>.log and each step's wall time and exit status printed.
#
#   scripts/fresh_machine.sh            # .ci/run, then make bench
#   scripts/fresh_machine.sh bench ci   # a newcomer's order
#
# The data folder is ../shared beside this checkout, linked beside the clone (as on a machine of our kind).
set -u
here="$(cd "$(dirname "$0")/.." && pwd)"
FRESH="${FRESH:-/tmp/lme-fresh}"
steps=("$@"); [ ${#steps[@]} -gt 0 ] || steps=(ci bench)
rm -rf "$FRESH"; mkdir -p "$FRESH/home"
ln -s "$(cd "$here/.." && pwd)/shared" "$FRESH/shared"
git clone -q "$here" "$FRESH/repo"
cd "$FRESH/repo" || exit 1
export HOME="$FRESH/home" PIP_NO_CACHE_DIR=1
echo "commit: $(git log --oneline -1)"
echo "cpu: $("$here/scripts/cpu_line.sh")"
status=0
for step in "${steps[@]}"; do
  case "$step" in
    ci) cmd=(env CI=true bash .ci/run) ;;
    bench) cmd=(make bench) ;;
    test) cmd=(make test) ;;
    *) echo "unknown step '$step' (ci, bench, test)" >&2; exit 2 ;;
  esac
  echo "$step: start $(date -u +%T), load $(cut -d' ' -f1-3 /proc/loadavg)"
  start=$(date +%s)
  "${cmd[@]}" 2>&1 | while IFS= read -r l; do printf '%(%T)T %s\n' -1 "$l"; done > "$FRESH/$step.log"
  rc=${PIPESTATUS[0]}
  echo "$step: rc=$rc wall=$(( $(date +%s) - start )) s, load $(cut -d' ' -f1-3 /proc/loadavg) ($FRESH/$step.log)"
  [ "$rc" -eq 0 ] || status=$rc
done
exit $status
