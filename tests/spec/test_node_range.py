"""`resources.nodes: MIN:MAX` (elastic): parsed from unquoted YAML (base-60 124 to YAML 1.1),
quoted text and --set; refused with file:line:key where the backend or launcher cannot run it."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobkit.core.errors import SpecError
from jobkit.spec.load import load_spec

JOB = "name: t\nbackend: {backend}\nresources:\n  nodes: {nodes}\nrun:\n  command: prog\n"


def load(folder: Path, nodes: str, backend: str = "slurm", *sets: str) -> tuple[int, int | None]:
    (folder / "job.yaml").write_text(JOB.format(backend=backend, nodes=nodes), encoding="utf-8")
    res = load_spec("job.yaml", sets=sets, profile_dirs=[folder]).spec.resources
    return res.nodes, res.max_nodes


@pytest.mark.parametrize(
    ("written", "expected"),
    [("2:4", (2, 4)), ('"2:4"', (2, 4)), ("1:30", (1, 30)), ("3", (3, None)), ("2:2", (2, None))],
)
def test_a_range_means_min_and_max(
    in_tmp: Path, written: str, expected: tuple[int, int | None]
) -> None:
    assert load(in_tmp, written) == expected


def test_set_gives_a_range_too(in_tmp: Path) -> None:
    assert load(in_tmp, "1", "slurm", "resources.nodes=2:4") == (2, 4)
    assert load(in_tmp, "2:4", "slurm", "resources.nodes=3") == (3, None)


@pytest.mark.parametrize(
    ("written", "error"),
    [
        ("4:2", "job.yaml:4: resources.nodes: a range MIN:MAX needs 1 <= MIN <= MAX (got 4:2)"),
        ("0:2", "job.yaml:4: resources.nodes: a range MIN:MAX needs 1 <= MIN <= MAX (got 0:2)"),
        ("010", "job.yaml:4: resources.nodes: 010 is an octal number to YAML 1.1 (8)"),
        ("two", "job.yaml:4: resources.nodes: must be an integer (got 'two')"),
    ],
)
def test_bad_ranges_are_one_line_errors(in_tmp: Path, written: str, error: str) -> None:
    with pytest.raises(SpecError) as caught:
        load(in_tmp, written)
    assert str(caught.value).startswith(error), str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("backend", ["local", "pbs", "sge"])
def test_a_backend_without_ranges_refuses_with_file_line_key(in_tmp: Path, backend: str) -> None:
    with pytest.raises(SpecError) as caught:
        load(in_tmp, "2:4", backend)
    assert str(caught.value) == (
        f"job.yaml:4: resources.nodes: the {backend} backend cannot run a node range (2:4):"
        " give one number, or use the slurm backend"
    )


def test_a_range_needs_torchrun_with_c10d(in_tmp: Path) -> None:
    with pytest.raises(SpecError) as caught:
        load(in_tmp, "2:4", "slurm", "launch.launcher=srun")
    assert str(caught.value) == (
        "job.yaml:4: resources.nodes: a node range (2:4) needs launch.launcher torchrun with"
        " launch.rdzv c10d"
    )
