"""Injection, for real: hostile values submitted through `jobkit submit` and run.

- local launcher (templates/ssh run on this machine): one job per string and run variant
  (run.command / run.train), the string in every field the launcher uses. torchrun,
  `module` and `conda` are recording stand-ins on PATH (the launcher, its quoting and the
  shell around them are real): they write down the exact argv, environment and folder
  they got. One more job runs the real torchrun with every string as an argument.
- ssh launcher (real sshd, host n1): the same with the launcher reaching the host by ssh;
  and the ssh.* fields with a recording `ssh` on PATH.
- Slurm: one held job per string with the string in the submission folder, logs.dir and
  mail_user; `scontrol show job` must show them exactly (then the jobs are cancelled).
  One job runs for real through srun with every string as an argument and a variable.

No job may create a canary file: each string that tries to run a command names one.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from jobkit.core.overrides import set_word
from jobkit.registry.store import Store
from tests.plugins.invoke import CliResult
from tests.reliability.helpers import (
    Hostile,
    assert_one_clean_line,
    canaries,
    executable,
    hostile_strings,
    path_with,
    scancel,
    scontrol_show,
    wait_for,
    write_spec,
)
from tests.render.fakes import torchrun_program

pytestmark = pytest.mark.usefixtures("reuse_the_jinja_environment")

Invoke = Callable[..., CliResult]
FINAL = {"SUCCEEDED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "UNKNOWN"}
RECORDER = """#!{python}
import json, os, sys
args = sys.argv[1:]
record = {{"argv": args, "cwd": os.getcwd(), "env": {{k: v for k, v in os.environ.items()
          if k.startswith(("JK_", "NCCL_"))}}, "run_dir": os.environ.get("JOBKIT_RUN_DIR")}}
if {name!r} == "conda" and args[:1] == ["shell.bash"]:
    sys.exit(0)  # the hook: nothing to define
with open(os.path.join(os.environ["JOBKIT_RUN_DIR"], {name!r} + ".jsonl"), "a") as out:
    out.write(json.dumps(record) + "\\n")
"""
ACTIVATE = 'printf "%s" "${BASH_SOURCE[0]}" >"$JOBKIT_RUN_DIR/venv.txt"\n'
PRINT_ARGS = (
    "import json, os, sys; print('JKARGS ' + json.dumps({'argv': sys.argv[1:], 'env':"
    " {k: v for k, v in os.environ.items() if k.startswith('JK_')}}))"
)


def recorders(folder: Path, names: tuple[str, ...]) -> Path:
    """A folder of recording stand-ins (torchrun, module, conda, ssh)."""
    for name in names:
        executable(folder / name, RECORDER.format(python=sys.executable, name=name))
    return folder


def records(run_dir: Path, name: str) -> list[dict[str, Any]]:
    """What the stand-in `name` wrote in a run folder (one dict per call)."""
    path = run_dir / f"{name}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def under(folder: Path, relative: str) -> Path:
    """folder/relative as the shell reads it: an absolute-looking part does not escape."""
    return Path(f"{folder}/{relative}")


def usable_path(text: str) -> bool:
    """Whether `text` can be a folder name part (no NUL, no part over 200 bytes)."""
    return "\x00" not in text and all(len(part.encode()) <= 200 for part in text.split("/"))


@dataclass
class Case:
    """One job: the string, the spec written, and what the stand-ins must have seen."""

    hostile: Hostile
    variant: str
    folder: Path
    spec: dict[str, Any]
    paths: bool
    jobkit_id: str | None = None
    refusal: str | None = None
    checked: list[str] = field(default_factory=list)


def launcher_case(hostile: Hostile, variant: str, folder: Path, backend: str, stubs: Path) -> Case:
    """The spec for one string: every launcher-used field holds it."""
    value = hostile.value
    folder.mkdir(parents=True)
    spec: dict[str, Any] = {"name": "inj", "backend": backend}
    env: dict[str, Any] = {
        "vars": {"JK_VAR": value},
        "nccl": {"socket_ifname": value, "ib_hca": value, "vars": {"NCCL_JK": value}},
    }
    if backend == "local":
        env["modules"] = [value]
        env["conda"] = value
    else:
        spec["ssh"] = {"hosts": ["n1"]}
        env["setup"] = [f"export PATH={stubs}:$PATH"]
    paths = usable_path(value)
    if paths:
        env["venv"] = f"v/{value}"
        activate = under(folder, f"v/{value}/bin/activate")
        activate.parent.mkdir(parents=True, exist_ok=True)
        activate.write_text(ACTIVATE)
        under(folder, f"wd/{value}").mkdir(parents=True, exist_ok=True)
        spec["logs"] = {"dir": f"logs/{value}"}
    spec["env"] = env
    # The recording stand-ins on PATH play python and torchrun: env.python must put no other
    # folder before them (the default, auto, would put jobkit's own environment first).
    env["python"] = "system"
    if variant == "command":
        spec["run"] = {"command": ["jkprog", value, "--", value]}
    else:
        # The trainer's config is checked at submit (jobkit/spec/trainer_check.py): a real config,
        # the value in a text setting of the trainer (logging.dir) and as the interpreter.
        spec["run"] = {
            "train": {"config": "tiny-lm", "overrides": {"logging.dir": value or "x"}},
            "python": value or "jkpy",
        }
    if paths:
        spec["run"]["workdir"] = f"wd/{value}"
    return Case(hostile, variant, folder, spec, paths)


def expected_program(case: Case) -> list[str]:
    """The argv every process must receive."""
    value = case.hostile.value
    if case.variant == "command":
        return ["jkprog", value, "--", value]
    return [
        value or "jkpy",
        "-m",
        "train",
        "--config",
        "tiny-lm",
        "--set",
        set_word("logging.dir", value or "x"),  # text the trainer reads back as the value
    ]


def trainer_refuses(value: str) -> bool:
    """Whether the trainer itself would refuse `--set logging.dir=VALUE` (then `jobkit submit`
    refuses it first): the trainer's own loader is the oracle, as the job would run it."""
    from train.config.load import ConfigError, load_config

    try:
        load_config("tiny-lm", [set_word("logging.dir", value or "x")])
    except ConfigError:
        return True
    return False


