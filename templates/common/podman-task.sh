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
# the program (program), its exit code (exit) and the id of the container (cid: a container that a
# signal to podman left created but never started is removed at the end; --rm never runs then).
dir=$(mktemp -d "${JOBKIT_RUN_DIR:?}/.podman-task.XXXXXX") || exit 125
count=$#
before=""
while [ "$count" -gt 0 ]; do
  word=$1
  shift
  count=$((count - 1))
  if [ "$word" = @jobkit-task ] && [ -z "$before" ]; then
    before=$(($# - count))
    set -- "$@" --sig-proxy=false --pidfile "$dir/init" --cidfile "$dir/cid" \
      --env JOBKIT_TASK_DIR --env JOBKIT_TASK_PID
  else
    set -- "$@" "$word"
  fi
done
words=$#
# with_podman COMMAND-LINE... WORDS...: `podman GLOBAL WORDS...`, podman and its global
# options being the words of the command line before `run`.
with_podman() {
  total=$#
  index=0
  while [ "$index" -lt "$total" ]; do
    index=$((index + 1))
    word=$1
    shift
    if [ "$index" -lt "${before:-1}" ] || [ "$index" -gt "$words" ]; then
      set -- "$@" "$word"
    fi
  done
  "$@"
}
# never_started COMMAND-LINE...: podman created the container but will never start it (podman
# run was stopped in between: the container stays created, and no --rm or conmon removes it).
never_started() {
  [ ! -s "$dir/program" ] && [ -s "$dir/cid" ] && [ -n "$before" ] || return 1
  status="{"
  status="$status{.State.Status}}"
  state=$(with_podman "$@" container inspect --format "$status" "$(cat "$dir/cid")" \
    2>/dev/null) || return 1
  case $state in configured | created | initialized) return 0 ;; esac
  return 1
}
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
    ! never_started "$@" || break
    sleep 1
  done
fi
client_rc=$rc
if [ -s "$dir/exit" ]; then
  rc=$(cat "$dir/exit")
elif [ -n "$signalled" ]; then
  rc=$((128 + signalled))
fi
# After a signal, or a podman run that did not end by itself (the errors of podman are 125 to
# 127, a signal 128+N): a container still there (never started, or not removed) is removed.
if [ -s "$dir/cid" ] && [ -n "$before" ] && { [ -n "$signalled" ] || [ "$client_rc" -ge 125 ]; } &&
  with_podman "$@" container exists "$(cat "$dir/cid")"; then
  with_podman "$@" rm --force --ignore "$(cat "$dir/cid")" >/dev/null 2>&1 || true
fi
rm -rf -- "$dir"
exit "$rc"
