"""Preemption signals: a handler only records the signal; the loop decides when to stop."""

from __future__ import annotations

import signal
from types import FrameType


class StopRequest:
    """Set by a preemption signal (SIGUSR2, SIGTERM ...); read once per training step."""

    def __init__(self) -> None:
        self.signal_name: str | None = None
        self._previous: dict[signal.Signals, object] = {}

    def install(self, names: list[str]) -> None:
        """Catch the named signals (e.g. ["SIGUSR2", "SIGTERM"])."""
        for name in names:
            number = signal.Signals[name]
            self._previous[number] = signal.signal(number, self._handle)

    def uninstall(self) -> None:
        """Put the previous handlers back."""
        for number, previous in self._previous.items():
            signal.signal(number, previous)  # type: ignore[arg-type]
        self._previous.clear()

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.signal_name is None:
            self.signal_name = signal.Signals(signum).name

    @property
    def requested(self) -> bool:
        """True once any of the signals arrived."""
        return self.signal_name is not None
