"""jobkit and the bundled trainer read the same YAML text and the same `--set` the same way.

One loader (jobkit/core/yamlsrc.py), one `--set` grammar (jobkit/core/overrides.py) and one
per-key reading of unquoted scalars (jobkit/spec/scalars.py): the VALUES that come out are
checked on both sides, and an override survives render -> trainer unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jobkit.core.errors import SpecError
from jobkit.core.overrides import parse_set, set_word
from jobkit.core.yamlsrc import MAX_DEPTH, load_yaml_text
from jobkit.render.engine import program_argv
from jobkit.spec.load import load_spec
from jobkit.spec.load import parse_set as jobkit_parse_set
from jobkit.spec.schema import JobSpec
from train.config.load import ConfigError, config_data, load_config

MINIMAL = "data:\n  batch_size_per_rank: 8\n"

Load = Callable[[Path, str], dict[str, Any]]


def _jobkit_load(tmp_path: Path, text: str) -> dict[str, Any]:
    try:
        return load_yaml_text(text, str(tmp_path / "c.yaml")).data
    except SpecError as err:
        raise AssertionError(err.show()) from err


def _trainer_load(tmp_path: Path, text: str) -> dict[str, Any]:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    data = config_data(str(path))
    data.pop("name")  # the trainer's default: the file's stem
    return data


def _error(side: str, tmp_path: Path, text: str) -> str:
    path = tmp_path / "c.yaml"
    if side == "jobkit":
        with pytest.raises(SpecError) as caught_spec:
            load_yaml_text(text, str(path))
        return caught_spec.value.show()
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        config_data(str(path))
    return caught.value.show()


SIDES = {"jobkit": _jobkit_load, "trainer": _trainer_load}

# Keys neither schema knows: the loader's own reading (YAML 1.1 plus the text as written,
# which a typed key then uses: see the per-key tests below).
LOADER_VALUES = [
    ("a: 1:30\n", {"a": 90}),
    ("a: on\n", {"a": True}),
    ("a: yes\n", {"a": True}),
    ("a: 0123\n", {"a": 83}),
    ("a: 1e3\n", {"a": "1e3"}),
    ("a: 1.0e+3\n", {"a": 1000.0}),
    ("a: .inf\n", {"a": float("inf")}),
    ("a: '0123'\n", {"a": "0123"}),
    ("on: 1\nyes: 2\n1: 3\nnull: 4\n", {"on": 1, "yes": 2, "1": 3, "null": 4}),
    ("a: &x {b: 1, c: 2}\nd:\n  <<: *x\n  c: 3\n", {"a": {"b": 1, "c": 2}, "d": {"b": 1, "c": 3}}),
    ("a: &x [1, 2]\nb: *x\n", {"a": [1, 2], "b": [1, 2]}),
]


@pytest.mark.parametrize("side", list(SIDES))
@pytest.mark.parametrize(("text", "value"), LOADER_VALUES, ids=[t for t, _ in LOADER_VALUES])
def test_loader_values_are_the_same(side: str, text: str, value: object, tmp_path: Path) -> None:
    assert SIDES[side](tmp_path, text) == value


LOADER_ERRORS = [
    ("a: 1\nb: 2\na: 3\n", "{f}:3: a: duplicate key"),
    ("a:\n  b: 1\n  b: 2\n", "{f}:3: a.b: duplicate key"),
    ("a: [1\nb: 2\n", "{f}:2: invalid YAML: expected ',' or ']', but got ':'"),
    ("a: " + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5) + "\n", "{f}:1: invalid YAML: nested"),
    ("a:\n" + "".join(" " * i + f"k{i}:\n" for i in range(1, MAX_DEPTH + 5)), "{f}:"),
    ("a: *nope\n", "{f}:1: invalid YAML: found undefined alias 'nope'"),
    ("- 1\n", "{f}:1: the top level must be a mapping of keys (got a list)"),
]


@pytest.mark.parametrize("side", list(SIDES))
@pytest.mark.parametrize(("text", "expected"), LOADER_ERRORS)
def test_loader_errors_are_the_same_line(
    side: str, text: str, expected: str, tmp_path: Path
) -> None:
    shown = _error(side, tmp_path, text)
    assert shown.startswith(expected.format(f=tmp_path / "c.yaml"))
    assert "\n" not in shown
    if "k1" in text:
        assert f"nested more than {MAX_DEPTH} levels deep" in shown


# Typed keys: the same unquoted text, read as each side's key of that type takes it.
JOB = "name: t\nbackend: slurm\nrun:\n  command: prog\n"
TEXT_KEYS = {"jobkit": ("resources", "partition"), "trainer": ("logging", "dir")}
BOOL_KEYS = {"jobkit": ("scheduler", "requeue"), "trainer": ("distributed", "static_graph")}
# (Not resources.nodes: there `1:30` is a node range, tests/spec/test_node_range.py.)
INT_KEYS = {"jobkit": ("resources", "cpus_per_task"), "trainer": ("train", "steps")}


def _typed(side: str, key: tuple[str, str], text: str, tmp_path: Path) -> object:
    section, name = key
    if side == "jobkit":
        path = tmp_path / "job.yaml"
        path.write_text(JOB + f"{section}:\n  {name}: {text}\n")
        return getattr(getattr(load_spec(path, profile_dirs=[]).spec, section), name)
    path = tmp_path / "c.yaml"
    length = "" if section == "train" else "train:\n  steps: 5\n"  # the one length key
    path.write_text(MINIMAL + f"{section}:\n  {name}: {text}\n" + length)
    return getattr(getattr(load_config(str(path)).config, section), name)


@pytest.mark.parametrize("side", list(SIDES))
@pytest.mark.parametrize("text", ["1:30", "on", "yes", "0123", "1e3", ".inf", "2024-01-02"])
def test_a_text_key_takes_the_text_as_written(side: str, text: str, tmp_path: Path) -> None:
    assert _typed(side, TEXT_KEYS[side], text, tmp_path) == text


@pytest.mark.parametrize("side", list(SIDES))
@pytest.mark.parametrize(("text", "value"), [("on", True), ("yes", True), ("off", False)])
def test_a_boolean_key_keeps_yaml_meaning(
    side: str, text: str, value: bool, tmp_path: Path
) -> None:
    assert _typed(side, BOOL_KEYS[side], text, tmp_path) is value


@pytest.mark.parametrize("side", list(SIDES))
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1:30", "1:30 is a base-60 number to YAML 1.1 (90), which is surely not what you mean"),
        ("0123", "0123 is an octal number to YAML 1.1 (83), which is surely not what you mean"),
    ],
)
def test_a_number_key_refuses_misread_numbers(
    side: str, text: str, message: str, tmp_path: Path
) -> None:
    section, name = INT_KEYS[side]
    error = SpecError if side == "jobkit" else ConfigError
    with pytest.raises(error) as caught:
        _typed(side, INT_KEYS[side], text, tmp_path)
    file, line = ("job.yaml", 6) if side == "jobkit" else ("c.yaml", 4)
    shown = caught.value.show()
    assert shown.startswith(f"{tmp_path / file}:{line}: {section}.{name}: {message}")


def test_the_trainer_reads_bundled_args_by_their_type(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "train:\n  steps: 5\ndata:\n  batch_size_per_rank: 8\n  name: chars\n  args:\n"
        "    path: 0123\n"
    )
    assert load_config(str(path)).config.data.args["path"] == "0123"


# --set: one grammar, the same values on both sides.
SET_VALUES = [
    ("1:30", 90),
    ("on", True),
    ("0123", 83),
    ("1e3", "1e3"),
    (".inf", float("inf")),
    ("[a, b]", ["a", "b"]),
    ("{a: 1}", {"a": 1}),
    ("'0123'", "0123"),
    ("", None),
    ("a #b", "a #b"),
    ("*", "*"),
    (" 2 ", 2),
]


@pytest.mark.parametrize("side", list(SIDES))
@pytest.mark.parametrize(("text", "value"), SET_VALUES, ids=[t or "empty" for t, _ in SET_VALUES])
def test_set_values_are_the_same(side: str, text: str, value: object) -> None:
    if side == "jobkit":
        got = jobkit_parse_set(f"xx.yy={text}").data["xx"]["yy"]
    else:
        got = config_data("mlp", [f"xx.yy={text}"])["xx"]["yy"]
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("side", list(SIDES))
@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ("xx.yy", "--set xx.yy: expected KEY=VALUE, e.g. --set "),
        ("xx..yy=1", "--set xx..yy=1: 'xx..yy' is not a key path like "),
        ("xx.yy=[a", "--set xx.yy=[a: xx.yy: invalid YAML: expected ',' or ']', but got"),
        ("xx.yy='a", "--set xx.yy='a: xx.yy: invalid YAML: "),
    ],
)
def test_set_errors_are_the_same_line(side: str, item: str, expected: str) -> None:
    if side == "jobkit":
        with pytest.raises(SpecError) as caught_spec:
            jobkit_parse_set(item)
        shown = caught_spec.value.show()
    else:
        with pytest.raises(ConfigError) as caught:
            config_data("mlp", [item])
        shown = caught.value.show()
    assert shown.startswith(expected)


def test_a_set_map_replaces_the_trainer_map(tmp_path: Path) -> None:
    """The trainer's `--set` puts its value at the key path (a plug-in's args replace the
    bundled dataset's); jobkit layers merge maps key by key (profile < job file < --set)."""
    path = tmp_path / "c.yaml"
    path.write_text(MINIMAL + "model:\n  name: pkg.mod:make\n  args: {a: 1, b: 2}\n")
    data = config_data(str(path), ["model.args={b: 3, c: 4}", "model.args.d=5"])
    assert data["model"] == {"name": "pkg.mod:make", "args": {"b": 3, "c": 4, "d": 5}}


