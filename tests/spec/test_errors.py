"""Every kind of bad spec gives exactly one line on stderr naming file, line and key; exit 2.

Each case runs the real CLI (`jobkit render job.yaml ...`) and checks the whole line.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.spec.conftest import CliRunner

OK_RUN = "run:\n  command: python3 train.py\n"


def spec(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


CASES: list[tuple[str, str, tuple[str, ...], str]] = [
    # (test id, job.yaml, extra CLI arguments, the expected stderr line)
    (
        "int-wrong-type",
        spec("""
            name: demo
            resources:
              nodes: abc
            """)
        + OK_RUN,
        (),
        "job.yaml:3: resources.nodes: must be an integer (got 'abc')",
    ),
    (
        "bool-wrong-type",
        spec("""
            name: demo
            resources:
              exclusive: maybe
            """)
        + OK_RUN,
        (),
        "job.yaml:3: resources.exclusive: must be true or false (got 'maybe')",
    ),
    (
        "string-got-list",
        spec("""
            name: demo
            resources:
              partition: [a, b]
            """)
        + OK_RUN,
        (),
        "job.yaml:3: resources.partition: must be a string (got a list)",
    ),
    (
        "section-got-scalar",
        spec("""
            name: demo
            resources: 4
            """)
        + OK_RUN,
        (),
        "job.yaml:2: resources: must be a mapping (got 4)",
    ),
    (
        "unknown-top-key-suggests",
        spec("""
            name: demo
            resourcez:
              nodes: 1
            """)
        + OK_RUN,
        (),
        "job.yaml:2: resourcez: unknown key (did you mean 'resources'?)",
    ),
    (
        "unknown-nested-key-suggests",
        spec("""
            name: demo
            resources:
              gpus: 2
            """)
        + OK_RUN,
        (),
        "job.yaml:3: resources.gpus: unknown key (did you mean 'gpus_per_node'?)",
    ),
    (
        "unknown-key-lists-valid-keys",
        spec("""
            name: demo
            logs:
              colour: red
            """)
        + OK_RUN,
        (),
        "job.yaml:3: logs.colour: unknown key (valid keys: dir)",
    ),
    (
        "nodes-zero",
        spec("""
            name: demo
            backend: slurm
            resources:
              nodes: 0
            """)
        + OK_RUN,
        (),
        "job.yaml:4: resources.nodes: must be >= 1 (got 0)",
    ),
    (
        "gpus-too-many",
        spec("""
            name: demo
            resources:
              gpus_per_node: 65
            """)
        + OK_RUN,
        (),
        "job.yaml:3: resources.gpus_per_node: must be <= 64 (got 65)",
    ),
    (
        "bad-time",
        spec("""
            name: demo
            resources:
              time: 25h
            """)
        + OK_RUN,
        (),
        "job.yaml:3: resources.time: must be minutes, HH:MM:SS or D-HH:MM:SS (got '25h')",
    ),
    (
        "bad-mem",
        spec("""
            name: demo
            resources:
              mem: 12X
            """)
        + OK_RUN,
        (),
        "job.yaml:3: resources.mem: must be a size like 32G or 500M (got '12X')",
    ),
    (
        "newline-in-name",
        'name: "two\\nlines"\n' + OK_RUN,
        (),
        "job.yaml:1: name: must start with a letter or digit and hold only letters, digits"
        " and . _ + - (at most 128 characters; got 'two\\nlines')",
    ),
    (
        "newline-in-value",
        spec("""
            name: demo
            resources:
              partition: "gpu\\n#SBATCH --uid=0"
            """)
        + OK_RUN,
        (),
        "job.yaml:3: resources.partition: must not contain a newline (it would end the script"
        " line)",
    ),
    (
        "carriage-return-in-command",
        'name: demo\nrun:\n  command: ["python3", "a\\rb"]\n',
        (),
        "job.yaml:3: run.command[1]: must not contain a carriage return (it would end the"
        " script line)",
    ),
    (
        "nul-in-value",
        spec("""
            name: demo
            env:
              venv: "/opt/env\\0x"
            """)
        + OK_RUN,
        (),
        "job.yaml:3: env.venv: must not contain a NUL (it would end the script line)",
    ),
    (
        "duplicate-key",
        spec("""
            name: demo
            resources:
              nodes: 1
              gpus_per_node: 0
              nodes: 2
            """)
        + OK_RUN,
        (),
        "job.yaml:5: resources.nodes: duplicate key",
    ),
    (
        "invalid-yaml",
        "name: demo\nresources:\n  nodes: 1\n   gpus_per_node: 2\n" + OK_RUN,
        (),
        "job.yaml:4: invalid YAML: mapping values are not allowed here",
    ),
    (
        "invalid-yaml-tab",
        "name: demo\n\tnodes: 1\n",
        (),
        "job.yaml:2: invalid YAML: found character '\\t' that cannot start any token",
    ),
    (
        "empty-file",
        "",
        (),
        "job.yaml: is empty: expected a mapping such as `name: ...` and `run: ...`",
    ),
    (
        "only-comments",
        "# nothing here yet\n",
        (),
        "job.yaml: is empty: expected a mapping such as `name: ...` and `run: ...`",
    ),
    (
        "top-level-list",
        "- name: demo\n",
        (),
        "job.yaml:1: the top level must be a mapping of keys (got a list)",
    ),
    (
        "missing-run",
        "name: demo\n",
        (),
        "job.yaml: run: is required",
    ),
    (
        "missing-name",
        OK_RUN,
        (),
        "job.yaml: name: is required",
    ),
    (
        "missing-train-config",
        "name: demo\nrun:\n  train:\n    overrides: {train.steps: 5}\n",
        (),
        "job.yaml:3: run.train.config: is required",
    ),
    (
        "both-train-and-command",
        spec("""
            name: demo
            run:
              train:
                config: tiny-lm
              command: python3 mine.py
            """),
        (),
        "job.yaml:5: run.command: give exactly one of run.train or run.command (got both)",
    ),
    (
        "neither-train-nor-command",
        "name: demo\nrun:\n  python: python3.11\n",
        (),
        "job.yaml:2: run: give exactly one of run.train or run.command (got neither)",
    ),
    (
        "empty-command",
        'name: demo\nrun:\n  command: ""\n',
        (),
        "job.yaml:3: run.command: must not be empty",
    ),
    (
        "unbalanced-quote-in-command",
        "name: demo\nrun:\n  command: python3 'unclosed\n",
        (),
        "job.yaml:3: run.command: cannot be split into arguments: No closing quotation",
    ),
    (
        "ssh-without-hosts",
        "name: demo\nbackend: ssh\n" + OK_RUN,
        (),
        "job.yaml: ssh.hosts: the ssh backend needs at least one host",
    ),
    (
        "nodes-not-number-of-hosts",
        spec("""
            name: demo
            backend: ssh
            resources:
              nodes: 3
            ssh:
              hosts: [n1, n2]
            """)
        + OK_RUN,
        (),
        "job.yaml:4: resources.nodes: must equal the number of ssh.hosts (2: n1, n2; got 3): one"
        " node per host; leave resources.nodes out and it follows ssh.hosts",
    ),
    (
        "bad-host-name",
        "name: demo\nbackend: ssh\nssh:\n  hosts:\n    - n1\n    - 'n2;reboot'\n" + OK_RUN,
        (),
        "job.yaml:6: ssh.hosts[1]: is not a host name: 'n2;reboot'",
    ),
    (
        "percent-in-a-submitit-folder",
        "name: demo\nbackend: submitit\nlogs:\n  dir: runs/100%\n" + OK_RUN,
        (),
        "job.yaml:4: logs.dir: must not contain % with the submitit backend (submitit reads %j,"
        " %t... in its folder; got 'runs/100%')",
    ),
    (
        "local-with-two-nodes",
        "name: demo\nresources:\n  nodes: 2\n" + OK_RUN,
        (),
        "job.yaml:3: resources.nodes: the local backend runs on one node (got 2)",
    ),
    (
        "torchrun-two-tasks-per-node",
        spec("""
            name: demo
            backend: slurm
            resources:
              tasks_per_node: 2
            """)
        + OK_RUN,
        (),
        "job.yaml:4: resources.tasks_per_node: must be 1 with launcher torchrun (one torchrun per"
        " node starts the processes; several would each claim every GPU; got 2)",
    ),
    (
        "nproc-above-gpus",
        spec("""
            name: demo
            backend: slurm
            resources:
              gpus_per_node: 2
            launch:
              nproc_per_node: 4
            """)
        + OK_RUN,
        (),
        "job.yaml:6: launch.nproc_per_node: must not exceed resources.gpus_per_node (2) on a GPU"
        " job (got 4)",
    ),
    (
        "nproc-not-int-or-auto",
        "name: demo\nlaunch:\n  nproc_per_node: many\n" + OK_RUN,
        (),
        "job.yaml:3: launch.nproc_per_node: must be an integer or 'auto' (got 'many')",
    ),
    (
        "nproc-zero",
        "name: demo\nlaunch:\n  nproc_per_node: 0\n" + OK_RUN,
        (),
        "job.yaml:3: launch.nproc_per_node: must be between 1 and 1024 (got 0)",
    ),
    (
        "srun-on-local",
        "name: demo\nlaunch:\n  launcher: srun\n" + OK_RUN,
        (),
        "job.yaml:3: launch.launcher: srun needs the slurm or submitit backend (backend is local)",
    ),
    (
        "unknown-backend",
        "name: demo\nbackend: lsf\n" + OK_RUN,
        (),
        "job.yaml:2: backend: must be one of: local, slurm, pbs, sge, ssh, submitit (got 'lsf')",
    ),
    (
        "unknown-backend-option",
        "name: demo\n" + OK_RUN,
        ("--backend", "lsf"),
        "--backend lsf: backend: must be one of: local, slurm, pbs, sge, ssh, submitit (got 'lsf')",
    ),
    (
        "bad-signal",
        "name: demo\nbackend: slurm\nscheduler:\n  signal: USR2\n" + OK_RUN,
        (),
        "job.yaml:4: scheduler.signal: must look like USR2@120 (signal@seconds before the end;"
        " got 'USR2')",
    ),
    (
        "bad-array",
        "name: demo\nbackend: slurm\nscheduler:\n  array: 1-\n" + OK_RUN,
        (),
        "job.yaml:4: scheduler.array: must look like 0-9, 1,3,5 or 0-99%10 (got '1-')",
    ),
    (
        "bad-literal-nested",
        "name: demo\nbackend: pbs\nscheduler:\n  pbs_flavor: openpbs\n" + OK_RUN,
        (),
        "job.yaml:4: scheduler.pbs_flavor: must be one of: pro, torque (got 'openpbs')",
    ),
    (
        "mail-type-without-user",
        "name: demo\nbackend: slurm\nscheduler:\n  mail_type: [END]\n" + OK_RUN,
        (),
        "job.yaml:3: scheduler.mail_user: is needed when scheduler.mail_type is set",
    ),
    (
        "bad-env-var-name",
        "name: demo\nenv:\n  vars:\n    1ST: x\n" + OK_RUN,
        (),
        "job.yaml:4: env.vars.1ST: is not a valid environment variable name: '1ST'",
    ),
    (
        "env-var-value-list",
        "name: demo\nenv:\n  vars:\n    OMP_NUM_THREADS: [1]\n" + OK_RUN,
        (),
        "job.yaml:4: env.vars.OMP_NUM_THREADS: must be a string, a number or true/false (got a"
        " list)",
    ),
    (
        "bad-nccl-preset-shorthand",
        "name: demo\nenv:\n  nccl: myrinet\n" + OK_RUN,
        (),
        "job.yaml:3: env.nccl.preset: must be one of: auto, ethernet, infiniband (got 'myrinet')",
    ),
    (
        "template-dir-in-job-file",
        "name: demo\ntemplate_dir: mine\n" + OK_RUN,
        (),
        "job.yaml:2: template_dir: only a site profile may set this (use --template-dir)",
    ),
    (
        "template-dir-set",
        "name: demo\n" + OK_RUN,
        ("--set", "template_dir=mine"),
        "--set template_dir=mine: template_dir: only a site profile may set this (use"
        " --template-dir)",
    ),
    (
        "every-error-in-file-order",
        spec("""
            name: demo
            launch:
              nproc_per_node: x
            resources:
              nodes: 0
            """)
        + OK_RUN,
        (),
        "job.yaml:3: launch.nproc_per_node: must be an integer or 'auto' (got 'x')\n"
        "jobkit: job.yaml:5: resources.nodes: must be >= 1 (got 0)",
    ),
    (
        "set-without-equals",
        "name: demo\n" + OK_RUN,
        ("--set", "resources.nodes"),
        "--set resources.nodes: expected KEY=VALUE, e.g. --set resources.nodes=2",
    ),
    (
        "set-empty-key-part",
        "name: demo\n" + OK_RUN,
        ("--set", "resources..nodes=2"),
        "--set resources..nodes=2: 'resources..nodes' is not a key path like resources.nodes",
    ),
    (
        "set-unknown-key",
        "name: demo\n" + OK_RUN,
        ("--set", "resourcez.nodes=2"),
        "--set resourcez.nodes=2: resourcez: unknown key (did you mean 'resources'?)",
    ),
    (
        "set-bad-value",
        "name: demo\nbackend: slurm\n" + OK_RUN,
        ("--set", "resources.nodes=0"),
        "--set resources.nodes=0: resources.nodes: must be >= 1 (got 0)",
    ),
    (
        "set-invalid-yaml-value",
        "name: demo\n" + OK_RUN,
        ("--set", "env.modules=[cuda"),
        "--set env.modules=[cuda: env.modules: invalid YAML: expected ',' or ']', but got"
        " '<stream end>'",
    ),
    (
        "set-into-a-value",
        "name: demo\n" + OK_RUN,
        ("--set", "resources.nodes.max=2"),
        "--set resources.nodes.max=2: resources.nodes.max: resources.nodes holds a value, not keys",
    ),
]


@pytest.mark.parametrize(
    ("text", "args", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_bad_spec_is_one_line(
    cli: CliRunner, in_tmp: Path, text: str, args: tuple[str, ...], expected: str
) -> None:
    (in_tmp / "job.yaml").write_text(text, encoding="utf-8")
    result = cli("render", "job.yaml", *args)
    assert result.code == 2
    assert result.out == ""
    assert result.err == f"jobkit: {expected}\n"


def test_every_schema_error_is_reported_at_once(cli: CliRunner, in_tmp: Path) -> None:
    """The user's words: "spec validation reports only its first schema error". Each error
    is its own `file:line: key: message` line, in file order; `jobkit check` lists the same."""
    (in_tmp / "job.yaml").write_text(
        spec("""
            name: bad job
            resources:
              nodes: 0
              gpus_per_node: many
              tme: "01:00:00"
            launch:
              nproc_per_node: -1
            """)
        + OK_RUN,
        encoding="utf-8",
    )
    expected = [
        "job.yaml:1: name: must start with a letter or digit and hold only letters, digits and"
        " . _ + - (at most 128 characters; got 'bad job')",
        "job.yaml:3: resources.nodes: must be >= 1 (got 0)",
        "job.yaml:4: resources.gpus_per_node: must be an integer (got 'many')",
        "job.yaml:5: resources.tme: unknown key (did you mean 'time'?)",
        "job.yaml:7: launch.nproc_per_node: must be between 1 and 1024 (got -1)",
    ]
    result = cli("render", "job.yaml")
    assert (result.code, result.out) == (2, "")
    assert result.err.splitlines() == [f"jobkit: {line}" for line in expected]
    checked = cli("check", "job.yaml")
    assert checked.code != 0
    assert [line for line in expected if line in checked.out + checked.err] == expected


def test_at_least_25_cases() -> None:
    assert len(CASES) >= 25
    assert len({case[0] for case in CASES}) == len(CASES)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"\x7fELF\x02\x01\x01\x00\x00\x00", "job.yaml: is a binary file, not YAML text"),
        (b"name: caf\xe9\n", "job.yaml:1: is not UTF-8 text (byte 0xe9 at offset 9)"),
        (
            b"name: demo\nrun: \x07\n",
            "job.yaml:2: invalid YAML: unacceptable character #x0007 (special characters are not"
            " allowed)",
        ),
    ],
    ids=["binary", "latin-1", "control-character"],
)
def test_undecodable_file(cli: CliRunner, in_tmp: Path, content: bytes, expected: str) -> None:
    (in_tmp / "job.yaml").write_bytes(content)
    result = cli("render", "job.yaml")
    assert (result.code, result.out, result.err) == (2, "", f"jobkit: {expected}\n")


def test_missing_file(cli: CliRunner, in_tmp: Path) -> None:
    result = cli("render", "nope.yaml")
    assert (result.code, result.out, result.err) == (2, "", "jobkit: nope.yaml: no such file\n")


def test_directory_instead_of_file(cli: CliRunner, in_tmp: Path) -> None:
    (in_tmp / "dir.yaml").mkdir()
    result = cli("render", "dir.yaml")
    assert result.err == "jobkit: dir.yaml: is a directory, not a YAML file\n"
    assert result.code == 2


def test_alias_bomb_is_refused(cli: CliRunner, in_tmp: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 7)]
    (in_tmp / "job.yaml").write_text("\n".join(lines) + "\nname: demo\n", encoding="utf-8")
    result = cli("render", "job.yaml")
    assert result.code == 2
    assert "too many values" in result.err
    assert result.err.count("\n") == 1


def test_errors_never_show_a_traceback(cli: CliRunner, in_tmp: Path) -> None:
    for _, text, args, expected in CASES:
        (in_tmp / "job.yaml").write_text(text, encoding="utf-8")
        result = cli("render", "job.yaml", *args)
        assert "Traceback" not in result.err
        assert result.err.count("\n") == expected.count("\n") + 1  # one line per error
