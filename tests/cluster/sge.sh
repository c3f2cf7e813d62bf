#!/usr/bin/env bash
# Son of Grid Engine (SGE 8.1.9, Debian bookworm packages) beside the Slurm test cluster:
# one qmaster (this host, port 6444) and two exec hosts n1 and n2 (execd port 6445), queue
# all.q (1 slot per host), parallel environment jobkit (allocation_rule 1, tight integration).
#
#   bash tests/cluster/sge.sh up       # download/unpack the packages, start, configure, wait
#   bash tests/cluster/sge.sh status   # daemons, queue instances; exit 0 when all answer
#   bash tests/cluster/sge.sh down     # delete jobs, stop the daemons, remove the network
#
# The gridengine packages are NOT installed (their qsub/qstat would clash with Slurm's Torque
# wrappers): they are unpacked with dpkg -x under $JK_DIR/sge/pkg and run by absolute path;
# only their shared-library dependencies are installed. Callers source $JK_DIR/sge/env.sh.
#
# Two exec hosts on one machine: SGE tells hosts apart by the resolved address of each
# connection, so n1 and n2 each get a network namespace (jk-sge-n1, jk-sge-n2, addresses
# 10.77.77.11/.12 on the bridge jksge0, whose host side 10.77.77.1 is the qmaster host), their
# own UTS namespace (hostname n1 / n2) and a private /etc/hosts (bind mount) where n1, n2 and
# the qmaster host resolve to those addresses. The qmaster runs in the host network with a
# private /etc/hosts of the same kind (the system one maps n1 n2 to 127.0.0.1 for Slurm). Each
# node namespace also runs an sshd on port 2222, so `ssh n2` from a job on n1 reaches n2.
# See docs/cluster.md.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"

SGE_DIR=$JK_DIR/sge
SGE_CELL_NAME=default
SGE_QMASTER_PORT_NO=6444
SGE_EXECD_PORT_NO=6445
SGE_QUEUE=all.q
SGE_PE=jobkit
SGE_NODES=(n1 n2)
SGE_BRIDGE=jksge0
SGE_NET=10.77.77
SGE_MASTER_IP=$SGE_NET.1
SGE_DEBS=(gridengine-common gridengine-client gridengine-master gridengine-exec)
# What ldd asks for (libc, libcrypt, libtinfo, libpam are always there).
SGE_LIBS=(libjemalloc2 libhwloc15 libdb5.3 libtirpc3 libmunge2 libssl3 libpam0g)

SGE_PKG=$SGE_DIR/pkg
SGE_LIB=$SGE_PKG/usr/lib/gridengine
SGE_BIN=$SGE_DIR/bin/lx-amd64
SGE_CELLDIR=$SGE_DIR/$SGE_CELL_NAME
SGE_COMMON=$SGE_CELLDIR/common
SGE_QSPOOL=$SGE_CELLDIR/spool/qmaster
SGE_ESPOOL=$SGE_CELLDIR/spool/execd
SGE_NETDIR=$SGE_DIR/net
SGE_RUN=$SGE_DIR/run
SGE_ENV=$SGE_DIR/env.sh
# The spooling library is dlopen()ed from this fixed path (compiled into the Debian binaries).
SGE_DLOPEN_DIR=/usr/lib/gridengine

export SGE_ROOT=$SGE_DIR SGE_CELL=$SGE_CELL_NAME
export SGE_QMASTER_PORT=$SGE_QMASTER_PORT_NO SGE_EXECD_PORT=$SGE_EXECD_PORT_NO
unset SGE_ARCH

started_at=$SECONDS
master=$(hostname -s)

node_ip() {
    case $1 in
    n1) echo "$SGE_NET.11" ;;
    n2) echo "$SGE_NET.12" ;;
    *) jk_die "unknown SGE node $1" ;;
    esac
}
netns_of() { echo "jk-sge-$1"; }

