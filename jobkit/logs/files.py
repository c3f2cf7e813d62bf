"""Which files `jobkit logs` shows for a job: its .out/.err, one rank's file, or every rank's.

Per-rank output lives in the job's run folder, in one of three kinds of file:
  rank-R.out   one file per process, when the launcher starts one task per process
               (launcher srun or mpirun)
  rank-R.log   the bundled trainer's own log of rank R (run.train)
  node-N.out   one file per host when one torchrun per host starts its processes: it holds
               the output of every rank on host N
The kind the spec predicts is tried first (the bundled trainer: rank-R.log, whatever the
launcher; srun/mpirun: rank-R.out; else node-N.out), then the others in that order; the
first kind with a file that exists wins. When none exists yet (a queued job), the predicted
kind is followed.

Which host runs rank R: torchrun's workers note it in `ranks/R` (the host's number N) as
they start. c10d rendezvous numbers hosts in its own order (by hostname, then pid), so
without that note only static rendezvous or a single host tell: ranks N*P .. N*P+P-1 on
host N (P processes per host).
A backend with its own naming puts a pattern in the job's extra: `rank_file` with `{rank}`
(submitit: `<run dir>/<id>_{rank}_log.out`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobkit.core.errors import JobkitError, UsageError
from jobkit.logs.follow import LogSource

RANK_OUT = "rank-{n}.out"
RANK_LOG = "rank-{n}.log"
NODE_OUT = "node-{n}.out"


@dataclass(frozen=True)
class Layout:
    """What the spec says about a job's processes."""

    nodes: int
    procs_per_node: int
    launcher: str
    bundled_trainer: bool
    static_hosts: bool = True
    """Host N runs ranks N*P .. N*P+P-1 (one host, or static rendezvous)."""

    @property
    def world_size(self) -> int:
        """Number of ranks."""
        return self.nodes * self.procs_per_node

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> Layout:
        """From the spec as stored in the registry (a dict); missing keys take defaults."""
        resources = spec.get("resources") or {}
        launch = spec.get("launch") or {}
        run = spec.get("run") or {}
        nproc = launch.get("nproc_per_node", "auto")
        procs = int(nproc) if nproc != "auto" else int(resources.get("gpus_per_node") or 1)
        return cls(
            # An elastic job (nodes MIN:MAX) may run on up to max_nodes hosts.
            nodes=int(resources.get("max_nodes") or resources.get("nodes") or 1),
            procs_per_node=max(procs, 1),
            launcher=str(launch.get("launcher") or "torchrun"),
            bundled_trainer=bool(run.get("train")),
            static_hosts=int(resources.get("max_nodes") or resources.get("nodes") or 1) == 1
            or launch.get("rdzv") == "static"
            or launch.get("launcher") == "distributed-launch",
        )

    def kinds(self) -> list[str]:
        """Per-rank file kinds, the one this spec predicts first."""
        if self.bundled_trainer:
            return [RANK_LOG, RANK_OUT, NODE_OUT]
        if self.launcher in ("srun", "mpirun"):
            return [RANK_OUT, RANK_LOG, NODE_OUT]
        return [NODE_OUT, RANK_OUT, RANK_LOG]


@dataclass(frozen=True)
class Selection:
    """The files to show, and a note for stderr when the choice needs explaining."""

    sources: list[LogSource]
    note: str | None = None
    rank_host_pending: bool = False
    """The rank's host is not noted yet: select again once the job has started."""
    optional: tuple[Path, ...] = ()
    """Files that may well not exist (a job's .err, rank 0's file before it starts or when
    the job failed before its program ran): their absence is not worth a word."""


def _path(run_dir: Path, kind: str, n: int) -> Path:
    return run_dir / kind.format(n=n)


def _first_kind(run_dir: Path, layout: Layout, count: dict[str, int]) -> str:
    """The first kind (in the layout's order) with at least one existing file."""
    for kind in layout.kinds():
        if any(_path(run_dir, kind, n).exists() for n in range(count[kind])):
            return kind
    return layout.kinds()[0]


def select_files(
    log_paths: Mapping[str, str],
    spec: Mapping[str, Any],
    extra: Mapping[str, Any],
    *,
    rank: int | None = None,
    all_ranks: bool = False,
    stderr: bool = False,
) -> Selection:
    """The files `jobkit logs` shows for these options (see the module docstring)."""
    if rank is not None and all_ranks:
        raise UsageError("give --rank N or --all-ranks, not both")
    if stderr and (rank is not None or all_ranks):
        raise UsageError("--stderr shows the job's .err file; per-rank files have none")
    if stderr:
        if not log_paths.get("err"):
            raise JobkitError("no err log path is recorded for this job")
        return Selection([LogSource(Path(log_paths["err"]))])
    if rank is None and not all_ranks:
        return job_view(log_paths, spec, extra)
    if not log_paths.get("run_dir"):
        raise JobkitError("no run folder is recorded for this job (per-rank files live there)")
    run_dir = Path(log_paths["run_dir"])
    layout = Layout.from_spec(spec)
    pattern = extra.get("rank_file")
    if rank is not None and not 0 <= rank < layout.world_size:
        raise UsageError(
            f"--rank {rank}: the job has {layout.world_size} rank(s), 0-{layout.world_size - 1}"
        )
    if pattern:
        ranks = [rank] if rank is not None else list(range(layout.world_size))
        return Selection(
            [
                LogSource(
                    Path(str(pattern).replace("{rank}", str(r))), _label("rank", r, all_ranks)
                )
                for r in ranks
            ]
        )
    if rank is not None:
        return _one_rank(run_dir, layout, rank)
    count = {RANK_OUT: layout.world_size, RANK_LOG: layout.world_size, NODE_OUT: layout.nodes}
    kind = _first_kind(run_dir, layout, count)
    word = "node" if kind == NODE_OUT else "rank"
    return Selection(
        [LogSource(_path(run_dir, kind, n), f"{word} {n}") for n in range(count[kind])]
    )


