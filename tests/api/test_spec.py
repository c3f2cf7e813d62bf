"""jobkit.api without running a job: specs and their errors (the CLI's lines), render, the
lazy `import jobkit`, refusals before anything is submitted."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

import jobkit
import jobkit.api
from tests.plugins.invoke import Invoke

REPO = Path(__file__).resolve().parents[2]


def _write(folder: Path, text: str) -> Path:
    path = folder / "job.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_import_jobkit_loads_nothing_else() -> None:
    """`import jobkit` (the CLI's first import) stays the version string (jobkit/core/version.py,
    below every layer): the API and pydantic come with the first use of one of its names."""
    code = (
        "import sys, jobkit\n"
        "heavy = ('jobkit.', 'pydantic', 'torch')\n"
        "before = sorted(m for m in sys.modules if m.startswith(heavy))\n"
        "jobkit.Spec\n"
        "print(before, 'jobkit.api' in sys.modules, 'torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.rsplit(maxsplit=2) == [
        "['jobkit.core', 'jobkit.core.version']",
        "True",
        "False",
    ]


def test_the_names_of_jobkit_are_the_api() -> None:
    """Every name of jobkit.api but `render` (jobkit.render is the package jobkit/render/,
    which would replace a function of that name as soon as it is imported)."""
    assert set(jobkit.API_NAMES) == set(jobkit.api.__all__) - {"render"}
    packages = {p.name for p in (REPO / "jobkit").iterdir() if (p / "__init__.py").exists()}
    assert not packages & set(jobkit.API_NAMES)
    assert jobkit.render_script is jobkit.api.render
    assert jobkit.submit is jobkit.api.submit
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        jobkit.nope  # noqa: B018


def test_spec_error_is_the_cli_line(workdir: Path, cli: Invoke) -> None:
    path = _write(workdir, "name: a\nrun:\n  command: 'true'\nresources:\n  nodes: 0\n")
    with pytest.raises(jobkit.SpecError) as caught:
        jobkit_api_load(path)
    done = cli("render", str(path))
    assert done.code == caught.value.exit_code == 2
    assert done.err == f"jobkit: {caught.value.show()}\n"
    assert caught.value.show() == f"{path}:5: resources.nodes: must be >= 1 (got 0)"
    assert (caught.value.file, caught.value.line, caught.value.key) == (
        str(path),
        5,
        "resources.nodes",
    )


def jobkit_api_load(path: Path) -> jobkit.Spec:
    return jobkit.Spec.load(path)


def test_set_values_are_layered_and_named(workdir: Path) -> None:
    path = _write(workdir, "name: a\nbackend: slurm\nrun:\n  command: 'true'\n")
    spec = jobkit.Spec.load(path, set={"resources.nodes": 2, "launch.nproc_per_node": 3})
    assert (spec.spec.resources.nodes, spec.spec.launch.nproc_per_node) == (2, 3)
    assert spec.loaded.origin("resources.nodes") == "--set resources.nodes=2"
    with pytest.raises(jobkit.SpecError) as caught:
        spec.with_set({"resources.nodes": 0, "bogus.key": "x"})
    assert caught.value.lines() == [
        "--set resources.nodes=0: resources.nodes: must be >= 1 (got 0)",
        "--set bogus.key=x: bogus: unknown key (did you mean 'logs'?)",
    ]
    assert spec.spec.resources.nodes == 2  # the spec itself is unchanged


def test_from_dict_errors_name_the_dict() -> None:
    with pytest.raises(jobkit.SpecError) as caught:
        jobkit.Spec.from_dict({"name": "a", "run": {"command": "true"}, "resources": {"nodes": 0}})
    assert caught.value.lines() == ["<dict>: resources.nodes: must be >= 1 (got 0)"]
    spec = jobkit.Spec.from_dict({"name": "a", "run": {"command": ["echo", "x y"]}})
    assert spec.spec.run.command == ["echo", "x y"]
    assert spec.loaded.origin("name") == "<dict>"
    assert spec.with_set({"sweep": None}).is_sweep is False


def test_render_is_what_jobkit_render_prints(workdir: Path, cli: Invoke) -> None:
    path = _write(workdir, "name: a\nbackend: slurm\nrun:\n  command: [echo, hi]\n")
    done = cli("render", str(path))
    assert done.code == 0, done.err
    assert jobkit.render_script(jobkit.Spec.load(path)) == done.out


def test_submit_refuses_a_sweep_and_submit_sweep_a_job(workdir: Path) -> None:
    sweep = jobkit.Spec.from_dict(
        {"name": "a", "run": {"command": "true"}, "sweep": {"grid": {"x": [1, 2]}}}
    )
    with pytest.raises(jobkit.UsageError, match=r"has a sweep: section; use jobkit\.submit_sweep"):
        jobkit.submit(sweep)
    with pytest.raises(jobkit.UsageError, match=r"has no sweep: section; use jobkit\.submit$"):
        jobkit.submit_sweep(sweep.with_set({"sweep": None}))
    assert jobkit.jobs(all=True) == []  # nothing recorded


def test_check_failures_are_one_line_each_and_nothing_is_recorded(workdir: Path) -> None:
    spec = jobkit.Spec.from_dict({"name": "a", "run": {"command": "./missing.sh"}})
    with pytest.raises(jobkit.CheckFailed) as caught:
        jobkit.submit(spec)
    assert caught.value.lines()[-1] == "not submitted: 1 problem"
    assert caught.value.problems[0].startswith("<dict>: run.command: ")
    assert "missing.sh" in caught.value.problems[0]
    assert jobkit.jobs(all=True) == []


def test_a_function_spec_leaves_run_to_jobkit(workdir: Path) -> None:
    with pytest.raises(jobkit.UsageError) as caught:
        jobkit.submit_function(print, spec={"name": "p", "run": {"command": "true"}})
    assert caught.value.show() == (
        "<dict>: run: a function job's run is jobkit's (it runs the function): leave it out"
    )
    with pytest.raises(jobkit.UsageError) as caught:
        jobkit.map_array(print, [1], spec={"name": "p", "sweep": {"grid": {"x": [1, 2]}}})
    assert caught.value.show() == (
        "<dict>: sweep: a function job's sweep is jobkit's (map_array: one task per item):"
        " leave it out"
    )
    with pytest.raises(jobkit.UsageError, match=r"^set run\.command: a function job's run"):
        jobkit.submit_function(print, set={"run.command": "true"})
    lock = threading.Lock()
    with pytest.raises(jobkit.UsageError, match=r"the call cannot be pickled: .*lock"):
        jobkit.submit_function(print, lock)
    assert jobkit.jobs(all=True) == []
    assert not (workdir / "logs").exists()


def test_an_unknown_id_is_the_cli_error(cli: Invoke) -> None:
    with pytest.raises(jobkit.UsageError) as caught:
        jobkit_job("jknope")
    assert cli("status", "jknope").err == f"jobkit: {caught.value.show()}\n"


def jobkit_job(job_id: str) -> jobkit.Job:
    return jobkit.job(job_id)


def test_pickler_is_cloudpickle() -> None:
    assert jobkit.pickler_name() == "cloudpickle"
