"""Classify a job's failure from its scanned logs and the scheduler's final word.

Each line goes to the first class (classes.py order) whose pattern it matches; a Python
exception counts only as the last line of a traceback, and is tried after every specific
class (`RuntimeError: ... Connection closed by peer` is a lost connection, not the cause).
The job's class is the first class of the table that has lines, or whose state or signal
the scheduler reported; a scheduler state (TIMEOUT, CANCELLED...) wins over log lines, which
are then listed as "also seen". The first failing rank is the one whose line came first:
by its own time stamp, the next one in its file or the file's last write, then by file
order. A class that follows a peer's death (an NCCL error, a lost connection, an abort at
teardown) yields to another failure seen before it: the first failure by time is the cause.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from jobkit.core.lifecycle import State
from jobkit.doctor.classes import BY_NAME, CLASSES, EXCEPTION_LINE, UNKNOWN, FailureClass
from jobkit.doctor.diagnosis import Diagnosis, Evidence
from jobkit.doctor.scan import Line, LogFile, Scan
from jobkit.registry.record import JobRecord

MAX_EVIDENCE = 4
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+)$')
_TRACEBACK = "Traceback (most recent call last):"
_NATIVE_FRAME = re.compile(r"^(?:frame #\d+: |Exception raised from |<omitting python frames>)")
"""A C++ stack printed under a torch error: its symbol names would match classes."""
_LOG_HEADER = re.compile(r"^\[?[IWEF]\d{4} [\d:.]+ (?:\d+ )?\S+\] (?:\[c10d\] )?")
"""glog's `[W1125 11:44:34.776 TCPStore.cpp:125] [c10d] ` before a message."""
_SIGNAL_WORDS = {"segfault": "signal 11 (SIGSEGV)", "killed": "signal 9 (SIGKILL)"}
_LIBRARY = re.compile(r"(?:site-packages|dist-packages|/lib/python\d|^<frozen |/bin/torchrun$)")
_WORLD = re.compile(r"\bworld_size=(?P<n>\d+)\b")
_PYTHON = re.compile(r"^\s*jobkit_python=(?P<python>\S+)", re.M)
_LINE_ORDER: tuple[FailureClass, ...] = tuple(c for c in CLASSES if c.name != "python_exception")
_SKIPPED_EXCEPTIONS = ("ChildFailedError", "SignalException")
"""torchrun's own summary of a worker's failure (the worker's lines say more), and its agent
stopped by a signal (what a launcher did to it after another rank's failure, or a cancel)."""
_ROOT_CAUSE_FIELD = re.compile(r"^\s*(?P<key>rank|host)\s*:\s*(?P<value>\S+)")
"""A field of torchrun's root-cause block above its `exitcode :` line."""

FAILED_STATES = frozenset(
    {
        State.FAILED.value,
        State.TIMEOUT.value,
        State.NODE_FAIL.value,
        State.OUT_OF_MEMORY.value,
        State.CANCELLED.value,
        State.PREEMPTED.value,
    }
)


class _Match:
    """A line assigned to a class, with what the traceback around it said."""

    __slots__ = ("exception", "file_root", "frame", "line", "moment", "order", "reported_rank")

    def __init__(
        self,
        line: Line,
        order: int,
        moment: float | None,
        frame: str | None,
        exception: tuple[str, str] | None,
        file_root: int | None,
    ) -> None:
        self.line = line
        self.order = order
        self.moment = moment
        self.frame = frame
        self.exception = exception
        self.file_root = file_root
        self.reported_rank: int | None = None
        """The rank torchrun's root-cause block names for this line."""


def line_class(text: str, in_container: bool = False) -> FailureClass | None:
    """The first specific class whose pattern matches this line (not the generic exception);
    a container-only class only for a job in a container."""
    for cls in _LINE_ORDER:
        if (in_container or not cls.container_only) and cls.matches(text):
            return cls
    return None


def _in_container(record: JobRecord) -> bool:
    """Whether the job ran with a `container:` section (its stored spec says)."""
    try:
        return bool(record.spec.get("container"))
    except (ValueError, AttributeError):
        return False


