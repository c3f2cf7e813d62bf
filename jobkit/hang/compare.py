"""Which rank's stack differs: ranks are grouped by their innermost frames; the largest group
is "where the others are" (on a tie, the group waiting in a collective: it waits for the rest)
and every rank outside it is named, with a summary of its innermost frames."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jobkit.hang.stacks import Frame, RankStack

SIGNATURE_DEPTH = 3
"""Innermost frames that decide whether two ranks are in the same place (lines ignored)."""
SUMMARY_DEPTH = 3
COLLECTIVES = frozenset(
    {
        "all_reduce",
        "all_gather",
        "all_gather_into_tensor",
        "all_gather_object",
        "all_to_all",
        "all_to_all_single",
        "barrier",
        "monitored_barrier",
        "broadcast",
        "broadcast_object_list",
        "gather",
        "gather_object",
        "reduce",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "scatter",
        "send",
        "recv",
        "wait",
        "_engine_run_backward",
    }
)
"""Functions a rank sits in while it waits for the others (torch.distributed's, and autograd's
backward, where DDP all-reduces the gradients)."""


def signature(stack: RankStack) -> tuple[tuple[str, str], ...]:
    """Where a rank is: its innermost frames' (file, function), without line numbers."""
    return tuple((f.file, f.function) for f in stack.frames[:SIGNATURE_DEPTH])


def collective_of(frames: tuple[Frame, ...]) -> str | None:
    """The collective the stack waits in (the innermost such frame), or None."""
    for frame in frames:
        if frame.function in COLLECTIVES:
            return frame.function
    return None


def summary(frames: tuple[Frame, ...]) -> str:
    """The innermost frames, innermost first: `sleep_before (x.py:12) < forward (x.py:30)`."""
    return " < ".join(f.show() for f in frames[:SUMMARY_DEPTH]) or "(no frames)"


@dataclass(frozen=True)
class Group:
    """Ranks whose innermost frames are the same."""

    ranks: tuple[int, ...]
    frames: tuple[Frame, ...]
    """The first rank's frames (innermost first)."""

    @property
    def collective(self) -> str | None:
        """The collective these ranks wait in, if any."""
        return collective_of(self.frames)

    def to_dict(self) -> dict[str, Any]:
        """JSON: the ranks, the collective, the innermost frames."""
        return {
            "ranks": list(self.ranks),
            "collective": self.collective,
            "innermost": [f.show() for f in self.frames[:SUMMARY_DEPTH]],
        }


@dataclass(frozen=True)
class Comparison:
    """The ranks grouped by where they are, the majority, and the ranks that differ."""

    groups: tuple[Group, ...]
    majority: Group | None
    odd_ranks: tuple[int, ...]
    unknown_ranks: tuple[int, ...]
    """Ranks without a stack (py-spy failed for them)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON: groups, majority, the differing ranks."""
        return {
            "groups": [g.to_dict() for g in self.groups],
            "majority": self.majority.to_dict() if self.majority else None,
            "differing_ranks": list(self.odd_ranks),
            "ranks_without_stack": list(self.unknown_ranks),
        }


def _majority_key(group: Group) -> tuple[int, int, int]:
    """Larger first; on a tie the group waiting in a collective (it waits for the others);
    then the group holding the lowest rank."""
    return (len(group.ranks), 1 if group.collective else 0, -min(group.ranks))


def compare(stacks: list[RankStack]) -> Comparison:
    """Group the ranks by their innermost frames and name the ones outside the majority."""
    by_place: dict[tuple[tuple[str, str], ...], list[RankStack]] = {}
    unknown: list[int] = []
    for stack in sorted(stacks, key=lambda s: s.rank):
        if not stack.frames:
            unknown.append(stack.rank)
            continue
        by_place.setdefault(signature(stack), []).append(stack)
    groups = tuple(
        sorted(
            (
                Group(tuple(s.rank for s in members), members[0].frames)
                for members in by_place.values()
            ),
            key=lambda g: g.ranks[0],
        )
    )
    if not groups:
        return Comparison((), None, (), tuple(unknown))
    majority = max(groups, key=_majority_key)
    odd = tuple(sorted(r for g in groups if g is not majority for r in g.ranks))
    return Comparison(groups, majority if len(groups) > 1 else groups[0], odd, tuple(unknown))
