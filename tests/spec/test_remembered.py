"""Remembered specs (spec/remembered.py, spec/view.py): a render of inputs that passed before
skips pydantic; what it gets must be exactly what validation gives.

Each spec is loaded three ways: validated (`remembered=False`), validated and remembered
(the first `remembered=True` load), and recalled (the second). The recalled spec must be a
SpecView with the validated spec's every value, derived value, origin, note, rendered script
and by-hand command; a refused spec must be refused with the same lines every time and never
remembered. The specs: every example, the fuzz corpus of tests/reliability/test_spec_fuzz.py
(its valid bases and structural mutations, mostly refused), a seeded corpus of mostly valid
specs of every backend (values the examples give a key, swapped into the bases) and specs
written for the layers and --set.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given

from jobkit.backends.registry import get_backend
from jobkit.core.errors import JobkitError
from jobkit.render.by_hand import node_script
from jobkit.render.notes import spec_notes
from jobkit.spec import remembered
from jobkit.spec.load import LoadedSpec, load_spec
from jobkit.spec.remembered import ENTRY_PREFIX, section_paths
from jobkit.spec.schema import JobSpec
from jobkit.spec.view import SpecView
from tests.reliability.test_spec_fuzz import (
    BASES,
    FIELD_PATHS,
    fuzz_settings,
    mutated_specs,
    same_corpus_in_any_order,
)

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


@pytest.fixture
def cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache folder of this test alone."""
    folder = tmp_path_factory.mktemp("remembered") / "cache"
    monkeypatch.setenv("JOBKIT_TEMPLATE_CACHE", str(folder))
    return folder


def entries(folder: Path) -> list[Path]:
    return sorted(folder.glob(f"{ENTRY_PREFIX}*.json")) if folder.is_dir() else []


Load = Callable[..., LoadedSpec]


def outcome(load: Load) -> LoadedSpec | list[str]:
    """The loaded spec, or every line of the refusal."""
    try:
        return load()
    except JobkitError as err:
        return [err.show(), *(more.show() for more in getattr(err, "more", []))]


def attempt(make: Callable[[], Any]) -> Any:
    """What `make` returns, or the refusal's line: a view and a spec must do the same."""
    try:
        return make()
    except JobkitError as err:
        return f"refused: {err.show()}"


def assert_same_values(real: Any, view: Any, path: tuple[str, ...] = ()) -> None:
    """Every field of `real` (a pydantic section) read from the view gives the same value."""
    for name in type(real).model_fields:
        mine, theirs = getattr(view, name), getattr(real, name)
        if hasattr(theirs, "model_fields"):
            assert_same_values(theirs, mine, (*path, name))
        else:
            assert mine == theirs, (*path, name)
            assert type(mine) is type(theirs), (*path, name, type(mine), type(theirs))


def assert_same_spec(fresh: LoadedSpec, recalled: LoadedSpec, workdir: Path) -> None:
    """The recalled spec stands in for the validated one everywhere render looks."""
    real, view = fresh.spec, recalled.spec
    assert isinstance(view, SpecView), type(view)
    assert isinstance(real, JobSpec)
    assert view.model_dump(mode="json") == real.model_dump(mode="json")
    assert_same_values(real, view)
    for name in (
        "procs_per_node",
        "tasks_per_node",
        "world_size",
        "cpus_per_scheduler_task",
        "cpus_per_process",
        "cpus_per_task_reinterpreted",
    ):
        assert getattr(view, name) == getattr(real, name), name
    assert dict(recalled.origins) == dict(fresh.origins)
    assert recalled.notes == fresh.notes == ()
    assert (recalled.profile_path, recalled.template_dir) == (
        fresh.profile_path,
        fresh.template_dir,
    )
    backend = get_backend(real.backend)
    assert attempt(lambda: backend.script(view, None, workdir)) == attempt(
        lambda: backend.script(real, None, workdir)
    )
    assert attempt(lambda: spec_notes(view)) == attempt(lambda: spec_notes(real))
    if real.launch.launcher in ("torchrun", "distributed-launch") and real.backend != "submitit":
        assert attempt(lambda: node_script(view, 1, "n1", 29500, None)) == attempt(
            lambda: node_script(real, 1, "n1", 29500, None)
        )


