"""Following and tailing log files, shared by every backend.

`follow()` merges one or several files into a stream of complete lines: it waits for files
that do not exist yet, follows appends (a requeued job appends to the same file), starts
again from the top of a file that was truncated or replaced, and stops by itself once
`is_done()` has said the job is final and every file has been read to its end.
`tail()` reads the last lines of a file from its end without reading the whole file.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from jobkit.logs.watch import Watcher, make_watcher

_CHUNK = 1 << 20
"""Bytes read per call while following."""
_TAIL_BLOCK = 1 << 16
"""Bytes read per step when scanning backwards from the end of a file."""
_BATCH_LINES = 4096
"""Lines per batch at most (bounded memory when a large file is read in one pass)."""
_MAX_PARTIAL = 1 << 20
"""A line without a newline longer than this is printed as it is (bounded memory)."""
_SEEN_BYTES = 256
"""Bytes before the read offset checked at each look, to tell a rewritten file from an append."""


@dataclass(frozen=True)
class LogLine:
    """One complete line of one file; `label` names the file when several are merged."""

    label: str | None
    text: str

    def render(self) -> str:
        """The line as printed: `[label] text` when labelled, else the text.

        A line that already names its label after a first word (the bundled trainer's
        `TIME rank 0: message`) is not prefixed twice: `[rank 0] TIME message`.
        """
        if not self.label:
            return self.text
        first, sep, rest = self.text.partition(" ")
        named = f"{self.label}: "
        if sep and rest.startswith(named):
            return f"[{self.label}] {first} {rest[len(named) :]}"
        return f"[{self.label}] {self.text}"


@dataclass(frozen=True)
class LogSource:
    """A file to follow: where it is, how its lines are prefixed, where to start reading."""

    path: Path
    label: str | None = None
    start: int = 0
    """Byte offset to start from (see `tail_offset`); 0 reads the whole file."""


@dataclass(frozen=True)
class FollowTiming:
    """How often the follower looks when no event wakes it."""

    min_poll_s: float = 0.05
    """Poll interval while lines keep coming (without inotify)."""
    active_s: float = 2.0
    """Without inotify: poll every min_poll_s until no line came for this long, then back
    off (doubling) to max_poll_s."""
    max_poll_s: float = 1.0
    """Longest poll interval; with inotify, the safety re-check (network file systems)."""
    done_interval_s: float = 2.0
    """How often `is_done()` is asked (it may query a scheduler)."""


def _decode(raw: bytes) -> str:
    text = raw.decode("utf-8", errors="replace")
    return text[:-1] if text.endswith("\r") else text


class _OpenFile:
    """One followed file: its descriptor, identity, read offset and unfinished last line.

    `seen` holds the last bytes read (up to _SEEN_BYTES, ending at the offset): if they are
    no longer there, the file was rewritten (truncated, then written past the offset before
    this follower looked again) and is read again from its top.
    """

    def __init__(self, source: LogSource) -> None:
        self.path = source.path
        self.label = source.label
        self.start = source.start
        self.fd: int | None = None
        self.identity: tuple[int, int] | None = None
        self.offset = 0
        self.partial = b""
        self.seen = b""

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def _open(self) -> bool:
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            return False
        st = os.fstat(fd)
        self.fd = fd
        self.identity = (st.st_dev, st.st_ino)
        self.offset = self.start if self.start <= st.st_size else 0
        self.start = 0  # a file that is replaced later is read from its top
        first = max(0, self.offset - _SEEN_BYTES)
        self.seen = os.pread(fd, self.offset - first, first) if self.offset else b""
        return True

    def _rewritten(self) -> bool:
        """True when the bytes just before the offset are not the ones read there."""
        assert self.fd is not None
        if not self.seen:
            return False
        return os.pread(self.fd, len(self.seen), self.offset - len(self.seen)) != self.seen

    def _flush_partial(self) -> Iterator[LogLine]:
        if self.partial:
            yield LogLine(self.label, _decode(self.partial))
            self.partial = b""

    def _read_to_end(self) -> Iterator[LogLine]:
        assert self.fd is not None
        while True:
            data = os.pread(self.fd, _CHUNK, self.offset)
            if not data:
                return
            self.offset += len(data)
            self.seen = (self.seen + data[-_SEEN_BYTES:])[-_SEEN_BYTES:]
            pieces = (self.partial + data).split(b"\n")
            self.partial = pieces.pop()
            for piece in pieces:
                yield LogLine(self.label, _decode(piece))
            if len(self.partial) > _MAX_PARTIAL:
                yield from self._flush_partial()

    def read_new(self) -> Iterator[LogLine]:
        """Complete lines written since the last call (the file may not exist yet)."""
        if self.fd is None and not self._open():
            return
        assert self.fd is not None
        try:
            st = os.stat(self.path)
            current: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except (FileNotFoundError, NotADirectoryError):
            current = None
        if current is not None and current != self.identity:
            # Replaced (rotated): finish the old file, then read the new one from its top.
            # A file renamed away or removed with no new one yet is still read through the
            # open descriptor: its writer may still be writing to it.
            yield from self._read_to_end()
            yield from self._flush_partial()
            self.close()
            if not self._open():
                return
        elif os.fstat(self.fd).st_size < self.offset or self._rewritten():
            # Truncated in place (and maybe written past the offset since): what was pending
            # belongs to the old content.
            yield from self._flush_partial()
            self.offset = 0
            self.seen = b""
        yield from self._read_to_end()

    def finish(self) -> Iterator[LogLine]:
        """Read to the end and give the last line even without its newline."""
        yield from self.read_new()
        yield from self._flush_partial()


def _batched(lines: Iterator[LogLine]) -> Iterator[list[LogLine]]:
    batch: list[LogLine] = []
    for line in lines:
        batch.append(line)
        if len(batch) >= _BATCH_LINES:
            yield batch
            batch = []
    if batch:
        yield batch


def follow_batches(
    sources: Sequence[LogSource],
    is_done: Callable[[], bool],
    *,
    timing: FollowTiming | None = None,
    use_inotify: bool = True,
) -> Iterator[list[LogLine]]:
    """Like `follow`, one list per read pass: print it, then flush once."""
    timing = timing or FollowTiming()
    files = [_OpenFile(source) for source in sources]
    folders = sorted({os.path.dirname(os.path.abspath(f.path)) for f in files})
    watcher: Watcher = make_watcher([Path(f) for f in folders], use_inotify=use_inotify)
    event_driven = watcher.kind == "inotify"
    try:
        interval = timing.min_poll_s
        last_data = -timing.active_s
        next_done_check = time.monotonic()  # a job that is already over is not waited for
        while True:
            got_lines = False
            for batch in _batched(line for f in files for line in f.read_new()):
                got_lines = True
                yield batch
            if time.monotonic() >= next_done_check:
                if is_done():
                    # Final state seen: read every file to its end once more, then stop.
                    yield from _batched(line for f in files for line in f.finish())
                    return
                next_done_check = time.monotonic() + timing.done_interval_s
            now = time.monotonic()
            if got_lines:
                last_data = now
            if event_driven:
                interval = timing.max_poll_s
            elif now - last_data < timing.active_s:
                interval = timing.min_poll_s  # a file is being written: keep looking often
            else:
                interval = min(interval * 2, timing.max_poll_s)
            watcher.wait(min(interval, max(next_done_check - time.monotonic(), 0.0)))
    finally:
        watcher.close()
        for open_file in files:
            open_file.close()


def follow(
    sources: Sequence[LogSource],
    is_done: Callable[[], bool],
    *,
    timing: FollowTiming | None = None,
    use_inotify: bool = True,
) -> Iterator[LogLine]:
    """Lines of `sources` as they are written, until the job is done and the files drained.

    Lines of one file keep their order; lines of several files interleave as they are read.
    Only complete lines are given until the end, when an unfinished last line is given too.
    `is_done` is asked at once, then every `timing.done_interval_s`; once it says yes, every
    file is read to its end and following stops.
    """
    for batch in follow_batches(sources, is_done, timing=timing, use_inotify=use_inotify):
        yield from batch


def read_all(sources: Sequence[LogSource]) -> Iterator[LogLine]:
    """Every line of each existing file, file after file, from each source's start offset."""
    for source in sources:
        open_file = _OpenFile(source)
        try:
            yield from open_file.finish()
        finally:
            open_file.close()


