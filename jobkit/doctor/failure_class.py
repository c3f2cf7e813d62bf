"""FailureClass: one kind of failure `jobkit doctor` knows (how it shows, what it means, what
to change), the record every part of the failure table (doctor/classes*.py) is made of."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class FailureClass:
    """One kind of failure: how it shows, what it means, what to change."""

    name: str
    """Stable id (JSON, the status cache), e.g. `port_in_use`."""
    title: str
    """A few words for people: `master port already in use`."""
    patterns: tuple[re.Pattern[str], ...]
    explanation: str
    fix: str
    """The spec key (or trainer key, or command) to change, and to what."""
    states: frozenset[str] = frozenset()
    """jobkit states (the scheduler's final state) that show this class by themselves."""
    signals: frozenset[int] = frozenset()
    """Signals that, ending the job, show this class by themselves."""
    container_only: bool = False
    """Only a job with a `container:` section shows this class (its lines mean something
    else outside one: they go to the next class that matches)."""
    follows_peers: bool = False
    """What a rank shows when ANOTHER rank died (a lost connection, an NCCL error, a
    timeout, an abort as it tears down): the class yields to a failure of another class seen
    before it (jobkit/doctor/classify.py), whatever the table's order."""

    def matches(self, text: str) -> re.Match[str] | None:
        """The first pattern's match in one log line, or None."""
        for pattern in self.patterns:
            found = pattern.search(text)
            if found:
                return found
        return None


def patterns(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in patterns)