def check_three_ways(path: Path, cache: Path, workdir: Path, **options: Any) -> str:
    """Load `path` validated, remembered and recalled; returns 'loaded' or 'refused'."""
    fresh = outcome(lambda: load_spec(path, profile_dirs=[], **options))
    before = entries(cache)
    first = outcome(lambda: load_spec(path, profile_dirs=[], remembered=True, **options))
    second = outcome(lambda: load_spec(path, profile_dirs=[], remembered=True, **options))
    if isinstance(fresh, list):
        assert first == second == fresh  # every line, in order, each time
        assert entries(cache) == before, "a refused spec was remembered"
        return "refused"
    assert isinstance(first, LoadedSpec) and isinstance(second, LoadedSpec)
    if fresh.notes:  # deprecated or ignored keys: never remembered, always validated
        assert isinstance(second.spec, JobSpec) and second.notes == fresh.notes
        return "loaded"
    assert_same_spec(fresh, second, workdir)
    return "loaded"


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.name)
def test_every_example_recalled_as_validated(
    example: Path, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)  # the examples' trainer configs and programs are found from here
    assert check_three_ways(example, cache, REPO) == "loaded"
    assert len(entries(cache)) == 1


def test_the_fuzz_corpus_recalled_as_validated(cache: Path, tmp_path: Path) -> None:
    """test_spec_fuzz.py's bases and its structural mutations (derandomized, as there, and
    drawn without the constants of the modules other tests imported: the same corpus in any
    order)."""
    spec_file = tmp_path / "fuzz.yaml"
    counts = {"loaded": 0, "refused": 0}
    for base in BASES:
        spec_file.write_text(yaml.safe_dump(base), encoding="utf-8")
        counts[check_three_ways(spec_file, cache, tmp_path)] += 1

    @fuzz_settings(250)
    @given(mutated_specs())
    def one(text: str) -> None:
        spec_file.write_text(text, encoding="utf-8")
        counts[check_three_ways(spec_file, cache, tmp_path)] += 1

    with same_corpus_in_any_order():  # else it depends on the modules imported before
        one()
    # 28 valid and 226 refused with Hypothesis 6.170, alone or after any other tests. Its
    # mutations are mostly refused: recall of many valid specs is the next test's corpus.
    assert counts["loaded"] >= 20 and counts["refused"] >= 50, counts