# ---- daemons: sge-qmaster, sge-execd-NODE, sge-sshd-NODE ----
sge_daemons() {
    local n
    echo sge-qmaster
    for n in "${SGE_NODES[@]}"; do echo "sge-execd-$n"; done
    for n in "${SGE_NODES[@]}"; do echo "sge-sshd-$n"; done
}

sge_pidfile() {
    case $1 in
    sge-qmaster) echo "$SGE_QSPOOL/qmaster.pid" ;;
    sge-execd-*) echo "$SGE_ESPOOL/${1#sge-execd-}/execd.pid" ;;
    sge-sshd-*) echo "$SGE_RUN/$1.pid" ;;
    *) jk_die "unknown SGE daemon $1" ;;
    esac
}

sge_comm() {
    case $1 in
    sge-qmaster) echo sge_qmaster ;;
    sge-execd-*) echo sge_execd ;;
    sge-sshd-*) echo sshd ;;
    esac
}

sge_log() {
    case $1 in
    sge-qmaster) echo "$SGE_QSPOOL/messages" ;;
    sge-execd-*) echo "$SGE_ESPOOL/${1#sge-execd-}/messages" ;;
    sge-sshd-*) echo "$JK_LOG/$1.log" ;;
    esac
}

sge_pid() {
    local f pid comm
    f=$(sge_pidfile "$1")
    [[ -r $f ]] || return 1
    pid=$(tr -dc 0-9 <"$f")
    [[ -n $pid ]] || return 1
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
    [[ $comm == "$(sge_comm "$1")" ]] && jk_alive "$pid" || return 1
    echo "$pid"
}

# Run an SGE command by absolute path (clients read SGE_ROOT, SGE_CELL and the ports).
sge() { "$SGE_BIN/$1" "${@:2}"; }

# Run an SGE command where n1 and n2 resolve as SGE knows them: in the qmaster's mount
# namespace (its private /etc/hosts). Needed for commands that name a host.
sge_admin() {
    local pid
    pid=$(sge_pid sge-qmaster) || jk_die "sge_qmaster does not run"
    nsenter -t "$pid" -m -- "$SGE_BIN/$1" "${@:2}"
}

# ---- readiness probes ----
qmaster_ok() { timeout 15 "$SGE_BIN/qconf" -sh; }
# The qmaster got a load report from NODE's execd.
execd_ok() {
    timeout 15 "$SGE_BIN/qhost" | awk -v h="$1" '$1 == h && $4 != "-" { found = 1 } END { exit !found }'
}
# Queue instance all.q@NODE exists and has no state flag (u, a, d, E, ...).
queue_ok() {
    timeout 15 "$SGE_BIN/qstat" -f -q "$SGE_QUEUE" |
        awk -v q="$SGE_QUEUE@$1" '$1 == q { found = 1; if (NF > 5) bad = 1 } END { exit !(found && !bad) }'
}
sshd_ok() { timeout 15 ip netns exec "$(netns_of "$1")" ssh "$1" true </dev/null; }

sge_ready() {
    case $1 in
    sge-qmaster) qmaster_ok ;;
    sge-execd-*) execd_ok "${1#sge-execd-}" ;;
    sge-sshd-*) sshd_ok "${1#sge-sshd-}" ;;
    esac
}

