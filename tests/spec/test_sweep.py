"""The `sweep:` section: its tasks in order, the values that reach the program, every bad
input as one line naming file, line and key, and the scheduler.array it fills (docs/sweeps.md)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from jobkit.render.engine import render, sweep_argv
from jobkit.spec.load import load_spec
from jobkit.spec.schema import JobSpec
from jobkit.spec.sweep import MAX_TASKS, array_task_ids, one_based, sweep_tasks
from tests.spec.conftest import CliRunner

TRAIN = "run:\n  train:\n    config: tiny-lm\n"
COMMAND = "run:\n  command: [prog]\n"


def _write(folder: Path, text: str) -> Path:
    path = folder / "job.yaml"
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def _load(folder: Path, run: str, text: str = "", *, backend: str = "slurm") -> JobSpec:
    body = f"name: demo\nbackend: {backend}\n{run}" + textwrap.dedent(text).lstrip("\n")
    return load_spec(_write(folder, body), profile_dirs=[]).spec


def _overrides(spec: JobSpec) -> list[dict[str, object]]:
    return [task.overrides for task in sweep_tasks(spec)]


# -- order ----------------------------------------------------------------------------------


def test_grid_varies_the_last_key_fastest(tmp_path: Path) -> None:
    spec = _load(
        tmp_path,
        COMMAND,
        """
        sweep:
          grid:
            lr: [a, b]
            width: [1, 2, 3]
        """,
    )
    assert _overrides(spec) == [
        {"lr": "a", "width": "1"},
        {"lr": "a", "width": "2"},
        {"lr": "a", "width": "3"},
        {"lr": "b", "width": "1"},
        {"lr": "b", "width": "2"},
        {"lr": "b", "width": "3"},
    ]
    assert [task.index for task in sweep_tasks(spec)] == list(range(6))


def test_each_set_meets_every_grid_combination_in_order(tmp_path: Path) -> None:
    spec = _load(
        tmp_path,
        COMMAND,
        """
        sweep:
          sets:
            - {steps: 10}
            - {}
            - {steps: 20, seed: 1}
          grid:
            lr: [x, y]
        """,
    )
    assert _overrides(spec) == [
        {"steps": "10", "lr": "x"},
        {"steps": "10", "lr": "y"},
        {"lr": "x"},
        {"lr": "y"},
        {"steps": "20", "seed": "1", "lr": "x"},
        {"steps": "20", "seed": "1", "lr": "y"},
    ]


def test_sets_alone_are_the_tasks(tmp_path: Path) -> None:
    spec = _load(tmp_path, COMMAND + "sweep:\n  sets: [{a: 1}, {b: 2}]\n")
    assert _overrides(spec) == [{"a": "1"}, {"b": "2"}]


def test_no_sweep_no_tasks(tmp_path: Path) -> None:
    assert sweep_tasks(_load(tmp_path, COMMAND)) == []


# -- what reaches the program -----------------------------------------------------------------


def test_values_are_kept_as_written(tmp_path: Path) -> None:
    """YAML 1.1 reads `1e-3` as a string and `0.001` as a float, `on` as true, `010` as 8:
    a sweep keeps every value's text as written, as run.train.overrides does."""
    spec = _load(
        tmp_path,
        COMMAND,
        """
        sweep:
          grid:
            v: [1e-3, 0.001, on, 010, '1:30', "quoted", true]
        """,
    )
    values = [task.overrides["v"] for task in sweep_tasks(spec)]
    assert values == ["1e-3", "0.001", "on", "010", "1:30", "quoted", "true"]
    assert [sweep_argv(spec, task) for task in sweep_tasks(spec)][:3] == [
        ["v=1e-3"],
        ["v=0.001"],
        ["v=on"],
    ]


def test_the_trainer_reads_1e_3_as_the_float_0_001(tmp_path: Path) -> None:
    """The words go to the bundled trainer as `--set optim.lr=1e-3`; its own --set reading
    (by its schema: optim.lr is a float) gives 0.001."""
    from train.config.load import load_config

    spec = _load(
        tmp_path,
        TRAIN,
        """
        sweep:
          grid:
            optim.lr: [1e-3, 3e-4]
            model.args.d_model: [32]
        """,
    )
    tasks = sweep_tasks(spec)
    words = sweep_argv(spec, tasks[0])
    assert words == ["--set", "optim.lr=1e-3", "--set", "model.args.d_model=32"]
    config = load_config("tiny-lm", words[1::2]).config
    assert (config.optim.lr, config.model.args["d_model"]) == (0.001, 32)
    assert isinstance(config.optim.lr, float)
    assert load_config("tiny-lm", sweep_argv(spec, tasks[1])[1::2]).config.optim.lr == 0.0003


