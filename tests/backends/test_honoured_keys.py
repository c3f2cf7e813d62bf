"""Every spec key, set to a value other than its default, on every backend: it is either
visible in what is submitted (the rendered script without its comments, or the submit
command) or refused in one line naming the job file, the key's line and the key
(backends/honours.py, spec/unsupported.py). Generated from the schema: a new key without a
case here fails `test_every_key_has_a_case`.

Keys jobkit itself acts on after the submission (how "jobkit" in Backend.honours, and
`monitor.stall_after`) are not in the script: they are checked to be kept in the submitted
spec, and their behaviour is tested where it happens (named in JOBKIT_ACTED).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from jobkit.backends.registry import backend_class, builtin_names
from jobkit.core.errors import SpecError
from jobkit.manager.submit import plan_submission
from jobkit.spec.load import load_spec
from jobkit.spec.walk import iter_fields, section_model

Case = tuple[Any, dict[str, Any]]
"""(the non-default value, other keys it needs, set in the baseline too)."""

IMAGE = {"container.image": "/img/a.sif", "container.runtime": "apptainer"}
"""A container's two required keys: the baseline of the container.* cases."""

CASES: dict[str, Case] = {
    "name": ("other", {}),
    "backend": (None, {}),  # the axis of this test
    "profile": (None, {}),  # a layer, tested in tests/spec/test_layering.py
    "cluster": (None, {}),  # where it is submitted: tests/remote/test_speckey.py
    "resources.nodes": (3, {}),
    "resources.max_nodes": (3, {}),
    "resources.gpus_per_node": (1, {}),
    "resources.gpu_type": ("a100", {"resources.gpus_per_node": 1}),
    "resources.tasks_per_node": (None, {}),  # a check only: its one valid value is derived
    "resources.cpus_per_process": (3, {}),
    "resources.cpus_per_task": (3, {}),
    "resources.mem": ("3G", {}),
    "resources.time": ("01:00:00", {}),
    "resources.partition": ("p1", {}),
    "resources.account": ("acc1", {}),
    "resources.qos": ("q1", {}),
    "resources.constraint": ("c1", {}),
    "resources.exclusive": (True, {}),
    "scheduler.array": ("0-3", {}),
    "scheduler.dependency": ("afterok:9", {}),
    "scheduler.mail_user": ("me@example.org", {}),
    "scheduler.mail_type": (["END"], {"scheduler.mail_user": "me@example.org"}),
    "scheduler.requeue": (True, {}),
    "scheduler.max_attempts": (3, {}),
    "scheduler.signal": ("USR2@60", {}),
    "scheduler.extra": (["--foo=bar"], {}),
    "scheduler.pbs_flavor": (None, {}),  # deprecated: pbs.flavor's case
    "scheduler.pbs_spawner": (None, {}),
    "scheduler.exclude_bad_nodes_for": ("1h", {}),
    "env.modules": (["cuda"], {}),
    "env.conda": ("torch", {}),
    "env.venv": ("/opt/venv", {}),
    "env.python": ("system", {}),
    "env.setup": (["echo hi"], {}),
    "env.vars": ({"FOO": "1"}, {}),
    "env.nccl.preset": ("ethernet", {}),
    "env.nccl.socket_ifname": ("eth9", {}),
    "env.nccl.ib_hca": ("mlx5", {}),
    "env.nccl.ib_gid_index": (3, {}),
    "env.nccl.p2p_level": ("NVL", {}),
    "env.nccl.socket_nthreads": (2, {}),
    "env.nccl.nsocks_perthread": (2, {}),
    "env.nccl.vars": ({"NCCL_ALGO": "Ring"}, {}),
    "env.log_level": ("DEBUG", {}),
    "env.debug": (True, {}),
    "launch.launcher": ("distributed-launch", {}),
    "launch.nproc_per_node": (2, {}),
    "launch.master_port": (23456, {}),
    "launch.rdzv": ("static", {}),
    "launch.max_restarts": (2, {}),
    "launch.preflight": (True, {}),
    "launch.rdzv_timeout": (77, {}),
    "launch.extra_args": (["--rdzv-conf=read_timeout=300"], {}),
    "run.train.config": (None, {}),  # the run section is the baseline's own (run.command)
    "run.train.overrides": (None, {}),
    "run.command": (["other-program"], {}),
    "run.python": ("/opt/py/bin/python3", {}),
    "run.workdir": ("sub", {}),
    "ssh.hosts": (["n2"], {}),
    "ssh.user": ("alice", {}),
    "ssh.port": (2222, {}),
    "ssh.identity_file": ("~/.ssh/k", {}),
    "ssh.options": (["Compression=yes"], {}),
    "ssh.fanout": ("pdsh", {}),
    "sge.pe": ("mpi", {}),
    "sge.spawner": ("ssh", {}),
    "sge.gpu_resource": ("gpus", {"resources.gpus_per_node": 1}),
    "pbs.flavor": ("torque", {}),
    "pbs.spawner": ("ssh", {}),
    "monitor.stall_after": ("00:20:00", {}),
    "notify.on": (["end"], {}),
    "notify.webhook": ("https://example.org/hook", {}),
    "notify.email": ("a@example.org", {}),
    "notify.smtp": ("localhost:25", {"notify.email": "a@example.org"}),
    "notify.command": (["notify-send", "x"], {}),
    "notify.from": ("job", {"notify.webhook": "https://example.org/hook"}),
    "container.image": ("/img/b.sif", {**IMAGE, "container.image": "/img/a.sif"}),
    "container.runtime": ("singularity", IMAGE),
    "container.mounts": (["/data:/data:ro"], IMAGE),
    "container.env": ({"HF_HOME": "/data/hf"}, IMAGE),
    "container.options": (["--writable-tmpfs"], IMAGE),
    "logs.dir": ("other-logs", {}),
    "code.snapshot": (False, {}),
    "code.include_untracked": (True, {}),
    "code.max_size": ("1G", {}),
    "sweep.grid": (None, {}),  # sweeps: tests/spec/test_sweep.py, tests/render/test_sweep_*
    "sweep.sets": (None, {}),
    "sweep.max_parallel": (None, {}),
}