# ---- install: packages unpacked, never installed ----
apt_get() {
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

install_libs() {
    local missing=() p
    for p in "${SGE_LIBS[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
            missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    jk_say "installing SGE's libraries: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -q -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "${missing[@]}" ||
        {
            apt_get update
            apt_get install -y --no-install-recommends "${missing[@]}"
        }
}

download_debs() {
    local have=1 p
    install -d -m 0755 "$SGE_DIR/debs"
    for p in "${SGE_DEBS[@]}"; do
        compgen -G "$SGE_DIR/debs/${p}_*.deb" >/dev/null || have=0
    done
    ((have)) && return 0
    jk_say "downloading ${SGE_DEBS[*]} into $SGE_DIR/debs"
    # apt's _apt user cannot write to our folder: download as root (quietly).
    (cd "$SGE_DIR/debs" && apt-get -q download "${SGE_DEBS[@]}" 2>&1 | grep -v unsandboxed) ||
        {
            apt_get update
            (cd "$SGE_DIR/debs" && apt-get -q download "${SGE_DEBS[@]}" 2>&1 | grep -v unsandboxed)
        }
    for p in "${SGE_DEBS[@]}"; do
        compgen -G "$SGE_DIR/debs/${p}_*.deb" >/dev/null || jk_die "apt-get download $p failed"
    done
}

unpack() {
    local stamp=$SGE_PKG/.unpacked deb want name
    want=$(cd "$SGE_DIR/debs" && printf '%s ' ./*.deb)
    if [[ ! -x $SGE_LIB/sge_qmaster || $(cat "$stamp" 2>/dev/null) != "$want" ]]; then
        jk_say "unpacking the gridengine packages into $SGE_PKG"
        rm -rf "$SGE_PKG"
        install -d -m 0755 "$SGE_PKG"
        for deb in "$SGE_DIR"/debs/*.deb; do dpkg -x "$deb" "$SGE_PKG"; done
        printf '%s\n' "$want" >"$stamp"
    fi
    # The binaries' RUNPATH is $ORIGIN/../../lib/lx-amd64.
    ln -sfn gridengine "$SGE_PKG/usr/lib/lx-amd64"
    # Upstream layout: $SGE_ROOT/bin/lx-amd64 holds the commands and daemons (links to the
    # real binaries; usr/bin and usr/sbin of the packages name them), utilbin the helpers.
    install -d -m 0755 "$SGE_BIN" "$SGE_DIR/utilbin"
    for name in "$SGE_PKG"/usr/bin/* "$SGE_PKG"/usr/sbin/*; do
        name=${name##*/}
        [[ -f $SGE_LIB/$name ]] && ln -sfn "$SGE_LIB/$name" "$SGE_BIN/$name"
    done
    ln -sfn "$SGE_LIB" "$SGE_DIR/utilbin/lx-amd64"
    ln -sfn "$SGE_PKG/usr/share/gridengine/util" "$SGE_DIR/util"
    # Compiled-in dlopen path of the spooling libraries: two links, nothing else there.
    install -d -m 0755 "$SGE_DLOPEN_DIR"
    for name in libspoolc.so libspoolb.so; do
        [[ $(readlink "$SGE_DLOPEN_DIR/$name" 2>/dev/null) == "$SGE_LIB/$name" ]] ||
            ln -sfn "$SGE_LIB/$name" "$SGE_DLOPEN_DIR/$name"
    done
    if ldd "$SGE_LIB/sge_qmaster" "$SGE_LIB/sge_execd" "$SGE_LIB/qsub" | grep -q 'not found'; then
        ldd "$SGE_LIB/sge_qmaster" "$SGE_LIB/sge_execd" "$SGE_LIB/qsub" | grep 'not found' >&2
        jk_die "SGE binaries miss libraries (see above)"
    fi
}

# ---- network: a bridge, one namespace per node ----
net_up() {
    local n ns ip
    ip link show "$SGE_BRIDGE" >/dev/null 2>&1 || ip link add "$SGE_BRIDGE" type bridge
    ip -4 addr show dev "$SGE_BRIDGE" | grep -q "inet $SGE_MASTER_IP/24" ||
        ip addr add "$SGE_MASTER_IP/24" dev "$SGE_BRIDGE"
    ip link set "$SGE_BRIDGE" up
    for n in "${SGE_NODES[@]}"; do
        ns=$(netns_of "$n")
        ip=$(node_ip "$n")
        if [[ ! -e /run/netns/$ns ]]; then
            # A host-side link left from an earlier namespace has no peer we can reach.
            ip link del "jksge-$n" >/dev/null 2>&1 || true
            ip netns add "$ns"
        fi
        ip link show "jksge-$n" >/dev/null 2>&1 ||
            ip link add "jksge-$n" type veth peer name eth0 netns "$ns"
        ip link set "jksge-$n" master "$SGE_BRIDGE" up
        ip -n "$ns" link set lo up
        ip -n "$ns" -4 addr show dev eth0 | grep -q "inet $ip/24" ||
            ip -n "$ns" addr add "$ip/24" dev eth0
        ip -n "$ns" link set eth0 up
    done
}

net_down() {
    local n
    for n in "${SGE_NODES[@]}"; do
        [[ -e /run/netns/$(netns_of "$n") ]] && ip netns del "$(netns_of "$n")"
        ip link del "jksge-$n" >/dev/null 2>&1 || true
    done
    ip link del "$SGE_BRIDGE" >/dev/null 2>&1 || true
}

# ---- cell ----
hosts_file() { # $1 = master|node
    local n
    if [[ $1 == master ]]; then
        # Clients on this host connect from 127.0.0.1: it must resolve to the master name.
        printf '127.0.0.1 %s localhost\n' "$master"
    else
        printf '127.0.0.1 localhost\n'
    fi
    printf '%s %s\n' "$SGE_MASTER_IP" "$master"
    for n in "${SGE_NODES[@]}"; do printf '%s %s\n' "$(node_ip "$n")" "$n"; done
}

write_cell() {
    install -d -m 0755 "$SGE_DIR" "$SGE_NETDIR" "$SGE_RUN" "$SGE_COMMON" "$SGE_QSPOOL" \
        "$SGE_ESPOOL" "$JK_LOG"
    hosts_file master | jk_write "$SGE_NETDIR/hosts-master" 0644
    hosts_file node | jk_write "$SGE_NETDIR/hosts-node" 0644
    cat <<EOF | jk_write "$SGE_COMMON/bootstrap" 0644
# Version: 8.1.9
# Written by tests/cluster/sge.sh (jobkit test cluster). Edits are overwritten.
admin_user              none
default_domain          none
ignore_fqdn             true
spooling_method         classic
spooling_lib            libspoolc
spooling_params         $SGE_COMMON;$SGE_QSPOOL
binary_path             $SGE_DIR/bin
qmaster_spool_dir       $SGE_QSPOOL
security_mode           none
listener_threads        2
worker_threads          2
scheduler_threads       1
EOF
    echo "$master" | jk_write "$SGE_COMMON/act_qmaster" 0644
    # Clients on this host resolve themselves to "localhost" (127.0.0.1): same host as master.
    echo "$master localhost" | jk_write "$SGE_COMMON/host_aliases" 0644
    printf 'SGE_ROOT=%s; export SGE_ROOT\nSGE_CELL=%s; export SGE_CELL\n' \
        "$SGE_DIR" "$SGE_CELL_NAME" | jk_write "$SGE_COMMON/settings.sh" 0644
    cat <<EOF | jk_write "$SGE_ENV" 0644
# Written by tests/cluster/sge.sh: source it to use the test cluster's SGE commands.
export SGE_ROOT=$SGE_DIR
export SGE_CELL=$SGE_CELL_NAME
export SGE_QMASTER_PORT=$SGE_QMASTER_PORT_NO
export SGE_EXECD_PORT=$SGE_EXECD_PORT_NO
export PATH=$SGE_BIN:\$PATH
EOF
    # sge_shepherd drops TMPDIR from the job environment (TMP, same folder, survives): the
    # queue's starter method puts it back.
    cat <<'EOF' | jk_write "$SGE_DIR/starter.sh" 0755
#!/bin/sh
# Written by tests/cluster/sge.sh: starter_method of the test queue.
[ -z "${TMPDIR:-}" ] && [ -n "${TMP:-}" ] && TMPDIR=$TMP && export TMPDIR
exec "$@"
EOF
    [[ -e $SGE_CELLDIR/.initialized ]] && return 0
    jk_say "initialising the SGE cell (classic spooling) in $SGE_CELLDIR"
    # The global configuration: root may run jobs, jobs start with their #! line, accounting
    # written at once, finished jobs leave qstat at once (qacct answers for them).
    sed -e "s|^execd_spool_dir .*|execd_spool_dir        $SGE_ESPOOL|" \
        -e 's|^mailer .*|mailer                 /bin/true|' \
        -e 's|^shell_start_mode .*|shell_start_mode       unix_behavior|' \
        -e 's|^min_uid .*|min_uid                0|' \
        -e 's|^min_gid .*|min_gid                0|' \
        -e 's|^load_report_time .*|load_report_time       00:00:10|' \
        -e 's|^loglevel .*|loglevel               log_info|' \
        -e 's|^reporting_params .*|reporting_params       accounting=true reporting=false flush_time=00:00:01 joblog=false sharelog=00:00:00 accounting_flush_time=00:00:00|' \
        -e 's|^finished_jobs .*|finished_jobs          0|' \
        "$SGE_PKG/usr/share/gridengine/default-configuration" >"$SGE_RUN/global.conf"
    (
        export LD_LIBRARY_PATH=$SGE_LIB
        "$SGE_LIB/spoolinit" classic libspoolc "$SGE_COMMON;$SGE_QSPOOL" init
        "$SGE_LIB/spooldefaults.bin" configuration "$SGE_RUN/global.conf"
        "$SGE_LIB/spooldefaults.bin" complexes "$SGE_PKG/usr/share/gridengine/util/resources/centry"
        "$SGE_LIB/spooldefaults.bin" usersets "$SGE_PKG/usr/share/gridengine/util/resources/usersets"
        "$SGE_LIB/spooldefaults.bin" managers root
    ) >>"$JK_LOG/sge-init.log" 2>&1 || {
        tail -n 25 "$JK_LOG/sge-init.log" >&2
        jk_die "SGE cell initialisation failed (log: $JK_LOG/sge-init.log)"
    }
    touch "$SGE_CELLDIR/.initialized"
}

sge_confsha() {
    case $1 in
    sge-qmaster) jk_sha "$SGE_COMMON/bootstrap" "$SGE_COMMON/act_qmaster" \
        "$SGE_COMMON/host_aliases" "$SGE_NETDIR/hosts-master" ;;
    sge-execd-*) jk_sha "$SGE_COMMON/bootstrap" "$SGE_NETDIR/hosts-node" ;;
    sge-sshd-*) jk_sha "$SGE_RUN/sshd_config" "$SGE_NETDIR/hosts-node" ;;
    esac
}

