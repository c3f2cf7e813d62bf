"""docs/design.md's Layout map names every module of jobkit/ and train/, in its package, and
nothing that does not exist: the map stays the architecture as it is."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONTINUATION = 30
"""Lines indented this far continue the entry above them."""
ROOTS = {"jobkit/": "", "train/": "train/"}
"""The mapped packages and how their modules are named here: jobkit's relative to jobkit/
(`core/ports.py`), the trainer's with its folder (`train/loop/loop.py`)."""


def mapped_modules() -> set[str]:
    """`core/ports.py` and `train/loop/loop.py` style paths the map names."""
    text = (REPO / "docs" / "design.md").read_text()
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    found: set[str] = set()
    package = sub = root = ""
    inside = False
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        words = line.strip()
        if indent == 0:
            top = words.split()[0] if words else ""
            inside = top in ROOTS
            root = ROOTS.get(top, "")
            package = sub = ""
            continue
        if not inside or not words:
            continue
        first = words.split()[0]
        if indent == 2:
            package, sub = first.rstrip("/"), ""
            if not first.endswith("/"):
                package = ""
        elif indent == 4:
            sub = first.rstrip("/") if first.endswith("/") else ""
        elif indent < CONTINUATION:
            raise AssertionError(f"unexpected indentation in the map: {line!r}")
        folder = "/".join(part for part in (package, sub) if part)
        for name in re.findall(r"\b[\w-]+\.py\b", words):
            found.add(root + (f"{folder}/{name}" if folder else name))
    return found


def real_modules() -> set[str]:
    root = REPO / "jobkit"
    found = {
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if path.name not in ("__main__.py",)
        and (path.name != "__init__.py" or path.parent.name == "cli")
    }
    found |= {
        str(path.relative_to(REPO))
        for path in (REPO / "train").rglob("*.py")
        if path.name not in ("__main__.py", "__init__.py")
    }
    return found


def test_map_names_every_module() -> None:
    missing = sorted(real_modules() - mapped_modules())
    assert not missing, f"modules docs/design.md's map does not name: {missing}"


def test_map_names_nothing_that_does_not_exist() -> None:
    extra = sorted(mapped_modules() - real_modules())
    assert not extra, f"docs/design.md's map names modules that do not exist: {extra}"
