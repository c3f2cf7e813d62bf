"""`jobkit doctor`'s hang section for a running job: its ranks' progress from their heartbeats
and, when it is STALLED, every rank's Python stack and the rank(s) whose stack differs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jobkit.hang.compare import Comparison, compare, summary
from jobkit.hang.stacks import INSTALL_HINT, SPY_MISSING, RankStack
from jobkit.hang.stall import Progress, format_age, job_progress
from jobkit.registry.record import JobRecord

STACK_LINES = 8
"""Innermost frames shown per rank in the text (--json has them all)."""


def _ranks(ranks: tuple[int, ...]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


@dataclass(frozen=True)
class HangReport:
    """What the hang section found: progress, and (stalled, when asked) stacks compared."""

    progress: Progress
    stacks: tuple[RankStack, ...] = ()
    comparison: Comparison | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def stalled(self) -> bool:
        """Whether no rank advanced for monitor.stall_after."""
        return self.progress.stalled

    def lines(self) -> list[str]:
        """The section as text, one fact per line."""
        p = self.progress
        limit = format_age(p.threshold_s)
        if p.stalled:
            head = (
                f"STALLED: no rank advanced for {format_age(p.since_progress_s)}"
                f" (monitor.stall_after {limit}); last step {p.last_step}"
            )
        elif p.waiting == "checkpoint":
            head = (
                f"saving a checkpoint at step {p.last_step} for"
                f" {format_age(p.since_progress_s)} (not counted as a hang)"
            )
        elif p.waiting == "done":
            head = f"training finished at step {p.last_step}; the job is ending"
        else:
            head = (
                f"progressing: step {p.last_step}, last advance"
                f" {format_age(p.since_progress_s)} ago (monitor.stall_after {limit})"
            )
        lines = [head]
        for beat in p.beats:
            lines.append(
                f"  rank {beat.rank:<3} step {beat.step:<7} {beat.phase:<10}"
                f" {format_age(p.now - beat.time):>6} ago  {beat.node} pid {beat.pid}"
            )
        lines += self._stack_lines()
        lines += list(self.notes)
        return lines

    def _stack_lines(self) -> list[str]:
        found = self.comparison
        if found is None:
            return []
        lines: list[str] = []
        major = found.majority
        if found.odd_ranks and major is not None:
            for group in found.groups:
                if group is not major:
                    lines.append(f"stack differs: {_ranks(group.ranks)} in {summary(group.frames)}")
            one = len(major.ranks) == 1
            doing = ("waits" if one else "wait") if major.collective else ("is" if one else "are")
            doing += f" in {major.collective}" if major.collective else ""
            lines.append(f"  while {_ranks(major.ranks)} {doing}: {summary(major.frames)}")
        elif major is not None:
            lines.append(f"all ranks with a stack are in the same place: {summary(major.frames)}")
        lines.append("stacks (innermost frame first):")
        for stack in self.stacks:
            where = f"rank {stack.rank} ({stack.node} pid {stack.pid})"
            if not stack.frames:
                lines.append(f"  {where}: {stack.error}")
                continue
            lines.append(f"  {where}:")
            lines += [f"    {frame.show()}" for frame in stack.frames[:STACK_LINES]]
            if len(stack.frames) > STACK_LINES:
                lines.append(f"    ... {len(stack.frames) - STACK_LINES} outer frames")
        return lines

    def culprit(self) -> RankStack | None:
        """The rank to look at first: the first whose stack differs from the others'."""
        found = self.comparison
        if found is None or not found.odd_ranks:
            return None
        return next((s for s in self.stacks if s.rank == found.odd_ranks[0]), None)

    def summary(self) -> str:
        """One line for doctor's `what` and --json's summary: the stuck step and its age, and
        the differing rank's place, or why no rank could be named."""
        p = self.progress
        text = f"no rank advanced for {format_age(p.since_progress_s)} (last step {p.last_step})"
        found, culprit = self.comparison, self.culprit()
        if culprit is not None and found is not None and found.majority is not None:
            major = found.majority
            waits = f" waits in {major.collective}" if major.collective else " is elsewhere"
            return (
                f"{text}; rank {culprit.rank} in {summary(culprit.frames)} while"
                f" {_ranks(major.ranks)}{waits}"
            )
        if self.notes:
            return f"{text}; {self.notes[0]}"
        if found is not None and found.majority is not None:
            return f"{text}; every rank in {summary(found.majority.frames)}"
        return text

    def to_dict(self) -> dict[str, Any]:
        """JSON: progress (as status's `stalled`), stacks, comparison, notes."""
        return {
            "stalled": self.progress.stalled,
            "waiting": self.progress.waiting,
            "progress": self.progress.to_dict(),
            "stacks": [s.to_dict() for s in self.stacks],
            "comparison": self.comparison.to_dict() if self.comparison else None,
            "stuck_ranks": list(self.comparison.odd_ranks) if self.comparison else [],
            "notes": list(self.notes),
        }


def hang_section(record: JobRecord, now: float, *, collect_stacks: bool) -> HangReport | None:
    """The hang section of a RUNNING job (None otherwise, or without heartbeats: a program
    other than the bundled trainer). With `collect_stacks`, a STALLED job's ranks are dumped
    with py-spy on their nodes and compared."""
    progress = job_progress(record, now)
    if progress is None:
        return None
    if not (collect_stacks and progress.stalled):
        return HangReport(progress)
    from jobkit.backends.registry import get_backend
    from jobkit.hang.stacks import collect_stacks as dump

    stacks = tuple(dump(get_backend(record.backend), record.tracked(), list(progress.beats)))
    notes = (no_stack_note(stacks),) if stacks and not any(s.frames for s in stacks) else ()
    return HangReport(progress, stacks, compare(list(stacks)), notes)


def no_stack_note(stacks: tuple[RankStack, ...]) -> str:
    """Why no rank could be named, in one line: py-spy missing (where, and the install
    command) when that is the reason for every rank, else a pointer to each rank's line."""
    missing = sorted({s.node for s in stacks if (s.error or "").startswith(SPY_MISSING)})
    if len(missing) and all((s.error or "").startswith(SPY_MISSING) for s in stacks):
        return (
            f"no stack could be collected: py-spy is not installed where the job runs"
            f" ({', '.join(missing)}): {INSTALL_HINT}"
        )
    return "no stack could be collected (see each rank above)"
