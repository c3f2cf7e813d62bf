#!/usr/bin/env bash
# Stop, start or restart one daemon of the jobkit test cluster (fault-injection tests), or
# switch Slurm accounting between slurmdbd and none:
#   ctl.sh stop|start|restart DAEMON   DAEMON: slurmctld slurmdbd slurmd-n1 slurmd-n2 sshd
#                                              mariadb munged
#   ctl.sh accounting off|on
# 'start' (and 'restart') return once the daemon answers.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"

usage() {
    echo "usage: ctl.sh stop|start|restart DAEMON   (DAEMON: ${JK_DAEMONS[*]})" >&2
    echo "       ctl.sh accounting off|on" >&2
    exit 2
}

# After slurmctld (re)starts, give running slurmds a moment to register again.
wait_nodes() {
    local n
    for n in "${JK_NODES[@]}"; do
        jk_pid "slurmd-$n" >/dev/null || continue
        jk_wait 60 "node $n responding" "$(jk_logfile slurmctld)" jk_node_responds "$n"
    done
}

start() {
    jk_start "$1"
    [[ $1 != slurmctld ]] || wait_nodes
}

accounting() {
    case $1 in
    off)
        jk_slurm_conf none | jk_write "$JK_SLURM_CONF" 0644
        ;;
    on)
        jk_slurm_conf slurmdbd | jk_write "$JK_SLURM_CONF" 0644
        jk_start slurmdbd
        ;;
    *) usage ;;
    esac
    if jk_pid slurmctld >/dev/null && [[ $(jk_started_with slurmctld) == "$(jk_confsha slurmctld)" ]]; then
        jk_say "accounting already $1"
        return 0
    fi
    jk_stop slurmctld
    start slurmctld
    scontrol reconfigure
    wait_nodes
    if [[ $1 == on ]]; then
        jk_wait 60 "sacct" "$(jk_logfile slurmdbd)" jk_sacct_ok
    fi
    jk_say "accounting $1"
}

main() {
    (($# == 2)) || usage
    jk_require_root
    jk_check_dir
    [[ -f $JK_SLURM_CONF ]] || jk_die "no cluster in $JK_DIR: run tests/cluster/up.sh first"
    if [[ $1 == accounting ]]; then
        jk_lock
        accounting "$2"
        return 0
    fi
    jk_pidfile "$2" >/dev/null
    jk_lock
    case $1 in
    stop) jk_stop "$2" ;;
    start) start "$2" ;;
    restart)
        jk_stop "$2"
        start "$2"
        ;;
    *) usage ;;
    esac
}

main "$@"
