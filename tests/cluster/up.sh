#!/usr/bin/env bash
# Bring up the jobkit test cluster on this machine (root, Debian/Ubuntu, no systemd needed):
# munge, MariaDB, slurmdbd, slurmctld, two slurmd (n1, n2; partition debug), Slurm's Torque
# wrappers (qsub/qstat) and sshd on 127.0.0.1:2222 (ssh n1 / ssh n2); then Son of Grid Engine
# (tests/cluster/sge.sh up: qmaster, exec hosts n1 n2; JOBKIT_CLUSTER_SGE=0 skips it).
# Idempotent: what already runs with the same config is left alone. See docs/cluster.md.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"

# acct: process accounting (accton), with which .ci/run says where its CPU went (.ci/cpu.py).
PACKAGES=(slurm-wlm slurmdbd munge mariadb-server mariadb-client slurm-wlm-torque
    openssh-server openssh-client shellcheck pdsh openmpi-bin acct)

started_at=$SECONDS

apt_get() {
    # Another apt may hold the dpkg lock: wait for it (the timeout), retry a few times.
    local try
    for try in 1 2 3 4 5; do
        if apt-get -q -o DPkg::Lock::Timeout=300 "$@"; then
            return 0
        fi
        jk_say "apt-get $1 failed (try $try); retrying in 10 s"
        sleep 10
    done
    jk_die "apt-get $* kept failing"
}

install_packages() {
    local missing=() p
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
            missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    jk_say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # Keep package scripts from starting the distribution's own services.
    local policy=/usr/sbin/policy-rc.d made_policy=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        made_policy=1
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    apt_get update
    apt_get install -y --no-install-recommends "${missing[@]}"
    if ((made_policy)); then
        rm -f "$policy"
        trap - EXIT
    fi
    jk_say "packages installed in $((SECONDS - started_at)) s"
}

make_folders() {
    install -d -m 0755 "$JK_DIR" "$JK_ETC" "$JK_RUN" "$JK_LOG" "$JK_DIR/slurmctld" \
        "$JK_DIR/spool-n1" "$JK_DIR/spool-n2"
    install -d -m 0700 "$JK_SSH"
    install -d -o munge -g munge -m 0700 "$JK_DIR/munge"
    install -d -m 0755 "$JK_DIR/mariadb"
    install -d -o mysql -g mysql -m 0750 "$JK_DIR/mariadb/data" "$JK_DIR/mariadb/run"
    # Daemons that drop privileges write their own logs.
    touch "$(jk_logfile munged)" "$(jk_logfile mariadb)"
    chown munge:munge "$(jk_logfile munged)"
    chown mysql:mysql "$(jk_logfile mariadb)"
}

