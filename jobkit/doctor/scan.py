"""Read a job's logs into numbered lines, each with the rank, host and time it belongs to.

Files (docs/logs.md): the job's .out and .err, and in its run folder every `node-N.out`
(one torchrun per host: every rank of host N), `rank-R.out` (one task per process),
`rank-R.log` (the bundled trainer), the `failure` note, and a backend's own per-rank
pattern (`extra['rank_file']`, submitit). An array's `{task}` placeholder matches every task.

A line's rank: its own prefix (`[rank3]: ` from torch, `[rank 3] ` and `TIME rank 3: ` from
the trainer, `[default1]:` from torchrun's --tee), else its file's (`rank-R.*`), else, in a
node file, the rank torchrun names as that host's first failure ("Root Cause"), or the only
rank of the host. Its host: `ranks/R` (written by each torchrun worker), else R // P; the
host's name from `jobkit: host N (NAME) of M` in node-N.out or the job's host list in .out.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from jobkit.core.conventions import FAILURE_FILE, RANKS_DIR
from jobkit.logs.files import Layout

HEAD_BYTES = 1 << 20
"""Read in full: the first MiB of a file ..."""
TAIL_BYTES = 8 << 20
"""... and its last 8 MiB (the middle of a huge file is only counted, for line numbers)."""

_RANK_PREFIXES = (
    re.compile(r"^\[rank(?P<rank>\d+)\]:\s?"),
    re.compile(r"^\[default(?P<local>\d+)\]:\s?"),
    re.compile(r"^\[rank (?P<rank>\d+)\] "),
    re.compile(r"^(?P<stamp>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d) rank (?P<rank>\d+): "),
)
_GLOG_TIME = re.compile(r"^\[?[IWEF](?P<md>\d{4}) (?P<hms>\d\d:\d\d:\d\d(?:\.\d+)?)")
_ELASTIC_TIME = re.compile(r"^\s*time\s*: (?P<stamp>\d{4}-\d\d-\d\d_\d\d:\d\d:\d\d)")
_SLURM_TIME = re.compile(r" AT (?P<stamp>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)")
_NODE_HOST = re.compile(r"^jobkit: host (?P<n>\d+) \((?P<host>[^)]+)\) of \d+")
_JOB_HOSTS = re.compile(r"^jobkit: job \S+ \(.*\) on \d+ (?:node|host)\(s\): (?P<hosts>.+)$")
_STEPD_HOST = re.compile(r"\*\*\* (?:JOB|STEP) \S+ ON (?P<host>\S+) ")
_ROOT_CAUSE = "Root Cause (first observed failure):"
_ELASTIC_RANK = re.compile(r"^\s*rank\s*: (?P<rank>\d+) \(local_rank: \d+\)")


@dataclass(frozen=True)
class Line:
    """One line of one log file, with what is known of where it came from."""

    path: Path
    number: int
    text: str
    """The line without its rank prefix."""
    rank: int | None
    node: int | None
    time: float | None
    """Its own time stamp (epoch seconds), if it has one."""

    @property
    def where(self) -> str:
        """`PATH:LINE`."""
        return f"{self.path}:{self.number}"


@dataclass
class LogFile:
    """One scanned file: its lines and what it says about ranks and hosts."""

    path: Path
    lines: list[Line]
    rank: int | None = None
    node: int | None = None
    root_rank: int | None = None
    """torchrun's "first observed failure" on this host (node files)."""
    modified: float | None = None
    """When the file was last written (epoch seconds): no line in it is later. A line with no
    time stamp at or below it (a rank's own traceback in rank-R.out) was written by then."""


@dataclass
class Scan:
    """Everything read from one job's files."""

    files: list[LogFile] = field(default_factory=list)
    hosts: dict[int, str] = field(default_factory=dict)
    """Node index -> host name."""
    rank_nodes: dict[int, int] = field(default_factory=dict)
    """Rank -> node index, from ranks/R."""
    failure_note: Line | None = None
    layout: Layout | None = None

    def lines(self) -> Iterator[Line]:
        """Every line of every file, file by file."""
        for log in self.files:
            yield from log.lines

    def node_of(self, rank: int | None) -> int | None:
        """The node index that runs `rank`: ranks/R, else R // processes per node where that
        is exact (one host, static rendezvous, or srun/mpirun's block distribution)."""
        if rank is None:
            return None
        if rank in self.rank_nodes:
            return self.rank_nodes[rank]
        one_task_per_process = self.layout is not None and self.layout.launcher != "torchrun"
        if self.layout is not None and (self.layout.static_hosts or one_task_per_process):
            return rank // self.layout.procs_per_node
        return None

    def host_of(self, node: int | None) -> str | None:
        """The host name of node N, when a log named it."""
        return None if node is None else self.hosts.get(node)


