"""`jobkit diff`'s comparison (jobkit/provenance/compare.py): each section names exactly
what differs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jobkit.provenance.compare import (
    as_json,
    as_text,
    code_difference,
    compare,
    settings,
    spec_difference,
)
from jobkit.provenance.read import Provenance
from jobkit.provenance.view import page

SCONTROL = (
    "JobId=12 JobName=x\n   UserId=root(0) GroupId=root(0)\n   Partition=debug"
    " AllocNode:Sid=vm:1\n   TimeLimit=00:10:00 TimeMin=N/A\n   NumNodes=1 NumCPUs=1"
    " NumTasks=1 CPUs/Task=1\n"
)
QSTAT_F = "Job Id: 5.srv\n    queue = workq\n    Resource_List.walltime = 01:00:00\n"
QSTAT_J = "job_number:                 7\nhard resource_list:         h_rt=600\nproject: p1\n"


def test_scheduler_records_read_as_settings() -> None:
    slurm = settings({"command": "scontrol show job 12", "output": SCONTROL})
    assert slurm["Partition"] == "debug" and slurm["CPUs/Task"] == "1"
    assert slurm["TimeLimit"] == "00:10:00"
    pbs = settings({"output": QSTAT_F})
    assert pbs["queue"] == "workq" and pbs["Resource_List.walltime"] == "01:00:00"
    sge = settings({"output": QSTAT_J})
    assert sge["hard resource_list"] == "h_rt=600" and sge["project"] == "p1"
    assert settings(None) == {} and settings({"output": None}) == {}


def test_spec_keys_that_differ_and_only_those() -> None:
    a = {"name": "x", "env": {"vars": {}}, "resources": {"nodes": 1, "mem": None}}
    b = {"name": "x", "env": {"vars": {"K": "2"}}, "resources": {"nodes": 2, "mem": None}}
    found = spec_difference(a, b)
    assert found.items == ["env.vars.K", "resources.nodes"]
    assert found.lines == ["env.vars.K: (unset) -> '2'", "resources.nodes: 1 -> 2"]


def _provenance(code: dict[str, Any], job: dict[str, Any] | None, tmp: Path) -> Provenance:
    from jobkit.registry.record import JobRecord

    record = JobRecord(
        jobkit_id="jk" + code.get("tree", "x")[:5],
        scheduler_id=None,
        backend="local",
        name="x",
        state="SUCCEEDED",
        raw_state=None,
        state_source=None,
        reason=None,
        observed_at=None,
        created_at=0.0,
        submitted_at=None,
        final_at=None,
        exit_code=0,
        signal=None,
        requeues=0,
        nodes=None,
        elapsed_s=None,
        max_rss=None,
        cpu_time=None,
        workdir=tmp,
        job_dir=tmp / "nojob",
        log_paths={},
        submit_argv=[],
        token="t",
        spec_json="{}",
        script="",
    )
    return Provenance(record, {"code": code, "spec": {"name": "x"}}, job, None)


def test_code_files_that_differ_between_snapshots(tmp_path: Path) -> None:
    for name, text in (("a", "one\ntwo\n"), ("b", "one\n2\n")):
        (tmp_path / name / "sub").mkdir(parents=True)
        (tmp_path / name / "sub" / "prog.py").write_text(text)
        (tmp_path / name / "same.txt").write_text("same\n")
    (tmp_path / "b" / "new.txt").write_text("new\n")
    code = {"git": True, "commit": "c1"}
    a = _provenance({**code, "tree": "aaaaaa", "snapshot": str(tmp_path / "a")}, None, tmp_path)
    b = _provenance({**code, "tree": "bbbbbb", "snapshot": str(tmp_path / "b")}, None, tmp_path)
    found = code_difference(a, b)
    assert found.items == ["new.txt", "sub/prog.py"]
    assert found.lines == ["new.txt:", "  +new", "sub/prog.py:", "  -two", "  +2"]


def test_same_tree_no_code_difference_and_unknown_sections_said(tmp_path: Path) -> None:
    code = {"git": True, "commit": "c1", "tree": "t1", "snapshot": None}
    job = {"packages": {"torch": "2.5"}, "hosts": ["n1"], "python": {"version": "3.11"}}
    a = _provenance(code, job, tmp_path)
    b = _provenance(code, None, tmp_path)
    found = as_json(compare(a, b))
    assert found["code"]["differs"] == [] and found["spec"]["differs"] == []
    assert found["packages"]["unknown"] == (
        "not recorded for the second (not started, or its software record was not taken)"
    )


def test_container_conda_and_modules_differences_and_the_page(tmp_path: Path) -> None:
    code = {"git": True, "commit": "c1", "tree": "t1", "snapshot": None}
    base = {"packages": {}, "hosts": ["n1"], "python": {"version": "3.11"}}
    image = {"runtime": "podman", "image": "localhost/t:1", "digest": "sha256:aa"}
    conda = {"prefix": "/c/env", "name": "env", "packages": {"numpy": "1.26.4 b0 (conda-forge)"}}
    conda["export"], conda["export_note"] = None, "conda not found: not exported"
    mods = {"system": "lmod", "loaded": ["gcc/12"]}
    job_a = {**base, "container": image, "conda": conda, "modules": mods}
    job_b = {
        **base,
        "container": {**image, "digest": "sha256:bb"},
        "conda": {**conda, "packages": {"numpy": "1.26.5 b0 (conda-forge)"}},
        "modules": {**mods, "loaded": ["gcc/13"]},
    }
    a, b = _provenance(code, job_a, tmp_path), _provenance(code, job_b, tmp_path)
    found = compare(a, b)
    assert [d.section for d in found] == [
        "spec", "code", "packages", "container", "hosts", "scheduler"
    ]  # fmt: skip
    assert found[2].items == ["conda:numpy", "modules"]
    assert found[3].items == ["digest"]
    text = as_text(a, b, found)
    assert "  digest: sha256:aa -> sha256:bb" in text
    assert "  conda numpy: 1.26.4 b0 (conda-forge) -> 1.26.5 b0 (conda-forge)" in text
    assert "  modules: gcc/12 -> gcc/13" in text
    assert text[-1] == "same: spec, code, hosts, scheduler"
    lines = page(a)
    assert "  container   podman localhost/t:1 sha256:aa" in lines
    assert "  conda       /c/env (env): 1 package(s); conda not found: not exported" in lines
    assert "  modules     lmod: gcc/12" in lines
    assert "  python      3.11  (the host's, outside the image)" in lines
    assert not any(
        line.startswith(("  conda", "  modules", "  container"))
        for line in page(_provenance(code, base, tmp_path))
    )