make_secrets() {
    local key=$JK_DIR/munge/munge.key pass=$JK_DIR/mariadb/slurm.pass
    if [[ ! -s $key ]]; then
        dd if=/dev/urandom bs=1 count=1024 status=none >"$key"
    fi
    chown munge:munge "$key"
    chmod 0600 "$key"
    if [[ ! -s $pass ]]; then
        (umask 077 && od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$pass")
    fi
    if [[ ! -s $JK_SSH/ssh_host_ed25519_key ]]; then
        ssh-keygen -q -t ed25519 -N '' -C "jobkit-cluster host" -f "$JK_SSH/ssh_host_ed25519_key"
    fi
    if [[ ! -s $JK_SSH/id_ed25519 ]]; then
        ssh-keygen -q -t ed25519 -N '' -C "jobkit-cluster client" -f "$JK_SSH/id_ed25519"
    fi
}

write_configs() {
    local hostkey
    jk_slurm_conf slurmdbd | jk_write "$JK_SLURM_CONF" 0644
    jk_slurmdbd_conf | jk_write "$JK_ETC/slurmdbd.conf" 0600
    jk_sshd_config | jk_write "$JK_SSH/sshd_config" 0600
    jk_ssh_client_conf | jk_write "$JK_SSH/config" 0644
    jk_write "$JK_SSH/authorized_keys" 0600 <"$JK_SSH/id_ed25519.pub"
    hostkey=$(cut -d' ' -f1,2 "$JK_SSH/ssh_host_ed25519_key.pub")
    printf '[n1]:%s,[n2]:%s %s\n' "$JK_SSH_PORT" "$JK_SSH_PORT" "$hostkey" |
        jk_write "$JK_SSH/known_hosts" 0644
}

# Client commands (sinfo, sbatch, qsub, ...) read /etc/slurm/slurm.conf: link it to ours.
link_system_conf() {
    install -d -m 0755 "$(dirname "$JK_SYSTEM_SLURM_CONF")"
    if [[ -L $JK_SYSTEM_SLURM_CONF ]]; then
        [[ $(readlink "$JK_SYSTEM_SLURM_CONF") == "$JK_SLURM_CONF" ]] && return 0
        rm -f "$JK_SYSTEM_SLURM_CONF"
    elif [[ -e $JK_SYSTEM_SLURM_CONF ]]; then
        jk_die "$JK_SYSTEM_SLURM_CONF exists and is not ours; move it away first"
    fi
    ln -s "$JK_SLURM_CONF" "$JK_SYSTEM_SLURM_CONF"
}

# n1 and n2 resolve to loopback (jobs use them as rendezvous hosts; ssh n1 / ssh n2).
add_hosts_line() {
    grep -qxF "$JK_HOSTS_LINE" /etc/hosts || printf '%s\n' "$JK_HOSTS_LINE" >>/etc/hosts
}

add_ssh_block() {
    local home ssh_config rest
    home=$(jk_root_home)
    ssh_config=$home/.ssh/config
    install -d -m 0700 "$home/.ssh"
    touch "$ssh_config"
    chmod 0600 "$ssh_config"
    rest=$(jk_strip_block "$ssh_config")
    # First in the file: ssh uses the first value it reads for each option.
    {
        printf '%s\n' "$JK_BLOCK_BEGIN"
        jk_ssh_client_conf
        printf '%s\n' "$JK_BLOCK_END"
        [[ -z $rest ]] || printf '%s\n' "$rest"
    } | jk_rewrite_in_place "$ssh_config"
}

# Restart a running daemon whose config changed since it started (e.g. after ctl.sh
# accounting off), then make sure it runs.
ensure() {
    local d=$1
    if jk_pid "$d" >/dev/null && [[ $(jk_started_with "$d") != "$(jk_confsha "$d")" ]]; then
        jk_say "$d: config changed since it started; restarting it"
        jk_stop "$d"
    fi
    jk_start "$d"
}

setup_database() {
    local pass
    pass=$(cat "$JK_DIR/mariadb/slurm.pass")
    mariadb --no-defaults --socket="$JK_DB_SOCKET" -u root <<SQL
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '${pass}';
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '${pass}';
ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '${pass}';
ALTER USER 'slurm'@'localhost' IDENTIFIED BY '${pass}';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
FLUSH PRIVILEGES;
SQL
}

init_database_dir() {
    [[ -d $JK_DIR/mariadb/data/mysql ]] && return 0
    jk_say "initialising the MariaDB data folder"
    mariadb-install-db --no-defaults --user=mysql --datadir="$JK_DIR/mariadb/data" \
        --auth-root-authentication-method=socket --skip-test-db \
        >>"$(jk_logfile mariadb)" 2>&1 ||
        {
            tail -n 25 "$(jk_logfile mariadb)" >&2
            jk_die "mariadb-install-db failed"
        }
}

register_accounting() {
    local out
    out=$(sacctmgr -n -P show cluster format=cluster)
    grep -qx "$JK_CLUSTER" <<<"$out" || sacctmgr -i add cluster "$JK_CLUSTER" >/dev/null
    out=$(sacctmgr -n -P show account format=account)
    grep -qx "$JK_ACCOUNT" <<<"$out" ||
        sacctmgr -i add account "$JK_ACCOUNT" Cluster="$JK_CLUSTER" \
            Description="jobkit tests" Organization=jobkit >/dev/null
    out=$(sacctmgr -n -P show assoc where cluster="$JK_CLUSTER" account="$JK_ACCOUNT" \
        user=root format=user)
    grep -qx root <<<"$out" ||
        sacctmgr -i add user root Account="$JK_ACCOUNT" Cluster="$JK_CLUSTER" >/dev/null
}

# down.sh drains the partition so that no job starts while it stops the cluster.
open_partition() {
    if ! jk_partition_up; then
        jk_say "partition $JK_PARTITION is not up: setting it UP"
        scontrol update PartitionName="$JK_PARTITION" State=UP
    fi
}

# Nodes left drained or down by an earlier run come back to service.
resume_nodes() {
    local n s
    for n in "${JK_NODES[@]}"; do
        s=$(jk_node_state "$n")
        if [[ $s =~ ^(down|drain|drained|draining|fail) ]]; then
            jk_say "node $n is $s: resuming it"
            scontrol update NodeName="$n" State=RESUME || true
        fi
    done
}

# CI starts from an empty queue: jobs left by an earlier, interrupted run on this machine
# (slurmctld keeps them in its state folder) would hold the nodes while the tests wait.
clear_leftover_jobs() {
    local ids
    ids=$(squeue -h -o '%i' 2>/dev/null | tr '\n' ' ')
    [[ -n ${ids// /} ]] || return 0
    jk_say "CI: cancelling jobs left by an earlier run: $ids"
    # shellcheck disable=SC2086 # one word per job id
    scancel $ids || true
    jk_wait 120 "leftover jobs gone" "$(jk_logfile slurmctld)" queue_empty
}
queue_empty() { [[ -z $(squeue -h -o '%i' 2>/dev/null) ]]; }

write_cluster_json() {
    local d
    {
        printf '{\n'
        printf '  "state_dir": "%s",\n' "$JK_DIR"
        printf '  "cluster_name": "%s",\n' "$JK_CLUSTER"
        printf '  "account": "%s",\n' "$JK_ACCOUNT"
        printf '  "partition": "%s",\n' "$JK_PARTITION"
        printf '  "nodes": ["n1", "n2"],\n'
        printf '  "slurm_conf": "%s",\n' "$JK_SLURM_CONF"
        printf '  "min_job_age_s": 10,\n'
        printf '  "ssh": {"port": %s, "config": "%s", "key": "%s", "known_hosts": "%s"},\n' \
            "$JK_SSH_PORT" "$JK_SSH/config" "$JK_SSH/id_ed25519" "$JK_SSH/known_hosts"
        printf '  "logs": "%s",\n' "$JK_LOG"
        printf '  "pid_files": {'
        local sep=''
        for d in "${JK_DAEMONS[@]}"; do
            printf '%s"%s": "%s"' "$sep" "$d" "$(jk_pidfile "$d")"
            sep=', '
        done
        printf '}\n}\n'
    } | jk_write "$JK_DIR/cluster.json" 0644
}

summary() {
    local d pid
    jk_say "state folder: $JK_DIR (logs in $JK_LOG)"
    printf '  %-10s %-8s %s\n' daemon pid port
    for d in "${JK_DAEMONS[@]}"; do
        pid=$(jk_pid "$d" || echo '-')
        printf '  %-10s %-8s %s\n' "$d" "$pid" "$(jk_port_of "$d")"
    done
    sinfo -N -o '  %N %P %T'
    jk_say "ssh: ssh n1 / ssh n2 (port $JK_SSH_PORT; standalone: ssh -F $JK_SSH/config n1)"
    jk_say "ready in $((SECONDS - started_at)) s"
}

main() {
    jk_require_root
    jk_check_dir
    install_packages
    # --packages: only the Debian packages (.ci/run installs the image's after them).
    if [[ ${1:-} == --packages ]]; then return 0; fi
    jk_lock
    make_folders
    make_secrets
    write_configs
    link_system_conf
    add_hosts_line
    add_ssh_block
    ensure munged
    init_database_dir
    ensure mariadb
    setup_database
    ensure slurmdbd
    register_accounting
    ensure slurmctld
    open_partition
    ensure slurmd-n1
    ensure slurmd-n2
    resume_nodes
    if [[ ${CI:-} == true ]]; then clear_leftover_jobs; fi
    jk_wait 60 "node n1 taking jobs" "$(jk_logfile slurmctld)" jk_node_ok n1
    jk_wait 60 "node n2 taking jobs" "$(jk_logfile slurmctld)" jk_node_ok n2
    ensure sshd
    jk_wait 60 "sacct" "$(jk_logfile slurmdbd)" jk_sacct_ok
    # Son of Grid Engine beside Slurm (qmaster + exec hosts n1 n2); JOBKIT_CLUSTER_SGE=0 skips.
    if [[ ${JOBKIT_CLUSTER_SGE:-1} != 0 ]]; then
        JK_SGE_LOCKED=1 bash "$here/sge.sh" up
    fi
    write_cluster_json
    summary
}

main "$@"
