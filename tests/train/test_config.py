"""Config loading: bundled names, typed --set, and one-line `file:line: key: message` errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.train.launch import clean_env
from train.config.load import (
    ConfigError,
    bundled_configs,
    load_config,
    parse_set_value,
    per_rank_batch,
    scaled_lr,
)

MINIMAL = "data:\n  batch_size_per_rank: 8\n"
RUNNABLE = MINIMAL + "train:\n  steps: 5\n"

FILE_ERRORS = {
    "wrong type": (
        "model:\n  name: mlp\ndata:\n  batch_size_per_rank: 8\noptim:\n  lr: fast\n",
        "{f}:6: optim.lr: must be a number (got 'fast')",
    ),
    "unknown section": (
        MINIMAL + "trian:\n  steps: 3\n",
        "{f}:3: trian: unknown key (expected one of: name, model, data, optim, train, amp,"
        " distributed, checkpoint, logging, eval, profile)",
    ),
    "unknown key in a section": (
        MINIMAL + "train:\n  stpes: 3\n",
        "{f}:4: train.stpes: unknown key (expected one of: steps, epochs, grad_accum_steps, step,"
        " step_args, seed, device, stop_after_step, preempt_signals, stop_vote_every_s)",
    ),
    "not one of the choices": (
        MINIMAL + "optim:\n  name: adam\n",
        "{f}:4: optim.name: must be one of 'adamw' or 'sgd' (got 'adam')",
    ),
    "both batch sizes": (
        "name: x\ndata:\n  batch_size_per_rank: 8\n  global_batch_size: 64\n",
        "{f}:2: data: give exactly one of batch_size_per_rank or global_batch_size",
    ),
    "no batch size": (
        "data:\n  num_workers: 0\n",
        "{f}:1: data: give exactly one of batch_size_per_rank or global_batch_size",
    ),
    "bound": (
        MINIMAL + "train:\n  steps: 0\n",
        "{f}:4: train.steps: must be >= 1 (got 0)",
    ),
    "bundled model argument": (
        "model:\n  name: mlp\n  args:\n    hidden: 8\n    width: 3\n" + RUNNABLE,
        "{f}:5: model.args.width: unknown key (expected one of: hidden, depth, dropout)",
    ),
    "cross-field check inside model args": (
        "model:\n  name: transformer\n  args:\n    d_model: 64\n    n_heads: 5\n" + RUNNABLE,
        "{f}:5: model.args.n_heads: must divide d_model (64; got 5)",
    ),
    "bad list item": (
        MINIMAL + "train:\n  preempt_signals: [USR2, SIGFOO]\n",
        "{f}:4: train.preempt_signals[1]: is not a signal name (got 'SIGFOO')",
    ),
    "duplicate key": (
        "data:\n  batch_size_per_rank: 8\n  batch_size_per_rank: 9\n",
        "{f}:3: data.batch_size_per_rank: duplicate key",
    ),
    "YAML syntax": (
        "data:\n  batch_size_per_rank: [8\noptim: {}\n",
        "{f}:3: invalid YAML: expected ',' or ']', but got ':'",
    ),
    "not a mapping": ("- 1\n- 2\n", "{f}:1: the top level must be a mapping of keys (got a list)"),
    "model that is neither bundled nor an import path": (
        MINIMAL + "model:\n  name: resnet\n",
        "{f}:4: model.name: must be one of mlp, transformer or package.module:factory"
        " (got 'resnet')",
    ),
    "section given a scalar": (
        MINIMAL + "amp: yes\n",
        "{f}:3: amp: must be a mapping of keys (got True)",
    ),
}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("case", list(FILE_ERRORS))
def test_file_errors(case: str, tmp_path: Path) -> None:
    text, expected = FILE_ERRORS[case]
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(str(path))
    assert caught.value.show() == expected.format(f=path)


SET_ERRORS = {
    "not a number": (["optim.lr=abc"], "--set optim.lr: must be a number (got 'abc')"),
    "unknown section": (
        ["foo.bar=1"],
        "--set foo.bar: unknown key (expected one of: name, model, data, optim, train, amp,"
        " distributed, checkpoint, logging, eval, profile)",
    ),
    "no value": (
        ["train.steps"],
        "--set train.steps: expected KEY=VALUE, e.g. --set train.steps=200",
    ),
    "misspelt model argument": (
        ["model.args.hiden=3"],
        "--set model.args.hiden: unknown key (expected one of: hidden, depth, dropout)",
    ),
    "bound": (["train.steps=0"], "--set train.steps: must be >= 1 (got 0)"),
    "choice": (
        ["amp.dtype=fp8"],
        "--set amp.dtype: must be one of 'off', 'bf16' or 'fp16' (got 'fp8')",
    ),
    "second batch size": (
        ["data.global_batch_size=128"],
        "--set data.global_batch_size: give exactly one of batch_size_per_rank or"
        " global_batch_size",
    ),
    "into a scalar": (
        ["optim.lr.x=1"],
        "--set optim.lr.x=1: optim.lr.x: optim.lr holds a value, not keys",
    ),
}


@pytest.mark.parametrize("case", list(SET_ERRORS))
def test_set_errors(case: str) -> None:
    overrides, expected = SET_ERRORS[case]
    with pytest.raises(ConfigError) as caught:
        load_config("mlp", overrides)
    assert caught.value.show() == expected


def test_unknown_config_name() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config("nosuch")
    assert caught.value.show() == (
        "--config: 'nosuch' is neither a bundled config (mlp, tiny-lm) nor a file"
    )


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["--config", "mlp", "--set", "optim.lr=abc"],
            "--set optim.lr: must be a number (got 'abc')",
        ),
        (
            ["--config", "BAD", "--set", "train.steps=3"],
            "BAD:4: optim.name: must be one of 'adamw' or 'sgd' (got 'adam')",
        ),
        (
            ["--config", "nosuch"],
            "--config: 'nosuch' is neither a bundled config (mlp, tiny-lm) nor a file",
        ),
    ],
)
def test_cli_prints_one_line_and_exits_2(argv: list[str], expected: str, tmp_path: Path) -> None:
    bad = write(tmp_path, MINIMAL + "optim:\n  name: adam\n")
    argv = [str(bad) if arg == "BAD" else arg for arg in argv]
    expected = expected.replace("BAD", str(bad))
    done = subprocess.run(
        [sys.executable, "-m", "train", *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(),
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == expected + "\n"
    assert done.stdout == ""


def test_runtime_config_errors_name_the_key(tmp_path: Path) -> None:
    """Errors found once the run starts still point at the key (here: a plug-in import)."""
    done = subprocess.run(
        [sys.executable, "-m", "train", "--config", "mlp", "--set", "model.name=nosuchmod:make"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(),
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        "--set model.name: cannot import 'nosuchmod' for 'nosuchmod:make':"
        " No module named 'nosuchmod'"
    )
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("200", 200),
        ("-3", -3),
        ("1e-3", "1e-3"),  # YAML 1.1: no dot, no float (a number key converts it)
        ("3.0e-4", 3e-4),
        (".5", 0.5),
        ("true", True),
        ("False", False),
        ("null", None),
        ("off", False),  # YAML 1.1 (a text key such as amp.dtype takes "off")
        ("bf16", "bf16"),
        ("'12'", "12"),
        ("[USR2, TERM]", ["USR2", "TERM"]),
        ("{context: 32}", {"context": 32}),
        ("pkg.mod:make", "pkg.mod:make"),
    ],
)
def test_set_values_are_typed(text: str, value: object) -> None:
    assert parse_set_value(text) == value
    assert type(parse_set_value(text)) is type(value)


def test_overrides_apply_typed() -> None:
    loaded = load_config(
        "tiny-lm",
        ["train.steps=7", "optim.lr=1e-2", "amp.dtype=bf16", "distributed.static_graph=true"],
    )
    config = loaded.config
    assert (config.train.steps, config.optim.lr, config.amp.dtype) == (7, 1e-2, "bf16")
    assert config.distributed.static_graph is True
    assert config.model.args["d_model"] == 64  # bundled defaults filled in


def test_yaml_off_means_off(tmp_path: Path) -> None:
    path = write(tmp_path, RUNNABLE + "amp:\n  dtype: off\n")
    assert load_config(str(path)).config.amp.dtype == "off"


def test_bundled_configs_load() -> None:
    assert {"mlp", "tiny-lm"} <= set(bundled_configs())
    for name in bundled_configs():
        assert load_config(name).config.name == name


def test_path_is_used_when_no_bundled_name_matches(tmp_path: Path) -> None:
    path = write(tmp_path, RUNNABLE)
    loaded = load_config(str(path))
    assert loaded.path == path
    assert loaded.config.name == "bad"  # default name: the file's stem


def test_global_batch_split_and_error() -> None:
    loaded = load_config("mlp", ["data.batch_size_per_rank=null", "data.global_batch_size=96"])
    assert per_rank_batch(loaded, 4) == (24, 96)
    with pytest.raises(ConfigError) as caught:
        per_rank_batch(loaded, 5)
    assert caught.value.show() == (
        "--set data.global_batch_size: 96 is not divisible by world size 5 x"
        " train.grad_accum_steps 1"
    )
    per_rank = load_config("mlp", ["train.grad_accum_steps=2"])
    assert per_rank_batch(per_rank, 3) == (64, 384)


@pytest.mark.parametrize(("rule", "factor"), [("none", 1.0), ("linear", 4.0), ("sqrt", 2.0)])
def test_lr_scaling(rule: str, factor: float) -> None:
    loaded = load_config("mlp", [f"optim.lr_scaling={rule}", "optim.lr=0.5"])
    assert scaled_lr(loaded.config, 4) == 0.5 * factor


def test_every_key_is_documented() -> None:
    from train.config.load import TrainerConfig

    doc = (Path(__file__).resolve().parents[2] / "docs" / "train.md").read_text()
    for section, field in TrainerConfig.model_fields.items():
        annotation = field.annotation
        for key in getattr(annotation, "model_fields", {}):
            assert f"| `{section}.{key}` |" in doc, f"{section}.{key} missing in docs/train.md"