sshd_conf() {
    # The test cluster's sshd settings, listening on every address of the node's namespace.
    jk_sshd_config | sed -e 's/^ListenAddress .*/ListenAddress 0.0.0.0/' \
        -e '/^PidFile /d' | jk_write "$SGE_RUN/sshd_config" 0600
}

# ---- start / stop ----
# Inside the new namespaces: bind the private hosts file over /etc/hosts, set the hostname
# (when one is given) and run the daemon.
# shellcheck disable=SC2016  # expanded by the inner bash
SGE_NS_INIT='mount --bind "$1" /etc/hosts && { [[ -z $2 ]] || hostname "$2"; } && shift 2 && exec "$@"'

launch() {
    local d=$1 log=$2 n
    case $d in
    sge-qmaster)
        unshare --mount --propagation private -- /bin/bash -c "$SGE_NS_INIT" _ \
            "$SGE_NETDIR/hosts-master" "" "$SGE_BIN/sge_qmaster" </dev/null >>"$log" 2>&1
        ;;
    sge-execd-*)
        n=${d#sge-execd-}
        install -d -m 0755 "$SGE_ESPOOL/$n"
        ip netns exec "$(netns_of "$n")" unshare --mount --uts --propagation private -- \
            /bin/bash -c "$SGE_NS_INIT" _ "$SGE_NETDIR/hosts-node" "$n" \
            "$SGE_BIN/sge_execd" </dev/null >>"$log" 2>&1
        ;;
    sge-sshd-*)
        n=${d#sge-sshd-}
        install -d -m 0755 /run/sshd
        ip netns exec "$(netns_of "$n")" unshare --mount --uts --propagation private -- \
            /bin/bash -c "$SGE_NS_INIT" _ "$SGE_NETDIR/hosts-node" "$n" \
            /usr/sbin/sshd -f "$SGE_RUN/sshd_config" -o PidFile="$(sge_pidfile "$d")" \
            -E "$log" </dev/null >/dev/null 2>&1
        ;;
    esac
}

