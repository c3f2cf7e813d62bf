"""The ssh backend: the launcher runs on this machine and starts one torchrun per host by ssh.

Submit and poll are the local backend's (one detached launcher, its pid and exit-code file).
Cancel stops the launcher, whose TERM trap stops the remote process groups, then checks
every host over ssh and stops whatever of the job is still running there: the process
group named in the host's pgid file (`pgid_file`) and any process whose environment holds
this job's JOBKIT_JOB_ID (it covers a launcher that died before it could clean up).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from jobkit.backends import chain_wait, launcher_files, slots
from jobkit.backends.base import SubmitRequest, Submitted, TrackedJob
from jobkit.backends.ssh_options import Ssh
from jobkit.core.errors import CrossFieldError, SchedulerError
from jobkit.spec.schema import JobSpec

DEFAULT_GRACE_S = 75.0
"""Seconds between SIGTERM to the launcher and SIGKILL: more than the launcher's own grace
(JOBKIT_STOP_GRACE_S, 60 s) for stopping the hosts in order. Cancel returns as soon as
everything has stopped."""
REMOTE_GRACE_S = 10.0
"""Seconds between SIGTERM and SIGKILL for what is still left on a host after that."""
SSH_SLACK_S = 30.0
"""Time allowed for an ssh connection on top of the remote grace period."""

# Run on each host by `sh -c SCRIPT jobkit-cleanup PGID_FILE JOB_ID GRACE_S`.
# Prints "clean", "stopped" or "left: PIDS" (exit 3); removes the pgid file once nothing is
# left. Zombies count as gone.
_REMOTE_CLEANUP = r"""
pgid_file=$1 job_id=$2 grace=$3
pg=
if [ -r "$pgid_file" ]; then pg=$(cat "$pgid_file"); fi
case $pg in *[!0-9]*) pg= ;; esac
members() {
  {
    if [ -n "$pg" ]; then
      ps -eo pid=,pgid=,stat= | awk -v g="$pg" '$2 == g && $3 !~ /^Z/ { print $1 }'
    fi
    grep -lzxF "JOBKIT_JOB_ID=$job_id" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3
  } | sort -un | while read -r p; do
    [ "$p" = "$$" ] && continue
    state=$(ps -o stat= -p "$p" 2>/dev/null) || continue
    case $state in Z*) continue ;; esac
    echo "$p"
  done
}
left=$(members)
if [ -z "$left" ]; then rm -f -- "$pgid_file"; echo clean; exit 0; fi
kill -TERM $left 2>/dev/null
i=0
while [ -n "$(members)" ] && [ "$i" -lt "$((grace * 10))" ]; do sleep 0.1; i=$((i + 1)); done
left=$(members)
if [ -n "$left" ]; then kill -KILL $left 2>/dev/null; sleep 0.3; fi
left=$(members)
if [ -n "$left" ]; then echo "left:" $left; exit 3; fi
rm -f -- "$pgid_file"
echo stopped
"""


def pgid_file(job_id: str, node: int) -> str:
    """Where host `node` keeps its torchrun's process-group id (templates/common/nodes.sh.j2,
    jobkit_pgid_file): on that host, outside the run folder, which may not be shared."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", job_id)
    return f"/tmp/jobkit-{safe}-node-{node}.pgid"