def test_task_line_and_json(tmp_path: Path) -> None:
    spec = _load(tmp_path, COMMAND + "sweep:\n  sets: [{a: 1e-3, b: it's}, {}]\n")
    first, empty = sweep_tasks(spec)
    assert first.shown() == "a=1e-3 b=it's"
    assert first.json_text() == '{"a": "1e-3", "b": "it\'s"}'
    assert (empty.shown(), empty.json_text()) == ("(no overrides)", "{}")


def test_grid_given_with_set_on_the_command_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "name: demo\nbackend: slurm\n" + COMMAND)
    spec = load_spec(path, sets=["sweep.grid.optim.lr=[1e-3, 3e-4]"], profile_dirs=[]).spec
    assert _overrides(spec) == [{"optim.lr": "1e-3"}, {"optim.lr": "3e-4"}]


# -- bad input: one line, file, line and key --------------------------------------------------

BAD = [
    (
        "empty-grid-list",
        "sweep:\n  grid:\n    lr: []\n",
        "job.yaml:7: sweep.grid.lr: must not be empty",
    ),
    ("empty-grid", "sweep:\n  grid: {}\n", "job.yaml:6: sweep.grid: must not be empty"),
    ("empty-sets", "sweep:\n  sets: []\n", "job.yaml:6: sweep.sets: must not be empty"),
    (
        "neither",
        "sweep:\n  max_parallel: 2\n",
        "job.yaml:5: sweep: give sweep.grid or sweep.sets (or both)",
    ),
    (
        "repeated-grid-value",
        "sweep:\n  grid:\n    lr:\n      - 0.1\n      - 0.2\n      - 0.1\n",
        "job.yaml:10: sweep.grid.lr[2]: repeats '0.1' (item 0): each task would run twice",
    ),
    (
        "repeated-set",
        "sweep:\n  sets:\n    - {a: 1, b: x}\n    - {a: 2}\n    - {b: x, a: 1}\n",
        "job.yaml:9: sweep.sets[2]: repeats sweep.sets[0]: each task would run twice",
    ),
    (
        "key-in-grid-and-set",
        "sweep:\n  grid: {a: [1, 2]}\n  sets:\n    - {b: 1}\n    - {a: 3}\n",
        "job.yaml:9: sweep.sets[1].a: a is also in sweep.grid, whose values would replace"
        " this one: give it in one place",
    ),
    (
        "key-with-equals",
        "sweep:\n  grid: {'a=b': [1]}\n",
        "job.yaml:6: sweep.grid.a=b: must be a key like optim.lr, without = (got 'a=b')",
    ),
    (
        "null-value",
        "sweep:\n  grid:\n    a: [null]\n",
        "job.yaml:7: sweep.grid.a[0]: must be a string, a number or true/false (got null)",
    ),
    (
        "newline-value",
        'sweep:\n  sets:\n    - {a: "x\\ny"}\n',
        "job.yaml:7: sweep.sets[0].a: must not contain a newline (it would end the script line)",
    ),
    ("not-a-list", "sweep:\n  grid: {a: 1}\n", "job.yaml:6: sweep.grid.a: must be a list (got 1)"),
    (
        "max-parallel-zero",
        "sweep:\n  grid: {a: [1]}\n  max_parallel: 0\n",
        "job.yaml:7: sweep.max_parallel: must be >= 1 (got 0)",
    ),
    (
        "too-many-tasks",
        "sweep:\n  grid:\n"
        + "".join(f"    k{n}: [{', '.join(str(v) for v in range(10))}]\n" for n in range(4))
        + "    k4: [0, 1]\n",
        f"job.yaml:5: sweep: has 20000 tasks, more than {MAX_TASKS}: split it into smaller sweeps",
    ),
    (
        "array-beyond-the-tasks",
        "scheduler:\n  array: 0-9:3\nsweep:\n  grid: {a: [1, 2, 3, 4, 5, 6, 7, 8]}\n",
        "job.yaml:6: scheduler.array: names task 9, but the sweep has 8 task(s), 0-7 (leave"
        " scheduler.array out to run them all)",
    ),
    (
        "submitit",
        "backend: submitit\nsweep:\n  grid: {a: [1]}\n",
        "job.yaml:5: sweep: the submitit backend cannot run a sweep: use backend slurm (the same"
        " cluster, one array job) or local",
    ),
    (
        "local-with-array",
        "backend: local\nscheduler:\n  array: 0-1\nsweep:\n  grid: {a: [1, 2]}\n",
        "job.yaml:6: scheduler.array: the local backend runs a sweep as one job per task: leave"
        " scheduler.array out",
    ),
    (
        "pbs-pro-limit",
        "backend: pbs\nsweep:\n  grid: {a: [1, 2]}\n  max_parallel: 1\n",
        "job.yaml:7: sweep.max_parallel: PBS Pro arrays take no limit of running tasks (%K is"
        " Slurm/Torque syntax): leave sweep.max_parallel out, or use pbs.flavor torque",
    ),
]


