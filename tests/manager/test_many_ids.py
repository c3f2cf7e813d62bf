"""Issue 24: `jobkit logs` and `jobkit retry` take what the other verbs take: several ids, a
sweep's id and an unambiguous prefix of a jobkit id. Real local jobs (the launcher runs
them on this machine): a 3-task sweep whose tasks exit 0, 3 and 4."""

from __future__ import annotations

import json
from pathlib import Path

from jobkit.registry.store import JobRecord, Store
from tests.manager.helpers import Invoke, wait_until


def sweep_spec(folder: Path) -> Path:
    """The user's sweep: their own command exits with the sweep's `code`."""
    spec = folder / "codes.yaml"
    command = ["bash", "-c", 'echo "task says ${1}"; exit "${1#code=}"', "job"]
    spec.write_text(
        "name: codes\nbackend: local\nlaunch:\n  launcher: none\n"
        f"run:\n  command: {json.dumps(command)}\n"
        "sweep:\n  grid:\n    code: ['0', '3', '4']\n",
        encoding="utf-8",
    )
    return spec


def tasks() -> dict[str, JobRecord]:
    """Each task's newest attempt, by task."""
    with Store() as store:
        rows = store.list_jobs(recent_final_s=None)
    newest: dict[str, JobRecord] = {}
    for row in sorted(rows, key=lambda r: r.attempt):
        newest[str(row.task)] = row
    return newest


def unique_prefix(record: JobRecord) -> str:
    """The shortest prefix of the job's id that names it alone."""
    with Store() as store:
        ids = [r.jobkit_id for r in store.list_jobs(recent_final_s=None)]
    for size in range(3, len(record.jobkit_id)):
        prefix = record.jobkit_id[:size]
        if sum(i.startswith(prefix) for i in ids) == 1:
            return prefix
    return record.jobkit_id


def test_logs_and_retry_take_several_ids_a_sweep_and_a_prefix(
    jobkit: Invoke, workdir: Path
) -> None:
    submitted = jobkit("submit", str(sweep_spec(workdir)), "--wait")
    assert submitted.code != 0, submitted.err  # tasks 1 and 2 failed
    first = tasks()
    sweep_id = first["0"].sweep_id
    assert sweep_id and [first[t].state for t in "012"] == ["SUCCEEDED", "FAILED", "FAILED"]

    # `jobkit logs SWEEP`: every task's output, each under a line naming it
    shown = jobkit("logs", sweep_id)
    assert shown.code == 0, shown.err
    for task, code in zip("012", ("0", "3", "4"), strict=True):
        heading = f"==> {first[task].jobkit_id} ({first[task].scheduler_id}, sweep task {task}) <=="
        assert heading in shown.out, shown.out
        below = shown.out.split(heading, 1)[1].split("==>", 1)[0]
        assert f"task says code={code}" in below, below
    # several ids and a prefix, in the order given; -f merges them, each line prefixed
    two = jobkit("logs", unique_prefix(first["2"]), first["1"].jobkit_id)
    assert two.code == 0, two.err
    assert two.out.index(first["2"].jobkit_id) < two.out.index(first["1"].jobkit_id)
    followed = jobkit("logs", "-f", first["0"].jobkit_id, first["1"].jobkit_id)
    assert followed.code == 3, followed.err  # like the jobs: task 1 exited 3
    assert f"[{first['1'].jobkit_id}] task says code=3" in followed.out.splitlines()
    assert f"[{first['0'].jobkit_id}] task says code=0" in followed.out.splitlines()

    # `jobkit retry SWEEP`: the tasks that failed, not the one that succeeded
    retried = jobkit("retry", sweep_id)
    assert retried.code == 0, retried.err
    assert retried.err == f"jobkit: sweep {sweep_id}: not retried: 1 SUCCEEDED\n"
    lines = retried.out.splitlines()
    assert len(lines) == 2 and all("resubmitted as attempt 2" in line for line in lines), lines
    second = tasks()
    assert [second[t].attempt for t in "012"] == [1, 2, 2]
    for task, code in (("1", 3), ("2", 4)):  # the retried attempt's own end, in the run folder
        ended = wait_until(jobkit, second[task].jobkit_id, lambda r: r["state"] == "FAILED")
        assert (ended["exit_code"], ended["reason"]) == (code, None), ended

    # several ids (one a prefix) at once: both runs get attempt 3
    again = jobkit("retry", unique_prefix(second["1"]), second["2"].jobkit_id, "--json")
    assert again.code == 0, again.err
    made = json.loads(again.out)
    assert [(m["previous"], m["attempt"]) for m in made] == [
        (second["1"].jobkit_id, 3),
        (second["2"].jobkit_id, 3),
    ]
    # one that cannot be retried (it succeeded) is one line; the others still are retried
    third = tasks()
    wait_until(jobkit, third["1"].jobkit_id, lambda r: r["state"] == "FAILED", timeout=60)
    mixed = jobkit("retry", first["0"].jobkit_id, third["1"].jobkit_id)
    assert mixed.code == 1
    assert mixed.err == (
        f"jobkit: {first['0'].jobkit_id} ({first['0'].scheduler_id}) succeeded: nothing to retry\n"
    )
    assert "resubmitted as attempt 4" in mixed.out and len(mixed.out.splitlines()) == 1
    ambiguous = jobkit("retry", "jk")
    assert ambiguous.code == 2 and "is ambiguous" in ambiguous.err, ambiguous.err
