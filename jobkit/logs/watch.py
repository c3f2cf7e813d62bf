"""Wake up when files in some folders change: inotify on Linux, a plain timeout elsewhere.

The follower in logs.py re-reads its files after every wake-up, so a watcher only has to say
"something may have changed"; it never has to say what. Folders that do not exist yet are
watched through their nearest existing ancestor and picked up once they appear.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import struct
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

# <sys/inotify.h>
_IN_MODIFY = 0x002
_IN_ATTRIB = 0x004
_IN_CLOSE_WRITE = 0x008
_IN_MOVED_FROM = 0x040
_IN_MOVED_TO = 0x080
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_DELETE_SELF = 0x400
_IN_MOVE_SELF = 0x800
_IN_IGNORED = 0x8000
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = 0o2000000

_FOLDER_MASK = (
    _IN_MODIFY
    | _IN_ATTRIB
    | _IN_CLOSE_WRITE
    | _IN_MOVED_FROM
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
    | _IN_DELETE_SELF
    | _IN_MOVE_SELF
)
_EVENT_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len


class Watcher(Protocol):
    """Blocks until a watched folder may have changed or the timeout passes."""

    kind: str

    def wait(self, timeout: float) -> bool:
        """Sleep at most `timeout` seconds; True when woken by a change (not by the timeout)."""
        ...

    def close(self) -> None:
        """Release the kernel resources."""
        ...


class TimeoutWatcher:
    """The portable fallback: it sees nothing, so the caller polls (with backoff)."""

    kind = "poll"

    def wait(self, timeout: float) -> bool:
        """Sleep for `timeout` seconds."""
        select.select([], [], [], max(timeout, 0.0))
        return False

    def close(self) -> None:
        """Nothing to release."""


class _Libc:
    """The inotify calls, through ctypes (no third-party package needed)."""

    def __init__(self) -> None:
        name = ctypes.util.find_library("c") or "libc.so.6"
        lib = ctypes.CDLL(name, use_errno=True)
        self.init1 = lib.inotify_init1
        self.init1.argtypes = [ctypes.c_int]
        self.init1.restype = ctypes.c_int
        self.add_watch = lib.inotify_add_watch
        self.add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self.add_watch.restype = ctypes.c_int
        self.rm_watch = lib.inotify_rm_watch
        self.rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
        self.rm_watch.restype = ctypes.c_int


class InotifyWatcher:
    """Watches folders (not files, so files that do not exist yet are seen when created)."""

    kind = "inotify"

    def __init__(self, folders: Iterable[Path]) -> None:
        self._libc = _Libc()
        fd = self._libc.init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"inotify_init1: {os.strerror(err)}")
        self._fd = fd
        self._wanted = [Path(os.path.abspath(f)) for f in folders]
        self._watched: dict[int, Path] = {}
        self._refresh()

    def _add(self, folder: Path) -> bool:
        """Watch `folder`; False when it cannot be watched (missing, not a folder, no
        permission, the user's watch limit reached): the caller's timeout then covers it."""
        wd = self._libc.add_watch(self._fd, os.fsencode(folder), _FOLDER_MASK)
        if wd < 0:
            return False
        self._watched[wd] = folder
        return True

    def _refresh(self) -> None:
        """Watch every wanted folder that exists, else its nearest existing ancestor."""
        needed: set[Path] = set()
        watching = set(self._watched.values())
        for folder in self._wanted:
            candidate = folder
            while True:
                if candidate in watching or self._add(candidate):
                    watching.add(candidate)
                    needed.add(candidate)
                    break
                if candidate == candidate.parent:
                    break
                candidate = candidate.parent
        for wd, folder in list(self._watched.items()):
            if folder not in needed:  # an ancestor no longer needed: stop its wake-ups
                self._libc.rm_watch(self._fd, wd)
                del self._watched[wd]

    def _drain(self) -> None:
        """Read the pending events; forget watches the kernel dropped."""
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return
            pos = 0
            while pos + _EVENT_HEADER.size <= len(data):
                wd, mask, _cookie, length = _EVENT_HEADER.unpack_from(data, pos)
                pos += _EVENT_HEADER.size + length
                if mask & _IN_IGNORED:
                    self._watched.pop(wd, None)

    def wait(self, timeout: float) -> bool:
        """Block on the inotify descriptor for at most `timeout` seconds."""
        readable, _, _ = select.select([self._fd], [], [], max(timeout, 0.0))
        if not readable:
            return False
        self._drain()
        self._refresh()
        return True

    def close(self) -> None:
        """Close the inotify descriptor (the kernel drops every watch with it)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def make_watcher(folders: Iterable[Path], *, use_inotify: bool = True) -> Watcher:
    """An inotify watcher on Linux when it can be made, else the polling fallback."""
    if use_inotify and sys.platform.startswith("linux"):
        try:
            return InotifyWatcher(folders)
        except (OSError, AttributeError):
            pass  # no inotify (old kernel, limits reached, no libc symbol): poll instead
    return TimeoutWatcher()
