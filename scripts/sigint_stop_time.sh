#!/usr/bin/env bash
# How long the first Ctrl-C takes to stop a run of the embedded model with a call in flight (docs/reliability.md).
# usage: scripts/sigint_stop_time.sh [RUN_DIR] [extra Hydra overrides...]
# Starts `lme-harness run` (smollm2_135m, 2 oracle cases, no cache), waits until the first pairs line is on stderr
# plus 10 s (a call in flight), sends SIGINT, and prints the exit status, the seconds to exit and any server left.
set -u
RUN=${1:-/tmp/lme-sigint-stop}; shift || true
rm -rf "$RUN"
PY=${PYTHON:-.venv/bin/python}
$PY -m commands.cli run model=smollm2_135m dataset.limit=2 generation.max_tokens=48 judge=longmemeval \
  cache.enabled=false "hydra.run.dir=$RUN" "$@" >"$RUN.out" 2>"$RUN.err" &
PID=$!
until grep -q "^pairs " "$RUN.err" 2>/dev/null; do
  kill -0 $PID 2>/dev/null || { echo "the run ended first"; tail -5 "$RUN.err"; exit 1; }
  sleep 0.5
done
sleep 10
SRV=$(pgrep -P $PID -f "harness.llm.local_server" | head -1)  # this run's server only
T0=$(date +%s.%N); kill -INT $PID; wait $PID; RC=$?; T1=$(date +%s.%N)
echo "exit status $RC, $(echo "$T1 - $T0" | bc) s after SIGINT; $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
if [ -n "$SRV" ] && kill -0 "$SRV" 2>/dev/null; then echo "server $SRV still running"; else echo "no server left"; fi
grep -o '"state": "[a-z]*"' "$RUN/run.json"