@pytest.mark.parametrize(("text", "expected"), [case[1:] for case in BAD], ids=[c[0] for c in BAD])
def test_bad_sweep_is_one_line(cli: CliRunner, in_tmp: Path, text: str, expected: str) -> None:
    # A later `backend:` line wins over the first (merged like any key, YAML's last one).
    body = "name: demo\n" + COMMAND + ("" if text.startswith("backend:") else "backend: slurm\n")
    # sweep: (or backend:) is on line 5 of job.yaml
    (in_tmp / "job.yaml").write_text(body + text, encoding="utf-8")
    result = cli("render", "job.yaml")
    assert (result.code, result.out) == (2, "")
    assert result.err == f"jobkit: {expected}\n"


# -- scheduler.array ----------------------------------------------------------------------------


def test_array_filled_for_a_batch_backend(tmp_path: Path) -> None:
    spec = _load(tmp_path, COMMAND + "sweep:\n  grid: {a: [1, 2, 3, 4]}\n")
    assert spec.scheduler.array == "0-3"
    limited = _load(tmp_path, COMMAND + "sweep:\n  grid: {a: [1, 2, 3]}\n  max_parallel: 2\n")
    assert limited.scheduler.array == "0-2%2"
    assert "#SBATCH --array=0-2%2\n" in render(limited)


def test_a_given_array_names_some_tasks(tmp_path: Path) -> None:
    """How one task is submitted again: scheduler.array = "3"; max_parallel still applies."""
    grid = "sweep:\n  grid: {a: [1, 2, 3, 4]}\n  max_parallel: 2\n"
    assert _load(tmp_path, COMMAND + "scheduler:\n  array: '3'\n" + grid).scheduler.array == "3%2"
    spec = _load(tmp_path, COMMAND + "scheduler:\n  array: 1,3%1\n" + grid)
    assert spec.scheduler.array == "1,3%1"


def test_array_without_a_sweep_keeps_its_meaning(tmp_path: Path) -> None:
    spec = _load(tmp_path, COMMAND + "scheduler:\n  array: 0-99%10\n")
    assert (spec.scheduler.array, sweep_tasks(spec)) == ("0-99%10", [])


def test_local_and_ssh_get_no_array(tmp_path: Path) -> None:
    spec = _load(tmp_path, COMMAND + "sweep:\n  grid: {a: [1, 2]}\n", backend="local")
    assert spec.scheduler.array is None
    assert len(sweep_tasks(spec)) == 2


def test_grid_engine_numbers_the_tasks_from_1(tmp_path: Path) -> None:
    """qsub refuses task id 0: the sweep's task i is Grid Engine's task i+1, -tc the limit."""
    spec = _load(
        tmp_path, COMMAND + "sweep:\n  grid: {a: [1, 2, 3, 4]}\n  max_parallel: 2\n", backend="sge"
    )
    script = render(spec)
    assert "#$ -t 1-4\n#$ -tc 2\n" in script
    assert "JOBKIT_TASK_ID=$(( SGE_TASK_ID - 1 ))" in script


@pytest.mark.parametrize(
    ("array", "ids"),
    [("0-3", [0, 1, 2, 3]), ("0-9:4%2", [0, 4, 8]), ("1,3,5-6", [1, 3, 5, 6]), ("7", [7])],
)
def test_array_task_ids(array: str, ids: list[int]) -> None:
    assert array_task_ids(array) == ids


@pytest.mark.parametrize(
    ("array", "expected"),
    [
        ("0-3%2", {"range": "1-4", "limit": 2}),
        ("4", {"range": "5", "limit": None}),
        ("0-9:2", {"range": "1-10:2", "limit": None}),
        ("1,3", {"range": "2,4", "limit": None}),
    ],
)
def test_one_based(array: str, expected: dict[str, object]) -> None:
    assert one_based(array) == expected
