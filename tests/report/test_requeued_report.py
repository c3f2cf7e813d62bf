"""A requeued Slurm job's report while it waits again: when slurmdbd has no line for the
queued run yet, sacct's latest line is the run that was requeued (seen in CI under load:
the report said 10 s for a job that had run 5). That run is among the record's earlier
runs; the report must not count it twice."""

from __future__ import annotations

from pathlib import Path

from jobkit.backends.slurm.usage import USAGE_FIELDS, parse_usage
from jobkit.registry.record import JobRecord, new_record
from jobkit.report.build import build_report


def _sacct_line(state: str, elapsed: int) -> str:
    values = {"JobID": "8240", "State": state, "ElapsedRaw": str(elapsed), "TimelimitRaw": "10"}
    values |= {"NodeList": "n1", "AllocCPUS": "1"}
    return "|".join(values.get(name, "") for name in USAGE_FIELDS)


def _requeued_record(tmp_path: Path) -> JobRecord:
    return new_record(
        jobkit_id="jkreq01",
        scheduler_id="8240",
        backend="slurm",
        name="requeued",
        state="QUEUED",
        raw_state="PENDING",
        created_at=0.0,
        submitted_at=0.0,
        requeues=1,
        elapsed_s=0.0,
        workdir=tmp_path,
        job_dir=tmp_path,
        token="t",
        spec_json="{}",
        script="",
        extra={"earlier_runs": 1, "earlier_runs_s": 5.0, "earlier_runs_from": "sacct"},
    )


def test_the_requeued_line_is_not_counted_twice(tmp_path: Path) -> None:
    usage = parse_usage(_sacct_line("REQUEUED", 5))["8240"]
    assert usage.requeued_run and usage.elapsed_s == 5.0
    report = build_report(_requeued_record(tmp_path), usage, None, None, now=100.0)
    assert (report.elapsed_s, report.earlier_runs, report.earlier_runs_s) == (5.0, 1, 5.0)


def test_the_queued_runs_own_line_adds_to_the_earlier_runs(tmp_path: Path) -> None:
    usage = parse_usage(_sacct_line("PENDING", 0))["8240"]
    assert not usage.requeued_run
    report = build_report(_requeued_record(tmp_path), usage, None, None, now=100.0)
    assert report.elapsed_s == 5.0
    running = parse_usage(_sacct_line("RUNNING", 3))["8240"]
    report = build_report(_requeued_record(tmp_path), running, None, None, now=100.0)
    assert report.elapsed_s == 8.0
