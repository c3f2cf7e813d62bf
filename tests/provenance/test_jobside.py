"""The job's side of provenance (jobkit/provenance/jobside.py): what it reads, where it
writes, and that it never stops a job."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jobkit.provenance import jobside


def _dist(folder: Path, name: str, version: str) -> None:
    info = folder / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_packages_include_pythonpath_ones_by_canonical_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _dist(tmp_path, "Fake_Pkg.Two", "1.2.3")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = jobside.packages()
    assert found["fake-pkg-two"] == "1.2.3"
    assert found["torch"]  # the venv's: read from its metadata, not imported
    assert list(found) == sorted(found)


def test_torch_cuda_and_nccl_versions_come_from_files() -> None:
    versions = jobside.torch_versions({"torch": "2.5.0", "nvidia-nccl-cu12": "2.21.5"})
    assert versions["torch"] == "2.5.0" and versions["nccl"] == "2.21.5"
    assert "torch" not in sys.modules or versions["cuda"] is None or versions["cuda"]


def test_the_record_lands_in_the_run_folder_with_the_submit_side(tmp_path: Path) -> None:
    run_dir, job_dir = tmp_path / "run", tmp_path / "job"
    run_dir.mkdir()
    job_dir.mkdir()
    (tmp_path / "img" / "bin").mkdir(parents=True)
    container = {"image": "../img", "runtime": "charliecloud"}
    submit = {"jobkit_id": "jkabc", "spec": {"container": container}, "submit_folder": str(job_dir)}
    (job_dir / "provenance.json").write_text(json.dumps(submit))
    (job_dir / "code.patch").write_text("diff --git a/x b/x\n")
    env = {
        "PATH": "/usr/bin:/bin",
        "JOBKIT_RUN_DIR": str(run_dir),
        "JOBKIT_JOB_ID": "123_4",
        "JOBKIT_PROVENANCE": str(job_dir / "provenance.json"),
        "HOME": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "-m", "jobkit.provenance.jobside", "n1", "n2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    data = json.loads((run_dir / "provenance" / "123_4.json").read_text())
    assert data["submit"] == submit
    image = data["job"]["container"]
    assert image["path"] == str(job_dir / "../img") and image["digest"].startswith("listing-")
    assert data["job"]["conda"] is None and data["job"]["modules"] is None  # none here
    assert data["job"]["hosts"] == ["n1", "n2"] and data["job"]["job_id"] == "123_4"
    assert (run_dir / "provenance" / "123_4.patch").read_text() == "diff --git a/x b/x\n"
    assert (run_dir / "provenance" / "123_4.json").stat().st_mode & 0o077 == 0


def test_a_failure_is_one_line_and_never_a_traceback(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "JOBKIT_RUN_DIR": str(tmp_path / "missing" / "run")}
    done = subprocess.run(
        [sys.executable, "-m", "jobkit.provenance.jobside"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("jobkit: provenance not recorded: FileNotFoundError: ")
    assert done.stderr.count("\n") == 1
