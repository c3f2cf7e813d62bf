#!/usr/bin/env bash
# Say what of the jobkit test cluster runs: each daemon (pid alive or not), sinfo, sacct and
# ssh n1/n2. Exit 0 when everything is up and answers, 1 otherwise.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"

ok=1
check() { # check LABEL CMD...: print LABEL and whether CMD succeeds
    local label=$1
    shift
    if "$@" >/dev/null 2>&1; then
        printf '  %-22s ok\n' "$label"
    else
        printf '  %-22s FAILED\n' "$label"
        ok=0
    fi
}

echo "jobkit test cluster, state folder $JK_DIR"
for d in "${JK_DAEMONS[@]}"; do
    if pid=$(jk_pid "$d"); then
        printf '  %-10s up    pid %-7s port %s\n' "$d" "$pid" "$(jk_port_of "$d")"
    else
        printf '  %-10s DOWN  (pid file %s)\n' "$d" "$(jk_pidfile "$d")"
        ok=0
    fi
done
echo "sinfo:"
if out=$(timeout 15 sinfo -N -o '%N %P %T' 2>&1); then
    printf '  %s\n' "${out//$'\n'/$'\n'  }"
else
    printf '  FAILED: %s\n' "$out"
    ok=0
fi
check "partition $JK_PARTITION up" jk_partition_up
check "node n1 takes jobs" jk_node_ok n1
check "node n2 takes jobs" jk_node_ok n2
check "sacct answers" jk_sacct_ok
check "ssh n1" jk_ssh_ok n1
check "ssh n2" jk_ssh_ok n2
check "qsub/qstat present" command -v qsub qstat
if [[ ${JOBKIT_CLUSTER_SGE:-1} != 0 ]]; then
    bash "$here/sge.sh" status | sed 's/^/  /' || ok=0
fi

if ((ok)); then
    echo "status: UP"
    exit 0
fi
echo "status: NOT (fully) UP; start with: bash tests/cluster/up.sh"
exit 1
