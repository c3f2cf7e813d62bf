"""What jobkit prints of user and scheduler text (issue 22 item 9, core/display.py): control
and bidi characters escaped visibly, long values cut in tables (full in --json and the detail
view), a scheduler's multi-line error as one line, and a HELD job kept HELD when squeue's
answer is empty (accounting records no holds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobkit.core import proc
from jobkit.core.display import ELLIPSIS, TABLE_CELL_MAX, first_line, printable, table_cell
from jobkit.core.errors import SchedulerError
from tests.reliability.helpers import (
    executable,
    path_with,
    run_jobkit,
    scancel,
    wait_for,
    write_spec,
)

RLO = "\N{RIGHT-TO-LEFT OVERRIDE}"
LONG = "v" * 3000


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (f"evil{RLO}txt.exe", "evil\\u202etxt.exe"),
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
        ("a\rb\nc\x00", "a\\x0db\\x0ac\\x00"),
        ("zero\u200bwidth\u2028line\u2066iso", "zero\\u200bwidth\\u2028line\\u2066iso"),
        ("caf\N{LATIN SMALL LETTER E WITH ACUTE} \N{SNOWMAN}", "café ☃"),
        ("caf\udce9", "caf\\udce9"),  # an undecodable byte kept by surrogateescape
    ],
)
def test_unsafe_characters_are_escaped_visibly(raw: str, shown: str) -> None:
    assert printable(raw) == shown


def test_a_tab_stays_and_is_a_space_in_a_table() -> None:
    assert printable("a\tb") == "a\tb" and table_cell("a\tb") == "a b"


def test_a_long_value_is_cut_in_a_table_cell_only() -> None:
    cell = table_cell(LONG)
    assert len(cell) == TABLE_CELL_MAX and cell.endswith(ELLIPSIS)
    assert table_cell("short") == "short"


def test_a_commands_usage_text_is_one_line() -> None:
    """The Torque wrapper's qstat (this machine's /usr/bin/qstat) refusing PBS Pro's `-F json`
    prints its usage text: the error is its first line and says how many more there are."""
    with pytest.raises(SchedulerError) as err:
        proc.run(["/usr/bin/qstat", "--bogus"])
    text = err.value.stderr or err.value.stdout
    assert len(text.strip().splitlines()) > 2, text
    shown = err.value.show()
    assert "\n" not in shown
    assert shown.startswith("/usr/bin/qstat --bogus: exit ")
    more = len([line for line in text.splitlines() if line.strip()]) - 1
    assert shown.endswith(
        f": Unknown option: bogus ({more} more lines: rerun with JOBKIT_DEBUG=1 to see them)"
    )


def test_first_line_skips_blank_lines() -> None:
    two = "\n\n  sbatch: error: x\n\nsbatch: error: y\n"
    assert first_line(two) == ("sbatch: error: x / sbatch: error: y", 0)
    assert first_line("qstat: bad\nUsage:\n  qstat [-f]\n") == ("qstat: bad", 2)
    assert first_line("x" * 200 + "\n" + "y" * 200) == ("x" * 200, 1)
    assert first_line("") == ("", 0)


@pytest.mark.slurm
@pytest.mark.timeout(300)
def test_garbage_sbatch_output_is_one_line(
    workdir: Path, tmp_path: Path, slurm_cluster: object
) -> None:
    """sbatch answering 40 lines of garbage (exit 0): `jobkit submit` says so in one line,
    the garbage cut and escaped, the outcome unknown (status settles it)."""
    folder = executable(
        tmp_path / "garbage" / "sbatch",
        "#!/bin/bash\nfor i in $(seq 40); do printf 'garbage \\033[2J line %s\\n' $i; done\n",
    ).parent
    spec = write_spec(
        workdir / "g.yaml",
        {"name": "g", "backend": "slurm", "launch": {"launcher": "srun"},
         "run": {"command": ["true"]}},
    )  # fmt: skip
    done = run_jobkit("submit", str(spec), cwd=workdir, env={"PATH": path_with(folder)})
    assert done.returncode == 1, done
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert ": unexpected sbatch output: garbage \\x1b[2J line 1 / garbage" in lines[0]
    assert " more lines: rerun with JOBKIT_DEBUG=1 to see them)" in lines[0], lines[0]
    # sbatch said 0: it may have taken the job, so the outcome is unknown (issue 22 item 4)
    assert "whether slurm took the job is unknown" in lines[0], lines[0]
    assert "\x1b" not in lines[0], lines[0]


@pytest.mark.slurm
@pytest.mark.timeout(300)
def test_sweep_values_are_escaped_and_cut_in_the_table(
    workdir: Path, tmp_path: Path, slurm_cluster: object
) -> None:
    """A held Slurm sweep whose values are an RTL override and 3,000 characters."""
    spec = write_spec(
        workdir / "swp.yaml",
        {
            "name": "swp",
            "backend": "slurm",
            "launch": {"launcher": "srun"},
            "run": {"command": ["true"]},
            "scheduler": {"extra": ["--hold"]},
            "sweep": {"grid": {"tag": [f"evil{RLO}txt.exe", LONG]}},
        },
    )
    submitted = run_jobkit("submit", "--json", str(spec), cwd=workdir)
    assert submitted.returncode == 0, submitted.stderr
    data = json.loads(submitted.stdout)
    rows = data["tasks"] if isinstance(data, dict) and "tasks" in data else data
    ids = [str(r["scheduler_id"]) for r in rows]
    try:
        table = run_jobkit("status", "--all", "--expand", cwd=workdir)
        assert table.returncode == 0, table.stderr
        assert RLO not in table.stdout and "tag=evil\\u202etxt.exe" in table.stdout
        assert all(len(line) < 250 for line in table.stdout.splitlines()), table.stdout
        assert ELLIPSIS in table.stdout and LONG not in table.stdout
        as_json = run_jobkit("status", "--all", "--json", cwd=workdir)
        assert LONG in json.loads(as_json.stdout)[0]["extra"].get("overrides", "") or (
            LONG in as_json.stdout
        )
        task = rows[1]["jobkit_id"]
        detail = run_jobkit("status", task, cwd=workdir)
        assert f"tag={LONG}" in detail.stdout  # the detail view: the full text
    finally:
        scancel(ids)


@pytest.mark.slurm
@pytest.mark.timeout(300)
def test_an_empty_squeue_answer_keeps_a_held_job_held(
    workdir: Path, tmp_path: Path, slurm_cluster: object
) -> None:
    """squeue answers nothing (exit 0) for a held job; sacct says PENDING (it records no
    hold). Before, the job became QUEUED; it stays HELD, with its reason."""
    spec = write_spec(
        workdir / "held.yaml",
        {"name": "held", "backend": "slurm", "launch": {"launcher": "srun"},
         "run": {"command": ["true"]}, "scheduler": {"extra": ["--hold"]}},
    )  # fmt: skip
    submitted = run_jobkit("submit", "--json", str(spec), cwd=workdir)
    assert submitted.returncode == 0, submitted.stderr
    job = json.loads(submitted.stdout)
    try:

        def state(env: dict[str, str] | None = None) -> dict[str, object]:
            shown = run_jobkit("status", "--json", job["jobkit_id"], cwd=workdir, env=env)
            assert shown.returncode == 0, shown.stderr
            record: dict[str, object] = json.loads(shown.stdout)[0]
            return record

        wait_for("HELD", lambda: state()["state"] == "HELD", 60)
        silent = executable(tmp_path / "silent" / "squeue", "#!/bin/sh\nexit 0\n").parent
        for _ in range(3):
            record = state({"PATH": path_with(silent)})
            assert (record["state"], record["reason"]) == ("HELD", "JobHeldUser"), record
            assert record["exit_code"] is None, record
        assert state()["state"] == "HELD"
    finally:
        scancel([job["scheduler_id"]])
