#!/usr/bin/env bash
# Stop the jobkit test cluster started by up.sh: stop SGE (tests/cluster/sge.sh down), cancel
# the Slurm jobs, stop each daemon by its pid file (sshd, slurmd n2/n1, slurmctld, slurmdbd,
# MariaDB, munged), wait for each to exit, and
# remove the managed /root/.ssh/config block, the /etc/hosts line and the slurm.conf link.
# Harmless when nothing runs. The state folder (database, job ids, keys) is kept.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"

# Jobs would outlive their slurmd (slurmstepd keeps running): cancel them first.
cancel_jobs() {
    local ids deadline
    jk_pid slurmctld >/dev/null && jk_ctld_ok >/dev/null 2>&1 || return 0
    # No new jobs from here on (up.sh sets the partition UP again).
    scontrol update PartitionName="$JK_PARTITION" State=DRAIN 2>/dev/null || true
    ids=$(squeue -h -o '%A' 2>/dev/null | sort -u | tr '\n' ' ')
    [[ -n ${ids// /} ]] || return 0
    jk_say "cancelling jobs: $ids"
    # shellcheck disable=SC2086  # ids is a list of numbers
    scancel $ids 2>/dev/null || true
    deadline=$((SECONDS + 30))
    while [[ -n $(squeue -h -t running,completing,configuring,suspended -o '%A' 2>/dev/null) ]]; do
        ((SECONDS < deadline)) || {
            jk_say "jobs still running after 30 s; stopping anyway"
            break
        }
        sleep 0.5
    done
}

# Job step daemons of our nodes that outlived everything (reported, never guessed at).
report_leftovers() {
    local pid left=()
    for pid in /proc/[0-9]*; do
        [[ $(cat "$pid/comm" 2>/dev/null) == slurmstepd ]] && left+=("${pid#/proc/}")
    done
    ((${#left[@]} == 0)) || jk_say "WARNING: slurmstepd processes still run: ${left[*]}"
}

main() {
    local d
    jk_require_root
    jk_check_dir
    jk_lock
    cancel_jobs
    # SGE first: its jobs, execds and node sshds (harmless when it never ran).
    JK_SGE_LOCKED=1 bash "$here/sge.sh" down
    for d in sshd slurmd-n2 slurmd-n1 slurmctld slurmdbd mariadb munged; do
        jk_stop "$d"
    done
    jk_remove_managed_files
    report_leftovers
    jk_say "down (state kept in $JK_DIR)"
}

main "$@"
