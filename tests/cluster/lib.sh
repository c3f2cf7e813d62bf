# shellcheck shell=bash disable=SC2034  # the constants are used by the scripts that source this
# Shared definitions for tests/cluster/{up,down,status,ctl}.sh. Sourced, never run.
#
# One state folder (JOBKIT_CLUSTER_DIR, default /var/lib/jobkit-cluster) holds every config,
# pid file, log, spool and database of the test cluster:
#   etc/      slurm.conf, slurmdbd.conf (600), cgroup-free settings
#   run/      pid files and the config hashes each daemon was started with
#   log/      one log per daemon
#   munge/    munge key, pid and seed (owned by munge)
#   mariadb/  data/ (the database) and run/ (pid), owned by mysql
#   ssh/      sshd_config, host key, client key, known_hosts, client config
#   slurmctld/ spool-n1/ spool-n2/   Slurm state

JK_DIR=${JOBKIT_CLUSTER_DIR:-/var/lib/jobkit-cluster}
JK_CLUSTER=jobkit
JK_ACCOUNT=default
JK_PARTITION=debug
JK_NODES=(n1 n2)
JK_CTLD_PORT=6817
JK_DBD_PORT=6819
JK_DB_PORT=3307
JK_SSH_PORT=2222
JK_DB_SOCKET=/run/mysqld/jobkit-cluster.sock
JK_MUNGE_SOCKET=/run/munge/munge.socket.2
JK_MARK=jobkit-cluster
JK_HOSTS_LINE="127.0.0.1 n1 n2 # ${JK_MARK}"
JK_SYSTEM_SLURM_CONF=/etc/slurm/slurm.conf
JK_DAEMONS=(munged mariadb slurmdbd slurmctld slurmd-n1 slurmd-n2 sshd)

JK_ETC=$JK_DIR/etc
JK_RUN=$JK_DIR/run
JK_LOG=$JK_DIR/log
JK_SSH=$JK_DIR/ssh
JK_SLURM_CONF=$JK_ETC/slurm.conf
export SLURM_CONF=$JK_SLURM_CONF

jk_say() { printf '[cluster] %s\n' "$*"; }
jk_die() {
    printf '[cluster] ERROR: %s\n' "$*" >&2
    exit 1
}

