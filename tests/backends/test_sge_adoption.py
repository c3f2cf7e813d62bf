"""The Grid Engine submission token as the job's account string (backends/sge/adoption.py):
qsub gets `-A jobkit.<token>` unless the user's own account applies, and qacct's records
carry it. The real adoption (jobkit killed right after qsub answered, the tasks ended
before any jobkit command ran) is tests/reliability/test_sweep_crashes.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobkit.backends.sge.adoption import account_args, user_sets_account
from jobkit.backends.sge.backend import SgeBackend
from jobkit.backends.sge.parse import parse_qacct
from jobkit.render.engine import render
from jobkit.spec.schema import JobSpec
from tests.backends.requests import make_request

SAMPLES = Path(__file__).resolve().parents[1] / "cluster" / "sge-samples"


def rendered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **fields: object) -> list[str]:
    """The qsub argv of a spec's real script (no sge_request files: HOME and SGE_ROOT empty
    folders)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home-dir"))
    monkeypatch.setenv("SGE_ROOT", str(tmp_path / "sge-root"))
    spec = JobSpec.model_validate(
        {"name": "job", "backend": "sge", "run": {"command": ["true"]}, **fields}
    )
    request = make_request(tmp_path, render(spec), backend="sge", **fields)
    return SgeBackend().submit_argv(request)


def test_the_token_is_the_account_string_when_the_spec_sets_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = rendered(tmp_path, monkeypatch)
    assert argv[:2] == ["qsub", "-terse"]
    assert argv[2] == "-A" and argv[3].startswith("jobkit.") and len(argv[3]) == 7 + 16
    assert ":" not in argv[3]  # Grid Engine: "Colon (':') not allowed in objectname"


def test_a_users_account_is_never_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """resources.account: the script's `#$ -A proj-7` stays the job's account."""
    argv = rendered(tmp_path, monkeypatch, resources={"account": "proj-7"})
    assert "-A" not in argv


def test_an_account_in_scheduler_extra_is_never_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = rendered(tmp_path, monkeypatch, scheduler={"extra": ["-A billing"]})
    assert "-A" not in argv


def test_an_account_from_sge_request_defaults_is_never_replaced(tmp_path: Path) -> None:
    """A site's (or the user's) sge_request default `-A` would lose to the command line's."""
    root = tmp_path / "sge"
    (root / "cell" / "common").mkdir(parents=True)
    (root / "cell" / "common" / "sge_request").write_text("# defaults\n-A site-acct -q all.q\n")
    env = {"SGE_ROOT": str(root), "SGE_CELL": "cell"}
    assert user_sets_account("#!/bin/bash\n#$ -N x\n", tmp_path, env)
    (root / "cell" / "common" / "sge_request").write_text("# -A commented out\n-q all.q\n")
    assert not user_sets_account("#!/bin/bash\n#$ -N x\n", tmp_path, env)
    request = make_request(tmp_path, "#!/bin/bash\n", backend="sge")
    assert account_args(request, env) == ["-A", f"jobkit.{request.token}"]
    (request.workdir / ".sge_request").write_text("-A here\n")  # the submission folder's
    assert account_args(request, env) == []


def test_an_account_word_elsewhere_in_the_script_is_not_an_account() -> None:
    script = "#!/bin/bash\n#$ -N x\necho -A\n# -A in a comment\n"
    assert not user_sets_account(script, Path("/nonexistent"), {})


def test_qacct_records_carry_the_account_string() -> None:
    runs = parse_qacct((SAMPLES / "qacct_array.txt").read_text())
    assert runs and {run.account for run in runs} == {"sge"}