def _read_text(path: Path) -> tuple[str, int]:
    """The file's text (head and tail of a huge one) and the number of the first tail line."""
    with open(path, "rb") as stream:
        size = stream.seek(0, 2)
        stream.seek(0)
        if size <= HEAD_BYTES + TAIL_BYTES:
            return stream.read().decode("utf-8", "replace"), 1
        head = stream.read(HEAD_BYTES)
        head = head[: head.rfind(b"\n") + 1]
        skipped = head.count(b"\n")
        stream.seek(len(head))
        remaining = size - TAIL_BYTES - len(head)
        while remaining > 0:
            chunk = stream.read(min(remaining, 1 << 22))
            if not chunk:
                break
            skipped += chunk.count(b"\n")
            remaining -= len(chunk)
        tail = stream.read()
        first_tail = tail.find(b"\n") + 1  # the partial first line is dropped
        skipped += 1 if first_tail else 0
        text = head.decode("utf-8", "replace")
        return text + tail[first_tail:].decode("utf-8", "replace"), skipped + 1


def _stamp_time(line: str, year: int) -> float | None:
    """The epoch time a log line carries (glog, torchrun's failure block, Slurm, trainer)."""
    found = _GLOG_TIME.match(line)
    if found:
        md, hms = found["md"], found["hms"]
        try:
            whole, _, frac = hms.partition(".")
            moment = datetime.strptime(f"{year}{md} {whole}", "%Y%m%d %H:%M:%S")
        except ValueError:
            return None
        return moment.timestamp() + (float(f"0.{frac}") if frac else 0.0)
    for pattern, fmt in ((_ELASTIC_TIME, "%Y-%m-%d_%H:%M:%S"), (_SLURM_TIME, "%Y-%m-%dT%H:%M:%S")):
        found = pattern.search(line)
        if found:
            try:
                return datetime.strptime(found["stamp"], fmt).timestamp()
            except ValueError:
                return None
    return None


def _split_prefix(
    raw: str, procs_per_node: int, node: int | None
) -> tuple[str, int | None, float | None]:
    """The line without its rank prefix, the rank it names, and the trainer's stamp."""
    for pattern in _RANK_PREFIXES:
        found = pattern.match(raw)
        if not found:
            continue
        groups = found.groupdict()
        stamp = None
        if groups.get("stamp"):
            try:
                stamp = datetime.strptime(groups["stamp"], "%Y-%m-%dT%H:%M:%S").timestamp()
            except ValueError:
                stamp = None
        if groups.get("rank") is not None:
            return raw[found.end() :], int(groups["rank"]), stamp
        local = int(groups["local"])
        rank = node * procs_per_node + local if node is not None else None
        return raw[found.end() :], rank, stamp
    return raw, None, None


def read_file(
    path: Path, *, rank: int | None, node: int | None, procs_per_node: int, year: int
) -> LogFile | None:
    """One file scanned into Lines (None when it cannot be read)."""
    try:
        text, first = _read_text(path)
    except OSError:
        return None
    log = LogFile(path, [], rank=rank, node=node)
    with contextlib.suppress(OSError):
        log.modified = path.stat().st_mtime
    in_root_cause = False
    for offset, raw in enumerate(text.splitlines()):
        body, own_rank, stamp = _split_prefix(raw.rstrip(), procs_per_node, node)
        moment = stamp if stamp is not None else _stamp_time(body, year)
        log.lines.append(
            Line(
                path, first + offset, body, own_rank if own_rank is not None else rank, node, moment
            )
        )
        if body.strip() == _ROOT_CAUSE:
            in_root_cause = True
        elif in_root_cause:
            found = _ELASTIC_RANK.match(body)
            if found:
                log.root_rank = int(found["rank"])
                in_root_cause = False
    return log


def _expand(pattern: str) -> list[Path]:
    """An array's `{task}` path as the files of every task; a plain path as itself."""
    if "{task}" not in pattern:
        return [Path(pattern)]
    return sorted(Path(p) for p in glob.glob(glob.escape(pattern).replace("{task}", "*")))


def _number(path: Path, prefix: str) -> int | None:
    digits = path.name[len(prefix) :].split(".")[0]
    return int(digits) if digits.isdigit() else None