JOBKIT_ACTED = {
    "scheduler.max_attempts": "tests/manager/test_attempts.py",
    "scheduler.exclude_bad_nodes_for": "tests/manager/test_badnodes.py",
    "monitor.stall_after": "tests/hang",
    **dict.fromkeys(
        ("notify.on", "notify.webhook", "notify.email", "notify.smtp", "notify.command"),
        "tests/e2e/test_notify.py",
    ),
    "code.snapshot": "tests/provenance/test_frozen_code.py",
    "code.include_untracked": "tests/provenance/test_snapshot.py",
    "code.max_size": "tests/provenance/test_snapshot.py",
}
"""Keys jobkit acts on after the submission, and where that is tested."""

REFUSED_AS = {"resources.max_nodes": "resources.nodes"}
"""max_nodes is the MAX of `nodes: MIN:MAX`: a range is refused naming resources.nodes."""

SECTION_REFUSED = ("container.",)
"""A backend that cannot run the section's container refuses it once, naming the key to
change (container.runtime), not each key given."""

BACKEND_CONTEXT: dict[str, dict[str, Any]] = {
    "ssh": {"ssh.hosts": ["n1"]},
    # A Grid Engine job of more than one slot needs a PE: two hosts make sge.* matter.
    "sge": {"resources.nodes": 2, "sge.pe": "smp"},
    # Two hosts make the spawner matter.
    "pbs": {"resources.nodes": 2},
}
EXTRA_CASES = [
    ("slurm", "launch.rdzv_timeout", 77, {"launch.launcher": "srun"}),
    ("slurm", "launch.max_restarts", 2, {"launch.launcher": "srun"}),
    ("slurm", "launch.rdzv_timeout", 77, {"launch.rdzv": "static"}),
    ("slurm", "launch.rdzv_timeout", 77, {"launch.launcher": "distributed-launch"}),
    ("slurm", "run.python", "/opt/py/bin/python3", {"run.train.config": "mlp"}),
    ("submitit", "run.python", "/opt/py/bin/python3", {"run.train.config": "mlp"}),
    (
        "local",
        "launch.max_restarts",
        2,
        {"launch.launcher": "spawn", "launch.nproc_per_node": 2, "run.train.config": "mlp"},
    ),
    ("pbs", "resources.constraint", "c1", {"pbs.flavor": "torque"}),
    ("pbs", "ssh.user", "alice", {"pbs.spawner": "ssh"}),
    ("sge", "ssh.user", "alice", {"sge.spawner": "ssh"}),
]
"""Cases where the answer depends on another key."""


