"""The git commands jobkit runs on a user's work tree: read-only, except for new objects in
the object store (as `git stash create` would add). The user's index and files are never
written: staging happens in a temporary index (GIT_INDEX_FILE)."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path

from jobkit.core.errors import JobkitError

GIT_TIMEOUT_S = 60.0
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
"""git's empty tree: the base of a repository without a commit."""


class NotInGit(Exception):
    """The folder is not inside a git work tree (or git is not installed): the reason."""


def git(folder: Path, *args: str, env: Mapping[str, str] | None = None, check: bool = True) -> str:
    """git's stdout (text, surrogate-escaped) for `args` run in `folder`; a failure is one
    JobkitError line naming the command and git's own words."""
    done = _run(folder, args, env)
    if check and done.returncode != 0:
        words = " ".join(done.stderr.split())[:300] or f"exit code {done.returncode}"
        raise JobkitError(f"git {' '.join(args[:3])} failed in {folder}: {words}")
    return done.stdout


def git_bytes(folder: Path, *args: str, env: Mapping[str, str] | None = None) -> bytes:
    """git's stdout as bytes (a patch: any encoding)."""
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=folder,
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            env=_environment(env),
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise JobkitError(f"git {' '.join(args[:3])} failed in {folder}: {err}") from None
    if done.returncode != 0:
        words = " ".join(done.stderr.decode(errors="replace").split())[:300]
        raise JobkitError(f"git {' '.join(args[:3])} failed in {folder}: {words}")
    return done.stdout


def _run(
    folder: Path, args: tuple[str, ...], env: Mapping[str, str] | None
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["git", *args],
            cwd=folder,
            capture_output=True,
            text=True,
            errors="surrogateescape",
            timeout=GIT_TIMEOUT_S,
            env=_environment(env),
            check=False,
        )
    except FileNotFoundError:
        raise NotInGit("git is not installed on this machine") from None
    except (OSError, subprocess.TimeoutExpired) as err:
        raise JobkitError(f"git {' '.join(args[:3])} failed in {folder}: {err}") from None


def _environment(extra: Mapping[str, str] | None) -> dict[str, str]:
    """The caller's environment, with no optional lock taken on the user's index and no
    pager or prompt; `extra` on top."""
    env = dict(os.environ)
    env.update({"GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"})
    env.update(extra or {})
    return env


def work_tree(folder: Path) -> tuple[Path, Path]:
    """The top of the work tree `folder` is in, and the path of its index; NotInGit."""
    done = _run(folder, ("rev-parse", "--show-toplevel", "--git-path", "index"), None)
    if done.returncode != 0:
        raise NotInGit(f"{folder} is not inside a git work tree")
    lines = done.stdout.splitlines()
    if len(lines) != 2 or not lines[0]:
        raise NotInGit(f"{folder} is not inside a git work tree (a bare repository?)")
    top = Path(lines[0])
    index = Path(lines[1])
    return top, index if index.is_absolute() else (folder / index)


def head_commit(top: Path) -> str | None:
    """HEAD's commit, None in a repository without one."""
    out = git(top, "rev-parse", "-q", "--verify", "HEAD^{commit}", check=False).strip()
    return out or None


def branch(top: Path) -> str | None:
    """The checked-out branch, None on a detached HEAD."""
    return git(top, "symbolic-ref", "--short", "-q", "HEAD", check=False).strip() or None


_USERINFO = re.compile(r"^([a-z][a-z0-9+.-]*://)[^/@]*@", re.IGNORECASE)


def remote_url(top: Path) -> str | None:
    """origin's URL (else the first remote's), without any user or token in it."""
    out = git(top, "config", "--get-regexp", r"^remote\..*\.url$", check=False)
    urls: dict[str, str] = {}
    for line in out.splitlines():
        key, _, url = line.partition(" ")
        urls.setdefault(key.removeprefix("remote.").removesuffix(".url"), url.strip())
    if not urls:
        return None
    url = urls.get("origin") or next(iter(urls.values()))
    return _USERINFO.sub(r"\1", url) or None


def untracked_names(top: Path) -> list[str]:
    """Untracked files that .gitignore does not exclude, relative to the top."""
    out = git(top, "ls-files", "--others", "--exclude-standard", "-z")
    return [name for name in out.split("\0") if name]