def job_files(
    log_paths: Mapping[str, str], extra: Mapping[str, Any]
) -> list[tuple[Path, int | None, int | None]]:
    """(path, rank, node) of every file of the job, job files first."""
    found: list[tuple[Path, int | None, int | None]] = []
    for key in ("out", "err"):
        if log_paths.get(key):
            found += [(p, None, None) for p in _expand(log_paths[key])]
    run_dirs = _expand(log_paths["run_dir"]) if log_paths.get("run_dir") else []
    for run_dir in run_dirs:
        for path in sorted(run_dir.glob("node-*.out")):
            # node-N.out only: on local/ssh it links to node-N-STAMP.out (docs/logs.md).
            if _number(path, "node-") is not None:
                found.append((path, None, _number(path, "node-")))
        for suffix in ("out", "log"):
            for path in sorted(run_dir.glob(f"rank-*.{suffix}")):
                found.append((path, _number(path, "rank-"), None))
    pattern = extra.get("rank_file")
    if isinstance(pattern, str) and "{rank}" in pattern:
        for name in sorted(glob.glob(glob.escape(pattern).replace("{rank}", "*"))):
            digits = re.findall(r"_(\d+)_log\.out$", name)
            found.append((Path(name), int(digits[0]) if digits else None, None))
    return found


def _read_rank_nodes(run_dirs: list[Path]) -> dict[int, int]:
    mapping: dict[int, int] = {}
    for run_dir in run_dirs:
        for note in (run_dir / RANKS_DIR).glob("*"):
            try:
                text = note.read_text(encoding="utf-8", errors="replace").strip()
            except OSError:
                continue
            if note.name.isdigit() and text.isdigit():
                mapping[int(note.name)] = int(text)
    return mapping


def scan_job(
    log_paths: Mapping[str, str],
    spec: Mapping[str, Any],
    extra: Mapping[str, Any],
    *,
    year: int | None = None,
) -> Scan:
    """Read every log of a job (see the module docstring)."""
    layout = Layout.from_spec(spec)
    the_year = year if year is not None else time.localtime().tm_year
    scan = Scan(layout=layout)
    run_dirs = _expand(log_paths["run_dir"]) if log_paths.get("run_dir") else []
    scan.rank_nodes = _read_rank_nodes(run_dirs)
    for path, rank, node in job_files(log_paths, extra):
        if rank is not None and node is None:
            node = scan.rank_nodes.get(rank)
        log = read_file(
            path, rank=rank, node=node, procs_per_node=layout.procs_per_node, year=the_year
        )
        if log is None:
            continue
        scan.files.append(log)
        for line in log.lines[:50]:
            _note_hosts(scan, line, node)
    for log in scan.files:
        for line in log.lines[-50:]:
            found = _STEPD_HOST.search(line.text)
            if found and 0 not in scan.hosts and layout.nodes == 1:
                scan.hosts[0] = found["host"]
    for run_dir in run_dirs:
        note = run_dir / FAILURE_FILE
        log = read_file(note, rank=None, node=None, procs_per_node=1, year=the_year)
        if log is not None and log.lines:
            scan.failure_note = log.lines[0]
            scan.files.append(log)
    return scan


def file_system_notes(log_paths: Mapping[str, str], reason: str | None) -> LogFile | None:
    """What the job's files say by their absence: a run folder that is gone while its .out
    is still there (or as the job's recorded reason says), a file system with no space
    left. As lines the failure classes match (disk_full, run_folder_missing)."""
    run_dir = log_paths.get("run_dir")
    if not run_dir or "{task}" in run_dir:
        return None
    folder = Path(run_dir)
    texts = [f"jobkit: {reason}"] if reason and "run folder" in reason else []
    out = log_paths.get("out")
    if not texts and not folder.exists() and out and "{task}" not in out and Path(out).exists():
        texts.append(f"jobkit: run folder {folder} is gone")
    for place in (folder, folder.parent):
        try:
            if place.exists() and os.statvfs(place).f_bavail == 0:
                texts.append(f"jobkit: {place}: No space left on device (its file system is full)")
                break
        except OSError:
            continue
    if not texts:
        return None
    lines = [Line(folder, 0, text, None, None, None) for text in texts]
    return LogFile(folder, lines)


def _note_hosts(scan: Scan, line: Line, node: int | None) -> None:
    """Host names from the launcher's own lines."""
    found = _NODE_HOST.match(line.text)
    if found:
        scan.hosts[int(found["n"])] = found["host"]
        return
    found = _JOB_HOSTS.match(line.text)
    if found:
        for index, host in enumerate(found["hosts"].split()):
            scan.hosts.setdefault(index, host)
