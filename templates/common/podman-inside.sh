# shellcheck shell=sh
# The first process of a Podman container of jobkit (docs/containers.md "How a Podman job
# stops"), started by templates/common/podman-task.sh: it runs the program in a child that
# writes its pid first (the task signals it there) and records its exit code for the task.
# The container runs outside the processes of the job (conmon starts it), so when that task is gone
# without having stopped the program (SIGKILL, a lost node or ssh session), a watch started
# here sends the program SIGTERM, then SIGKILL 10 s later: a container never outlives its task.
# Arguments: the command line of the program.
dir=${JOBKIT_TASK_DIR:?not started by the podman task}
# proc_field PID N: field N of /proc/PID/stat after the command name (20: the start time,
# which tells a reused pid apart); empty once the process has ended, or when it is not seen
# (--pid private). The task has the same function (this one runs inside the image).
proc_field() {
  index=$2
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  stat=${stat##*") "}
  # shellcheck disable=SC2086  # the fields of /proc/PID/stat, split on purpose
  set -- $stat
  shift $((index - 1))
  echo "$1"
}
task=$(proc_field "${JOBKIT_TASK_PID:-none}" 20)
if [ -n "$task" ]; then
  (
    while [ "$(proc_field "$JOBKIT_TASK_PID" 20)" = "$task" ]; do
      sleep 1
    done
    [ ! -e "$dir/exit" ] || exit 0
    program=$(cat "$dir/program" 2>/dev/null) || exit 0
    kill -s TERM "$program" 2>/dev/null || exit 0
    sleep 10
    [ -e "$dir/exit" ] || kill -s KILL "$program" 2>/dev/null
  ) </dev/null >/dev/null 2>&1 &
fi
rc=0
sh -c "echo \$\$ >\"\$JOBKIT_TASK_DIR/program\" && exec \"\$@\"" jobkit-program "$@" || rc=$?
echo "$rc" >"$dir/exit"
# Nobody is left to read it when the task is gone: the folder goes too.
if [ -n "$task" ] && [ "$(proc_field "$JOBKIT_TASK_PID" 20)" != "$task" ]; then
  rm -rf -- "$dir"
fi
exit "$rc"
