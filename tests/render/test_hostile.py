"""Hostile values in every string field of the schema (found by walking it, so a new field
cannot be forgotten): each value is either refused with an error naming its key, or reaches
the script only quoted.

Proof by running: the rendered local and ssh launchers, the PBS script (pbsdsh, mpiexec and
ssh spawners) and the Slurm script run here with stand-ins for torchrun, ssh, srun, pbsdsh...
(tests/render/fakes.py). The argv torchrun gets, the environment and working directory of the
program, the words of module/conda/ssh must all come out exactly as given, and no command
hidden in a value may run (a canary file). #SBATCH / #PBS lines are read back with POSIX
shlex (sbatch's own reading of the same quoting is checked on the cluster, test_cluster.py).
"""

from __future__ import annotations

import copy
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from jobkit.core.errors import SpecError
from jobkit.render.engine import render
from jobkit.spec.schema import JobSpec
from tests.render.fakes import FROM_PATH, install_fakes, records, torchrun_program
from tests.render.helpers import bash_syntax_ok, directive_lines, string_fields

HOSTILE = [
    "a'; touch {canary} #",
    "$(touch {canary})",
    "`touch {canary}`",
    "two words",
    "a|touch {canary}",
    "a;touch {canary}",
    "a&touch {canary}&",
    "50% %j %x %%",
    "back\\slash\\",
    'dq"$HOME${PATH}\\"',
    "ünï→code ✓",
    "vt\x0bff\x0cls\u2028nel\x85tab\t",
    "-leading-dash",
    "*",
    "~user",
    "hetjob",
]

JOB_IDS = {"local": "local-1-42", "ssh": "local-1-43", "slurm": "55", "pbs": "123.server"}
DICT_KEYS = {
    ("env", "vars"): "HOSTILE_VAR",
    ("env", "nccl", "vars"): "NCCL_HOSTILE",
    ("run", "train", "overrides"): "hostile.key",
}
RAW_FIELDS = {("env", "setup")}
"""Emitted as written by design (docs/templates.md); checked to appear verbatim."""
COMMAND_FIELDS = {("run", "command")}
"""Exclusive with run.train: tested on its own (test_hostile_command_words)."""
CONTAINER_FIELDS = {("container", "image"), ("container", "mounts"), ("container", "env")}
CONTAINER_FIELDS |= {("container", "options")}
"""Exclusive with env.venv/conda/python: tested on their own (tests/container/test_render.py,
test_hostile_values_stay_one_word)."""

VARIANTS = {
    "local": {"backend": "local"},
    "ssh": {"backend": "ssh", "ssh": {"hosts": ["hostA", "hostB"]}},
    "slurm": {"backend": "slurm"},
    "pbs-pbsdsh": {"backend": "pbs"},
    "pbs-mpiexec": {"backend": "pbs", "scheduler": {"pbs_spawner": "mpiexec"}},
    "pbs-torque-ssh": {
        "backend": "pbs",
        "scheduler": {"pbs_flavor": "torque", "pbs_spawner": "ssh"},
    },
}


def _base(variant: str) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "hostile",
        "resources": {"nodes": 1 if variant == "local" else 2, "gpus_per_node": 1},
        "scheduler": {"mail_user": "x@y"},
        "run": {"train": {"config": "cfg", "overrides": {}}},
    }
    return _merge(data, copy.deepcopy(VARIANTS[variant]))


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
    return base


def _put(data: dict[str, Any], path: tuple[str, ...], kind: str, value: str) -> None:
    target = data
    for part in path[:-1]:
        target = target.setdefault(part, {})
    last = path[-1]
    if kind == "scalar":
        target[last] = value
    elif path == ("ssh", "hosts"):
        target[last] = [value, value]  # as many hosts as resources.nodes
    elif kind == "list":
        target[last] = [value]
    elif kind == "key":
        target.setdefault(last, {})[value] = "v"
    else:
        target.setdefault(last, {})[DICT_KEYS[path]] = value