def _start_of_last_lines(fd: int, end: int, n: int) -> int:
    """Offset where the last `n` lines of bytes [0, end) begin."""
    if n <= 0 or end <= 0:
        return end
    # The byte at end-1 may be the last line's own newline: it does not start a line.
    pos = end - 1
    seen = 0
    while pos > 0:
        block_start = max(0, pos - _TAIL_BLOCK)
        block = os.pread(fd, pos - block_start, block_start)
        index = len(block)
        while True:
            index = block.rfind(b"\n", 0, index)
            if index < 0:
                break
            seen += 1
            if seen == n:
                return block_start + index + 1
        pos = block_start
    return 0


def _last_newline_end(fd: int, size: int) -> int:
    """Offset just after the file's last newline (0 when it has none)."""
    pos = size
    while pos > 0:
        block_start = max(0, pos - _TAIL_BLOCK)
        block = os.pread(fd, pos - block_start, block_start)
        index = block.rfind(b"\n")
        if index >= 0:
            return block_start + index + 1
        pos = block_start
    return 0


def tail_offset(path: Path, n: int) -> int:
    """Offset where the last `n` complete lines of `path` begin (0 if it does not exist).

    Following from this offset prints those lines, then the unfinished one once complete.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return 0
    try:
        end = _last_newline_end(fd, os.fstat(fd).st_size)
        return _start_of_last_lines(fd, end, n)
    finally:
        os.close(fd)


def tail(path: Path, n: int) -> list[str]:
    """The last `n` lines of `path`, an unfinished last line included, read from the end."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return []
    try:
        size = os.fstat(fd).st_size
        start = _start_of_last_lines(fd, size, n)
        data = b""
        while len(data) < size - start:
            chunk = os.pread(fd, size - start - len(data), start + len(data))
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    if not data:
        return []
    if data.endswith(b"\n"):
        data = data[:-1]
    return [_decode(piece) for piece in data.split(b"\n")]
