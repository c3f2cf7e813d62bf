#!/usr/bin/env bash
# shellcheck disable=SC2016  # single-quoted $VARS belong to the job scripts written below
# Regenerate the raw SGE outputs in this folder from the test cluster (tests/cluster/sge.sh up
# first). Job ids in the files are whatever the cluster hands out. About 60 s.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$here/../lib.sh"
# shellcheck source=/dev/null
source "$JK_DIR/sge/env.sh"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
printf '#!/bin/bash\nsleep "${1:-20}"\n' >sleep.sh
printf '#!/bin/bash\necho "task $SGE_TASK_ID"; sleep 6\n' >array.sh
printf '#!/bin/bash\necho failing; exit 3\n' >exit3.sh
printf '#!/bin/bash\ncat "$PE_HOSTFILE"; sleep 3\n' >pe.sh
chmod +x ./*.sh

wait_gone() { # wait until qstat no longer lists job $1, then for its accounting record

    for _ in $(seq 1 120); do
        qstat -u '*' | awk -v j="$1" '$1 == j { f = 1 } END { exit !f }' || break
        sleep 0.5
    done
    for _ in $(seq 1 20); do
        qacct -j "$1" >/dev/null 2>&1 && return 0
        sleep 0.5
    done
}
wait_running() {

    for _ in $(seq 1 60); do
        [[ $(qstat -u '*' | awk -v j="$1" '$1 == j { print $5 }' | head -n 1) == r ]] && return 0
        sleep 0.5
    done
}

ok=$(qsub -terse -cwd -o /dev/null -j y -N ok sleep.sh 4)
wait_running "$ok"
qstat -xml >"$here/qstat_xml_running.txt"
qstat -j "$ok" -xml >"$here/qstat_j_xml_running.txt"
wait_gone "$ok"
qacct -j "$ok" >"$here/qacct_ok.txt"

# Two slots in all: two sleepers fill them; then a queued job and a held one wait.
a=$(qsub -terse -cwd -o /dev/null -j y -N fill1 sleep.sh 15)
b=$(qsub -terse -cwd -o /dev/null -j y -N fill2 sleep.sh 15)
wait_running "$a"
wait_running "$b"
p=$(qsub -terse -cwd -o /dev/null -j y -N pending sleep.sh 1)
h=$(qsub -terse -cwd -o /dev/null -j y -N held -h sleep.sh 1)
d=$(qsub -terse -cwd -o /dev/null -j y -N afterok -hold_jid "$p" sleep.sh 1)
sleep 2
qstat -xml >"$here/qstat_xml_pending.txt"
qdel "$a" >/dev/null
qdel "$h" "$d" >/dev/null
wait_gone "$a"
qacct -j "$a" >"$here/qacct_deleted.txt"
wait_gone "$b"
wait_gone "$p"

arr=$(qsub -terse -cwd -o /dev/null -j y -N arr -t 1-3 array.sh)
arr=${arr%%.*}
sleep 3
qstat -xml >"$here/qstat_xml_array.txt"
wait_gone "$arr"
sleep 1
qacct -j "$arr" >"$here/qacct_array.txt"

e=$(qsub -terse -cwd -o /dev/null -j y -N exit3 exit3.sh)
wait_gone "$e"
qacct -j "$e" >"$here/qacct_exit3.txt"

pe=$(qsub -terse -cwd -o /dev/null -j y -N pe -pe jobkit 2 pe.sh)
wait_gone "$pe"
qacct -j "$pe" >"$here/qacct_pe.txt"

{ qacct -j 999999 || echo "exit status $?"; } >"$here/qacct_notfound.txt" 2>&1
{ qstat -j 999999 -xml || echo "exit status $?"; } >"$here/qstat_j_xml_notfound.txt" 2>&1
qstat -xml >"$here/qstat_xml_empty.txt"
echo "samples written to $here"