start() {
    local d=$1 log
    log=$(sge_log "$d")
    install -d -m 0755 "$(dirname "$log")"
    if sge_pid "$d" >/dev/null && [[ $(cat "$SGE_RUN/$d.confsha" 2>/dev/null) != "$(sge_confsha "$d")" ]]; then
        jk_say "$d: config changed since it started; restarting it"
        stop "$d"
    fi
    if ! sge_pid "$d" >/dev/null; then
        if [[ $d == sge-qmaster ]] && jk_port_in_use "$SGE_QMASTER_PORT_NO"; then
            jk_die "$d: port $SGE_QMASTER_PORT_NO is taken by another program (ours is not running)"
        fi
        if ! (
            exec 9>&-
            launch "$d" "$log"
        ); then
            tail -n 25 "$log" >&2 || true
            jk_die "$d failed to start (log: $log)"
        fi
        sge_confsha "$d" >"$SGE_RUN/$d.confsha"
        jk_wait 60 "$d" "$log" sge_pid "$d"
        jk_say "started $d (pid $(sge_pid "$d" || echo '?'))"
    fi
    jk_wait 60 "$d" "$log" sge_ready "$d"
}

stop() {
    local d=$1 pid deadline
    pid=$(sge_pid "$d") || return 0
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
    rm -f "$(sge_pidfile "$d")" "$SGE_RUN/$d.confsha"
    jk_say "stopped $d (pid $pid)"
}

