# shellcheck shell=bash disable=SC2154,SC2016  # jobkit_hosts comes from the including script; single-quoted code is meant
# jobkit's multi-host launcher library: start one runner per host, watch them, stop them in
# order, report one exit code. Plain bash, included verbatim by templates/common/nodes.sh.j2
# (no Jinja here: CI shellchecks this file as it is). The including script defines first:
#   jobkit_hosts                 the hosts, in order (host 0 hosts the rendezvous)
#   jobkit_run_on_node I CODE    run bash CODE on host I (locally, over ssh, pbsdsh, qrsh...)
#   jobkit_node_script I         the bash code that runs host I's torchrun
#   jobkit_pgid_file I           where host I keeps its torchrun's process-group id
#   jobkit_program_rc RC SINCE F the program's exit code, from host I's RC and output F
#   jobkit_node_logs_itself      1 when host I writes node-I.out into the run folder itself
#   jobkit_exit_file             the run folder's exit-code file
#   JOBKIT_RUN_DIR               the run folder
: "${JOBKIT_RUN_DIR:?}" "${jobkit_exit_file:?}" "${jobkit_node_logs_itself:?}"

# jobkit_signal_script I SIGNAL [group]: bash code that sends SIGNAL to host I's torchrun, or
# with "group" to its process group and to the groups of its children (torchrun starts its
# workers in sessions of their own). It fails while torchrun has not started.
jobkit_signal_script() {
  local file
  file=$(jobkit_pgid_file "$1")
  if [[ "${3:-}" == group ]]; then
    printf '%s\n' "f=$file" '[ -r "$f" ] || exit 1' 'p=$(cat "$f")' \
      'for c in $(pgrep -P "$p"); do kill -s '"$2"' -- "-$c" 2>/dev/null || kill -s '"$2"' "$c"; done' \
      'kill -s '"$2"' -- "-$p"'
  else
    printf '%s\n' "f=$file" '[ -r "$f" ] && kill -s '"$2"' "$(cat "$f")"'
  fi
}

# ---- Starting and watching the hosts ----------------------------------------------------------
jobkit_node_pids=()     # per host: the local process that runs it (ssh, pbsdsh, bash)
jobkit_node_rc=()       # per host: its exit code once it has ended
jobkit_node_stopped=()  # per host: 1 once its torchrun was asked to stop
jobkit_first_rc=""      # exit code of the first host that failed
jobkit_stop_deadline="" # SECONDS value after which stopping turns into killing
jobkit_signal_name=""   # the signal that stopped the launcher, if any
jobkit_killed=""        # set once the hosts left after the grace period were killed
jobkit_time_deadline="" # SECONDS value of the job's time limit, where the launcher keeps it

# jobkit_launch_node I: run host I to its end; return its exit code. Where the host writes
# node-I.out into the (shared) run folder itself, its exit code comes back in node-I.exit.
jobkit_launch_node() {
  local rc=0 since
  since=$(date +%Y-%m-%d_%H:%M:%S)
  if (( jobkit_node_logs_itself )); then
    rm -f -- "$JOBKIT_RUN_DIR/node-$1.exit"
    jobkit_run_on_node "$1" "$(jobkit_node_script "$1")" </dev/null || rc=$?
    if [[ -r "$JOBKIT_RUN_DIR/node-$1.exit" ]]; then
      rc=$(<"$JOBKIT_RUN_DIR/node-$1.exit")
    fi
  else
    # Host I writes node-I-YYYYmmdd-HHMMSS.out (when it started); node-I.out links to it, the
    # name jobkit logs, doctor and the latest-node-I.out links read (docs/logs.md).
    local name
    name="node-$1-$(date +%Y%m%d-%H%M%S).out"
    ln -sfn -- "$name" "$JOBKIT_RUN_DIR/node-$1.out"
    jobkit_run_on_node "$1" "$(jobkit_node_script "$1")" \
      </dev/null >"$JOBKIT_RUN_DIR/$name" 2>&1 || rc=$?
  fi
  # The program's own exit code (torchrun's is 1 whatever its worker's).
  rc=$(jobkit_program_rc "$rc" "$since" "$JOBKIT_RUN_DIR/node-$1.out")
  return "$rc"
}

# Job control puts each host's runner in a process group of its own: a signal sent to the
# launcher's group (jobkit cancel, Ctrl-C) reaches only the launcher, which stops the hosts
# in order instead of losing track of them.
jobkit_start_nodes() {
  local i
  set -m
  for i in "${!jobkit_hosts[@]}"; do
    jobkit_launch_node "$i" &
    jobkit_node_pids[i]=$!
  done
  set +m
}

# Ask every running host's torchrun to stop (SIGTERM: torchrun passes it to its workers, which
# checkpoint and exit); after JOBKIT_STOP_GRACE_S seconds (default 60) kill what is left.
jobkit_stop_nodes() {
  local i
  if [[ -z "$jobkit_stop_deadline" ]]; then
    jobkit_stop_deadline=$(( SECONDS + ${JOBKIT_STOP_GRACE_S:-60} ))
  fi
  for i in "${!jobkit_hosts[@]}"; do
    if [[ -n "${jobkit_node_rc[i]:-}" || -n "${jobkit_node_stopped[i]:-}" ]]; then
      continue
    fi
    if jobkit_run_on_node "$i" "$(jobkit_signal_script "$i" TERM)" </dev/null >/dev/null 2>&1
    then
      jobkit_node_stopped[i]=1
    fi
  done
}

