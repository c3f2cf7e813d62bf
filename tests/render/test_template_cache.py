"""The compiled-template cache: same scripts, stale entries never used, unsafe folders refused."""

from __future__ import annotations

import stat
from pathlib import Path

import jinja2
import pytest

from jobkit.core.cache_folder import CACHE_ENV, cache_dir
from jobkit.render.cache import bytecode_cache, settings_fingerprint
from jobkit.render.engine import _environment, render
from tests.render.helpers import EXAMPLES_DIR, spec_file, spec_from

BASE = {"name": "site", "backend": "slurm", "run": {"command": ["hostname"]}}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh cache folder for this test (it does not exist yet)."""
    folder = tmp_path / "cache" / "templates"
    monkeypatch.setenv(CACHE_ENV, str(folder))
    return folder


def _render_without_cache(monkeypatch: pytest.MonkeyPatch, *args: object) -> str:
    with monkeypatch.context() as patch:
        patch.setenv(CACHE_ENV, "off")
        return render(*args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "example",
    ["slurm-2node.yaml", "pbs-torque.yaml", "pbs-pro.yaml", "ssh-2node.yaml", "quickstart.yaml"],
)
def test_cached_render_is_the_same_script(
    cache: Path, monkeypatch: pytest.MonkeyPatch, example: str
) -> None:
    spec = spec_file(EXAMPLES_DIR / example)
    expected = _render_without_cache(monkeypatch, spec)
    assert not cache.exists()
    first = render(spec)
    entries = sorted(cache.iterdir())
    assert entries, "the first render fills the cache"
    assert stat.S_IMODE(cache.stat().st_mode) & 0o077 == 0
    second = render(spec)  # from the cache
    assert first == second == expected
    assert sorted(cache.iterdir()) == entries


def test_edited_template_is_compiled_again(cache: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "slurm").mkdir(parents=True)
    template = site / "slurm" / "job.sh.j2"
    template.write_text("#!/bin/bash\necho first {{ spec.name | q }}\n")
    assert render(spec_from(BASE), site) == "#!/bin/bash\necho first site\n"
    template.write_text("#!/bin/bash\necho second {{ spec.name | q }}\n")
    assert render(spec_from(BASE), site) == "#!/bin/bash\necho second site\n"


def test_damaged_entries_are_compiled_again(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = spec_file(EXAMPLES_DIR / "slurm-2node.yaml")
    expected = render(spec)
    for entry in cache.iterdir():
        entry.write_bytes(b"\x00not a jinja cache entry")
    assert render(spec) == expected
    for entry in cache.iterdir():
        entry.write_bytes(b"")
    assert render(spec) == expected


def test_entries_that_cannot_be_written_are_skipped(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every entry's name taken by a folder: each write fails, and each render compiles."""
    spec = spec_file(EXAMPLES_DIR / "slurm-2node.yaml")
    expected = render(spec)
    names = [entry.name for entry in cache.iterdir()]
    for name in names:
        (cache / name).unlink()
        (cache / name).mkdir()
    assert render(spec) == expected
    assert render(spec) == expected
    assert sorted(entry.name for entry in cache.iterdir() if entry.is_dir()) == sorted(names)
    assert not [entry for entry in cache.iterdir() if entry.is_file()], "no temp file left"


def test_cache_on_a_full_or_missing_disk_still_renders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache folder that cannot be created (its parent is a file) is no cache."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(CACHE_ENV, str(blocker / "templates"))
    assert bytecode_cache(jinja2.Environment()) is None
    spec = spec_file(EXAMPLES_DIR / "slurm-2node.yaml")
    assert render(spec) == _render_without_cache(monkeypatch, spec)


def test_folder_others_may_write_is_not_used(cache: Path) -> None:
    cache.mkdir(parents=True)
    cache.chmod(0o777)
    assert bytecode_cache(jinja2.Environment()) is None
    cache.chmod(0o720)
    assert bytecode_cache(jinja2.Environment()) is None
    cache.chmod(0o700)
    assert bytecode_cache(jinja2.Environment()) is not None


def test_symlinked_folder_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    monkeypatch.setenv(CACHE_ENV, str(link))
    assert bytecode_cache(jinja2.Environment()) is None


@pytest.mark.parametrize("value", ["off", "OFF", "0", "no", "false"])
def test_cache_can_be_turned_off(value: str) -> None:
    assert cache_dir({CACHE_ENV: value}) is None


def test_default_folder_follows_xdg_then_home() -> None:
    assert cache_dir({"XDG_CACHE_HOME": "/c", "HOME": "/h"}) == Path("/c/jobkit/templates")
    assert cache_dir({"XDG_CACHE_HOME": "relative", "HOME": "/h"}) == Path(
        "/h/.cache/jobkit/templates"
    )
    assert cache_dir({"HOME": "/h"}) == Path("/h/.cache/jobkit/templates")
    assert cache_dir({CACHE_ENV: "/x", "XDG_CACHE_HOME": "/c"}) == Path("/x")


def test_entries_are_named_for_the_environment_settings(cache: Path) -> None:
    """Code compiled under other settings (another jobkit, other whitespace rules) is never
    loaded: the settings' fingerprint is part of every entry's name."""
    render(spec_file(EXAMPLES_DIR / "slurm-2node.yaml"))
    fingerprint = settings_fingerprint(_environment(None))
    names = [entry.name for entry in cache.iterdir()]
    assert names and all(name.startswith(f"__jobkit_{fingerprint}_") for name in names)
    assert settings_fingerprint(_environment(None)) == fingerprint  # stable
    for change in (
        {"trim_blocks": False},
        {"lstrip_blocks": False},
        {"keep_trailing_newline": False},
    ):
        other = _environment(None)
        for key, value in change.items():
            setattr(other, key, value)
        assert settings_fingerprint(other) != fingerprint, change
    assert settings_fingerprint(jinja2.Environment()) != fingerprint
