"""Why Grid Engine jobs wait (`jobkit why`): the state from `qstat -xml -u USER` (the poll's
query) and the scheduler's messages from ONE `qstat -j ID,ID,...` for the jobs it lists.

The "scheduling info:" lines exist only while the scheduler's `schedd_job_info` is true
(`qconf -ssconf`); when it is off qstat says "(Collecting of scheduler job information is
turned off)" and jobkit says so. Grid Engine gives no start estimate.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

from jobkit.backends.sge.parse import LiveJob
from jobkit.backends.waiting import Event, Explanation, WaitInfo, WaitReason, parse_ctime
from jobkit.core.states import State

INFO_OFF = "turned off"
INFO_OFF_NOTE = (
    "Grid Engine's schedd_job_info is off, so it does not say why jobs wait (an administrator"
    " turns it on with `qconf -msconf`)"
)
NO_ESTIMATE = "Grid Engine makes no start estimates"
GONE_NOTE = "Grid Engine no longer lists the job (it ended): `qacct -j {job}` has its times"

_MESSAGES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"Job is in hold state", re.I), "it is held", "`qrls {job}`"),
    (
        re.compile(r"dropped because of job dependencies", re.I),
        "it waits for the jobs in `scheduler.dependency` (-hold_jid) to end",
        "wait for them (`qstat -j {job}` shows jid_predecessor_list)",
    ),
    (
        re.compile(r"execution time not reached", re.I),
        "it may not start before the time given with qsub -a",
        "wait, or `qalter -a <time> {job}`",
    ),
    (
        re.compile(r"cannot run .*because it offers only", re.I),
        "a host or queue offers less of a resource than it asks for",
        "ask for less (`resources.mem`, `resources.time`, `sge.resources`) if no host offers it",
    ),
    (
        re.compile(r"dropped because it is full", re.I),
        "a queue instance is full (its slots are in use)",
        "wait for running jobs to end",
    ),
    (
        re.compile(r"cannot run in PE .*only offers", re.I),
        "its parallel environment has too few free slots",
        "wait, or ask for fewer slots (`resources.nodes`, processes per node)",
    ),
    (
        re.compile(r"exceeds limit", re.I),
        "a resource quota (qconf -srqs) is reached",
        "wait for your other jobs to end",
    ),
    (
        re.compile(
            r"dropped because it is (?:temporarily not available|disabled|overloaded)", re.I
        ),
        "a queue instance is unavailable, disabled or overloaded",
        "wait (`qstat -f` shows queue states)",
    ),
)


def parse_qstat_j(text: str) -> dict[str, dict[str, list[str]]]:
    """`qstat -j ID,ID` -> job number -> key -> lines (a value continued on indented lines,
    as "scheduling info:" is, gives several)."""
    jobs: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    key = ""
    for line in text.splitlines():
        if line.startswith("====="):
            current, key = {}, ""
            continue
        if current is None or not line.strip():
            continue
        head, sep, value = line.partition(":")
        if line[:1].isspace() or not sep:
            if key:
                current[key].append(line.strip())
            continue
        key = head.strip()
        current.setdefault(key, []).append(value.strip())
        if key == "job_number":
            jobs[value.strip()] = current
    return jobs


def explain_message(line: str, job: str) -> Explanation:
    """One "scheduling info" line in plain words; an unknown one verbatim."""
    for pattern, meaning, fix in _MESSAGES:
        if pattern.search(line):
            return Explanation(line, meaning, fix.format(job=job))
    return Explanation(line, f"Grid Engine says: {line}", "", known=False)


def _rank(found: Explanation) -> int:
    """The table's order (hold, dependency, begin time first); unknown messages last."""
    for index, (pattern, _, _) in enumerate(_MESSAGES):
        if pattern.search(found.code):
            return index
    return len(_MESSAGES)


def _reasons(lines: Sequence[str], job: str) -> tuple[WaitReason, ...]:
    """One reason per kind of message (a message repeated for every host is said once)."""
    grouped: dict[str, list[Explanation]] = defaultdict(list)
    for line in lines:
        found = explain_message(line, job)
        grouped[found.fix if found.known else line].append(found)
    reasons = []
    for same in sorted(grouped.values(), key=lambda group: _rank(group[0])):
        first = same[0]
        if len(same) > 1:
            more = f" (and {len(same) - 1} more like it)"
            first = Explanation(first.code, first.meaning + more, first.fix, known=first.known)
        reasons.append(WaitReason(first))
    return tuple(reasons)


def sge_wait_info(job: str, state: State, letters: str, block: dict[str, list[str]]) -> WaitInfo:
    """One job's answer from its qstat state letters and its `qstat -j` block."""
    events = []
    for key, what in (("submission_time", "submitted"), ("execution_time", "eligible")):
        at = parse_ctime((block.get(key) or [""])[0])
        if at is not None:
            events.append(Event(at, what))
    info = [line for line in block.get("scheduling info", []) if line]
    errors = [
        line for key, lines in block.items() if key.startswith("error reason") for line in lines
    ]
    notes: list[str] = []
    reasons: tuple[WaitReason, ...] = ()
    waiting = state in (State.QUEUED, State.HELD)
    if waiting:
        if any(INFO_OFF in line for line in info):
            notes.append(INFO_OFF_NOTE)
            info = []
        reasons = _reasons([*errors, *info], job)
    timeline = tuple(sorted(events, key=lambda e: e.at))
    return WaitInfo(state, letters, reasons, timeline, tuple(notes), NO_ESTIMATE)


def live_state(rows: Sequence[LiveJob]) -> tuple[State, str]:
    """An array's rows as one state: running wins over held over queued."""
    from jobkit.backends.sge.states import normalize_qstat_state

    order = [State.RUNNING, State.SUSPENDED, State.HELD, State.QUEUED, State.UNKNOWN]
    state = min((normalize_qstat_state(r.letters) for r in rows), key=order.index)
    return state, ",".join(sorted({r.letters for r in rows}))


def gone(job: str) -> WaitInfo:
    """A job qstat no longer lists."""
    return WaitInfo(notes=(GONE_NOTE.format(job=job),))
