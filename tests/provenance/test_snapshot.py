"""The code snapshot (jobkit/provenance/snapshot.py, git.py): what goes in, what is shared,
what is refused, and that the user's index and files are never touched."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobkit.core.errors import JobkitError
from jobkit.provenance.git import NotInGit, remote_url
from jobkit.provenance.snapshot import take_snapshot
from tests.provenance.repo import git, make_repo

MB = 1 << 20


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("JOBKIT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_uncommitted_changes_are_in_untracked_files_are_not(tmp_path: Path, home: Path) -> None:
    sub = make_repo(tmp_path)
    (sub / "prog.py").write_text('print("v2")\n')
    (sub / "notes.txt").write_text("untracked\n")
    shot = take_snapshot(sub, include_untracked=False, max_bytes=MB)
    assert shot.root == home / "snapshots" / shot.tree
    assert shot.code_dir == shot.root / "sub"
    assert (shot.code_dir / "prog.py").read_text() == 'print("v2")\n'
    assert not (shot.code_dir / "notes.txt").exists()
    assert sorted(p.name for p in shot.code_dir.iterdir()) == ["job.yaml", "prog.py"]


def test_untracked_files_when_asked_but_never_ignored_ones(tmp_path: Path) -> None:
    sub = make_repo(tmp_path)
    (sub / "notes.txt").write_text("untracked\n")
    (sub / "weights.bin").write_bytes(b"\0" * 100)  # .gitignore'd
    shot = take_snapshot(sub, include_untracked=True, max_bytes=MB)
    assert (shot.code_dir / "notes.txt").read_text() == "untracked\n"
    assert not (shot.code_dir / "weights.bin").exists()


def test_the_users_index_and_files_are_untouched(tmp_path: Path) -> None:
    sub = make_repo(tmp_path)
    repo = sub.parent
    (sub / "prog.py").write_text('print("v2")\n')
    (sub / "staged.py").write_text("x = 1\n")
    git(repo, "add", "sub/staged.py")
    (sub / "new.py").write_text("y = 2\n")
    index = (repo / ".git" / "index").read_bytes()
    status = git(repo, "status", "--porcelain")
    shot = take_snapshot(sub, include_untracked=True, max_bytes=MB)
    assert (repo / ".git" / "index").read_bytes() == index
    assert git(repo, "status", "--porcelain") == status
    assert (shot.code_dir / "staged.py").exists() and (shot.code_dir / "new.py").exists()


def test_same_code_same_snapshot_other_code_another(tmp_path: Path) -> None:
    sub = make_repo(tmp_path)
    first = take_snapshot(sub, include_untracked=False, max_bytes=MB)
    (first.code_dir / "marker").write_text("the folder is reused, not made again")
    again = take_snapshot(sub, include_untracked=False, max_bytes=MB)
    assert again.root == first.root and (again.code_dir / "marker").exists()
    (sub / "prog.py").write_text('print("v3")\n')
    other = take_snapshot(sub, include_untracked=False, max_bytes=MB)
    assert other.tree != first.tree
    assert (first.code_dir / "prog.py").read_text() == 'print("v1")\n'


def test_over_max_size_is_refused_naming_the_biggest_files(tmp_path: Path, home: Path) -> None:
    sub = make_repo(tmp_path)
    (sub / "big.dat").write_bytes(b"x" * (3 * MB))
    (sub / "mid.dat").write_bytes(b"x" * (2 * MB))
    git(sub.parent, "add", "-A")
    with pytest.raises(JobkitError) as caught:
        take_snapshot(sub, include_untracked=False, max_bytes=4 * MB)
    assert caught.value.show() == (
        "code.max_size: the code snapshot would be 5.0 MB, over 4.0 MB; biggest files:"
        " sub/big.dat (3.0 MB), sub/mid.dat (2.0 MB), sub/job.yaml (62 B) (remove or"
        " .gitignore them, raise code.max_size, or set code.snapshot: false)"
    )
    assert not (home / "snapshots").exists() or not any((home / "snapshots").iterdir())


def test_outside_git_says_so(tmp_path: Path) -> None:
    with pytest.raises(NotInGit, match="is not inside a git work tree"):
        take_snapshot(tmp_path, include_untracked=False, max_bytes=MB)


def test_remote_url_loses_its_user_and_token(tmp_path: Path) -> None:
    sub = make_repo(tmp_path)
    git(sub.parent, "remote", "add", "origin", "https://alice:ghp_secret@example.org/x.git")
    assert remote_url(sub.parent) == "https://example.org/x.git"


def test_an_edit_of_the_same_size_in_the_same_second_as_the_index_is_seen(
    tmp_path: Path,
) -> None:
    """git trusts an index entry whose stat matches unless the entry is as new as the index
    file ("racy"): the temporary index keeps the real one's mtime, so this edit is read."""
    sub = make_repo(tmp_path)
    (sub / "prog.py").write_text('print("v2")\n')  # the same size as v1, within the second
    shot = take_snapshot(sub, include_untracked=False, max_bytes=MB)
    assert (shot.code_dir / "prog.py").read_text() == 'print("v2")\n'


def test_a_file_name_that_is_not_utf8_is_escaped_in_the_refusal(tmp_path: Path) -> None:
    sub = make_repo(tmp_path)
    (sub / "caf\xe9.dat".encode("latin-1").decode("utf-8", "surrogateescape")).write_bytes(
        b"x" * (2 * MB)
    )
    git(sub.parent, "add", "-A")
    with pytest.raises(JobkitError) as caught:
        take_snapshot(sub, include_untracked=False, max_bytes=MB)
    assert "biggest files: sub/caf\\udce9.dat (2.0 MB)," in caught.value.show()