# ---- configuration through the qmaster (idempotent) ----
# Run CMD; print its output only when it fails.
quiet() {
    local out
    out=$("$@" 2>&1) || {
        printf '%s\n' "$out" >&2
        jk_die "failed: ${*##*/}"
    }
}

configure() {
    local h tmp
    tmp=$(mktemp -d)
    # shellcheck disable=SC2064  # expand now
    trap "rm -rf '$tmp'" RETURN
    for h in "$master" "${SGE_NODES[@]}"; do
        sge qconf -sh 2>/dev/null | grep -qx "$h" || quiet sge_admin qconf -ah "$h"
        sge qconf -ss 2>/dev/null | grep -qx "$h" || quiet sge_admin qconf -as "$h"
    done
    # Scheduler: a pass every second, placement by queue sequence (n1 first), no load games.
    sge qconf -ssconf | sed -e 's/^schedule_interval .*/schedule_interval 0:0:1/' \
        -e 's/^flush_submit_sec .*/flush_submit_sec 1/' \
        -e 's/^flush_finish_sec .*/flush_finish_sec 1/' \
        -e 's/^queue_sort_method .*/queue_sort_method seqno/' \
        -e 's/^job_load_adjustments .*/job_load_adjustments NONE/' \
        -e 's/^load_adjustment_decay_time .*/load_adjustment_decay_time 0:0:0/' >"$tmp/sconf"
    sge qconf -ssconf | cmp -s - "$tmp/sconf" || quiet sge_admin qconf -Msconf "$tmp/sconf"
    cat >"$tmp/pe" <<EOF
pe_name            $SGE_PE
slots              999
user_lists         NONE
xuser_lists        NONE
start_proc_args    NONE
stop_proc_args     NONE
allocation_rule    1
control_slaves     TRUE
job_is_first_task  FALSE
urgency_slots      min
accounting_summary FALSE
qsort_args         NONE
EOF
    if sge qconf -spl 2>/dev/null | grep -qx "$SGE_PE"; then
        quiet sge_admin qconf -Mp "$tmp/pe"
    else
        quiet sge_admin qconf -Ap "$tmp/pe"
    fi
    queue_conf >"$tmp/$SGE_QUEUE"
    if sge qconf -sql 2>/dev/null | grep -qx "$SGE_QUEUE"; then
        quiet sge_admin qconf -Mq "$tmp/$SGE_QUEUE"
    else
        quiet sge_admin qconf -Aq "$tmp/$SGE_QUEUE"
    fi
}