# The state folder lands in slurm.conf, sshd_config and JSON: refuse odd characters.
jk_check_dir() {
    [[ $JK_DIR == /* && $JK_DIR =~ ^[A-Za-z0-9._/-]+$ ]] ||
        jk_die "JOBKIT_CLUSTER_DIR must be an absolute path of [A-Za-z0-9._/-] (got '$JK_DIR')"
}

jk_require_root() {
    [[ $(id -u) -eq 0 ]] || jk_die "run as root (the test cluster runs its daemons as root)"
}

# Root's home from the passwd database (jobs and ssh use it), not $HOME.
jk_root_home() { getent passwd root | cut -d: -f6; }

jk_slurmd_port() {
    case $1 in
    n1) echo 6821 ;;
    n2) echo 6822 ;;
    *) jk_die "unknown node $1" ;;
    esac
}

jk_pidfile() {
    case $1 in
    munged) echo "$JK_DIR/munge/munged.pid" ;;
    mariadb) echo "$JK_DIR/mariadb/run/mariadbd.pid" ;;
    slurmdbd | slurmctld | sshd) echo "$JK_RUN/$1.pid" ;;
    slurmd-n1 | slurmd-n2) echo "$JK_RUN/$1.pid" ;;
    *) jk_die "unknown daemon '$1' (one of: ${JK_DAEMONS[*]})" ;;
    esac
}

jk_comm() {
    case $1 in
    mariadb) echo mariadbd ;;
    slurmd-*) echo slurmd ;;
    *) echo "$1" ;;
    esac
}

jk_logfile() { echo "$JK_LOG/$1.log"; }

jk_port_of() {
    case $1 in
    mariadb) echo "$JK_DB_PORT" ;;
    slurmdbd) echo "$JK_DBD_PORT" ;;
    slurmctld) echo "$JK_CTLD_PORT" ;;
    slurmd-*) jk_slurmd_port "${1#slurmd-}" ;;
    sshd) echo "$JK_SSH_PORT" ;;
    *) echo - ;;
    esac
}

# True while PID runs: it exists and is not a zombie (an exited daemon waits as a zombie
# until init reaps it, which can take a second or more).
jk_alive() {
    local state
    state=$(awk '$1 == "State:" { print $2 }' "/proc/$1/status" 2>/dev/null) || return 1
    [[ -n $state && $state != Z ]]
}

# Print the pid of DAEMON when its pid file names a live process of the right program.
jk_pid() {
    local f pid comm
    f=$(jk_pidfile "$1")
    [[ -r $f ]] || return 1
    pid=$(tr -dc 0-9 <"$f")
    [[ -n $pid ]] || return 1
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
    [[ $comm == "$(jk_comm "$1")" ]] && jk_alive "$pid" || return 1
    echo "$pid"
}

jk_port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# jk_wait SECONDS WHAT LOGFILE CMD...: poll CMD until it succeeds; on timeout print the
# log's tail and exit 1.
jk_wait() {
    local limit=$1 what=$2 log=$3
    shift 3
    local deadline=$((SECONDS + limit))
    while ! "$@" >/dev/null 2>&1; do
        if ((SECONDS >= deadline)); then
            printf '[cluster] ERROR: %s not ready after %ss\n' "$what" "$limit" >&2
            if [[ -n $log && -r $log ]]; then
                printf '[cluster] last lines of %s:\n' "$log" >&2
                tail -n 25 "$log" >&2
            fi
            exit 1
        fi
        sleep 0.3
    done
}

# ---- readiness probes: each answers "does this daemon serve requests now?" ----
jk_munge_ok() { munge -n -S "$JK_MUNGE_SOCKET" | unmunge -S "$JK_MUNGE_SOCKET"; }
jk_db_ok() { mariadb-admin --no-defaults --socket="$JK_DB_SOCKET" -u root ping; }
jk_dbd_ok() {
    if grep -qx 'AccountingStorageType=accounting_storage/slurmdbd' "$JK_SLURM_CONF"; then
        timeout 15 sacctmgr -n -P show cluster format=cluster
    else # accounting off: sacctmgr would refuse, so only check that it listens
        jk_port_in_use "$JK_DBD_PORT"
    fi
}
jk_ctld_ok() { timeout 15 scontrol ping | grep -q 'is UP'; }
jk_sacct_ok() {
    local err
    err=$(timeout 15 sacct -n -X -o JobID -S now 2>&1 >/dev/null) && [[ -z $err ]]
}
jk_node_state() { timeout 15 sinfo -h -N -n "$1" -o '%T' 2>/dev/null | head -n 1; }
# A node's slurmd answers when sinfo shows it without '*' (not responding), known, not down.
jk_node_responds() {
    local s
    s=$(jk_node_state "$1")
    [[ -n $s && $s != *'*' && $s != unknown && $s != down ]]
}
# A node takes jobs: it responds and is not drained.
jk_node_ok() {
    local s
    s=$(jk_node_state "$1")
    [[ $s =~ ^(idle|mixed|allocated|completing|planned)$ ]]
}
jk_partition_up() { [[ $(timeout 15 sinfo -h -p "$JK_PARTITION" -o '%a' | head -n 1) == up ]]; }
jk_ssh_ok() {
    timeout 15 ssh -F "$JK_SSH/config" "$1" true </dev/null
}

jk_ready() {
    case $1 in
    munged) jk_munge_ok ;;
    mariadb) jk_db_ok ;;
    slurmdbd) jk_dbd_ok ;;
    slurmctld) jk_ctld_ok ;;
    slurmd-*) jk_node_responds "${1#slurmd-}" ;;
    sshd) jk_ssh_ok n1 && jk_ssh_ok n2 ;;
    esac
}

# ---- configs ----
jk_sha() { sha256sum "$@" 2>/dev/null | cut -c1-16 | tr '\n' ' '; }

jk_confsha() {
    case $1 in
    slurmdbd) jk_sha "$JK_ETC/slurmdbd.conf" ;;
    slurmctld | slurmd-*) jk_sha "$JK_SLURM_CONF" ;;
    sshd) jk_sha "$JK_SSH/sshd_config" ;;
    *) echo - ;;
    esac
}

# jk_write FILE MODE: write stdin to FILE when the content differs (atomic rename).
jk_write() {
    local file=$1 mode=$2 tmp
    tmp=$(mktemp "$file.XXXXXX")
    cat >"$tmp"
    chmod "$mode" "$tmp"
    if [[ -f $file ]] && cmp -s "$tmp" "$file"; then
        rm -f "$tmp"
    else
        mv -f "$tmp" "$file"
    fi
}

# slurm.conf; $1 = accounting storage type (slurmdbd or none).
jk_slurm_conf() {
    local acct=${1:-slurmdbd} host
    host=$(hostname -s)
    cat <<EOF
# Written by tests/cluster/up.sh (jobkit test cluster). Edits are overwritten.
ClusterName=${JK_CLUSTER}
SlurmctldHost=${host}(127.0.0.1)
SlurmctldPort=${JK_CTLD_PORT}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# cred_expire (default 120 s) is also how long a requeued job is held PENDING with
# Reason=BeginTime before it may run again (slurm.conf(5)): 30 s (as Slurm's own test suite
# sets it) keeps the requeue tests short, leaves a test time to see the hold, and a loaded
# 2-core machine ample time to launch a step with its credential.
AuthInfo=socket=${JK_MUNGE_SOCKET},cred_expire=30
StateSaveLocation=${JK_DIR}/slurmctld
SlurmdSpoolDir=${JK_DIR}/spool-%n
SlurmctldPidFile=${JK_RUN}/slurmctld.pid
SlurmdPidFile=${JK_RUN}/slurmd-%n.pid
SlurmctldLogFile=${JK_LOG}/slurmctld.log
SlurmdLogFile=${JK_LOG}/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
MailProg=/bin/true
# Scheduling: the backfill pass every 5 s (default 30) so heterogeneous jobs start quickly.
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=5
# Requeue allowed (scontrol requeue, --requeue); jobs run as root in their submit dir.
JobRequeue=1
# Preemption between partitions (see the partitions below): off except in 'norequeue'.
PreemptType=preempt/partition_prio
PreemptMode=CANCEL
# Finished jobs leave squeue 10-20 s after they end (purge runs every max(10, MinJobAge) s);
# sacct still answers for them.
MinJobAge=10
# SIGTERM -> SIGKILL grace on cancel/timeout: short, yet time for a checkpoint.
KillWait=10
InactiveLimit=0
# Accounting: jobs go to slurmdbd (sacct); 'ctl.sh accounting off' switches to none.
AccountingStorageType=accounting_storage/${acct}
AccountingStorageHost=localhost
AccountingStoragePort=${JK_DBD_PORT}
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
JobCompType=jobcomp/none
# Two one-CPU nodes on this host, told apart by port; /etc/hosts maps n1 n2 to 127.0.0.1.
# One CPU each, on purpose: with two CPUs a node (tried in session 16, issue 25) the two CI
# lanes' jobs ran side by side, the machine's 2 cores were busier still, the no-cluster shards
# took ~400 s longer and the run was only 100 s shorter; and tests count on one CPU a node
# (render/test_cpus.py's refused request, the preemption tests' urgent job).
NodeName=n1 NodeHostname=${host} NodeAddr=127.0.0.1 Port=$(jk_slurmd_port n1) CPUs=1 RealMemory=4000 State=UNKNOWN
NodeName=n2 NodeHostname=${host} NodeAddr=127.0.0.1 Port=$(jk_slurmd_port n2) CPUs=1 RealMemory=4000 State=UNKNOWN
# Preemption by partition tier: only jobs of 'norequeue' can be preempted, and there the
# scheduler cancels them (PreemptMode=CANCEL, no requeue): the site jobkit must resubmit for
# (issue 16). A job in 'urgent' (higher tier) preempts them; 'debug' jobs are never preempted.
PartitionName=${JK_PARTITION} Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP PreemptMode=OFF
PartitionName=norequeue Nodes=n1,n2 MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=CANCEL GraceTime=30
PartitionName=urgent Nodes=n1,n2 MaxTime=INFINITE State=UP PriorityTier=2
EOF
}

jk_slurmdbd_conf() {
    cat <<EOF
# Written by tests/cluster/up.sh (jobkit test cluster). Edits are overwritten.
AuthType=auth/munge
AuthInfo=socket=${JK_MUNGE_SOCKET}
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=${JK_DBD_PORT}
SlurmUser=root
DebugLevel=info
LogFile=${JK_LOG}/slurmdbd.log
PidFile=${JK_RUN}/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=${JK_DB_PORT}
StorageUser=slurm
StoragePass=$(cat "$JK_DIR/mariadb/slurm.pass")
StorageLoc=slurm_acct_db
EOF
}

jk_sshd_config() {
    cat <<EOF
# Written by tests/cluster/up.sh (jobkit test cluster). Edits are overwritten.
Port ${JK_SSH_PORT}
ListenAddress 127.0.0.1
HostKey ${JK_SSH}/ssh_host_ed25519_key
PidFile ${JK_RUN}/sshd.pid
AuthorizedKeysFile ${JK_SSH}/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PrintMotd no
MaxStartups 100:30:200
MaxSessions 100
AcceptEnv LANG LC_*
# One OpenMP thread a process in every session, as .ci/run sets for its own processes (and
# sbatch's --export=ALL passes on): a rank of a one-process-a-host ssh job otherwise runs
# torch's two threads, which spin on these 2 shared cores (issue 25: 9.8 CPU-s a rank over
# ssh against 4.5 on the host). jobkit's scripts are unchanged: a site's sshd may do the same.
SetEnv OMP_NUM_THREADS=1
Subsystem sftp internal-sftp
EOF
}

# Client settings for n1/n2: used as ssh/config in the state folder and as the managed
# block in root's ~/.ssh/config.
jk_ssh_client_conf() {
    cat <<EOF
Host n1 n2
    Port ${JK_SSH_PORT}
    User root
    IdentityFile ${JK_SSH}/id_ed25519
    IdentitiesOnly yes
    UserKnownHostsFile ${JK_SSH}/known_hosts
    StrictHostKeyChecking yes
    CheckHostIP no
    BatchMode yes
    LogLevel ERROR
    ConnectTimeout 10
EOF
}

JK_BLOCK_BEGIN="# >>> ${JK_MARK} (managed by tests/cluster/up.sh; down.sh removes it) >>>"
JK_BLOCK_END="# <<< ${JK_MARK} <<<"

# Print FILE without the managed block.
jk_strip_block() {
    awk -v b="$JK_BLOCK_BEGIN" -v e="$JK_BLOCK_END" '
        $0 == b { skip = 1; next }
        $0 == e { skip = 0; next }
        !skip { print }' "$1"
}

# Rewrite FILE in place (truncate + write, no rename: /etc/hosts may be a bind mount).
jk_rewrite_in_place() {
    local file=$1 content
    content=$(cat)
    if [[ -n $content ]]; then
        printf '%s\n' "$content" >"$file"
    else
        : >"$file"
    fi
}

jk_remove_managed_files() {
    local ssh_config hosts_now
    ssh_config="$(jk_root_home)/.ssh/config"
    if [[ -f $ssh_config ]] && grep -qxF "$JK_BLOCK_BEGIN" "$ssh_config"; then
        jk_strip_block "$ssh_config" | jk_rewrite_in_place "$ssh_config"
        jk_say "removed the managed block from $ssh_config"
    fi
    if grep -qxF "$JK_HOSTS_LINE" /etc/hosts; then
        hosts_now=$(grep -vxF "$JK_HOSTS_LINE" /etc/hosts || true)
        printf '%s' "$hosts_now" | jk_rewrite_in_place /etc/hosts
        jk_say "removed '$JK_HOSTS_LINE' from /etc/hosts"
    fi
    if [[ -L $JK_SYSTEM_SLURM_CONF && $(readlink "$JK_SYSTEM_SLURM_CONF") == "$JK_SLURM_CONF" ]]; then
        rm -f "$JK_SYSTEM_SLURM_CONF"
        jk_say "removed the link $JK_SYSTEM_SLURM_CONF"
    fi
}

# ---- starting and stopping one daemon ----

# Record the config a daemon was started with, so up.sh can restart it when it changes.
jk_note_started() { jk_confsha "$1" >"$JK_RUN/$1.confsha"; }
jk_started_with() { cat "$JK_RUN/$1.confsha" 2>/dev/null || echo none; }

# Start DAEMON unless it runs; wait until it answers. Daemons get /dev/null as stdin and
# their own log as stdout/stderr, so callers that capture output never hang on them.
jk_start() {
    local d=$1 log port
    log=$(jk_logfile "$d")
    if jk_pid "$d" >/dev/null; then
        jk_wait 60 "$d" "$log" jk_ready "$d"
        return 0
    fi
    port=$(jk_port_of "$d")
    if [[ $port != - ]] && jk_port_in_use "$port"; then
        jk_die "$d: port $port on 127.0.0.1 is taken by another program (ours is not running)"
    fi
    if [[ $d == munged ]] && jk_munge_ok >/dev/null 2>&1; then
        jk_die "munged: another munged serves $JK_MUNGE_SOCKET (ours is not running)"
    fi
    # The subshell drops fd 9 (the lock of jk_lock): a daemon must not hold it.
    if ! (
        exec 9>&-
        jk_launch "$d" "$log"
    ); then
        tail -n 25 "$log" >&2 || true
        jk_die "$d failed to start (log: $log)"
    fi
    jk_note_started "$d"
    jk_wait 60 "$d" "$log" jk_ready "$d"
    jk_say "started $d (pid $(jk_pid "$d" || echo '?'))"
}

# Run DAEMON's program (each one detaches itself, or is detached with setsid -f).
jk_launch() {
    local d=$1 log=$2
    case $d in
    munged)
        install -d -o munge -g munge -m 0755 /run/munge
        rm -f "$JK_MUNGE_SOCKET" "$JK_MUNGE_SOCKET.lock"
        runuser -u munge -- /usr/sbin/munged --socket="$JK_MUNGE_SOCKET" \
            --key-file="$JK_DIR/munge/munge.key" --pid-file="$(jk_pidfile munged)" \
            --log-file="$log" --seed-file="$JK_DIR/munge/munged.seed" \
            </dev/null >>"$log" 2>&1
        ;;
    mariadb)
        install -d -o mysql -g mysql -m 0755 /run/mysqld
        rm -f "$JK_DB_SOCKET" "$JK_DB_SOCKET.lock"
        setsid -f /usr/sbin/mariadbd --no-defaults --user=mysql \
            --datadir="$JK_DIR/mariadb/data" --socket="$JK_DB_SOCKET" \
            --port="$JK_DB_PORT" --bind-address=127.0.0.1 --skip-name-resolve \
            --pid-file="$(jk_pidfile mariadb)" --log-error="$log" \
            --innodb-buffer-pool-size=32M --innodb-log-file-size=16M \
            </dev/null >>"$log" 2>&1
        ;;
    slurmdbd)
        slurmdbd </dev/null >>"$log" 2>&1
        ;;
    slurmctld)
        slurmctld -f "$JK_SLURM_CONF" </dev/null >>"$log" 2>&1
        ;;
    slurmd-*)
        slurmd -N "${d#slurmd-}" -f "$JK_SLURM_CONF" </dev/null >>"$log" 2>&1
        ;;
    sshd)
        install -d -m 0755 /run/sshd
        /usr/sbin/sshd -f "$JK_SSH/sshd_config" -E "$log" </dev/null >/dev/null 2>&1
        ;;
    esac
}

# Stop DAEMON (TERM, then KILL after 30 s); harmless when it does not run.
jk_stop() {
    local d=$1 pid deadline
    pid=$(jk_pid "$d") || return 0
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$((SECONDS + 30))
    while jk_alive "$pid"; do
        if ((SECONDS >= deadline)); then
            jk_say "$d (pid $pid) ignored SIGTERM for 30 s: SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            sleep 1
            break
        fi
        sleep 0.1
    done
    # Give init a moment to reap it, so ps no longer lists it (not needed for correctness).
    deadline=$((SECONDS + 3))
    while [[ -e /proc/$pid ]] && ((SECONDS < deadline)); do sleep 0.1; done
    rm -f "$(jk_pidfile "$d")" "$JK_RUN/$d.confsha"
    jk_say "stopped $d (pid $pid)"
}

# Serialize up/down/ctl (two callers at once must not start a daemon twice).
jk_lock() {
    local f=/run/lock/${JK_MARK}-scripts.lock
    mkdir -p /run/lock
    exec 9>"$f"
    flock -w 600 9 || jk_die "another tests/cluster script held $f for 600 s"
}
