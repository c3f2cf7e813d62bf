"""A small git work tree for the provenance tests: a committed program, a job file."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git(folder: Path, *args: str) -> str:
    """git ARGS in `folder` (it must succeed)."""
    done = subprocess.run(
        ["git", *args], cwd=folder, capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout


def make_repo(root: Path, program: str = 'print("v1")\n') -> Path:
    """root/repo with sub/prog.py and sub/job.yaml committed, logs/ ignored; returns
    the submit folder root/repo/sub."""
    repo = root / "repo"
    sub = repo / "sub"
    sub.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.org")
    git(repo, "config", "user.name", "t")
    (repo / ".gitignore").write_text("logs/\n*.bin\n")
    (sub / "prog.py").write_text(program)
    (sub / "job.yaml").write_text(
        "name: frozen\nbackend: local\nrun:\n  command: [python, prog.py]\n"
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    return sub