def _leaf_keys() -> list[str]:
    return [
        ".".join(path)
        for path, field in iter_fields()
        if section_model(field.annotation) is None or field.annotation is dict
    ]


def test_every_key_has_a_case() -> None:
    assert sorted(_leaf_keys()) == sorted(CASES)


def _write(folder: Path, backend: str, flat: dict[str, Any]) -> tuple[Path, dict[str, int]]:
    """The job file, one key a line (so each key's line is known), and key -> line."""
    own_run = any(key in flat for key in ("run.command", "run.train.config"))
    run = {} if own_run else {"run.command": ["prog"]}
    text, lines_of = _as_nested_yaml({"name": "k", "backend": backend, **run, **flat})
    path = folder / "job.yaml"
    path.write_text(text)
    return path, lines_of


def _as_nested_yaml(flat: dict[str, Any]) -> tuple[str, dict[str, int]]:
    """Nested YAML, one leaf per line, and each dotted key's line."""
    out: list[str] = []
    lines_of: dict[str, int] = {}
    opened: list[str] = []
    for key in sorted(flat, key=lambda k: k.split(".")):
        *parents, last = key.split(".")
        common = 0
        while common < min(len(opened), len(parents)) and opened[common] == parents[common]:
            common += 1
        opened = opened[:common]
        for depth in range(common, len(parents)):
            out.append("  " * depth + parents[depth] + ":")
            opened.append(parents[depth])
        value = yaml.safe_dump(flat[key], default_flow_style=True, width=1000).strip()
        value = value.removesuffix("\n...").strip()
        out.append("  " * len(parents) + f"{last}: {value}")
        lines_of[key] = len(out)
    return "\n".join(out) + "\n", lines_of


def _submitted(path: Path, workdir: Path) -> tuple[str, list[str]]:
    """The script without its comment lines (directives kept) and the submit command."""
    plan = plan_submission(load_spec(path, profile_dirs=[]).spec, workdir=workdir)
    kept = [
        line
        for line in plan.script.split("\n")
        if not line.lstrip().startswith("#") or line.startswith(("#SBATCH", "#PBS", "#$"))
    ]
    return "\n".join(kept), plan.argv