def _leaves(data: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """(key path, value) of every value of a spec that is not a section."""
    if isinstance(data, dict) and (not path or path in SECTION_PATHS):
        return [leaf for key, value in data.items() for leaf in _leaves(value, (*path, key))]
    return [(path, data)]


SECTION_PATHS = {path for path in FIELD_PATHS if len(path) == 1}


def recall_corpus(count: int, seed: int = 25) -> list[dict[str, Any]]:
    """Specs likely to be valid: a base of test_spec_fuzz.py with 1 to 3 of its values
    replaced by values the examples and the other bases give the same key (or deleted), drawn
    by a seeded random.Random: the same specs every time, in any order."""
    import random

    sources = [*BASES, *(yaml.safe_load(path.read_text()) for path in EXAMPLES)]
    values: dict[tuple[str, ...], list[Any]] = {}
    for source in sources:
        for path, value in _leaves(source):
            if path in FIELD_PATH_SET and len(path) > 1 and path[0] not in ("run", "sweep"):
                values.setdefault(path, []).append(value)
    paths = sorted(values)
    rng = random.Random(seed)
    corpus = []
    for _ in range(count):
        spec = json.loads(json.dumps(rng.choice(BASES)))
        backend = spec.get("backend", "local")
        mine = [p for p in paths if p[0] not in BACKEND_SECTIONS - {backend}]
        for _ in range(rng.randint(1, 3)):
            section, key = rng.choice(mine)
            if rng.random() < 0.15:
                spec.get(section, {}).pop(key, None)
            else:
                spec.setdefault(section, {})[key] = rng.choice(values[(section, key)])
        corpus.append(spec)
    return corpus


FIELD_PATH_SET = set(FIELD_PATHS)
BACKEND_SECTIONS = {"ssh", "pbs", "sge", "submitit"}
"""Sections only their backend reads (another backend refuses them: not what this tests)."""


def test_a_corpus_of_mostly_valid_specs_recalled_as_validated(cache: Path, tmp_path: Path) -> None:
    """What the fuzz corpus hardly tests: recall of many valid specs of every backend."""
    spec_file = tmp_path / "recall.yaml"
    counts = {"loaded": 0, "refused": 0}
    for spec in recall_corpus(150):
        spec_file.write_text(yaml.safe_dump(spec), encoding="utf-8")
        counts[check_three_ways(spec_file, cache, tmp_path)] += 1
    assert counts["loaded"] >= 90 and counts["refused"] >= 30, counts  # 98 and 52 here


LAYERED = """\
name: layered
backend: slurm
profile: site
resources: {nodes: 2:4, time: 24:00:00, mem: 32G, cpus_per_task: 4, account: 0123}
scheduler: {array: 0-3%2, signal: USR2@120, exclude_bad_nodes_for: 1:30:00}
env: {nccl: ethernet, vars: {TAG: 1.10, ON: on}, log_level: debug}
launch: {rdzv: c10d, extra_args: ["--rdzv-conf=read_timeout=300"]}
run:
  train: {config: tiny-lm, overrides: {train.steps: 20}}
sweep: {grid: {optim.lr: [0.1, 0.01]}, max_parallel: 1}
"""


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"sets": ("resources.gpus_per_node=2", "env.vars.X=1:2")},
        {"backend": "pbs"},
        {"sets": ("resources.nodes=3",), "backend": "sge"},
    ],
    ids=["file", "sets", "backend", "sets-and-backend"],
)
def test_layers_and_sets_recalled_as_validated(
    options: dict[str, Any], cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Source text (24:00:00, 0123, 1.10, on), a profile, --set and --backend: the layers'
    every input is in the key, and a different one is validated afresh."""
    monkeypatch.chdir(REPO)
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "site.yaml").write_text("resources: {partition: gpu}\n", encoding="utf-8")
    job = tmp_path / "job.yaml"
    job.write_text(LAYERED, encoding="utf-8")

    def load(**more: Any) -> LoadedSpec:
        return load_spec(job, profile_dirs=[profiles], **options, **more)

    fresh, first, second = (
        outcome(load),
        outcome(lambda: load(remembered=True)),
        outcome(lambda: load(remembered=True)),
    )
    if isinstance(fresh, list):
        assert fresh == first == second
        return
    assert isinstance(first, LoadedSpec) and isinstance(second, LoadedSpec)
    assert_same_spec(fresh, second, REPO)
    assert fresh.spec.resources.time == 86400 and second.spec.resources.account == "0123"
    assert str(second.profile_path).endswith("site.yaml")


def test_a_changed_input_or_code_is_validated_again(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("name: a\nrun: {command: [./a]}\nresources: {nodes: 1}\n", encoding="utf-8")
    load_spec(job, remembered=True)
    assert isinstance(load_spec(job, remembered=True).spec, SpecView)
    job.write_text("name: a\nrun: {command: [./a]}\nresources: {nodes: 0}\n", encoding="utf-8")
    with pytest.raises(JobkitError, match=r"job\.yaml:3: resources\.nodes"):
        load_spec(job, remembered=True)
    job.write_text("name: a\nrun: {command: [./a]}\nresources: {nodes: 1}\n", encoding="utf-8")
    monkeypatch.setattr(remembered, "code_fingerprint", lambda: (("edited.py", 1, 2),))
    assert isinstance(load_spec(job, remembered=True).spec, JobSpec)  # edited code: a miss
    assert len(entries(cache)) == 2


def test_a_damaged_entry_is_a_miss(cache: Path, tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("name: a\nrun: {command: [./a]}\n", encoding="utf-8")
    load_spec(job, remembered=True)
    (entry,) = entries(cache)
    for damage in ("{", "[]", json.dumps({"format": 1, "spec": {"backend": "mine"}})):
        entry.write_text(damage, encoding="utf-8")
        again = load_spec(job, remembered=True)
        assert isinstance(again.spec, JobSpec)
        assert isinstance(load_spec(job, remembered=True).spec, SpecView)  # written afresh


def test_nothing_remembered_when_off_or_not_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: Path
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("name: a\nrun: {command: [./a]}\n", encoding="utf-8")
    for _ in range(2):
        assert isinstance(load_spec(job).spec, JobSpec)
    assert entries(cache) == []
    monkeypatch.setenv("JOBKIT_TEMPLATE_CACHE", "off")
    for _ in range(2):
        assert isinstance(load_spec(job, remembered=True).spec, JobSpec)


def test_a_view_answers_the_unforeseen_through_the_real_spec(cache: Path, tmp_path: Path) -> None:
    """What SpecView does not itself hold (pydantic's own attributes) comes from the real
    JobSpec, validated from the remembered values; the view itself is read-only."""
    job = tmp_path / "job.yaml"
    job.write_text("name: a\nbackend: slurm\nrun: {command: [./a]}\n", encoding="utf-8")
    real = load_spec(job, remembered=True).spec
    view = load_spec(job, remembered=True).spec
    assert isinstance(view, SpecView)
    assert view.resources.model_fields_set == real.resources.model_fields_set
    assert view.model_json_schema() == real.model_json_schema()
    with pytest.raises(AttributeError, match="read-only"):
        view.resources.nodes = 3
    copied = view.model_copy(update={"launch": view.launch.model_copy(update={"rdzv": "static"})})
    assert copied.launch.rdzv == "static" and view.launch.rdzv == "c10d"
    assert [list(p) for p in section_paths(real)] == [list(p) for p in view.sections()]


def test_render_cli_recalls_the_spec(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Any
) -> None:
    """`jobkit render` twice: the same script, the second from the remembered spec."""
    monkeypatch.chdir(REPO)
    first = cli("render", "examples/slurm-2node.yaml")
    assert first.code == 0 and len(entries(cache)) == 1
    second = cli("render", "examples/slurm-2node.yaml")
    assert (second.code, second.out, second.err) == (0, first.out, first.err)
