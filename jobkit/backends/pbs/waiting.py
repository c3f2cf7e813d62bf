"""Why PBS jobs wait (`jobkit why`), from the `qstat -f` the backend already runs (one per
flavor for all the jobs): PBS Pro's `comment` (`Not Running: ...`, `Can Never Run: ...`),
its `estimated.start_time`, and the times qtime / etime / stime / obittime (Torque:
start_time / comp_time). Pure functions of qstat's attributes.

Slurm's Torque wrappers (the `pbs` backend on the test cluster) print no comment and no
times beyond qtime: a waiting job then gets a note saying PBS gave no reason.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from jobkit.backends.pbs.states import normalize_pbs_state
from jobkit.backends.waiting import Event, Explanation, WaitInfo, WaitReason, parse_ctime

NO_COMMENT = (
    "PBS gives no reason for this job (no `comment` in qstat -f; Slurm's Torque wrappers never"
    " set one): `qstat -f ID` and your site's docs are the places to look"
)

_COMMENTS: tuple[tuple[re.Pattern[str], str, str, bool], ...] = (
    (
        re.compile(r"^Can Never Run", re.I),
        "PBS says this job can never run as asked",
        "cancel it (`jobkit cancel {job}`) and resubmit with less of what the comment names"
        " (`resources.*`, `resources.partition` for the queue)",
        True,
    ),
    (
        re.compile(r"^Not Running: Insufficient amount of (?:queue |server )?resource", re.I),
        "the resources it asks for are in use by other jobs now",
        "wait; asking for less of the resource named (`resources.*`) or a shorter"
        " `resources.time` can start it sooner",
        False,
    ),
    (
        re.compile(r"^Not Running: .*(?:limit|max_run|max_queued)", re.I),
        "a per-user, per-queue or server limit on running jobs or resources is reached",
        "wait for your other jobs to end (`qstat -Qf {queue}` shows the queue's limits)",
        False,
    ),
    (
        re.compile(r"^Not Running: .*(?:reservation|top job|dedicated time|prime)", re.I),
        "it would overlap a reservation, a top job or dedicated time",
        "wait, or a shorter `resources.time` may fit it in before",
        False,
    ),
    (
        re.compile(r"held", re.I),
        "it is held",
        "`qrls {job}` (a user hold; `qstat -f {job}` shows Hold_Types)",
        False,
    ),
    (
        re.compile(r"depend", re.I),
        "it waits for the jobs in `scheduler.dependency`",
        "wait for them (`qstat -f {job}` shows depend)",
        False,
    ),
)


def explain_comment(comment: str, job: str, queue: str | None = None) -> Explanation:
    """PBS's comment in plain words with its fix; an unknown one verbatim."""
    for pattern, meaning, fix, never in _COMMENTS:
        if pattern.search(comment):
            filled = fix.format(job=job, queue=queue or "QUEUE")
            return Explanation(comment, meaning, filled, never)
    return Explanation(comment, f"PBS says: {comment}", "", known=False)


def _get(attrs: Mapping[str, Any], dotted: str) -> Any:
    """`estimated.start_time` from Torque text (a flat key) or PBS Pro JSON (nested)."""
    if dotted in attrs:
        return attrs[dotted]
    head, _, tail = dotted.partition(".")
    inner = attrs.get(head)
    return inner.get(tail) if tail and isinstance(inner, Mapping) else None


TIMES = (
    ("qtime", "submitted"),
    ("etime", "eligible"),
    ("stime", "started"),
    ("start_time", "started"),
    ("obittime", "ended"),
    ("comp_time", "ended"),
)
"""qstat -f time attributes and the timeline event each is (Torque's mtime/ctime are left
out: Slurm's wrappers put other times in them)."""


def pbs_wait_info(attrs: Mapping[str, Any], job: str, flavor: str = "pro") -> WaitInfo:
    """One job's answer from its qstat -f attributes (Torque text or PBS Pro JSON); PBS Pro's
    ctime (creation) also counts as the submission time."""
    letter = str(attrs.get("job_state", ""))
    substate = attrs.get("substate")
    state = normalize_pbs_state(letter, None, int(substate) if substate is not None else None)
    events: list[Event] = []
    seen: set[str] = set()
    for key, what in (("ctime", "submitted"), *TIMES) if flavor == "pro" else TIMES:
        at = parse_ctime(_get(attrs, key))
        if at is not None and what not in seen:
            seen.add(what)
            events.append(Event(at, what))
    events.sort(key=lambda event: event.at)
    runs = attrs.get("run_count")
    notes: list[str] = []
    if str(runs).isdigit() and int(str(runs)) > 1:
        notes.append(f"PBS has started it {runs} times (requeued {int(str(runs)) - 1})")
    reasons: tuple[WaitReason, ...] = ()
    waiting = letter in ("Q", "H", "W", "T")
    comment = str(attrs.get("comment") or "").strip()
    if waiting and comment:
        found = explain_comment(comment, job, str(attrs.get("queue") or "") or None)
        estimate = parse_ctime(_get(attrs, "estimated.start_time"))
        nodes = _get(attrs, "estimated.exec_vnode")
        reasons = (WaitReason(found, None, estimate, str(nodes) if nodes else None),)
    elif waiting:
        notes.append(NO_COMMENT)
    return WaitInfo(state, letter, reasons, tuple(events), tuple(notes))