queue_conf() {
    cat <<EOF
qname                 $SGE_QUEUE
hostlist              ${SGE_NODES[*]}
seq_no                0
load_thresholds       NONE
suspend_thresholds    NONE
nsuspend              1
suspend_interval      00:05:00
priority              0
min_cpu_interval      00:05:00
processors            UNDEFINED
qtype                 BATCH INTERACTIVE
ckpt_list             NONE
pe_list               $SGE_PE
rerun                 FALSE
slots                 1
tmpdir                /tmp
shell                 /bin/bash
prolog                NONE
epilog                NONE
shell_start_mode      unix_behavior
starter_method        $SGE_DIR/starter.sh
suspend_method        NONE
resume_method         NONE
terminate_method      NONE
notify                00:00:10
owner_list            NONE
user_lists            NONE
xuser_lists           NONE
subordinate_list      NONE
complex_values        NONE
projects              NONE
xprojects             NONE
calendar              NONE
initial_state         default
s_rt                  INFINITY
h_rt                  INFINITY
s_cpu                 INFINITY
h_cpu                 INFINITY
s_fsize               INFINITY
h_fsize               INFINITY
s_data                INFINITY
h_data                INFINITY
s_stack               INFINITY
h_stack               INFINITY
s_core                INFINITY
h_core                INFINITY
s_rss                 INFINITY
h_rss                 INFINITY
s_vmem                INFINITY
h_vmem                INFINITY
EOF
}

# Queue instances left in error/disabled state by an earlier run come back to service.
open_queue() {
    local n
    for n in "${SGE_NODES[@]}"; do
        queue_ok "$n" && continue
        jk_say "queue $SGE_QUEUE@$n has a state flag: clearing and enabling it"
        sge_admin qmod -c "$SGE_QUEUE@$n" >/dev/null 2>&1 || true
        sge_admin qmod -e "$SGE_QUEUE@$n" >/dev/null 2>&1 || true
    done
}

# What the pytest fixtures read (paths, names, ports), beside cluster.json.
write_json() {
    cat <<EOF | jk_write "$SGE_DIR/sge.json" 0644
{
  "env_sh": "$SGE_ENV",
  "sge_root": "$SGE_DIR",
  "sge_cell": "$SGE_CELL_NAME",
  "qmaster_port": $SGE_QMASTER_PORT_NO,
  "execd_port": $SGE_EXECD_PORT_NO,
  "bin_dir": "$SGE_BIN",
  "master_host": "$master",
  "nodes": ["n1", "n2"],
  "queue": "$SGE_QUEUE",
  "pe": "$SGE_PE",
  "slots_per_node": 1,
  "accounting_file": "$SGE_COMMON/accounting",
  "qmaster_messages": "$SGE_QSPOOL/messages"
}
EOF
}