def _outcome(tmp: Path, backend: str, key: str, value: Any, context: dict[str, Any]) -> str:
    """'' when the key is honoured visibly or refused naming it; else what went wrong."""
    base = {**BACKEND_CONTEXT.get(backend, {}), **context}
    base_dir, case_dir = tmp / "base", tmp / "case"
    base_dir.mkdir(exist_ok=True)
    case_dir.mkdir(exist_ok=True)
    base_path, _ = _write(base_dir, backend, base)
    case_path, lines = _write(case_dir, backend, {**base, key: value})
    try:
        case = _submitted(case_path, tmp)
    except SpecError as err:
        shown = err.show()
        if key in REFUSED_AS:  # named as the key the range is written with
            ok = shown.startswith(f"{case_path}:") and f": {REFUSED_AS[key]}: " in shown
        elif key.startswith(SECTION_REFUSED):
            section = key.split(".", 1)[0] + "."
            ok = any(
                shown.startswith(f"{case_path}:{line}: {named}: ")
                for named, line in lines.items()
                if named.startswith(section)
            )
        else:
            ok = shown.startswith(f"{case_path}:{lines[key]}: {key}: ")
        return "" if ok else f"refused as {shown!r}"
    if key in JOBKIT_ACTED:
        honours = backend_class(backend).honours.get(key)
        kept = load_spec(case_path, profile_dirs=[]).spec.model_dump(mode="json")
        for part in key.split("."):
            kept = kept[part]
        # monitor.* and notify.* are jobkit's own on every backend (docs/notify.md)
        ok = honours == "jobkit" or key == "monitor.stall_after" or key.startswith("notify.")
        return "" if ok and kept is not None else f"not acted on (honours: {honours})"
    return "" if case != _submitted(base_path, tmp) else "accepted but not visible"


@pytest.mark.parametrize("backend", builtin_names())
def test_each_key_is_honoured_visibly_or_refused(backend: str, tmp_path: Path) -> None:
    wrong = []
    for key, (value, context) in CASES.items():
        if value is None:
            continue
        found = _outcome(tmp_path, backend, key, value, context)
        if found:
            wrong.append(f"{key}: {found}")
    for case_backend, key, value, context in EXTRA_CASES:
        if case_backend == backend:
            found = _outcome(tmp_path, backend, key, value, context)
            if found:
                wrong.append(f"{key} with {context}: {found}")
    assert wrong == []


def test_refusal_is_exactly_one_line_naming_file_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("name: k\nbackend: sge\nresources:\n  mem: 3G\nrun:\n  command: prog\n")
    with pytest.raises(SpecError) as caught:
        load_spec(path, profile_dirs=[])
    assert caught.value.show() == (
        f"{path}:4: resources.mem: the sge backend has no memory request here (add your"
        " site's memory resource, h_vmem or mem_free, through scheduler.extra, or remove"
        " the key)"
    )
    assert caught.value.exit_code == 2


def test_ignore_unsupported_lists_every_ignored_key(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        "name: k\nbackend: local\nresources:\n  mem: 3G\n  partition: gpu\n"
        "  time: '1:00:00'\nrun:\n  command: prog\n"
    )
    loaded = load_spec(path, profile_dirs=[], ignore_unsupported=True)
    assert loaded.notes == (
        f"{path}:4: resources.mem: ignored: the local backend has no memory request here"
        " (remove the key)",
        f"{path}:5: resources.partition: ignored: the local backend has no partition or"
        " queue here (remove the key)",
    )
    assert loaded.spec.resources.time == 3600  # honoured: the launcher keeps it


def test_profile_and_defaults_never_trip_the_refusal(tmp_path: Path) -> None:
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "site.yaml").write_text("resources:\n  partition: gpu\n  account: lab\n")
    path = tmp_path / "job.yaml"
    path.write_text(
        "name: k\nbackend: local\nprofile: site\nresources:\n  exclusive: false\n"
        "scheduler:\n  requeue: false\nrun:\n  command: prog\n"
    )
    loaded = load_spec(path, profile_dirs=[profiles])
    assert loaded.notes == ()
    assert loaded.spec.resources.partition == "gpu"  # kept, and said nothing of: a profile's


def test_deprecated_pbs_keys_still_work_with_a_note(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        "name: k\nbackend: pbs\nscheduler:\n  pbs_flavor: torque\nrun:\n  command: prog\n"
    )
    loaded = load_spec(path, profile_dirs=[])
    assert loaded.spec.pbs.flavor == "torque"
    assert loaded.spec.scheduler.pbs_flavor is None
    assert loaded.notes == (
        f"{path}:4: scheduler.pbs_flavor: deprecated: write pbs.flavor (the old key still works)",
    )