def _next_times(lines: Sequence[Line], modified: float | None) -> list[float | None]:
    """For each line: its own time, else the next time stamp below it in the file, else when
    the file was last written (a line below every stamp was written by then: without it, a
    rank's unstamped traceback lost to any stamped line, so the rank that printed last won)."""
    result: list[float | None] = [None] * len(lines)
    upcoming: float | None = modified
    for index in range(len(lines) - 1, -1, -1):
        if lines[index].time is not None:
            upcoming = lines[index].time
        result[index] = lines[index].time if lines[index].time is not None else upcoming
    return result


def _user_frame(frames: list[tuple[str, str, str]]) -> str | None:
    """`FILE:LINE in FUNC` of the innermost frame outside libraries (None: all in libraries)."""
    if not frames:
        return None
    chosen = next((f for f in reversed(frames) if not _LIBRARY.search(f[0])), None)
    return None if chosen is None else f"{chosen[0]}:{chosen[1]} in {chosen[2]}"


def _match_file(
    log: LogFile, start: int, found: dict[str, list[_Match]], in_container: bool = False
) -> None:
    """Assign the lines of one file to classes (tracebacks followed per rank)."""
    times = _next_times(log.lines, log.modified)
    open_tb: dict[int | None, list[tuple[str, str, str]]] = {}
    for index, line in enumerate(log.lines):
        text = line.text.strip()
        key = line.rank
        if text == _TRACEBACK:
            open_tb[key] = []
            continue
        frame = _FRAME.match(line.text)
        if frame and key in open_tb:
            open_tb[key].append((frame["file"], frame["line"], frame["func"].strip()))
            continue
        if _NATIVE_FRAME.match(text):
            continue
        cls = line_class(text, in_container)
        exception = None
        frames = open_tb.get(key)
        exc = EXCEPTION_LINE.match(text) if frames is not None else None
        if exc:
            del open_tb[key]
            if exc["exc"].endswith(_SKIPPED_EXCEPTIONS):
                continue
            exception = (exc["exc"], (exc["msg"] or "").strip())
            cls = cls or BY_NAME["python_exception"]
        if cls is None:
            continue
        match = _Match(
            line,
            start + index,
            times[index],
            _user_frame(frames or []),
            exception,
            log.root_rank,
        )
        if cls.name == "program_exit":
            match.reported_rank = _root_cause_rank(log.lines, index)
        found.setdefault(cls.name, []).append(match)


def _root_cause_rank(lines: Sequence[Line], index: int) -> int | None:
    """The `rank : R (local_rank: L)` of torchrun's root-cause block above line `index`."""
    for line in reversed(lines[max(0, index - 4) : index]):
        field = _ROOT_CAUSE_FIELD.match(line.text)
        if field and field["key"] == "rank" and field["value"].isdigit():
            return int(field["value"])
    return None


def _rank_of(match: _Match, scan: Scan) -> int | None:
    """The line's rank, else the rank torchrun's report names, else its host's first failing
    rank (torchrun), else the host's only rank."""
    if match.line.rank is not None:
        return match.line.rank
    if match.reported_rank is not None:
        return match.reported_rank
    if match.file_root is not None:
        return match.file_root
    layout = scan.layout
    node = match.line.node
    if node is not None and layout is not None and layout.procs_per_node == 1:
        on_node = [r for r, n in scan.rank_nodes.items() if n == node]
        if len(on_node) == 1:
            return on_node[0]
        if layout.static_hosts:
            return node
    return None


def _first(matches: list[_Match]) -> _Match:
    """The match that came first: by time (own or next stamp), then by scan order."""
    return min(matches, key=lambda m: (m.moment is None, m.moment or 0.0, m.order))


def _earliest_cause(chosen: FailureClass, found: dict[str, list[_Match]]) -> FailureClass:
    """The class of the failure that came first, where the table's choice is one that follows
    a peer's death (FailureClass.follows_peers: a lost connection, an NCCL error, an abort at
    teardown): a failure of its own (not the fallback program_exit) seen before it, by time
    then scan order, is the cause. Without a time for the follower, the table decides."""
    if not chosen.follows_peers or chosen.name not in found:
        return chosen
    follower = _first(found[chosen.name])
    if follower.moment is None:
        return chosen
    earliest: tuple[float, int, FailureClass] | None = None
    for cls in CLASSES:
        if cls.follows_peers or cls.name == "program_exit" or cls.name not in found:
            continue
        first = _first(found[cls.name])
        if first.moment is None or (first.moment, first.order) >= (
            follower.moment,
            follower.order,
        ):
            continue
        if earliest is None or (first.moment, first.order) < earliest[:2]:
            earliest = (first.moment, first.order, cls)
    return chosen if earliest is None else earliest[2]