def ssh_command(ssh: Ssh) -> list[str]:
    """`ssh` and its options for every host (the user's -o options first: ssh keeps the
    first value it gets for each option)."""
    argv = ["ssh"]
    for option in ssh.options:
        argv += ["-o", option]
    argv += ["-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]
    if ssh.port is not None:
        argv += ["-p", str(ssh.port)]
    if ssh.user:
        argv += ["-l", ssh.user]
    if ssh.identity_file:
        argv += ["-i", ssh.identity_file]
    return argv


@dataclass(frozen=True)
class HostCheck:
    """What the clean-up on one host found."""

    host: str
    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        """True when nothing of the job is left on the host."""
        return self.returncode == 0


def clean_hosts(job: TrackedJob, grace_s: float) -> list[HostCheck]:
    """Stop what is left of `job` on each of its hosts (in parallel), and say what was found."""
    hosts: list[str] = json.loads(job.extra.get("hosts", "[]"))
    ssh_argv: list[str] = json.loads(job.extra.get("ssh", '["ssh"]'))
    commands = []
    for index, host in enumerate(hosts):
        remote = ["sh", "-c", _REMOTE_CLEANUP, "jobkit-cleanup", pgid_file(job.jobkit_id, index)]
        remote.append(job.jobkit_id)
        remote.append(str(max(1, round(grace_s))))
        commands.append([*ssh_argv, host, shlex.join(remote)])
    from jobkit.core.proc import run_parallel

    outcomes = run_parallel(commands, timeout=grace_s + SSH_SLACK_S)
    return [
        HostCheck(
            host,
            done.argv,
            done.returncode,
            done.stdout.strip(),
            (done.error or done.stderr).strip(),
        )
        for host, done in zip(hosts, outcomes, strict=True)
    ]


def _reach(request: SubmitRequest) -> dict[str, str]:
    """What cancel needs to reach the hosts: their names and the ssh command."""
    return {
        "hosts": json.dumps(list(request.spec.ssh.hosts)),
        "ssh": json.dumps(ssh_command(request.spec.ssh)),
    }


def _check_pdsh(spec: JobSpec) -> None:
    """pdsh tells hosts apart by name and splits PDSH_SSH_ARGS at spaces, expanding %."""
    if len(set(spec.ssh.hosts)) != len(spec.ssh.hosts):
        raise CrossFieldError(
            "ssh.hosts",
            "must be distinct with ssh.fanout pdsh (its output is told apart by host name)",
        )
    for key, values in (
        ("ssh.options", list(spec.ssh.options)),
        ("ssh.identity_file", [spec.ssh.identity_file or ""]),
        ("ssh.user", [spec.ssh.user or ""]),
    ):
        if any(char.isspace() or char == "%" for value in values for char in value):
            raise CrossFieldError(
                key,
                "must hold no spaces or % with ssh.fanout pdsh (PDSH_SSH_ARGS is split at"
                " spaces and expands %)",
            )


class SshBackend(launcher_files.LauncherJobs):
    """Runs the launcher here, detached; it reaches the hosts in `ssh.hosts` over ssh."""

    name = "ssh"
    launchers = ("torchrun", "spawn", "distributed-launch", "none")
    nodes_from_hosts = True
    remote_hosts = True
    options_section = "ssh"

    @classmethod
    def spec_hosts(cls, spec: JobSpec) -> tuple[str, ...]:
        """ssh.hosts: one per node, host 0 the rendezvous host."""
        return tuple(spec.ssh.hosts)

    @classmethod
    def validate(cls, spec: JobSpec) -> None:
        """One host per node, from ssh.hosts; with fanout pdsh, options pdsh can pass on."""
        hosts, nodes = spec.ssh.hosts, spec.resources.nodes
        if not hosts:
            raise CrossFieldError("ssh.hosts", "the ssh backend needs at least one host")
        if nodes != len(hosts):
            raise CrossFieldError(
                "resources.nodes",
                f"must equal the number of ssh.hosts ({len(hosts)}: {', '.join(hosts)}; got"
                f" {nodes}): one node per host; leave resources.nodes out and it follows"
                " ssh.hosts",
            )
        if spec.ssh.fanout == "pdsh":
            _check_pdsh(spec)

    def __init__(
        self, grace_s: float = DEFAULT_GRACE_S, remote_grace_s: float = REMOTE_GRACE_S
    ) -> None:
        self.grace_s = grace_s
        self.remote_grace_s = remote_grace_s

    def checked_hosts(self, spec: JobSpec) -> list[tuple[str, list[str] | None]] | None:
        """Every host of ssh.hosts, over ssh as the job reaches it."""
        ssh = ssh_command(spec.ssh)
        return [(host, [*ssh, host, "bash -s"]) for host in spec.ssh.hosts]

    def submit(self, request: SubmitRequest) -> Submitted:
        """Start the launcher; keep its pid and what cancel needs to reach the hosts."""
        argv = self.submit_argv(request)
        files = launcher_files.job_files(request.spec, request.jobkit_id, request.workdir)
        task = slots.task_launch(request)  # a sweep's task: JOBKIT_TASK_ID, its slot
        chain_wait.prepare(request)  # a chain's stage: it waits for the previous one
        launched = launcher_files.launch_detached(
            argv,
            cwd=request.workdir,
            files=files,
            env={"JOBKIT_JOB_ID": request.jobkit_id, **task.env, **request.code_env()},
        )
        extra = {
            **launched.as_extra(),
            "run_dir": str(files.run_dir),
            **_reach(request),
            **task.extra,
        }
        return Submitted(
            scheduler_id=request.jobkit_id,
            argv=argv,
            log_paths=files.as_log_paths(),
            extra=extra,
        )

    # -- adoption of launchers whose `jobkit submit` stopped before recording them --------

    def submit_extra(self, request: SubmitRequest, scheduler_id: str) -> dict[str, str]:
        """What `submit` would have recorded, read back from the run folder and /proc."""
        return {**launcher_files.adopted_extra(request), **_reach(request)}

    def on_node_argv(
        self, job: TrackedJob, node: str, node_index: int | None, argv: Sequence[str]
    ) -> list[str] | None:
        """`ssh HOST ARGV` to host `node_index` of ssh.hosts, as the job reached it."""
        hosts: list[str] = json.loads(job.extra.get("hosts", "[]"))
        if node_index is None or not 0 <= node_index < len(hosts):
            return None
        ssh_argv: list[str] = json.loads(job.extra.get("ssh", '["ssh"]'))
        return [*ssh_argv, hosts[node_index], shlex.join(argv)]

    def cancel(self, jobs: Sequence[TrackedJob]) -> None:
        """Stop the launchers, then make sure nothing of the jobs is left on any host."""
        launcher_files.stop_launchers(jobs, self.grace_s)  # raises for other machines' jobs
        for job in jobs:
            for check in clean_hosts(job, self.remote_grace_s):
                if not check.ok:
                    raise SchedulerError(
                        [*check.argv[:-1], "<clean-up script>"],
                        check.returncode,
                        check.stdout,
                        check.stderr,
                        reason=f"could not make sure job {job.jobkit_id} stopped on {check.host}",
                    )