def test_set_through_a_value_is_the_same_error() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config("mlp", ["optim.lr.x=1"])
    with pytest.raises(SpecError) as caught_spec:
        jobkit_parse_set("resources.nodes.x=1")
    assert caught.value.show() == "--set optim.lr.x=1: optim.lr.x: optim.lr holds a value, not keys"
    assert caught_spec.value.show() == (
        "--set resources.nodes.x=1: resources.nodes.x: resources.nodes holds a value, not keys"
    )


# Trainer overrides: what jobkit read is what the trainer reads.


def _trainer_sees(overrides: dict[str, object]) -> Any:
    spec = JobSpec.model_validate(
        {"name": "t", "run": {"train": {"config": "mlp", "overrides": overrides}}}
    )
    argv = program_argv(spec)
    words = [argv[i + 1] for i, word in enumerate(argv) if word == "--set"]
    return load_config("mlp", words).config


@pytest.mark.parametrize(
    "text", ["0123", "1:30", "on", "null", "1e3", "[a, b]", "", " x ", "a #b", "~", "it's", "*"]
)
def test_string_overrides_reach_the_trainer_unchanged(text: str, tmp_path: Path) -> None:
    assert _trainer_sees({"logging.dir": text}).logging.dir == text
    # the same from a job file, quoted
    job = tmp_path / "job.yaml"
    quoted = "'" + text.replace("'", "''") + "'"
    job.write_text(
        f"name: t\nrun:\n  train:\n    config: mlp\n    overrides:\n      logging.dir: {quoted}\n"
    )
    spec = load_spec(job, profile_dirs=[]).spec
    assert spec.run.train is not None
    assert spec.run.train.overrides == {"logging.dir": text}
    argv = program_argv(spec)
    words = [argv[i + 1] for i, word in enumerate(argv) if word == "--set"]
    assert load_config("mlp", words).config.logging.dir == text