jobkit_kill_nodes() {
  local i
  for i in "${!jobkit_node_pids[@]}"; do
    if [[ -z "${jobkit_node_rc[i]:-}" ]]; then
      echo "jobkit: killing host $i (${jobkit_hosts[i]})" >&2
      jobkit_run_on_node "$i" "$(jobkit_signal_script "$i" KILL group)" \
        </dev/null >/dev/null 2>&1 || true
      kill -s KILL "${jobkit_node_pids[i]}" 2>/dev/null || true
    fi
  done
}

# The local and ssh launchers keep resources.time themselves (no scheduler does): at the
# limit they note it in the run folder (the job then ends TIMEOUT) and stop every host as
# SIGTERM would, killing what is left after JOBKIT_STOP_GRACE_S.
jobkit_check_time_limit() {
  if [[ -n "$jobkit_time_deadline" && -z "$jobkit_signal_name" ]] \
    && (( SECONDS >= jobkit_time_deadline )); then
    : >"$JOBKIT_RUN_DIR/$jobkit_timed_out_file"
    echo "jobkit: time limit (resources.time) reached: stopping every host" >&2
    jobkit_signal_name=TERM
    jobkit_stop_nodes
  fi
}

jobkit_on_signal() {
  echo "jobkit: received SIG$1: stopping every host" >&2
  jobkit_signal_name=$1
  jobkit_stop_nodes
}

# Should the launcher itself fail, stop the hosts and still leave an exit code behind.
jobkit_on_exit() {
  local rc=$?
  if [[ ! -e "$jobkit_exit_file" ]]; then
    jobkit_kill_nodes
    jobkit_write_exit_code "$rc"
  fi
}

# Reap hosts as they end; the first failure stops the others.
jobkit_watch_nodes() {
  local i rc running
  while :; do
    running=0
    for i in "${!jobkit_node_pids[@]}"; do
      if [[ -n "${jobkit_node_rc[i]:-}" ]]; then
        continue
      fi
      if kill -0 "${jobkit_node_pids[i]}" 2>/dev/null; then
        running=$(( running + 1 ))
        continue
      fi
      rc=0
      wait "${jobkit_node_pids[i]}" || rc=$?
      jobkit_node_rc[i]=$rc
      echo "jobkit: host $i (${jobkit_hosts[i]}) ended with exit code $rc"
      # A host failing after the launcher was told to stop is no failure of its own.
      if (( rc != 0 )) && [[ -z "$jobkit_first_rc" && -z "$jobkit_signal_name" ]]; then
        jobkit_first_rc=$rc
        echo "jobkit: host $i failed: stopping the others" >&2
        jobkit_stop_nodes
      fi
    done
    if (( running == 0 )); then
      return 0
    fi
    jobkit_check_time_limit
    if [[ -n "$jobkit_stop_deadline" ]]; then
      if (( SECONDS >= jobkit_stop_deadline )); then
        if [[ -z "$jobkit_killed" ]]; then
          echo "jobkit: hosts still running after the grace period" >&2
          jobkit_kill_nodes
          jobkit_killed=1
        fi
      else
        jobkit_stop_nodes  # hosts whose torchrun had not started yet
      fi
    fi
    # Look again shortly; a trapped signal interrupts this wait at once.
    sleep 0.2 &
    wait "$!" || true
  done
}

# The launcher's exit code: the first host's failure; else 128+N when signal N stopped the
# launcher (143 for SIGTERM, 130 for SIGINT); else 0.
jobkit_exit_code() {
  if [[ -n "$jobkit_first_rc" ]]; then
    echo "$jobkit_first_rc"
  elif [[ -n "$jobkit_signal_name" ]]; then
    echo "$(( 128 + $(kill -l "$jobkit_signal_name") ))"
  else
    echo 0
  fi
}

# The exit code, then the job's scheduler id: a run's attempts share the folder, and jobkit
# reads only its own job's code (core/run_files.py).
jobkit_write_exit_code() {
  printf '%s\n%s\n' "$1" "${JOBKIT_JOB_ID:-}" >"$jobkit_exit_file.tmp"
  mv -f -- "$jobkit_exit_file.tmp" "$jobkit_exit_file"
}

# ---- ssh.fanout pdsh: one pdsh starts every host ----------------------------------------------
# The including script defines jobkit_pdsh (pdsh and its options; PDSH_SSH_ARGS exported).
# Each host runs the same command; pdsh puts the host's place in the list (%n) into it, and
# prefixes each line of output with the host name ("n1: ..."). Those lines go to the launcher's
# own output as they are, and without the prefix into node-I.out. pdsh says "HOST: ssh exited
# with exit code N" as each failing host ends: that host's code is noted in pdsh-exits, and the
# first failure stops the others as with one ssh per host. Stopping and killing still reach
# each host by jobkit_run_on_node (ssh).
jobkit_pdsh_pid=""
jobkit_pdsh_worst=""  # the worst exit code of the hosts that failed on their own