def _summary(cls: FailureClass, match: _Match | None, record: JobRecord) -> str:
    if match is None:
        raw = record.raw_state or record.state
        return f"the scheduler reports {raw}" + (f" ({record.reason})" if record.reason else "")
    if cls.name in _SIGNAL_WORDS:
        return f"the process died of {_SIGNAL_WORDS[cls.name]}"
    if cls.name == "program_exit":
        code = match.line.text.split(":", 1)[1].split()[0]
        who = "a rank" if match.reported_rank is None else f"rank {match.reported_rank}"
        return f"{who} exited with code {code} (torchrun's root cause)"
    if match.exception is not None and cls.name == "python_exception":
        name, message = match.exception
        return f"{name}: {message}" if message else name
    text = _LOG_HEADER.sub("", match.line.text.strip())
    return text if len(text) <= 200 else text[:197] + "..."


def _notes(cls: FailureClass, record: JobRecord, scan: Scan, match: _Match | None) -> list[str]:
    """Facts that make the fix concrete: the Python used, world sizes that disagree."""
    notes: list[str] = []
    if cls.name == "crash_at_exit":
        notes.append(_finished_note(record))
    if cls.name == "module_not_found":
        found = _PYTHON.search(record.script or "")
        env = record.spec.get("env") or {}
        python = found["python"] if found else env.get("python")
        where = ", ".join(f"env.{k}: {env[k]}" for k in ("venv", "conda") if env.get(k))
        ran = f"the job ran {python or 'the python on PATH'}"
        notes.append(ran + (f" ({where})" if where else ""))
    if cls.name in ("rendezvous_timeout", "world_size", "nccl_timeout") and scan.layout:
        seen = {int(m["n"]) for line in scan.lines() for m in [_WORLD.search(line.text)] if m}
        expected = scan.layout.world_size
        if seen and seen != {expected}:
            notes.append(
                f"the program saw world_size={', '.join(map(str, sorted(seen)))} but the spec"
                f" starts {expected} rank(s) ({scan.layout.nodes} node(s) x"
                f" {scan.layout.procs_per_node})"
            )
    return notes


def _finished_note(record: JobRecord) -> str:
    """Whether the program noted that its work was complete (the run folder's `finished`)."""
    from jobkit.core.conventions import FINISHED_FILE

    run_dir = (record.log_paths or {}).get("run_dir")
    marker = Path(run_dir) / FINISHED_FILE if run_dir else None
    if marker is not None and marker.is_file():
        text = marker.read_text(encoding="utf-8", errors="replace").strip()[:200]
        return f"the program had noted its work complete ({marker.name}: {text or 'empty'})"
    return "no `finished` note in the run folder: check the program's last lines for its end"


def _fix(cls: FailureClass, record: JobRecord, rank: int | None) -> str:
    fix = cls.fix.replace("resources.mem", _memory_key(record.backend))
    fix = fix.replace("jobkit logs ID", f"jobkit logs {record.jobkit_id}")
    fix = fix.replace("jobkit doctor ID", f"jobkit doctor {record.jobkit_id}")
    fix = fix.replace("jobkit report ID", f"jobkit report {record.jobkit_id}")
    return fix.replace("--rank R", f"--rank {rank}" if rank is not None else "--all-ranks")


def _memory_key(backend: str) -> str:
    """The spec key that asks this backend for memory (resources.mem where it honours it)."""
    from jobkit.backends.registry import backend_class
    from jobkit.core.errors import JobkitError

    try:
        return backend_class(backend).memory_key
    except JobkitError:  # an unknown or unavailable backend
        return "resources.mem"


