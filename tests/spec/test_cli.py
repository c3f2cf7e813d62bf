"""The CLI shell: version, one place for errors, lazy verbs, render's output rules."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import jobkit
import jobkit.cli
from jobkit.cli.common import SpecArgs
from tests.spec.conftest import CliRunner

ROOT = Path(__file__).resolve().parents[2]
GOOD = "name: demo\nbackend: slurm\nrun:\n  command: python3 train.py\n"
BAD = "name: demo\nbackend: slurm\nresources:\n  nodes: 0\nrun:\n  command: python3 train.py\n"


def python_m_jobkit(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobkit", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=60,
        check=False,
    )


def test_version(cli: CliRunner) -> None:
    result = cli("--version")
    assert (result.code, result.out, result.err) == (0, f"jobkit {jobkit.__version__}\n", "")


def test_python_m_jobkit_renders_the_quickstart() -> None:
    done = python_m_jobkit("render", "examples/quickstart.yaml")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("#!")
    assert done.stderr == ""


def test_console_script_reports_a_bad_spec(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(BAD, encoding="utf-8")
    done = subprocess.run(
        [str(Path(sys.executable).parent / "jobkit"), "render", "job.yaml"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == "jobkit: job.yaml:4: resources.nodes: must be >= 1 (got 0)\n"


def test_render_writes_the_script_to_stdout_only(cli: CliRunner, in_tmp: Path) -> None:
    (in_tmp / "job.yaml").write_text(GOOD, encoding="utf-8")
    result = cli("render", "job.yaml")
    assert result.code == 0
    assert result.err == ""
    assert result.out.startswith("#!")
    assert "#SBATCH --job-name=demo" in result.out
    assert list(in_tmp.iterdir()) == [in_tmp / "job.yaml"]  # render creates nothing


def test_render_output_file(cli: CliRunner, in_tmp: Path) -> None:
    (in_tmp / "job.yaml").write_text(GOOD, encoding="utf-8")
    printed = cli("render", "job.yaml").out
    result = cli("render", "job.yaml", "-o", "job.sh")
    assert (result.code, result.out, result.err) == (0, "", "")
    script = in_tmp / "job.sh"
    assert script.read_text(encoding="utf-8") == printed
    assert stat.S_IMODE(script.stat().st_mode) == 0o700  # it holds env.vars: its owner's only
    assert sorted(path.name for path in in_tmp.iterdir()) == ["job.sh", "job.yaml"]


def test_render_error_leaves_no_output_file(cli: CliRunner, in_tmp: Path) -> None:
    (in_tmp / "job.yaml").write_text(BAD, encoding="utf-8")
    result = cli("render", "job.yaml", "-o", "job.sh")
    assert (result.code, result.out) == (2, "")
    assert list(in_tmp.iterdir()) == [in_tmp / "job.yaml"]


def test_render_error_keeps_an_existing_output_file(cli: CliRunner, in_tmp: Path) -> None:
    (in_tmp / "job.yaml").write_text(BAD, encoding="utf-8")
    (in_tmp / "job.sh").write_text("previous\n", encoding="utf-8")
    assert cli("render", "job.yaml", "-o", "job.sh").code == 2
    assert (in_tmp / "job.sh").read_text(encoding="utf-8") == "previous\n"


def test_render_refuses_to_overwrite_the_spec(cli: CliRunner, in_tmp: Path) -> None:
    (in_tmp / "job.yaml").write_text(GOOD, encoding="utf-8")
    result = cli("render", "job.yaml", "-o", "./job.yaml")
    assert result.err == "jobkit: -o job.yaml: is the job spec itself; choose another file\n"
    assert result.code == 2
    assert (in_tmp / "job.yaml").read_text(encoding="utf-8") == GOOD


def test_render_into_a_missing_folder(cli: CliRunner, in_tmp: Path) -> None:
    (in_tmp / "job.yaml").write_text(GOOD, encoding="utf-8")
    result = cli("render", "job.yaml", "-o", "no/such/job.sh")
    assert result.err == "jobkit: -o no/such/job.sh: cannot write: No such file or directory\n"
    assert result.code == 2


def test_show_command(cli: CliRunner, in_tmp: Path) -> None:
    (in_tmp / "job.yaml").write_text(GOOD, encoding="utf-8")
    result = cli("render", "job.yaml", "--show-command", "-o", "my job.sh")
    assert result.err == "sbatch --parsable '--comment=jobkit:<token>' 'my job.sh'\n"
    result = cli("render", "job.yaml", "--show-command", "--backend", "local")
    assert result.err == "bash SCRIPT\n"
    assert result.out.startswith("#!")


def test_submitit_renders_the_file_submitit_would_submit(cli: CliRunner, in_tmp: Path) -> None:
    """Pure: nothing submitted, no folder made; the token, made at submit time, is marked."""
    result = cli("render", str(ROOT / "examples" / "submitit.yaml"))
    assert result.code == 0, result.err
    assert result.out.startswith("#!/bin/bash\n# submitit's sbatch file for this job")
    assert "#SBATCH --comment=jobkit:SUBMISSION_TOKEN\n" in result.out
    assert "#SBATCH --job-name=submitit-demo\n" in result.out
    folder = in_tmp / "logs" / "submitit-demo-%j"
    assert f"-m submitit.core._submit {folder}\n" in result.out
    assert not (in_tmp / "logs").exists()
    assert cli("render", str(ROOT / "examples" / "submitit.yaml")).out == result.out


def test_usage_error_exits_2(cli: CliRunner) -> None:
    result = cli("render")
    assert result.code == 2
    assert "Missing argument 'SPEC'" in result.err
    assert cli("no-such-verb").code == 2


def test_internal_error_is_one_line(
    cli: CliRunner, in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: SpecArgs) -> None:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(SpecArgs, "load", broken)
    result = cli("render", "job.yaml")
    assert result.code == 70
    assert result.out == ""
    assert result.err == (
        "jobkit: internal error: RuntimeError: boom second line"
        " (rerun with JOBKIT_DEBUG=1 for the traceback)\n"
    )
    monkeypatch.setenv("JOBKIT_DEBUG", "1")
    result = cli("render", "job.yaml")
    assert result.code == 70
    assert "Traceback (most recent call last)" in result.err
    assert result.err.endswith("jobkit: internal error: RuntimeError: boom second line\n")


def test_ctrl_c_exits_130_quietly(cli: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(self: SpecArgs) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(SpecArgs, "load", interrupted)
    result = cli("render", "job.yaml")
    assert (result.code, result.out, result.err) == (130, "", "")


def test_verb_exit_code_is_returned(
    cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A verb may return an int: it becomes the exit code (e.g. submit --wait)."""
    (tmp_path / "fake_verb_answer.py").write_text(
        "import click\n\n\n@click.command()\ndef answer() -> int:\n    return 3\n", "utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(jobkit.cli.VERBS, "answer", "fake_verb_answer")
    assert cli("answer").code == 3


def test_a_missing_verb_module_does_not_break_the_others(
    cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "fake_verb_broken.py").write_text("import no_such_module_here\n", "utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(jobkit.cli.VERBS, "gone", "jobkit.cli.no_such_verb_module")
    monkeypatch.setitem(jobkit.cli.VERBS, "broken", "fake_verb_broken")
    assert cli("--version").code == 0
    help_text = cli("--help")
    assert help_text.code == 0
    assert "render" in help_text.out
    assert "gone" not in help_text.out
    assert re.search(
        r"broken +\(unavailable: No module named 'no_such_module_here'\)", help_text.out
    )
    assert cli("gone").code == 2
    result = cli("render", str(ROOT / "examples" / "quickstart.yaml"))
    assert result.code == 0


def test_version_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from jobkit.cli import run\n"
        "assert run(['--version']) == 0\n"
        "heavy = [m for m in ('pydantic', 'jinja2', 'yaml', 'torch') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.splitlines()[-1] == ""


def test_rendering_every_example_never_imports_torch(tmp_path: Path) -> None:
    """The CLI must not import torch, not even transitively (render of every example)."""
    code = (
        "import sys, glob, json\n"
        "from jobkit.cli import run\n"
        "codes = {path: run(['render', path, '--show-command', '-o', sys.argv[1] + '/job.sh'])"
        " for path in sorted(glob.glob('examples/*.yaml'))}\n"
        "print(json.dumps(codes))\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=True,
    )
    codes_line, torch_line = done.stdout.splitlines()[-2:]
    codes = json.loads(codes_line)
    assert len(codes) >= 8
    assert codes == dict.fromkeys(codes, 0), done.stderr
    assert torch_line == "[]"


def test_render_spec_alone_never_imports_click(tmp_path: Path) -> None:
    """`render SPEC` and nothing else skips click (cli/rendering.py): a cold start-up cost."""
    code = (
        "import sys\n"
        "from jobkit.cli import run\n"
        "code = run(['render', 'examples/quickstart.yaml'])\n"
        "print(code, 'click' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert done.stdout.startswith("#!"), done.stderr
    assert done.stdout.splitlines()[-1] == "0 False"


SPECS_FOR_BOTH_PATHS = {
    "good.yaml": GOOD,
    "bad.yaml": BAD,
    "unicode.yaml": "name: d\u00e9mo\nbackend: slurm\nresources:\n  n\u00f6des: 1\nrun:\n"
    "  command: python3 train.py\n",
    "broken.yaml": "name: [\n",
    "deprecated.yaml": "name: demo\nbackend: pbs\nscheduler:\n  pbs_flavor: torque\n"
    "run:\n  command: python3 train.py\n",
    "note.yaml": GOOD + "resources:\n  cpus_per_task: 4\nlaunch:\n  nproc_per_node: 2\n",
}
"""Each with what `render` of it must give: (exit code, stderr's start)."""
EXPECTED = {
    "good.yaml": (0, ""),
    "bad.yaml": (2, "jobkit: bad.yaml:4: resources.nodes: must be >= 1 (got 0)"),
    "unicode.yaml": (2, "jobkit: unicode.yaml:1: name: must start with a letter"),
    "broken.yaml": (2, "jobkit: broken.yaml:"),
    "deprecated.yaml": (0, "jobkit: deprecated.yaml:4: scheduler.pbs_flavor: deprecated"),
    "note.yaml": (0, "jobkit: note: resources.cpus_per_task 4 is taken per process"),
    "missing.yaml": (2, "jobkit: "),
    "examples": (2, "jobkit: "),
}


@pytest.mark.parametrize("name", [*EXPECTED, "-"])
def test_render_spec_alone_answers_as_the_click_command_does(
    cli: CliRunner, in_tmp: Path, name: str
) -> None:
    """Output, errors and exit code of `render SPEC` (no click) are those of click's
    `render -- SPEC` (the same SPEC, read by click), for good, bad and odd specs."""
    for file_name, text in SPECS_FOR_BOTH_PATHS.items():
        (in_tmp / file_name).write_text(text, encoding="utf-8")
    (in_tmp / "examples").mkdir()
    alone = cli("render", name)
    by_click = cli("render", "--", name)
    assert (alone.code, alone.out, alone.err) == (by_click.code, by_click.out, by_click.err)
    if name in EXPECTED:
        code, err_start = EXPECTED[name]
        assert (alone.code, alone.err[: len(err_start)]) == (code, err_start), alone.err
        assert alone.out.startswith("#!") == (code == 0)
    if name == "unicode.yaml":  # not plain ASCII: written by click.echo itself
        assert "jobkit: unicode.yaml:4: resources.n\u00f6des: unknown key" in alone.err


def test_render_of_every_example_alone_equals_the_click_command(
    cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        alone = cli("render", f"examples/{path.name}")
        by_click = cli("render", "--", f"examples/{path.name}")
        assert alone == by_click, path.name
        assert alone.code == 0, alone.err


@pytest.mark.parametrize(
    "message", ["jobkit: plain\tline", "jobkit: \x1b[31mred\x1b[0m", "jobkit: d\u00e9mo", ""]
)
def test_echo_writes_what_click_echo_writes(
    message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import click

    from jobkit.cli.echo import echo

    for err in (False, True):
        echo(message, err=err)
        ours = capsys.readouterr()
        click.echo(message, err=err)
        assert ours == capsys.readouterr()
    assert "\x1b" not in ours.err  # not a terminal: click's stripping applies to ours too


def test_shell_completion_still_goes_to_click() -> None:
    done = python_m_jobkit(
        "render", "examples/quickstart.yaml", env={"_JOBKIT_COMPLETE": "bash_source"}
    )
    assert done.returncode == 0, done.stderr
    assert "_jobkit_completion()" in done.stdout
    assert not done.stdout.startswith("#!")


def test_output_through_a_symlink_keeps_the_link(cli: CliRunner, in_tmp: Path) -> None:
    (in_tmp / "job.yaml").write_text(GOOD, encoding="utf-8")
    (in_tmp / "real.sh").write_text("old\n", encoding="utf-8")
    (in_tmp / "link.sh").symlink_to("real.sh")
    assert cli("render", "job.yaml", "-o", "link.sh").code == 0
    assert (in_tmp / "link.sh").is_symlink()
    assert (in_tmp / "real.sh").read_text(encoding="utf-8").startswith("#!")


def test_output_to_a_pipe_is_written_not_replaced(cli: CliRunner, in_tmp: Path) -> None:
    """-o /dev/stdout or a FIFO: written in place; the special file itself stays."""
    (in_tmp / "job.yaml").write_text(GOOD, encoding="utf-8")
    fifo = in_tmp / "pipe"
    os.mkfifo(fifo)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text(encoding="utf-8")))
    reader.start()
    result = cli("render", "job.yaml", "-o", "pipe")
    reader.join(timeout=30)
    assert result.code == 0
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert received and received[0].startswith("#!")


def test_render_process_writes_the_whole_script_before_its_quick_exit(tmp_path: Path) -> None:
    """`render` leaves with os._exit: everything it printed must still reach the pipe."""
    from jobkit.render.engine import render
    from jobkit.spec.load import load_spec

    expected = render(load_spec(ROOT / "examples" / "slurm-2node.yaml").spec)
    many_vars = "\n".join(f"    V{index}: value-{index}" for index in range(3000))
    big = GOOD + f"env:\n  vars:\n{many_vars}\n"
    (tmp_path / "big.yaml").write_text(big, encoding="utf-8")
    done = python_m_jobkit("render", "examples/slurm-2node.yaml")
    assert (done.returncode, done.stdout, done.stderr) == (0, expected, "")
    done = python_m_jobkit("render", str(tmp_path / "big.yaml"))
    assert done.returncode == 0, done.stderr
    assert len(done.stdout) > 64 * 1024, "more than a pipe buffer"
    assert done.stdout == render(load_spec(tmp_path / "big.yaml").spec)


def test_render_into_a_closed_pipe_exits_141_quietly() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before render writes anything
    try:
        done = subprocess.run(
            [sys.executable, "-m", "jobkit", "render", "examples/slurm-2node.yaml"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (141, "")


def test_render_error_still_exits_2_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(BAD, encoding="utf-8")
    done = python_m_jobkit("render", str(tmp_path / "job.yaml"))
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and "resources.nodes: must be >= 1" in done.stderr


def test_render_json_has_the_script_the_submit_command_and_the_resolved_spec(
    cli: CliRunner, in_tmp: Path
) -> None:
    """The user's words: "`render` has no `--json`". The script in it is byte for byte what
    `render` prints; the spec is the one submit uses (defaults and --set applied)."""
    (in_tmp / "job.yaml").write_text(GOOD, encoding="utf-8")
    plain = cli("render", "job.yaml", "--set", "resources.nodes=2")
    result = cli("render", "job.yaml", "--set", "resources.nodes=2", "--json")
    assert (result.code, result.err) == (0, ""), result.err
    data = json.loads(result.out)
    assert data["script"] == plain.out
    assert (data["backend"], data["name"], data["spec_file"]) == ("slurm", "demo", "job.yaml")
    assert data["argv"] == ["sbatch", "--parsable", "--comment=jobkit:<token>", "SCRIPT"]
    assert data["spec"]["resources"]["nodes"] == 2
    assert data["spec"]["monitor"]["stall_after"] == 600  # a default, resolved
    assert data["script_file"] is None and data["node_rank"] is None
    written = cli("render", "job.yaml", "--json", "-o", "job.sh")
    assert written.code == 0, written.err
    data = json.loads(written.out)
    assert data["script_file"] == str(in_tmp / "job.sh")
    assert data["argv"][-1] == "job.sh"
    assert (in_tmp / "job.sh").read_text() == data["script"]