# pdsh's output, copied to stdout and split into node-I.out by its "HOST: " prefix.
jobkit_pdsh_split() {
  JOBKIT_PDSH_HOSTS="${jobkit_hosts[*]}" awk '
    BEGIN {
      n = split(ENVIRON["JOBKIT_PDSH_HOSTS"], hosts, " ")
      for (i = n; i >= 1; i--) { node[hosts[i]] = i - 1 }
      exits = ENVIRON["JOBKIT_RUN_DIR"] "/pdsh-exits"
    }
    { print; fflush() }
    /^pdsh@[^ ]*: [^ ]*: ssh exited with exit code [0-9]+$/ {
      host = $2; sub(/:$/, "", host)
      if (host in node) { print node[host], $NF >> exits; fflush(exits) }
      next
    }
    {
      p = index($0, ": ")
      if (p > 0 && (substr($0, 1, p - 1) in node)) {
        f = ENVIRON["JOBKIT_RUN_DIR"] "/node-" node[substr($0, 1, p - 1)] ".out"
        print substr($0, p + 2) >> f
        fflush(f)
      }
    }'
}

jobkit_start_nodes_pdsh() {
  local code hostlist i
  # The node script travels inside the command as base64: no quoting, no %, no stdin needed.
  code=$(jobkit_node_script '"$1"' | base64 -w 0)
  hostlist=$(IFS=,; echo "${jobkit_hosts[*]}")
  rm -f -- "$JOBKIT_RUN_DIR/pdsh-exits"
  for i in "${!jobkit_hosts[@]}"; do
    : >"$JOBKIT_RUN_DIR/node-$i.out"
  done
  echo "jobkit: pdsh -w $hostlist"
  set -m
  (
    # shellcheck disable=SC2154  # jobkit_pdsh comes from the including script (ssh.fanout pdsh)
    "${jobkit_pdsh[@]}" -w "$hostlist" "echo $code | base64 -d | bash -s -- %n" </dev/null 2>&1 |
      jobkit_pdsh_split
    exit "${PIPESTATUS[0]}"
  ) &
  jobkit_pdsh_pid=$!
  set +m
  for i in "${!jobkit_hosts[@]}"; do
    jobkit_node_pids[i]=$jobkit_pdsh_pid  # what jobkit_kill_nodes kills should the launcher fail
  done
}

# Note the hosts pdsh reported as failed since the last look; the first failure stops the others.
jobkit_pdsh_reap() {
  local i code
  while read -r i code; do
    if [[ -n "${jobkit_node_rc[i]:-}" ]]; then
      continue
    fi
    jobkit_node_rc[i]=$code
    echo "jobkit: host $i (${jobkit_hosts[i]}) ended with exit code $code"
    if [[ -n "${jobkit_node_stopped[i]:-}" || -n "$jobkit_signal_name" ]]; then
      continue  # stopped by jobkit: no failure of its own
    fi
    if [[ -z "$jobkit_pdsh_worst" ]]; then
      echo "jobkit: host $i failed: stopping the others" >&2
      jobkit_pdsh_worst=$code
      jobkit_stop_nodes
    elif (( code > jobkit_pdsh_worst )); then
      jobkit_pdsh_worst=$code
    fi
  done < <(cat -- "$JOBKIT_RUN_DIR/pdsh-exits" 2>/dev/null || true)
}

# Wait for pdsh; on a signal stop every host (jobkit_on_signal), kill them after the grace.
jobkit_watch_pdsh() {
  local rc=0 i
  while kill -0 "$jobkit_pdsh_pid" 2>/dev/null; do
    jobkit_pdsh_reap
    jobkit_check_time_limit
    if [[ -n "$jobkit_stop_deadline" ]]; then
      if (( SECONDS >= jobkit_stop_deadline )) && [[ -z "$jobkit_killed" ]]; then
        echo "jobkit: hosts still running after the grace period" >&2
        for i in "${!jobkit_hosts[@]}"; do
          jobkit_run_on_node "$i" "$(jobkit_signal_script "$i" KILL group)" \
            </dev/null >/dev/null 2>&1 || true
        done
        kill -s KILL -- "-$jobkit_pdsh_pid" 2>/dev/null || true
        jobkit_killed=1
      else
        jobkit_stop_nodes  # hosts whose program had not started yet
      fi
    fi
    sleep 0.2 &
    wait "$!" || true
  done
  wait "$jobkit_pdsh_pid" || rc=$?
  jobkit_pdsh_reap
  echo "jobkit: pdsh ended with exit code $rc"
  if [[ -n "$jobkit_pdsh_worst" ]]; then
    jobkit_first_rc=$jobkit_pdsh_worst
  elif (( rc != 0 )) && [[ -z "$jobkit_signal_name" ]]; then
    jobkit_first_rc=$rc  # pdsh itself failed
  fi
}