def job_view(
    log_paths: Mapping[str, str], spec: Mapping[str, Any], extra: Mapping[str, Any]
) -> Selection:
    """What `jobkit logs ID` and `submit --wait` show by default: rank 0's program output and
    the job's own output (.out, and .err prefixed `[err]`), merged as they come when followed,
    and a note saying where the other ranks' files are.

    Rank 0's output is the file that holds its stdout and stderr: with one torchrun per host,
    the node-N.out of the host that runs rank 0 (every host's file while that is not known
    yet: c10d numbers the hosts as the job starts); with one task per process, rank-0.out.
    mpirun and submitit put rank 0's output in the job's .out itself.
    """
    if not log_paths.get("out"):
        raise JobkitError("no out log path is recorded for this job")
    out = log_paths["out"]
    sources = [LogSource(Path(out))]
    err = log_paths.get("err")
    if err and err != out:
        sources.append(LogSource(Path(err), "err"))
    run_dir_text = log_paths.get("run_dir")
    layout = Layout.from_spec(spec)
    optional = tuple(source.path for source in sources[1:])
    if not run_dir_text or extra.get("rank_file") or layout.launcher == "mpirun":
        return Selection(sources, optional=optional)
    run_dir = Path(run_dir_text)
    note = None
    if layout.launcher == "srun":
        program = [LogSource(_path(run_dir, RANK_OUT, 0))]
    else:
        host = rank_host(run_dir, 0)
        if host is None and not layout.static_hosts:
            program = [
                LogSource(_path(run_dir, NODE_OUT, n), f"node {n}") for n in range(layout.nodes)
            ]
            note = "which host runs rank 0 is not known yet: showing every host's output"
        else:
            program = [LogSource(_path(run_dir, NODE_OUT, host or 0))]
    if note is None:
        others = _other_ranks(run_dir, layout)
        note = f"rank 0's output is in {program[0].path}" + (f"; {others}" if others else "")
    optional += tuple(source.path for source in program)
    # Printed in this order without -f: the program's output, then the job's own lines.
    return Selection(program + sources, note, optional=optional)


def _other_ranks(run_dir: Path, layout: Layout) -> str | None:
    """`other ranks: DIR/rank-{1..3}.log (jobkit logs ID --rank N, --all-ranks)`."""
    if layout.world_size < 2:
        return None
    kind = RANK_LOG if layout.bundled_trainer else layout.kinds()[0]
    if kind == NODE_OUT and layout.nodes < 2:
        return None
    last = layout.nodes - 1 if kind == NODE_OUT else layout.world_size - 1
    span = "1" if last == 1 else f"{{1..{last}}}"
    return f"other ranks: {run_dir}/{kind.format(n=span)} (--rank N, --all-ranks)"


def _label(word: str, n: int, labelled: bool) -> str | None:
    return f"{word} {n}" if labelled else None


def rank_host(run_dir: Path, rank: int) -> int | None:
    """The host number torchrun's worker noted for this rank in `ranks/R`, if any."""
    try:
        text = (run_dir / "ranks" / str(rank)).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def _one_rank(run_dir: Path, layout: Layout, rank: int) -> Selection:
    """Rank R's own file, or the node-N.out of the host that runs it."""
    noted = rank_host(run_dir, rank)
    node = noted if noted is not None else rank // layout.procs_per_node
    paths = {
        RANK_OUT: _path(run_dir, RANK_OUT, rank),
        RANK_LOG: _path(run_dir, RANK_LOG, rank),
        NODE_OUT: _path(run_dir, NODE_OUT, node),
    }
    kinds = layout.kinds()
    kind = next((k for k in kinds if paths[k].exists()), kinds[0])
    if kind != NODE_OUT:
        return Selection([LogSource(paths[kind])])
    if noted is None and not layout.static_hosts:
        note = (
            f"which host runs rank {rank} is not known yet (c10d rendezvous numbers the hosts"
            f" as the job starts): node-{node}.out is a guess"
        )
        return Selection([LogSource(paths[kind])], note, rank_host_pending=True)
    if layout.procs_per_node > 1:
        return Selection(
            [LogSource(paths[kind])],
            f"rank {rank} has no file of its own; node-{node}.out holds every rank on host {node}",
        )
    return Selection([LogSource(paths[kind])])
