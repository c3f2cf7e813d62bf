"""A Python stack of every rank of a running job: `py-spy dump --pid PID` on each rank's node,
one command per node, all nodes at once. The backend says how to reach a node
(`Backend.on_node_argv`: Slurm `srun --overlap --jobid`, ssh, or this machine)."""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobkit.backends.base import Backend, TrackedJob
from jobkit.hang.stall import RankBeat

DUMP_TIMEOUT_S = 60.0
INSTALL_HINT = "pip install 'jobkit[debug]' into the job's environment"
SPY_MISSING = "py-spy not found on "
PID_MARK = "@@jobkit-pid "
RC_MARK = "@@jobkit-rc "

# Runs on the node: $1 py-spy next to the job's python, $2 next to jobkit's, else PATH's;
# then one `py-spy dump --json` per pid, each between marker lines.
REMOTE_SCRIPT = r"""
spy=
for c in "$1" "$2"; do if [ -x "$c" ]; then spy=$c; break; fi; done
shift 2
if [ -z "$spy" ]; then spy=$(command -v py-spy) || spy=; fi
for pid in "$@"; do
  echo "@@jobkit-pid $pid"
  if [ -z "$spy" ]; then
    echo "jobkit: py-spy not found on $(hostname)"; echo "@@jobkit-rc 127"; continue
  fi
  "$spy" dump --json --pid "$pid" 2>&1
  echo "@@jobkit-rc $?"
done
"""


@dataclass(frozen=True)
class Frame:
    """One frame of a stack: the function, its file (py-spy's short name) and line."""

    function: str
    file: str
    line: int

    def show(self) -> str:
        """`all_reduce (torch/distributed/distributed_c10d.py:2501)`."""
        return f"{self.function} ({self.file}:{self.line})"


@dataclass(frozen=True)
class RankStack:
    """What py-spy saw of one rank: its main thread's frames, innermost first, or why not."""

    rank: int
    node: str
    pid: int | None
    frames: tuple[Frame, ...] = ()
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON: the rank, where it runs, its frames (innermost first) or the error."""
        return {
            "rank": self.rank,
            "node": self.node,
            "pid": self.pid,
            "frames": [f.__dict__ for f in self.frames],
            "error": self.error,
        }


def _spy_next_to(python: str | None) -> str:
    return str(Path(python).parent / "py-spy") if python else ""


def remote_argv(beats: Sequence[RankBeat]) -> list[str]:
    """The command run on a node: py-spy dump for each of these ranks' pids."""
    job_python = next((b.python for b in beats if b.python), None)
    pids = [str(b.pid) for b in beats if b.pid is not None]
    spies = [_spy_next_to(job_python), _spy_next_to(sys.executable)]
    return ["sh", "-c", REMOTE_SCRIPT, "jobkit-stacks", *spies, *pids]


def _main_thread(dump: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The frames of the dump's main thread (else its first thread with frames)."""
    threads = [t for t in dump if isinstance(t, dict) and t.get("frames")]
    for thread in threads:
        if thread.get("thread_name") == "MainThread":
            return list(thread["frames"])
    return list(threads[0]["frames"]) if threads else []


def explain_failure(text: str, rc: int, node: str, pid: int | None) -> str:
    """One line for a dump that failed: py-spy missing, ptrace refused, process gone."""
    low = text.lower()
    if rc == 127 or "py-spy not found" in low:
        return f"{SPY_MISSING}{node} ({INSTALL_HINT})"
    if "permission denied" in low or "operation not permitted" in low:
        return (
            f"py-spy may not attach to pid {pid} on {node}: ptrace not permitted (run as the"
            " job's user; the kernel must allow ptrace: kernel.yama.ptrace_scope <= 1, or"
            " CAP_SYS_PTRACE in a container)"
        )
    if "no such file" in low or "no such process" in low:
        return f"pid {pid} is gone on {node} (the rank exited)"
    last = text.strip().splitlines()[-1] if text.strip() else f"exit code {rc}"
    return f"py-spy on {node} (pid {pid}): {last}"


def parse_dumps(output: str, beats: Sequence[RankBeat], node: str) -> list[RankStack]:
    """The node's marked output -> one RankStack per rank (missing ones say so)."""
    by_pid = {b.pid: b for b in beats}
    found: dict[int, RankStack] = {}
    pid: int | None = None
    body: list[str] = []
    for line in output.splitlines():
        if line.startswith(PID_MARK):
            pid, body = int(line[len(PID_MARK) :].strip()), []
        elif line.startswith(RC_MARK) and pid is not None and pid in by_pid:
            rank = by_pid[pid].rank
            rc = int(line[len(RC_MARK) :].strip() or 1)
            found[rank] = _one_stack(by_pid[pid], node, "\n".join(body), rc)
            pid = None
        else:
            body.append(line)
    return [
        found.get(b.rank) or RankStack(b.rank, node, b.pid, error=f"no answer from {node}")
        for b in beats
    ]


def _one_stack(beat: RankBeat, node: str, text: str, rc: int) -> RankStack:
    if rc == 0:
        try:
            frames = _main_thread(json.loads(text))
        except ValueError:
            frames = []
        if frames:
            return RankStack(
                beat.rank,
                node,
                beat.pid,
                frames=tuple(
                    Frame(
                        str(f.get("name", "?")),
                        str(f.get("short_filename") or f.get("filename") or "?"),
                        int(f.get("line") or 0),
                    )
                    for f in frames
                ),
            )
        return RankStack(beat.rank, node, beat.pid, error="py-spy found no Python frames")
    return RankStack(beat.rank, node, beat.pid, error=explain_failure(text, rc, node, beat.pid))


def collect_stacks(
    backend: Backend,
    job: TrackedJob,
    beats: Sequence[RankBeat],
    timeout_s: float = DUMP_TIMEOUT_S,
) -> list[RankStack]:
    """Every rank's stack: one command per node (through the backend), nodes in parallel."""
    nodes: dict[tuple[str, int | None], list[RankBeat]] = defaultdict(list)
    for beat in beats:
        nodes[(beat.node, beat.node_index)].append(beat)
    stacks: list[RankStack] = []
    asked: list[tuple[str, list[RankBeat]]] = []
    commands: list[list[str]] = []
    for (node, index), ranks in nodes.items():
        argv = backend.on_node_argv(job, node, index, remote_argv(ranks))
        if argv is None:
            why = f"stacks cannot be collected for the {backend.name} backend"
            stacks += [RankStack(b.rank, node, b.pid, error=why) for b in ranks]
            continue
        asked.append((node, ranks))
        commands.append(argv)
    from jobkit.core.proc import run_parallel

    for (node, ranks), done in zip(asked, run_parallel(commands, timeout=timeout_s), strict=True):
        if done.error is not None:
            error = f"{done.argv[0]}: {done.error.removeprefix('cannot run: ')}"
            stacks += [RankStack(b.rank, node, b.pid, error=error) for b in ranks]
            continue
        stderr = f"no answer in {timeout_s:g} s" if done.timed_out else done.stderr
        parsed = parse_dumps(done.stdout, ranks, node)
        reason = (stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        stacks += [
            RankStack(s.rank, s.node, s.pid, error=f"{done.argv[0]} on {node}: {reason}")
            if s.error == f"no answer from {node}"
            else s
            for s in parsed
        ]
    return sorted(stacks, key=lambda s: s.rank)
