"""The templates' static bash (templates/common/*.sh): included verbatim by the Jinja
templates, so it must hold no Jinja syntax, and shellcheck reads it as it is (CI runs the same
check in .ci/run)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jobkit.core.paths import templates_dir
from tests.render.helpers import shellcheck

STATIC = sorted((templates_dir() / "common").glob("*.sh"))


def test_there_is_a_static_library() -> None:
    # nodes-lib.sh: bash, included in nodes.sh.j2; the podman ones: sh, set between single
    # quotes by container.sh.j2 (tests/container/test_render.py::test_podman_line).
    assert [path.name for path in STATIC] == ["nodes-lib.sh", "podman-inside.sh", "podman-task.sh"]


@pytest.mark.parametrize("path", STATIC, ids=[p.name for p in STATIC])
def test_static_bash_holds_no_jinja(path: Path) -> None:
    text = path.read_text()
    assert not re.search(r"\{\{|\{%|\{#", text), "Jinja would change this file when included"


@pytest.mark.parametrize("path", STATIC, ids=[p.name for p in STATIC])
def test_static_bash_is_shellcheck_clean(path: Path) -> None:
    shellcheck(path.read_text())