def submit_all(jobkit: Invoke, cases: list[Case], monkeypatch: pytest.MonkeyPatch) -> None:
    """`jobkit submit` each case from its own folder; refusals must be one clean line."""
    for case in cases:
        path = write_spec(case.folder / "job.yaml", case.spec)
        monkeypatch.chdir(case.folder)
        result = jobkit("submit", str(path), "--json")
        if result.code == 0:
            case.jobkit_id = json.loads(result.out)["jobkit_id"]
        else:
            assert_one_clean_line(result.err, result.code, allowed=(2,))
            case.refusal = result.err


def wait_final(jobkit: Invoke, ids: list[str], timeout: float = 300) -> dict[str, dict[str, Any]]:
    """Poll `jobkit status --json` until every job is final; their records by id."""
    shown: dict[str, dict[str, Any]] = {}

    def all_final() -> bool:
        result = jobkit("status", "--all", "--json")
        assert result.code == 0, result.err
        shown.update({r["jobkit_id"]: r for r in json.loads(result.out)})
        return all(shown.get(i, {}).get("state") in FINAL for i in ids)

    wait_for(f"{len(ids)} jobs to end", all_final, timeout=timeout, interval=1.0)
    return shown


def tails(record: dict[str, Any]) -> dict[str, str]:
    """The last lines of a job's output files (for failure messages)."""
    found = {}
    paths = record["log_paths"]
    for path in [paths.get("out"), paths.get("err"), f"{paths.get('run_dir')}/node-0.out"]:
        if path and Path(path).is_file():
            found[path] = "\n".join(Path(path).read_text(errors="replace").splitlines()[-8:])
    return {"state": record["state"], "reason": record["reason"], **found}


def check_launcher_case(case: Case, record: dict[str, Any], backend: str) -> None:
    """What the stand-ins saw must be exactly what the spec says."""
    value = case.hostile.value
    label = f"{backend}/{case.variant}/{case.hostile.id}"
    run_dir = Path(record["log_paths"]["run_dir"])
    assert (record["state"], record["exit_code"]) == ("SUCCEEDED", 0), (label, tails(record))
    seen = records(run_dir, "torchrun")
    assert len(seen) == 1, (label, seen)
    argv = seen[0]["argv"]
    assert torchrun_program(argv) == expected_program(case), label
    env = seen[0]["env"]
    assert env["JK_VAR"] == value and env["NCCL_JK"] == value, label
    assert env.get("NCCL_SOCKET_IFNAME") == (value or None), label
    assert env.get("NCCL_IB_HCA") == (value or None), label
    assert os.path.realpath(seen[0]["run_dir"]) == os.path.realpath(run_dir), label
    case.checked += ["argv", "env"]
    if case.paths:
        assert os.path.samefile(seen[0]["cwd"], under(case.folder, f"wd/{value}")), label
        # The script sources the activate script by its absolute path (relative to $PWD).
        sourced = (run_dir / "venv.txt").read_text()
        assert sourced.endswith(f"/v/{value}/bin/activate"), (label, sourced)
        assert os.path.samefile(sourced, under(case.folder, f"v/{value}/bin/activate")), label
        expected_dir = under(case.folder, f"logs/{value}/inj-{record['scheduler_id']}")
        assert os.path.samefile(run_dir, expected_dir), label
        case.checked += ["run.workdir", "env.venv", "logs.dir"]
    if backend == "local":
        assert [r["argv"] for r in records(run_dir, "module")] == [["load", value]], label
        conda = [r["argv"] for r in records(run_dir, "conda")]
        assert conda == ([["activate", value]] if value else []), label
        case.checked += ["env.modules", "env.conda"]