sge_clear_leftover_jobs() {
    local left
    left=$(sge qstat -u '*' 2>/dev/null | awk 'NR > 2 { print $1 }' | tr '\n' ' ')
    [[ -n ${left// /} ]] || return 0
    jk_say "CI: deleting SGE jobs left by an earlier run: $left"
    sge qdel -f -u '*' >/dev/null 2>&1 || true
}

cmd_up() {
    local n
    jk_require_root
    jk_check_dir
    [[ ${JK_SGE_LOCKED:-0} == 1 ]] || jk_lock
    [[ -x /usr/sbin/sshd ]] || jk_die "sshd missing: run tests/cluster/up.sh (it installs openssh-server)"
    [[ -s $JK_SSH/id_ed25519 ]] || jk_die "no ssh keys in $JK_SSH: run tests/cluster/up.sh first"
    install_libs
    download_debs
    unpack
    write_cell
    sshd_conf
    net_up
    start sge-qmaster
    # n1 and n2 must be admin hosts before their execd first registers.
    configure
    for n in "${SGE_NODES[@]}"; do start "sge-execd-$n"; done
    for n in "${SGE_NODES[@]}"; do
        jk_wait 60 "execd $n" "$(sge_log "sge-execd-$n")" execd_ok "$n"
    done
    open_queue
    for n in "${SGE_NODES[@]}"; do
        jk_wait 60 "queue $SGE_QUEUE@$n" "$(sge_log sge-qmaster)" queue_ok "$n"
    done
    for n in "${SGE_NODES[@]}"; do start "sge-sshd-$n"; done
    # CI starts from an empty queue (the qmaster keeps jobs of an interrupted earlier run).
    if [[ ${CI:-} == true ]]; then sge_clear_leftover_jobs; fi
    write_json
    jk_say "SGE: qmaster $master:$SGE_QMASTER_PORT_NO, execd n1 n2 :$SGE_EXECD_PORT_NO, queue $SGE_QUEUE, pe $SGE_PE"
    jk_say "SGE: source $SGE_ENV to use qsub/qstat/qacct (ready in $((SECONDS - started_at)) s)"
}

cmd_down() {
    local d deadline
    jk_require_root
    jk_check_dir
    [[ ${JK_SGE_LOCKED:-0} == 1 ]] || jk_lock
    if sge_pid sge-qmaster >/dev/null && qmaster_ok >/dev/null 2>&1; then
        if [[ -n $(sge qstat -u '*' 2>/dev/null) ]]; then
            jk_say "SGE: deleting jobs"
            sge qdel -u '*' >/dev/null 2>&1 || true
            deadline=$((SECONDS + 30))
            while [[ -n $(sge qstat -u '*' 2>/dev/null) ]] && ((SECONDS < deadline)); do
                sleep 0.5
            done
            sge qdel -f -u '*' >/dev/null 2>&1 || true
        fi
    fi
    for d in $(sge_daemons | tac); do stop "$d"; done
    net_down
    jk_say "SGE down (state kept in $SGE_DIR)"
}

cmd_status() {
    local d pid ok=1 n out
    echo "SGE (state folder $SGE_DIR; env: source $SGE_ENV)"
    for d in $(sge_daemons); do
        if pid=$(sge_pid "$d"); then
            printf '  %-14s up    pid %s\n' "$d" "$pid"
        else
            printf '  %-14s DOWN  (pid file %s)\n' "$d" "$(sge_pidfile "$d")"
            ok=0
        fi
    done
    if out=$(timeout 15 "$SGE_BIN/qstat" -f 2>&1); then
        printf '  %s\n' "${out//$'\n'/$'\n'  }"
    else
        printf '  qstat FAILED: %s\n' "$out"
        ok=0
    fi
    for n in "${SGE_NODES[@]}"; do
        if queue_ok "$n" >/dev/null 2>&1; then
            printf '  %-22s ok\n' "queue $SGE_QUEUE@$n"
        else
            printf '  %-22s FAILED\n' "queue $SGE_QUEUE@$n"
            ok=0
        fi
    done
    ((ok)) && {
        echo "SGE status: UP"
        return 0
    }
    echo "SGE status: NOT (fully) UP; start with: bash tests/cluster/sge.sh up"
    return 1
}

case ${1:-} in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
*)
    echo "usage: $0 up|down|status" >&2
    exit 2
    ;;
esac
