"""What `jobkit doctor` found about one job: the class, the first failing rank and host, the
lines that show it and the fix; as text for people and as JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobkit.hang.report import HangReport

ONE_LINE_MAX = 140
STALLED_CLASS = "stalled"


@dataclass(frozen=True)
class Evidence:
    """One line that shows the failure: `PATH:LINE` (or `scheduler`) and its text."""

    where: str
    text: str

    def to_dict(self) -> dict[str, str]:
        """JSON-ready form."""
        return {"where": self.where, "text": self.text}


@dataclass
class Diagnosis:
    """The answer for one job. `cls` is None while nothing failed (succeeded, queued, or a
    running job without errors so far)."""

    jobkit_id: str
    name: str
    backend: str
    scheduler_id: str | None
    state: str
    exit_code: int | None
    signal: int | None
    outcome: str
    """failed, succeeded, running or pending."""
    cls: str | None = None
    title: str | None = None
    summary: str | None = None
    rank: int | None = None
    node: int | None = None
    host: str | None = None
    frame: str | None = None
    evidence: list[Evidence] = field(default_factory=list)
    explanation: str | None = None
    fix: str | None = None
    notes: list[str] = field(default_factory=list)
    also: list[str] = field(default_factory=list)
    hang: dict[str, Any] | None = None
    hang_lines: list[str] = field(default_factory=list)

    def add_hang(self, report: HangReport) -> None:
        """A running job's hang section; a STALLED job with no error in its logs so far gets
        it as its cause too (class `stalled`, the differing rank and its node, the summary),
        so that --json's rank, host, summary and one_line say what the text says."""
        self.hang = report.to_dict()
        self.hang_lines = report.lines()
        if not report.stalled or self.cls is not None:
            return
        self.cls = STALLED_CLASS
        self.title = "the job is stalled"
        self.summary = report.summary()
        culprit = report.culprit()
        if culprit is not None:
            self.rank, self.host = culprit.rank, culprit.node
            beat = next((b for b in report.progress.beats if b.rank == culprit.rank), None)
            self.node = beat.node_index if beat is not None else None
        self.explanation = (
            "no rank's heartbeat advanced for monitor.stall_after: a rank is stuck, and the"
            " others wait for it in a collective (or every rank waits on the same thing)"
        )
        self.fix = (
            f"read the named rank's stack below; `jobkit cancel {self.jobkit_id}` once seen,"
            " or raise monitor.stall_after if one step really takes this long"
        )

    def one_line(self) -> str:
        """`TITLE on rank R (HOST): SUMMARY`, at most ONE_LINE_MAX characters."""
        if self.cls is None:
            return f"{self.outcome}: no failure found"
        where = self.where_words()
        text = f"{self.title}{' ' + where if where else ''}"
        if self.summary:
            text += f": {self.summary}"
        return text if len(text) <= ONE_LINE_MAX else text[: ONE_LINE_MAX - 3] + "..."

    def where_words(self) -> str:
        """`on rank 1 (vm)`, `on vm`, or empty."""
        if self.rank is not None:
            return f"on rank {self.rank}" + (f" ({self.host})" if self.host else "")
        return f"on {self.host}" if self.host else ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (`jobkit doctor ID --json`)."""
        data = {k: v for k, v in self.__dict__.items() if k not in ("evidence", "hang_lines")}
        data["class"] = data.pop("cls")
        data["evidence"] = [e.to_dict() for e in self.evidence]
        data["one_line"] = self.one_line() if self.cls else None
        return data

    def lines(self) -> list[str]:
        """The report for people, one fact per line."""
        sched = f"{self.backend} {self.scheduler_id}" if self.scheduler_id else self.backend
        ended = self.state + (f", exit {self.exit_code}" if self.exit_code is not None else "")
        if self.signal:
            ended += f", signal {self.signal}"
        out = [f"{self.jobkit_id}  {self.name}  ({sched})  {ended}"]
        if self.cls is None:
            out.append(f"  {self._quiet_words()}")
        else:
            facts: list[tuple[str, str]] = []
            if self.cls == STALLED_CLASS:
                facts.append(("so far", "the job still runs, and no rank advances (hang below)"))
            elif self.outcome == "running":
                facts.append(("so far", "the job still runs: the errors in its logs so far"))
            facts.append(("cause", f"{self.title} [{self.cls}]"))
            if self.summary:
                facts.append(("what", self.summary))
            node = f" (node {self.node})" if self.node is not None else ""
            if self.rank is not None:
                facts.append(("first rank", f"{self.rank}, host {self.host or '?'}{node}"))
            elif self.host or self.node is not None:
                facts.append(
                    ("host", f"{self.host or '?'}{node} (no rank named: the launcher's own lines)")
                )
            if self.frame:
                facts.append(("where", self.frame))
            for index, item in enumerate(self.evidence):
                facts.append(("evidence" if index == 0 else "", f"{item.where}: {item.text}"))
            facts.append(("why", self.explanation or "-"))
            facts.append(("fix", self.fix or "-"))
            facts += [("note", note) for note in self.notes]
            if self.also:
                facts.append(("also seen", ", ".join(self.also)))
            out += [f"  {key:<11} {value}".rstrip() for key, value in facts]
        if self.hang_lines:
            out.append("  hang")
            out += [f"    {line}" for line in self.hang_lines]
        elif self.outcome == "running":
            out.append("  hang        no heartbeats to judge by (the bundled trainer writes them)")
        return out

    def _quiet_words(self) -> str:
        if self.outcome == "succeeded":
            return "the job succeeded: nothing to diagnose"
        if self.outcome == "pending":
            return f"the job has not run yet ({self.state}): `jobkit why {self.jobkit_id}` says why"
        if self.outcome == "running":
            return "no errors in the logs so far"
        return "no failure pattern found"
