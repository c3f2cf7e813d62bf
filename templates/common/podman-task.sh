# shellcheck shell=sh disable=SC2317  # on_signal runs from traps
# The Podman task of jobkit (docs/containers.md "How a Podman job stops"): it runs `podman run`
# and stays the process the scheduler signals. The signal proxy of podman run is off: it gives up
# for good at the first signal it fails to pass on, and the SIGCONT of Slurm, followed at once by
# SIGTERM, can fail it (its `runc kill` child gets the SIGTERM): the container then outlived
# the job. This task passes HUP, INT, QUIT, USR1, USR2 and TERM to the program itself (its host
# pid: --pid host), waits for the program to end even when the podman client ended first,
# and exits with the exit code of the program (128+N for signal N when none was recorded).
# Arguments: the podman command line, with @jobkit-task where its run options go.
# Its folder, in the run folder (mounted inside): the pid of the container (init), the pid of
# the program (program) and its exit code (exit).
dir=$(mktemp -d "${JOBKIT_RUN_DIR:?}/.podman-task.XXXXXX") || exit 125
count=$#
while [ "$count" -gt 0 ]; do
  word=$1
  shift
  count=$((count - 1))
  if [ "$word" = @jobkit-task ]; then
    set -- "$@" --sig-proxy=false --pidfile "$dir/init" --env JOBKIT_TASK_DIR --env JOBKIT_TASK_PID
  else
    set -- "$@" "$word"
  fi
done
JOBKIT_TASK_DIR=$dir
JOBKIT_TASK_PID=$$
export JOBKIT_TASK_DIR JOBKIT_TASK_PID
# proc_field PID N: field N of /proc/PID/stat after the command name (2: the parent pid, 20:
# the start time, which tells a reused pid apart); empty once the process has ended.
proc_field() {
  index=$2
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  stat=${stat##*") "}
  # shellcheck disable=SC2086  # the fields of /proc/PID/stat, split on purpose
  set -- $stat
  shift $((index - 1))
  echo "$1"
}
pending=""
signalled=""
# pass SIGNAL: to the program once it has written its pid, if that is a child of the first
# process of the container (a host pid: never another process); else later (pending).
pass() {
  program=$(cat "$dir/program" 2>/dev/null)
  init=$(cat "$dir/init" 2>/dev/null)
  if [ -n "$program" ] && [ -n "$init" ] && [ "$(proc_field "$program" 2)" = "$init" ] &&
    kill -s "$1" "$program" 2>/dev/null; then
    pending=""
  else
    pending=$1
  fi
}
on_signal() {
  [ -n "$signalled" ] || signalled=$2
  pass "$1"
}
trap "on_signal HUP 1" HUP
trap "on_signal INT 2" INT
trap "on_signal QUIT 3" QUIT
trap "on_signal USR1 10" USR1
trap "on_signal USR2 12" USR2
trap "on_signal TERM 15" TERM
"$@" &
client=$!
while :; do
  # A signal that came before the program had started: passed once it has.
  if [ -n "$pending" ]; then
    sleep 1
    pass "$pending"
    if kill -0 "$client" 2>/dev/null; then
      continue
    fi
  fi
  rc=0
  wait "$client" || rc=$?
  kill -0 "$client" 2>/dev/null || break
done
# The client ended first (a signal stops it, not the container): wait for the first process
# of the container itself.
init=$(cat "$dir/init" 2>/dev/null)
if [ -n "$init" ]; then
  since=$(proc_field "$init" 20)
  while [ -n "$since" ] && [ "$(proc_field "$init" 20)" = "$since" ]; do
    [ -z "$pending" ] || pass "$pending"
    sleep 1
  done
fi
if [ -s "$dir/exit" ]; then
  rc=$(cat "$dir/exit")
elif [ -n "$signalled" ]; then
  rc=$((128 + signalled))
fi
rm -rf -- "$dir"
exit "$rc"