def test_typed_overrides_reach_the_trainer_typed(tmp_path: Path) -> None:
    config = _trainer_sees(
        {"train.steps": 20, "optim.lr": 1e-5, "distributed.static_graph": True, "optim.eps": 1.5}
    )
    assert config.train.steps == 20 and config.optim.lr == 1e-5 and config.optim.eps == 1.5
    assert config.distributed.static_graph is True
    # written unquoted in a job file: the text as written, read by the trainer's key type
    job = tmp_path / "job.yaml"
    job.write_text(
        "name: t\nrun:\n  train:\n    config: mlp\n    overrides:\n      train.steps: 20\n"
        "      optim.lr: 3.0e-4\n      optim.eps: 1e-6\n      distributed.static_graph: on\n"
        "      logging.dir: 0123\n"
    )
    spec = load_spec(job, profile_dirs=[]).spec
    argv = program_argv(spec)
    words = [argv[i + 1] for i, word in enumerate(argv) if word == "--set"]
    assert words == [
        "train.steps=20",
        "optim.lr=3.0e-4",
        "optim.eps=1e-6",
        "distributed.static_graph=on",
        "logging.dir=0123",
    ]
    config = load_config("mlp", words).config
    assert (config.train.steps, config.optim.lr, config.optim.eps) == (20, 3e-4, 1e-6)
    assert config.distributed.static_graph is True and config.logging.dir == "0123"


def test_lists_arrive_typed() -> None:
    word = set_word("train.preempt_signals", ["USR2", "TERM"])
    assert word == "train.preempt_signals=[USR2, TERM]"
    assert load_config("mlp", [word]).config.train.preempt_signals == ["SIGUSR2", "SIGTERM"]
    assert parse_set(word).value == ["USR2", "TERM"]
