#!/usr/bin/env bash
# Seconds from a Slurm job's end (sacct End, whole seconds) to `jobkit submit --wait`
# returning, for this checkout's jobkit and another's, one job at a time on the test Slurm
# (tests/cluster/up.sh). Usage: bench/wait_lag.sh OTHER_CHECKOUT [SLEEP_SECONDS...]
# (e.g. `git worktree add /tmp/old 669d0f0`; docs/benchmarks.md, session 22).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
other=${1:?usage: bench/wait_lag.sh OTHER_CHECKOUT [SLEEP_SECONDS...]}
shift
sleeps=("$@")
(( ${#sleeps[@]} )) || sleeps=(31 38 44 52)
work=$(mktemp -d)
trap 'rm -rf -- "$work"' EXIT
export JOBKIT_HOME="$work/home"
export SLURM_CONF="${SLURM_CONF:-/var/lib/jobkit-cluster/etc/slurm.conf}"
for seconds in "${sleeps[@]}"; do
  cat >"$work/job.yaml" <<SPEC
name: wait-lag
backend: slurm
resources: {nodes: 1, time: "00:05:00"}
launch: {launcher: none}
run: {command: [sleep, "$seconds"]}
SPEC
  for tree in "$here" "$other"; do
    (cd "$work" && PYTHONPATH="$tree" "$here/.venv/bin/python" -m jobkit submit job.yaml \
      --wait --json >"$work/out" 2>/dev/null) || true
    returned=$(date +%s.%N)
    job=$("$here/.venv/bin/python" -c \
      "import json, sys; print(json.load(open(sys.argv[1]))['scheduler_id'])" "$work/out")
    ended=$(date -d "$(sacct -j "$job" -X -n -P -o End)" +%s)
    lag=$("$here/.venv/bin/python" -c \
      "import sys; print(f'{float(sys.argv[1]) - int(sys.argv[2]):.1f}')" "$returned" "$ended")
    echo "$tree sleep $seconds: $lag s"
  done
done
