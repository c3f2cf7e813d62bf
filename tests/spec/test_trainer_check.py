"""The bundled trainer's config is checked by `jobkit render` and `jobkit submit`, before any
queue wait: one line naming the job file's line and the key, exit 2, nothing recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.spec.conftest import CliRunner

JOB = """\
name: train
backend: slurm
run:
  train:
    config: {config}
    overrides:
      train.steps: 20
{extra}"""


def job(folder: Path, config: str = "tiny-lm", extra: str = "") -> str:
    (folder / "job.yaml").write_text(JOB.format(config=config, extra=extra), encoding="utf-8")
    return "job.yaml"


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        (
            "      optim.lr: fast\n",
            "job.yaml:8: run.train.overrides.optim.lr: must be a number (got 'fast')",
        ),
        (
            "      optim.lrr: 0.1\n",
            "job.yaml:8: run.train.overrides.optim.lrr: unknown key (expected one of: name, lr,"
            " weight_decay, betas, eps, momentum, nesterov, lr_scaling, warmup_steps, schedule,"
            " min_lr_ratio, grad_clip)",
        ),
        ("      train.steps: 0\n", None),  # a duplicate key: the YAML loader's own error
    ],
)
def test_a_bad_override_is_refused_at_render(
    cli: CliRunner, in_tmp: Path, extra: str, error: str | None
) -> None:
    result = cli("render", job(in_tmp, extra=extra))
    assert result.code == 2 and result.out == ""
    lines = result.err.splitlines()
    assert len(lines) == 1
    if error is not None:
        assert lines[0] == f"jobkit: {error}"
    else:
        assert lines[0] == "jobkit: job.yaml:8: run.train.overrides.train.steps: duplicate key"


def test_overrides_from_the_command_line_are_named_as_given(cli: CliRunner, in_tmp: Path) -> None:
    result = cli("render", job(in_tmp), "--set", "run.train.overrides.train.steps=-3")
    assert result.code == 2
    assert result.err == (
        "jobkit: --set run.train.overrides.train.steps=-3: run.train.overrides.train.steps:"
        " must be >= 1 (got -3)\n"
    )


def test_a_missing_config_names_what_was_looked_for(cli: CliRunner, in_tmp: Path) -> None:
    result = cli("render", job(in_tmp, config="nosuch"))
    assert result.code == 2
    assert result.err == (
        "jobkit: job.yaml:5: run.train.config: 'nosuch' is neither a bundled config (mlp,"
        f" tiny-lm) nor a file (looked for {in_tmp / 'nosuch'})\n"
    )


def test_a_config_file_is_found_where_the_trainer_runs(cli: CliRunner, in_tmp: Path) -> None:
    """Relative to the submission directory, or to run.workdir when it is set."""
    (in_tmp / "sub").mkdir()
    (in_tmp / "sub" / "mine.yaml").write_text("model:\n  name: mlp\noptim:\n  lr: -1\n")
    at_workdir = cli("render", job(in_tmp, config="mine.yaml", extra="  workdir: sub\n"))
    assert at_workdir.code == 2
    assert at_workdir.err == (
        f"jobkit: job.yaml:5: run.train.config: {in_tmp / 'sub' / 'mine.yaml'}:4: optim.lr:"
        " must be > 0.0 (got -1)\n"
    )
    (in_tmp / "sub" / "mine.yaml").write_text(
        "model:\n  name: mlp\ndata:\n  batch_size_per_rank: 4\n"
    )
    assert cli("render", job(in_tmp, config="sub/mine.yaml")).code == 0
    assert cli("render", job(in_tmp, config="mine.yaml", extra="  workdir: sub\n")).code == 0


def test_submit_refuses_before_recording_anything(
    cli: CliRunner, in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOBKIT_HOME", str(in_tmp / "home"))
    bad = job(in_tmp, extra="      optim.lr: fast\n")
    for args in (("submit", bad), ("submit", bad, "--dry-run")):
        result = cli(*args)
        assert result.code == 2
        assert result.err == (
            "jobkit: job.yaml:8: run.train.overrides.optim.lr: must be a number (got 'fast')\n"
        )
    assert not (in_tmp / "home").exists()  # no registry row, no job folder
    assert not (in_tmp / "logs").exists()


def test_a_config_that_passed_is_checked_again_once_edited(cli: CliRunner, in_tmp: Path) -> None:
    """Inputs that passed are remembered (render skips the trainer's import); an edit of the
    config file, or other overrides, is a new check."""
    mine = in_tmp / "mine.yaml"
    mine.write_text("model:\n  name: mlp\ndata:\n  batch_size_per_rank: 4\n")
    assert cli("render", job(in_tmp, config="mine.yaml")).code == 0
    assert cli("render", job(in_tmp, config="mine.yaml")).code == 0  # remembered
    mine.write_text("model:\n  name: mlp\ndata:\n  batch_size_per_rank: 0\n")
    again = cli("render", job(in_tmp, config="mine.yaml"))
    assert again.code == 2
    assert again.err == (
        f"jobkit: job.yaml:5: run.train.config: {mine}:4: data.batch_size_per_rank: must be"
        " >= 1 (got 0)\n"
    )
    bad = cli("render", job(in_tmp), "--set", "run.train.overrides.train.steps=x")
    assert bad.code == 2 and "run.train.overrides.train.steps: must be" in bad.err


def test_an_unprintable_config_name_stays_one_line(cli: CliRunner, in_tmp: Path) -> None:
    result = cli("render", job(in_tmp, config='"a\\u2028b"'))
    assert result.code == 2
    assert result.err.count("\n") == 1 and len(result.err.splitlines()) == 1
    assert "\\u2028" in result.err
