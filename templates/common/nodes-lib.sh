# shellcheck shell=bash disable=SC2154,SC2016  # jobkit_hosts comes from the including script; single-quoted code is meant
# jobkit's multi-host launcher library: start one runner per host, watch them, stop them in
# order, report one exit code. Plain bash, included verbatim by templates/common/nodes.sh.j2
# (no Jinja here: CI shellchecks this file as it is). The including script defines first:
#   jobkit_hosts                 the hosts, in order (host 0 hosts the rendezvous)
#   jobkit_run_on_node I CODE    run bash CODE on host I (locally, over ssh, pbsdsh, qrsh...)
#   jobkit_node_script I         the bash code that runs host I's torchrun
#   jobkit_pgid_file I           where host I keeps its torchrun's process-group id
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

# jobkit_launch_node I: run host I to its end; return its exit code. Where the host writes
# node-I.out into the (shared) run folder itself, its exit code comes back in node-I.exit.
jobkit_launch_node() {
  local rc=0
  if (( jobkit_node_logs_itself )); then
    rm -f -- "$JOBKIT_RUN_DIR/node-$1.exit"
    jobkit_run_on_node "$1" "$(jobkit_node_script "$1")" </dev/null || rc=$?
    if [[ -r "$JOBKIT_RUN_DIR/node-$1.exit" ]]; then
      rc=$(<"$JOBKIT_RUN_DIR/node-$1.exit")
    fi
  else
    jobkit_run_on_node "$1" "$(jobkit_node_script "$1")" \
      </dev/null >"$JOBKIT_RUN_DIR/node-$1.out" 2>&1 || rc=$?
  fi
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

jobkit_write_exit_code() {
  echo "$1" >"$jobkit_exit_file.tmp"
  mv -f -- "$jobkit_exit_file.tmp" "$jobkit_exit_file"
}