def _get(data: dict[str, Any], path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


FIELDS = list(string_fields())


def test_schema_walk_finds_the_string_fields() -> None:
    """The walk sees sections, lists and mappings (a broken walk would test nothing)."""
    paths = {path for path, _ in FIELDS}
    assert {("name",), ("env", "vars"), ("run", "command"), ("ssh", "options")} <= paths
    assert (("env", "vars"), "value") in FIELDS and (("env", "vars"), "key") in FIELDS
    assert len(FIELDS) >= 30


def _accepted(value: str) -> list[tuple[tuple[str, ...], str]]:
    """The fields that take `value`; every refusal must name the field."""
    accepted = []
    for path, kind in FIELDS:
        if path in RAW_FIELDS or path in COMMAND_FIELDS or path in CONTAINER_FIELDS:
            continue
        data = _base("slurm")
        _put(data, path, kind, value)
        try:
            JobSpec.model_validate(data)
        except ValidationError as err:
            errors = err.errors()
            assert errors, err
            assert tuple(errors[0]["loc"][: len(path)]) == path, (path, errors[0])
            assert errors[0]["msg"]
            continue
        accepted.append((path, kind))
    return accepted


def _render_errors(variant: str, data: dict[str, Any]) -> list[tuple[tuple[str, ...], str]]:
    """Fields whose value this backend's syntax cannot carry: render must refuse them."""
    refused: list[tuple[tuple[str, ...], str]] = []
    backend = data["backend"]
    logs_dir = _get(data, ("logs", "dir"))
    if backend == "slurm" and logs_dir and "\\" in logs_dir:
        refused.append((("logs", "dir"), "logs.dir"))
    extra = _get(data, ("scheduler", "extra")) if backend in ("slurm", "pbs") else None
    for entry in extra or []:
        try:
            words = shlex.split(entry)
        except ValueError:
            refused.append((("scheduler", "extra"), "scheduler.extra"))
            continue
        if backend == "slurm" and words and words[0].lower() in ("hetjob", "packjob"):
            refused.append((("scheduler", "extra"), "scheduler.extra"))
    mail_types = _get(data, ("scheduler", "mail_type")) or []
    if backend == "pbs" and any(
        t not in ("BEGIN", "END", "FAIL", "ALL", "NONE") for t in mail_types
    ):
        refused.append((("scheduler", "mail_type"), "scheduler.mail_type"))
    return refused


def _drop(data: dict[str, Any], path: tuple[str, ...]) -> None:
    target = _get(data, path[:-1])
    target.pop(path[-1], None)


@pytest.fixture(scope="module")
def fake_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_fakes(tmp_path_factory.mktemp("fakebin"))


def _run(script: str, variant: str, workdir: Path, fake_dir: Path, fake_bin: Path) -> None:
    """Run a rendered script as its backend would start it, with the fakes on PATH."""
    path = workdir.parent / "job.sh"
    path.write_text(script)
    env = {
        "PATH": f"{fake_bin}:{os.environ['PATH']}",
        "HOME": str(workdir.parent),
        "FAKE_DIR": str(fake_dir),
        "JOBKIT_STOP_GRACE_S": "5",
    }
    cwd = workdir
    backend = VARIANTS[variant]["backend"]
    if backend in ("local", "ssh"):
        env["JOBKIT_JOB_ID"] = JOB_IDS[backend]
    elif backend == "slurm":
        env.update(
            SLURM_JOB_ID="55",
            SLURM_JOB_NAME="hostile",
            SLURM_JOB_NODELIST="n[1-2]",
            SLURM_JOB_NUM_NODES="2",
            SLURM_NODEID="0",
        )
    else:
        nodefile = workdir.parent / "nodefile"
        nodefile.write_text("hostA\nhostA\nhostB\n")
        env.update(PBS_JOBID="123.server", PBS_O_WORKDIR=str(workdir), PBS_NODEFILE=str(nodefile))
        cwd = workdir.parent  # PBS starts jobs in $HOME
    done = subprocess.run(
        ["bash", str(path)], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    logs = "\n".join(
        f"--- {p}\n{p.read_text(errors='replace')}" for p in workdir.rglob("*") if p.is_file()
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{logs}"


def _prepare_workdir(workdir: Path, data: dict[str, Any], fake_dir: Path) -> None:
    """What the job expects to find: the venv to activate, run.workdir."""
    workdir.mkdir(parents=True, exist_ok=True)
    venv = _get(data, ("env", "venv"))
    if venv:
        activate = workdir / venv / "bin" / "activate"
        activate.parent.mkdir(parents=True, exist_ok=True)
        record = 'rec=$(mktemp -d "$FAKE_DIR/venv.XXXXXX")'
        activate.write_text(record + '; printf "%s\\0" "${BASH_SOURCE[0]}" >"$rec/argv"\n')
    run_workdir = _get(data, ("run", "workdir"))
    if run_workdir:
        (workdir / run_workdir).mkdir(parents=True, exist_ok=True)
    fake_dir.mkdir(parents=True, exist_ok=True)


def _expected_program(data: dict[str, Any]) -> list[str]:
    train = data["run"]["train"]
    argv = [data["run"].get("python", "python3"), "-m", "train", "--config", train["config"]]
    for key, value in train["overrides"].items():
        argv += ["--set", f"{key}={value}"]
    return argv


def _check_program(data: dict[str, Any], variant: str, workdir: Path, fake_dir: Path) -> None:
    backend = data["backend"]
    calls = records(fake_dir, "torchrun")
    assert len(calls) == (1 if backend in ("local", "slurm") else 2)
    run_workdir = _get(data, ("run", "workdir"))
    cwd = os.path.realpath(workdir / run_workdir) if run_workdir else os.path.realpath(workdir)
    logs_dir = _get(data, ("logs", "dir")) or "logs"
    run_dir = f"{workdir}/{logs_dir}/{data['name']}-{JOB_IDS[backend]}"
    nccl = _get(data, ("env", "nccl")) or {}
    expected_env = dict(_get(data, ("env", "vars")) or {})
    expected_env.update(nccl.get("vars", {}))
    if nccl.get("socket_ifname"):
        expected_env["NCCL_SOCKET_IFNAME"] = nccl["socket_ifname"]
    if nccl.get("ib_hca"):
        expected_env["NCCL_IB_HCA"] = nccl["ib_hca"]
    for call in calls:
        assert torchrun_program(call.argv) == _expected_program(data)
        assert call.cwd == cwd
        assert call.env["JOBKIT_RUN_DIR"] == run_dir
        assert call.env["JOBKIT_JOB_ID"] == JOB_IDS[backend]
        for name, value in expected_env.items():
            assert call.env.get(name) == value, name
    nodes = len(calls)
    modules = _get(data, ("env", "modules"))
    if modules:
        assert [c.argv for c in records(fake_dir, "module")] == [["load", *modules]] * nodes
    conda = _get(data, ("env", "conda"))
    if conda:
        assert [c.argv for c in records(fake_dir, "conda")] == [["activate", conda]] * nodes
    venv = _get(data, ("env", "venv"))
    if venv:
        sourced = [c.argv for c in records(fake_dir, "venv")]
        activate = f"{venv}/bin/activate"  # relative to the submission directory
        if not activate.startswith("/"):
            activate = f"{workdir}/{activate}"
        assert sourced == [[activate]] * nodes


def _check_ssh(data: dict[str, Any], fake_dir: Path) -> None:
    calls = [c.argv for c in records(fake_dir, "ssh")]
    assert calls, "ssh was never called"
    ssh = data.get("ssh", {})
    for argv in calls:
        options = argv[: argv.index("--")]
        pairs = list(zip(options[::2], options[1::2], strict=True))
        if ssh.get("user"):
            assert ("-l", ssh["user"]) in pairs
        if ssh.get("identity_file"):
            assert ("-i", ssh["identity_file"]) in pairs
        for option in ssh.get("options", []):
            assert ("-o", option) in pairs
        assert argv[argv.index("--") + 2 :] == ["bash", "-s"]


def _check_directives(data: dict[str, Any], script: str) -> None:
    backend = data["backend"]
    res, sch = data["resources"], data["scheduler"]
    if backend == "slurm":
        words = [w for line in directive_lines(script, "#SBATCH") for w in line]
        expect = {
            "partition": "--partition={}",
            "account": "--account={}",
            "qos": "--qos={}",
            "constraint": "--constraint={}",
            "gpu_type": "--gres=gpu:{}:1",
        }
        for key, form in expect.items():
            if res.get(key):
                assert form.format(res[key]) in words, key
        for key, form in {"dependency": "--dependency={}", "mail_user": "--mail-user={}"}.items():
            if sch.get(key):
                assert form.format(sch[key]) in words, key
        if sch.get("mail_type"):
            assert f"--mail-type={','.join(sch['mail_type'])}" in words
        logs_dir = _get(data, ("logs", "dir"))
        if logs_dir:
            assert f"--output={logs_dir.replace('%', '%%')}/{data['name']}-%j.out" in words
    else:
        lines = directive_lines(script, "#PBS")
        pairs = [tuple(line) for line in lines]
        if res.get("partition"):
            assert ("-q", res["partition"]) in pairs
        if res.get("account"):
            assert ("-A", res["account"]) in pairs
        if sch.get("dependency"):
            assert ("-W", f"depend={sch['dependency']}") in pairs
        if sch.get("mail_user"):
            assert ("-M", sch["mail_user"]) in pairs
        logs_dir = _get(data, ("logs", "dir"))
        if logs_dir:
            assert ("-o", f"{logs_dir}/") in pairs
        if res.get("constraint") and sch.get("pbs_flavor") == "torque":
            assert ("-l", f"nodes=2:ppn=1:gpus=1:{res['constraint']}") in pairs
    for entry in sch.get("extra", []):
        prefix = "#SBATCH" if backend == "slurm" else "#PBS"
        assert shlex.split(entry) in directive_lines(script, prefix)


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("template", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_values_stay_quoted(
    template: str, variant: str, tmp_path: Path, fake_bin: Path
) -> None:
    canary = tmp_path / "canary"
    value = template.replace("{canary}", str(canary))
    accepted = _accepted(value)
    data = _base(variant)
    for path, kind in accepted:
        _put(data, path, kind, value)
    for path, key in _render_errors(variant, data):
        alone = _base(variant)
        _put(alone, path, "scalar" if path == ("logs", "dir") else "list", value)
        with pytest.raises(SpecError) as caught:
            render(JobSpec.model_validate(alone))
        assert caught.value.key == key
        _drop(data, path)
    spec = JobSpec.model_validate(data)
    script = render(spec, interpreter=FROM_PATH)
    bash_syntax_ok(script)
    workdir = tmp_path / "submit dir"
    fake_dir = tmp_path / "fake"
    _prepare_workdir(workdir, data, fake_dir)
    _run(script, variant, workdir, fake_dir, fake_bin)
    assert not canary.exists(), "a command hidden in a value ran"
    _check_program(data, variant, workdir, fake_dir)
    if variant in ("ssh", "pbs-torque-ssh"):
        _check_ssh(data, fake_dir)
    if data["backend"] in ("slurm", "pbs"):
        _check_directives(data, script)


@pytest.mark.parametrize("variant", ["local", "ssh", "slurm", "pbs-pbsdsh"])
def test_hostile_command_words(variant: str, tmp_path: Path, fake_bin: Path) -> None:
    """run.command: every word, hostile or not, arrives as one argv word."""
    canary = tmp_path / "canary"
    words = [template.replace("{canary}", str(canary)) for template in HOSTILE]
    data = _base(variant)
    data["run"] = {"command": ["prog", *words]}
    script = render(JobSpec.model_validate(data), interpreter=FROM_PATH)
    workdir, fake_dir = tmp_path / "w", tmp_path / "fake"
    _prepare_workdir(workdir, data, fake_dir)
    _run(script, variant, workdir, fake_dir, fake_bin)
    assert not canary.exists()
    calls = records(fake_dir, "torchrun")
    assert calls
    for call in calls:
        assert torchrun_program(call.argv) == ["prog", *words]


def test_setup_lines_are_emitted_verbatim() -> None:
    """env.setup is the one raw field: its lines are shell code, as documented."""
    line = 'export X="$(hostname)"; echo "$X" | tee -a setup.log'
    for backend in ("local", "slurm", "pbs"):
        data = _base("local" if backend == "local" else "slurm")
        data["backend"] = backend
        data["env"] = {"setup": [line]}
        assert f"\n{line}\n" in render(JobSpec.model_validate(data)).replace("\n  ", "\n")


def test_every_string_field_is_covered() -> None:
    """Fields handled apart from the main test are exactly the raw and command fields."""
    paths = {path for path, _ in FIELDS}
    assert paths >= RAW_FIELDS | COMMAND_FIELDS
