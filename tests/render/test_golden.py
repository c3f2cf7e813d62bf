"""Golden scripts: every example for every backend it validates for, and the fixture specs
in tests/render/specs/ (together they set every key). Each rendered script must also pass
`bash -n` and `shellcheck -S warning`.

Regenerate after an intended change: JOBKIT_UPDATE_GOLDEN=1 .venv/bin/pytest tests/render
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jobkit.core.errors import SpecError
from jobkit.render.engine import render
from jobkit.spec.load import load_spec
from tests.render.helpers import (
    EXAMPLES_DIR,
    GOLDEN_DIR,
    GOLDEN_PYTHON,
    SCRIPT_BACKENDS,
    SPECS_DIR,
    bash_syntax_ok,
    check_golden,
    render_file,
    shellcheck,
)


def _example_cases() -> list[tuple[Path, str]]:
    """(example, backend) for each backend the example validates for, the keys that backend
    cannot honour ignored (--ignore-unsupported: an example for Slurm still lints on local;
    on its own backend nothing may be ignored: test_every_example_renders_for_its_own_backend)."""
    cases = []
    for example in sorted(EXAMPLES_DIR.glob("*.yaml")):
        for backend in SCRIPT_BACKENDS:
            try:
                load_spec(example, backend=backend, profile_dirs=[], ignore_unsupported=True)
            except SpecError:
                continue  # e.g. a 2-node example on the local backend
            cases.append((example, backend))
    return cases


EXAMPLE_CASES = _example_cases()
SPEC_FILES = sorted(SPECS_DIR.glob("*.yaml"))


def _render_example(example: Path, backend: str) -> str:
    loaded = load_spec(example, backend=backend, profile_dirs=[], ignore_unsupported=True)
    return render(loaded.spec, interpreter=GOLDEN_PYTHON)


@pytest.mark.parametrize(
    ("example", "backend"), EXAMPLE_CASES, ids=[f"{e.stem}-{b}" for e, b in EXAMPLE_CASES]
)
def test_example_matches_golden(example: Path, backend: str) -> None:
    script = _render_example(example, backend)
    check_golden(f"examples/{example.stem}.{backend}.sh", script)
    bash_syntax_ok(script)
    shellcheck(script)


@pytest.mark.parametrize("spec", SPEC_FILES, ids=[p.stem for p in SPEC_FILES])
def test_fixture_spec_matches_golden(spec: Path) -> None:
    script = render_file(spec)
    check_golden(f"specs/{spec.stem}.sh", script)
    bash_syntax_ok(script)
    shellcheck(script)


def test_every_example_renders_for_its_own_backend() -> None:
    """Each example's own backend is among the golden cases (submitit renders no script),
    and there every key it sets is honoured: nothing ignored, no deprecated key."""
    for example in EXAMPLES_DIR.glob("*.yaml"):
        loaded = load_spec(example, profile_dirs=[])
        spec = loaded.spec
        assert loaded.notes == (), example
        if spec.backend != "submitit":  # submitit writes its own file (test_cli.py)
            assert (example, spec.backend) in EXAMPLE_CASES


def test_no_stale_golden_files() -> None:
    """Every golden file belongs to a case (a renamed example leaves none behind)."""
    expected = {f"examples/{e.stem}.{b}.sh" for e, b in EXAMPLE_CASES}
    expected |= {f"specs/{p.stem}.sh" for p in SPEC_FILES}
    found = {str(p.relative_to(GOLDEN_DIR)) for p in GOLDEN_DIR.rglob("*.sh")}
    assert found == expected


def test_rendering_is_pure_and_repeatable() -> None:
    """Two renders of one spec are byte-identical and leave the spec as it was."""
    spec_path = SPECS_DIR / "slurm-every-key.yaml"
    from tests.render.helpers import spec_file

    spec = spec_file(spec_path)
    before = spec.model_dump()
    assert render(spec) == render(spec)
    assert spec.model_dump() == before