def _last_lines(scan: Scan) -> list[Evidence]:
    """The unknown class's evidence: the last lines of the file that tells most."""
    files = (
        [f for f in scan.files if f.root_rank is not None]
        or [f for f in scan.files if f.path.suffix == ".err" and f.lines]
        or [f for f in scan.files if f.lines]
    )
    if not files:
        return []
    lines = [line for line in files[0].lines if line.text.strip()]
    return [Evidence(line.where, line.text.strip()[:200]) for line in lines[-MAX_EVIDENCE:]]


def outcome_of(record: JobRecord) -> str:
    """failed, succeeded, running or pending, from the record's state."""
    if record.state == State.SUCCEEDED.value:
        return "succeeded"
    if record.state in FAILED_STATES:
        return "failed"
    if record.state in (State.RUNNING.value, State.SUSPENDED.value):
        return "running"
    return "pending"


def diagnose(record: JobRecord, scan: Scan, *, outcome: str | None = None) -> Diagnosis:
    """The job's diagnosis from its scanned logs (a running job: the errors so far)."""
    result = Diagnosis(
        jobkit_id=record.jobkit_id,
        name=record.name,
        backend=record.backend,
        scheduler_id=record.scheduler_id,
        state=record.state,
        exit_code=record.exit_code,
        signal=record.signal,
        outcome=outcome or outcome_of(record),
    )
    if result.outcome in ("succeeded", "pending"):
        return result
    found: dict[str, list[_Match]] = {}
    start = 0
    in_container = _in_container(record)
    for log in scan.files:
        _match_file(log, start, found, in_container)
        start += len(log.lines)
    by_state = next((c for c in CLASSES if record.state in c.states), None)
    by_signal = next((c for c in CLASSES if record.signal in c.signals), None)
    candidates = [c for c in CLASSES if c.name in found or c in (by_state, by_signal)]
    if by_state is not None:
        before = CLASSES[: CLASSES.index(by_state)]
        earlier = [c for c in before if c.name in found and (c.states or c is CLASSES[0])]
        chosen = earlier[0] if earlier else by_state
    elif candidates:
        chosen = _earliest_cause(candidates[0], found)
    elif result.outcome == "running":
        return result
    else:
        chosen = UNKNOWN
    matches = found.get(chosen.name, [])
    first = _first(matches) if matches else None
    result.cls, result.title = chosen.name, chosen.title
    result.explanation = chosen.explanation
    result.summary = _summary(chosen, first, record)
    if first is not None:
        result.rank = _rank_of(first, scan)
        result.node = first.line.node if first.line.node is not None else scan.node_of(result.rank)
        result.frame = first.frame
        ordered = sorted(matches, key=lambda m: (m is not first, m.order))
        result.evidence = [
            Evidence(m.line.where, m.line.text.strip()[:200]) for m in ordered[:MAX_EVIDENCE]
        ]
    elif chosen is UNKNOWN:
        result.evidence = _last_lines(scan)
    if first is None:
        raw = record.raw_state or record.state
        exit_words = "" if record.exit_code is None else f", exit code {record.exit_code}"
        result.evidence.insert(0, Evidence("scheduler", f"state {raw}{exit_words}"))
    result.host = scan.host_of(result.node)
    if result.host is None and first is not None:
        result.host = _stepd_host(first.line.text)
    if result.host is None and result.node is None and record.nodes and "," not in record.nodes:
        result.host = record.nodes if "[" not in record.nodes else None
    result.fix = _fix(chosen, record, result.rank)
    result.notes = _notes(chosen, record, scan, first)
    result.also = [c.title for c in candidates if c is not chosen]
    return result


def _stepd_host(text: str) -> str | None:
    found = re.search(r"\*\*\* (?:JOB|STEP) \S+ ON (\S+) ", text)
    return found.group(1) if found else None


def diagnose_record(record: JobRecord, *, outcome: str | None = None) -> Diagnosis:
    """Scan the job's files and diagnose it (the year of its submission dates glog lines)."""
    import time

    from jobkit.doctor.scan import file_system_notes, scan_job

    year = time.localtime(record.submitted_at or record.created_at).tm_year
    scan = scan_job(record.log_paths, record.spec, record.extra, year=year)
    notes = file_system_notes(record.log_paths, record.reason)
    if notes is not None:
        scan.files.insert(0, notes)
    return diagnose(record, scan, outcome=outcome)