def launcher_cases(
    tmp_path: Path, backend: str, variants: tuple[str, ...], stubs: Path
) -> tuple[list[Case], Path]:
    canary_dir = tmp_path / "canary"
    canary_dir.mkdir()
    cases = [
        launcher_case(h, variant, tmp_path / "jobs" / f"{i}-{variant}", backend, stubs)
        for i, h in enumerate(hostile_strings(canary_dir))
        for variant in variants
    ]
    return cases, canary_dir


def run_launcher_cases(
    jobkit: Invoke,
    cases: list[Case],
    backend: str,
    monkeypatch: pytest.MonkeyPatch,
    batch: int,
) -> dict[str, dict[str, Any]]:
    """Submit in batches (each waited for), return the final records by jobkit id."""
    done: dict[str, dict[str, Any]] = {}
    for start in range(0, len(cases), batch):
        chunk = cases[start : start + batch]
        submit_all(jobkit, chunk, monkeypatch)
        ids = [c.jobkit_id for c in chunk if c.jobkit_id]
        done.update(wait_final(jobkit, ids))
    return done


def test_local_launcher_keeps_every_value_exact(
    jobkit: Invoke,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tally: Callable[[str, int], None],
) -> None:
    stubs = recorders(tmp_path / "stubs", ("torchrun", "module", "conda"))
    monkeypatch.setenv("PATH", path_with(stubs))
    cases, canary_dir = launcher_cases(tmp_path, "local", ("command", "train"), stubs)
    done = run_launcher_cases(jobkit, cases, "local", monkeypatch, batch=80)
    for case in cases:
        if case.jobkit_id:
            check_launcher_case(case, done[case.jobkit_id], "local")
    assert canaries(canary_dir) == []
    ran = [c for c in cases if c.jobkit_id]
    refused = {(c.hostile.id, c.variant) for c in cases if c.refusal}
    unsafe = {"newline", "carriage-return", "nul", "crlf", "backslash-newline"}
    by_trainer = {
        (c.hostile.id, "train")
        for c in cases
        if c.variant == "train" and c.hostile.id not in unsafe and trainer_refuses(c.hostile.value)
    }
    assert refused == {(i, v) for i in unsafe for v in ("command", "train")} | by_trainer
    for case in cases:
        if (case.hostile.id, case.variant) in by_trainer:
            assert case.refusal is not None and "run.train.overrides.logging.dir" in case.refusal
    tally("injection run: local launcher jobs run", len(ran))
    tally("injection run: local launcher values checked", sum(len(c.checked) for c in ran))
    tally("injection run: local launcher specs refused (one line, exit 2)", len(cases) - len(ran))


@pytest.mark.ssh
def test_ssh_launcher_keeps_every_value_exact(
    jobkit: Invoke,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tally: Callable[[str, int], None],
    ssh_hosts: object,
) -> None:
    stubs = recorders(tmp_path / "stubs", ("torchrun",))
    cases, canary_dir = launcher_cases(tmp_path, "ssh", ("command",), stubs)
    done = run_launcher_cases(jobkit, cases, "ssh", monkeypatch, batch=25)
    for case in cases:
        if case.jobkit_id:
            check_launcher_case(case, done[case.jobkit_id], "ssh")
    assert canaries(canary_dir) == []
    ran = [c for c in cases if c.jobkit_id]
    tally("injection run: ssh launcher jobs run over real ssh", len(ran))
    tally("injection run: ssh launcher values checked", sum(len(c.checked) for c in ran))


