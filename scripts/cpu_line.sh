#!/usr/bin/env bash
# One line naming this machine's CPU as the docs record it: model name (family F, model M), N cores.
# Used by .ci/run (each step's time) and scripts/fresh_machine.sh; bash only, so it works before any venv exists.
field() { grep -m1 "^$1[[:space:]]*:" /proc/cpuinfo | cut -d: -f2- | xargs; }
echo "$(field 'model name') (family $(field 'cpu family'), model $(field model)), $(nproc) cores"