def test_ssh_options_reach_ssh_as_single_arguments(
    jobkit: Invoke,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tally: Callable[[str, int], None],
) -> None:
    """ssh.user, ssh.identity_file and ssh.options: a recording `ssh` gets each as one word."""
    stubs = recorders(tmp_path / "stubs", ("ssh",))
    monkeypatch.setenv("PATH", path_with(stubs))
    canary_dir = tmp_path / "canary"
    canary_dir.mkdir()
    cases = []
    for i, hostile in enumerate(hostile_strings(canary_dir)):
        folder = tmp_path / "jobs" / str(i)
        folder.mkdir(parents=True)
        ssh = {"hosts": ["n1"], "user": hostile.value, "options": [hostile.value]}
        ssh["identity_file"] = hostile.value
        spec = {
            "name": "inj",
            "backend": "ssh",
            "ssh": ssh,
            "env": {"python": "system"},  # no interpreter to check over ssh before launch
            "run": {"command": ["true"]},
        }
        cases.append(Case(hostile, "ssh-options", folder, spec, paths=False))
    submit_all(jobkit, cases, monkeypatch)
    ids = [c.jobkit_id for c in cases if c.jobkit_id]
    done = wait_final(jobkit, ids)
    home = os.environ["HOME"]
    for case in cases:
        if not case.jobkit_id:
            continue
        value = case.hostile.value
        record = done[case.jobkit_id]
        assert record["state"] == "SUCCEEDED", (case.hostile.id, record)
        calls = [r["argv"] for r in records(Path(record["log_paths"]["run_dir"]), "ssh")]
        assert len(calls) == 1, (case.hostile.id, calls)
        expected = ["-o", "BatchMode=yes", "-o", "ServerAliveInterval=30"]
        if value:
            identity = home + value[1:] if value == "~" or value.startswith("~/") else value
            expected += ["-i", identity, "-l", value]
        expected += ["-o", value, "--", "n1", "bash", "-s"]
        assert calls[0] == expected, case.hostile.id
    assert canaries(canary_dir) == []
    tally("injection run: ssh.* fields through a recording ssh (jobs)", len(ids))


def test_real_torchrun_gets_every_string_as_one_argument(
    jobkit: Invoke, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No stand-in: the local launcher starts the real torchrun, which starts python."""
    monkeypatch.setenv("PATH", path_with(Path(sys.executable).parent))
    canary_dir = workdir / "canary"
    canary_dir.mkdir()
    strings = [h.value for h in hostile_strings(canary_dir) if not set(h.value) & set("\n\r\0")]
    spec = {
        "name": "torchrun-args",
        "run": {"command": [sys.executable, "-c", PRINT_ARGS, *strings]},
        "env": {"vars": {f"JK_{i}": value for i, value in enumerate(strings)}},
    }
    path = write_spec(workdir / "job.yaml", spec)
    result = jobkit("submit", str(path), "--json")
    assert result.code == 0, result.err
    jobkit_id = json.loads(result.out)["jobkit_id"]
    record = wait_final(jobkit, [jobkit_id], timeout=240)[jobkit_id]
    assert record["state"] == "SUCCEEDED", record
    node_out = Path(record["log_paths"]["run_dir"]) / "node-0.out"
    line = next(x for x in node_out.read_text().splitlines() if "JKARGS " in x)
    got = json.loads(line.split("JKARGS ", 1)[1])
    assert got["argv"] == strings
    assert got["env"] == {f"JK_{i}": value for i, value in enumerate(strings)}
    assert canaries(canary_dir) == []


# ---- Slurm ----------------------------------------------------------------------------------


@pytest.fixture
def slurm_jobs() -> Iterator[list[str]]:
    """Slurm job ids to cancel when the test ends, whatever happened."""
    ids: list[str] = []
    yield ids
    scancel(ids)


@pytest.mark.slurm
def test_slurm_shows_folder_logs_and_mail_user_exactly(
    jobkit: Invoke,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    slurm_jobs: list[str],
    tally: Callable[[str, int], None],
) -> None:
    """One held job per string: the submission folder, logs.dir and mail_user hold it."""
    canary_dir = tmp_path / "canary"
    canary_dir.mkdir()
    submitted: list[tuple[Hostile, Path, dict[str, Any], dict[str, Any]]] = []
    refused: list[str] = []
    sent_refusals = 0
    for i, hostile in enumerate(hostile_strings(canary_dir)):
        value = hostile.value
        spec: dict[str, Any] = {
            "name": f"inj-{i}",
            "backend": "slurm",
            "launch": {"launcher": "srun"},
            "run": {"command": ["true"]},
            "scheduler": {"extra": ["--hold"], "mail_user": value, "mail_type": ["END"]},
        }
        folder = tmp_path / "jobs" / str(i)
        if usable_path(value) and value:
            folder = under(folder, value)
            if "\\" not in value:  # sbatch stops expanding %j after a backslash: refused
                spec["logs"] = {"dir": f"logs/{value}"}
        folder.mkdir(parents=True, exist_ok=True)
        folder = folder.resolve()  # what the job's working directory will read
        path = write_spec(folder / "job.yaml", spec)
        monkeypatch.chdir(folder)
        result = jobkit("submit", str(path), "--json")
        if result.code != 0:
            assert_one_clean_line(result.err, result.code)
            refused.append(hostile.id)
            if result.code == 1:  # refused by jobkit's Slurm backend or by sbatch: FAILED
                if "%" in str(folder) or "\\" in str(folder):
                    assert "cannot submit to Slurm from" in result.err, result.err
                else:
                    assert "sbatch: error: Batch job submission failed:" in result.err
                sent_refusals += 1
                with Store() as store:
                    states = [r.state for r in store.list_jobs(recent_final_s=None)]
                assert states.count("FAILED") == sent_refusals, states
            continue
        record = json.loads(result.out)
        slurm_jobs.append(record["scheduler_id"])
        submitted.append((hostile, folder, spec, record))
    checked = 0
    for hostile, folder, spec, record in submitted:
        sched = record["scheduler_id"]
        shown = scontrol_show(sched)
        with Store() as store:
            token = store.get(record["jobkit_id"]).token
        assert shown["JobName"] == spec["name"], hostile.id
        assert shown["Comment"] == f"jobkit:{token}", hostile.id
        assert shown["WorkDir"] == str(folder), hostile.id
        assert shown["MailUser"] == hostile.value, hostile.id
        logs_dir = spec.get("logs", {}).get("dir", "logs").replace("%", "%%")
        # scontrol shows the --output pattern with %j filled in and %% as written
        assert shown["StdOut"] == f"{folder}/{logs_dir}/{spec['name']}-{sched}.out", hostile.id
        assert shown["StdErr"] == f"{folder}/{logs_dir}/{spec['name']}-{sched}.err", hostile.id
        assert shown["JobState"] == "PENDING", hostile.id
        checked += 6
    assert canaries(canary_dir) == []
    control = {"newline", "carriage-return", "nul", "crlf", "backslash-newline"}
    patterns = {h.id for h in hostile_strings(canary_dir) if set(h.value) & set("%\\")}
    # sbatch: "Pathname ... too long"; an empty mail_user beside mail_type is no mail_user
    expected = control | patterns | {"very-long", "empty"}
    assert set(refused) == expected, set(refused) ^ expected
    tally("injection run: held Slurm jobs checked with scontrol", len(submitted))
    tally("injection run: Slurm fields compared with scontrol", checked)


@pytest.mark.slurm
@pytest.mark.timeout(900)  # it may wait for a free node on a shared cluster
def test_slurm_job_runs_with_every_string_exact(
    jobkit: Invoke, workdir: Path, slurm_jobs: list[str]
) -> None:
    """A real Slurm job (srun launcher): every string as an argument and a variable, logs in
    a folder whose name holds quotes, $(...), backticks and a % pattern."""
    canary_dir = workdir / "canary"
    canary_dir.mkdir()
    strings = [h.value for h in hostile_strings(canary_dir) if not set(h.value) & set("\n\r\0")]
    logs_dir = f"logs/a b $(touch {canary_dir}/logs) %j %% 'q' \"d\" `e` ;&|"
    spec = {
        "name": "slurm-args",
        "backend": "slurm",
        "launch": {"launcher": "srun"},
        "logs": {"dir": logs_dir},
        "run": {"command": [sys.executable, "-c", PRINT_ARGS, *strings]},
        "env": {"vars": {f"JK_{i}": value for i, value in enumerate(strings)}},
    }
    path = write_spec(workdir / "job.yaml", spec)
    result = jobkit("submit", str(path), "--json")
    assert result.code == 0, result.err
    record = json.loads(result.out)
    slurm_jobs.append(record["scheduler_id"])
    final = wait_final(jobkit, [record["jobkit_id"]], timeout=720)[record["jobkit_id"]]
    assert (final["state"], final["exit_code"]) == ("SUCCEEDED", 0), final
    out = Path(final["log_paths"]["out"])
    expected_out = workdir / logs_dir / f"slurm-args-{record['scheduler_id']}.out"
    assert out == expected_out and out.exists(), sorted(p.name for p in out.parent.iterdir())
    rank_out = Path(final["log_paths"]["run_dir"]) / "rank-0.out"
    line = next(x for x in rank_out.read_text().splitlines() if x.startswith("JKARGS "))
    got = json.loads(line[len("JKARGS ") :])
    assert got["argv"] == strings
    assert got["env"] == {f"JK_{i}": value for i, value in enumerate(strings)}
    assert canaries(canary_dir) == []
