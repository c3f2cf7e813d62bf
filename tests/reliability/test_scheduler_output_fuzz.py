"""Whatever a scheduler prints, a backend answers or raises SchedulerError (issue 22, "the
`internal error` path is for jobkit's own bugs only"; docs/reliability.md).

Every backend's queries (Slurm: sbatch, squeue, sacct, sinfo; PBS: qsub, qstat -f text and
-F json; Grid Engine: qsub -terse, qstat -xml, qstat -j, qacct, qconf) are fed, through the
one runner of scheduler commands (core/proc.run, replaced here), output drawn by hypothesis:
real output (captured from this machine's clusters, tests/cluster/sge-samples and the recorded
PBS Pro JSON) cut, spliced with random text and undecodable bytes (as proc decodes them), lines
dropped or repeated, separators swapped; random text; nothing; with exit codes 0, 1, 2, 255.
Each call of poll, explain_waiting (`jobkit why`), usage (`jobkit report`), find_lost
(adoption), usable_nodes and parse_submit_output must return a sane value (ids it was asked
about, states it knows) or raise SchedulerError: any other exception is a jobkit bug. Then a
hanging command of each backend ends in SchedulerTimeout, and a real `jobkit status` with a
garbage squeue exits 0 or 3, never 70. Derandomized, bounded examples: a few seconds.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobkit.backends.base import Observation, SubmitRequest, TrackedJob
from jobkit.backends.pbs.backend import PbsBackend
from jobkit.backends.sge.backend import SgeBackend
from jobkit.backends.slurm.backend import SlurmBackend
from jobkit.core import proc
from jobkit.core.errors import SchedulerError
from jobkit.core.states import State
from tests.reliability.helpers import executable, path_with, run_jobkit, write_spec

REPO = Path(__file__).resolve().parents[2]
SGE_SAMPLES = REPO / "tests" / "cluster" / "sge-samples"
PBS_PRO_JSON = REPO / "tests" / "backends" / "data" / "pbspro_qstat_f_F_json_x.json"
EXAMPLES = 50
"""Examples per backend query (derandomized: the same ones in every run)."""

SQUEUE = (
    "1102|1102|N/A|PENDING|Resources||0:00|0|\n"
    "1103_0|1103|0|PENDING|JobHeldUser||0:00|0|\n"
    "1103_1|1103|1|RUNNING|None|n1|1:02|0|\n"
    "CLUSTER: main\n"
)
SACCT = (
    "672|672|FAILED|1:0|00:00:11|n2|None||00:03.272\n"
    "672.batch|672.batch|FAILED|1:0|00:00:11|n2|||00:00.097\n"
    "672.0|672.0|FAILED|1:0|00:00:10|n2|||00:03.175\n"
    "1065_[0-1]|1065|CANCELLED by 0|0:0|00:00:00|None assigned|JobHeldUser||00:00:00\n"
    "1103_1|1104|COMPLETED|0:0|1-02:03:04|n[1-2]|None|1234K|01:02:03\n"
)
SINFO = "n1|debug\nn2|debug\nn1|norequeue\n"
TORQUE = (
    "Job Id:\t1102\n\tJob_Name = secret-slurm\n\tJob_Owner = root@localhost\n"
    "\tjob_state = R\n\tqueue = debug\n\texec_host = n1/0+n2/0\n"
    "\tresources_used.walltime = 00:01:02\n\tresources_used.cput = 00:00:30\n"
    "\tresources_used.mem = 1024kb\n\texit_status = 0\n\tsubmit_args = /x/job.sh\n\n"
)


def _sge(name: str) -> str:
    return (SGE_SAMPLES / name).read_text(encoding="utf-8", errors="replace")


def samples(argv: Sequence[str]) -> list[str]:
    """Real output of the command this argv names (several where it has several forms)."""
    name = Path(argv[0]).name
    if name == "squeue":
        return [SQUEUE, "1102|Q|0|\n"]
    if name == "sacct":
        return [SACCT]
    if name == "sinfo":
        return [SINFO]
    if name == "sbatch":
        return ["1234\n", "1234;cluster\n"]
    if name == "qacct":
        return [_sge(f) for f in ("qacct_ok.txt", "qacct_array.txt", "qacct_exit3.txt",
                                  "qacct_deleted.txt", "qacct_pe.txt")]  # fmt: skip
    if name == "qconf":
        return ["n1\nn2\n"]
    if name == "qsub":
        return ["123\n", "123.1-3:1\n", "77.server\n", "78[].server\n"]
    if name == "qstat" and "-xml" in argv:
        return [_sge(f) for f in ("qstat_xml_array.txt", "qstat_xml_running.txt",
                                  "qstat_xml_pending.txt", "qstat_xml_empty.txt")]  # fmt: skip
    if name == "qstat" and "-j" in argv:
        return [_sge("qstat_j_xml_running.txt"), _sge("qstat_j_xml_notfound.txt")]
    if name == "qstat" and "json" in argv:
        return [PBS_PRO_JSON.read_text(encoding="utf-8")]
    return [TORQUE]


@st.composite
def mutated(draw: st.DrawFn, sample: str) -> str:
    """`sample` with a few edits: cut, spliced text or bytes, a line dropped or repeated,
    its separators swapped."""
    text = sample
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(text)))
        edit = draw(st.sampled_from(["cut", "text", "bytes", "drop", "repeat", "separator"]))
        if edit == "cut":
            text = text[:at]
        elif edit == "text":
            text = text[:at] + draw(st.text(max_size=20)) + text[at:]
        elif edit == "bytes":
            noise = draw(st.binary(min_size=1, max_size=12)).decode("utf-8", errors="replace")
            text = text[:at] + noise + text[at:]
        else:
            lines = text.split("\n")
            index = draw(st.integers(0, max(len(lines) - 1, 0)))
            if edit == "drop" and lines:
                del lines[index]
            elif edit == "repeat" and lines:
                lines.insert(index, lines[index])
            else:
                old, new = draw(st.sampled_from([("|", ","), ("|", "||"), (" = ", "="),
                                                 ("<", "&lt;"), (":", ""), ('"', "")]))  # fmt: skip
                lines[index] = lines[index].replace(old, new)
            text = "\n".join(lines)
    return text


def output_of(argv: Sequence[str]) -> st.SearchStrategy[str]:
    """What a command may print: its real output mutated, random text or bytes, nothing."""
    return st.one_of(
        st.sampled_from(samples(argv)).flatmap(mutated),
        st.text(max_size=200),
        st.binary(max_size=200).map(lambda b: b.decode("utf-8", errors="replace")),
        st.just(""),
    )


class Answers:
    """proc.run replaced: each command's answer drawn by hypothesis when it runs."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data
        self.calls = 0

    def run(self, argv: Sequence[str], **kwargs: Any) -> proc.Completed:
        self.calls += 1
        args = [str(a) for a in argv]
        stdout = self.data.draw(output_of(args), label=" ".join(args[:3]))
        stderr = self.data.draw(st.one_of(st.just(""), output_of(args)), label="stderr")
        code = self.data.draw(st.sampled_from([0, 0, 0, 1, 2, 255]), label="exit")
        if kwargs.get("check", True) and code != 0:
            raise SchedulerError(args, code, stdout, stderr)
        return proc.Completed(args, code, stdout, stderr, 0.0)


@pytest.fixture(scope="module")
def command_folders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Grid Engine's and PBS's commands found (never run: proc.run is replaced)."""
    folder = tmp_path_factory.mktemp("bin")
    for name in ("qsub", "qstat", "qdel", "qacct", "qconf"):
        executable(folder / name, "#!/bin/sh\nexit 0\n")
    with mock.patch.dict(
        os.environ, {"JOBKIT_SGE_BIN": str(folder), "JOBKIT_PBS_BIN": str(folder)}
    ):
        yield


def _jobs(tmp_path: Path, ids: Sequence[str], **extra: str) -> list[TrackedJob]:
    return [
        TrackedJob(f"jk{i}", sched, tmp_path, tmp_path, {"run_dir": str(tmp_path / f"r{i}"),
                   "submitted_at": str(int(time.time()) - 100), **extra})
        for i, sched in enumerate(ids)
    ]  # fmt: skip


SLURM_IDS = ["1102", "1103_1", "672", "1065_0"]
SGE_IDS = ["55", "56.2", "57"]
PBS_IDS = ["77.server", "78[1].server", "1102"]


def _cases(tmp_path: Path) -> dict[str, tuple[Any, list[TrackedJob]]]:
    pbs_jobs = _jobs(tmp_path, PBS_IDS[:2], pbs_flavor="pro")
    pbs_jobs += _jobs(tmp_path, PBS_IDS[2:], pbs_flavor="torque")
    slurm_jobs = _jobs(tmp_path, SLURM_IDS)
    slurm_jobs[0].extra["array"] = "0-3"
    return {
        "slurm": (SlurmBackend(), slurm_jobs),
        "sge": (SgeBackend(), _jobs(tmp_path, SGE_IDS)),
        "pbs": (PbsBackend(), pbs_jobs),
    }


def _sane(query: str, answer: Any, jobs: Sequence[TrackedJob]) -> None:
    asked = {job.scheduler_id for job in jobs}
    if query == "parse_submit_output":
        assert isinstance(answer, str) and answer and answer == answer.strip(), answer
        assert "\n" not in answer and answer.isprintable(), answer
        return
    if query == "usable_nodes":
        assert answer is None or all(isinstance(n, str) and n for n in answer), answer
        return
    assert isinstance(answer, dict)
    if query == "find_lost":
        assert set(answer) <= {"tok1", "tok2"} and all(isinstance(v, str) for v in answer.values())
        return
    assert set(answer) <= asked, (set(answer), asked)
    if query == "poll":
        for obs in answer.values():
            assert isinstance(obs, Observation) and isinstance(obs.state, State), obs


QUERIES: dict[str, Callable[[Any, list[TrackedJob]], Any]] = {
    "poll": lambda backend, jobs: backend.poll(jobs),
    "explain_waiting": lambda backend, jobs: backend.explain_waiting(jobs),
    "usage": lambda backend, jobs: backend.usage(jobs),
}


@pytest.mark.usefixtures("command_folders")
@pytest.mark.parametrize("backend_name", ["slurm", "sge", "pbs"])
@pytest.mark.parametrize("query", [*QUERIES, "parse_submit_output", "find_lost", "usable_nodes"])
def test_any_scheduler_output_is_an_answer_or_a_scheduler_error(
    backend_name: str,
    query: str,
    tmp_path: Path,
    tally: Callable[[str, int], None],
) -> None:
    backend, jobs = _cases(tmp_path)[backend_name]
    tried = {"n": 0, "errors": 0}

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=st.data())
    def one(data: st.DataObject) -> None:
        answers = Answers(data)
        tried["n"] += 1
        with mock.patch.object(proc, "run", answers.run):
            try:
                if query == "parse_submit_output":
                    argv = ["sbatch" if backend_name == "slurm" else "qsub"]
                    stdout = data.draw(output_of(argv), label="stdout")
                    answer = backend.parse_submit_output(argv, stdout, "")
                elif query == "find_lost":
                    if backend_name == "pbs":
                        answer = backend.find_lost(_pbs_requests(tmp_path), time.time() - 60)
                    else:
                        answer = backend.find_lost({"tok1": None, "tok2": None}, time.time() - 60)
                elif query == "usable_nodes":
                    answer = _usable_nodes(backend)
                else:
                    answer = QUERIES[query](backend, jobs)
            except SchedulerError as err:
                tried["errors"] += 1
                assert "\n" not in err.show(), err.show()  # one line, also for garbage
                return
        _sane(query, answer, jobs)

    one()
    tally(f"scheduler output fuzz: {backend_name} {query}", tried["n"])


def _pbs_requests(tmp_path: Path) -> dict[str, SubmitRequest | None]:
    """Two lost PBS submissions (Pro and Torque), found by their script's path."""
    from jobkit.spec.schema import JobSpec

    requests: dict[str, SubmitRequest | None] = {}
    for token, flavor in (("tok1", "pro"), ("tok2", "torque")):
        spec = JobSpec.model_validate(
            {"name": "n", "backend": "pbs", "scheduler": {"pbs_flavor": flavor},
             "run": {"command": ["true"]}}
        )  # fmt: skip
        requests[token] = SubmitRequest(
            jobkit_id=token, spec=spec, script="", script_path=Path("/x/job.sh"),
            job_dir=tmp_path, workdir=tmp_path, token=token,
        )  # fmt: skip
    return requests


def _usable_nodes(backend: Any) -> tuple[str, ...] | None:
    from jobkit.spec.schema import JobSpec

    spec = JobSpec.model_validate(
        {"name": "n", "backend": backend.name, "run": {"command": ["true"]}}
    )
    result: tuple[str, ...] | None = backend.usable_nodes(spec)
    return result


# ---- a command that hangs ---------------------------------------------------------------


@pytest.mark.parametrize("backend_name", ["slurm", "sge", "pbs"])
def test_a_hanging_scheduler_command_is_a_timeout(
    backend_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every command of the backend sleeps for a minute: poll gives up after its query
    timeout (lowered to 0.5 s here) with SchedulerTimeout naming the command."""
    folder = tmp_path / "hanging"
    for name in ("squeue", "sacct", "qstat", "qacct", "qconf", "qsub", "qdel"):
        executable(folder / name, "#!/bin/sh\nexec sleep 60\n")
    monkeypatch.setenv("PATH", path_with(folder))
    monkeypatch.setenv("JOBKIT_SGE_BIN", str(folder))
    monkeypatch.setenv("JOBKIT_PBS_BIN", str(folder))
    backend, jobs = _cases(tmp_path)[backend_name]
    backend.query_timeout_s = 0.5
    started = time.monotonic()
    with pytest.raises(proc.SchedulerTimeout) as err:
        backend.poll(jobs)
    assert time.monotonic() - started < 10
    assert "timed out after 0.5 s" in err.value.show()


# ---- the real CLI -------------------------------------------------------------------------


@pytest.mark.slurm
@pytest.mark.parametrize(
    "garbage",
    [
        "",
        "1|2|3\n",
        "\x00\x01\xff\xfe|||||||||\n" * 3,
        "999999999999999999999|x|y|RUNNING|None|n1|99:99:99:99|-1|\n",
    ],
    ids=["empty", "short", "binary", "odd-values"],
)
def test_status_with_a_garbage_squeue_exits_cleanly(
    garbage: str, workdir: Path, tmp_path: Path, slurm_cluster: object
) -> None:
    """A held Slurm job; squeue then prints garbage: `jobkit status` exits 0 or 3 with at
    most one warning line, never an internal error (exit 70)."""
    spec = write_spec(
        workdir / "held.yaml",
        {"name": "held", "backend": "slurm", "launch": {"launcher": "srun"},
         "run": {"command": ["true"]}, "scheduler": {"extra": ["--hold"]}},
    )  # fmt: skip
    submitted = run_jobkit("submit", "--json", str(spec), cwd=workdir)
    assert submitted.returncode == 0, submitted.stderr
    job = json.loads(submitted.stdout)
    data = tmp_path / "garbage.bin"
    data.write_bytes(garbage.encode("latin-1"))
    folder = executable(tmp_path / "bin" / "squeue", f'#!/bin/sh\ncat "{data}"\n').parent
    try:
        for args in (["status", "--all"], ["status", job["jobkit_id"]], ["why", job["jobkit_id"]]):
            done = run_jobkit(*args, cwd=workdir, env={"PATH": path_with(folder)})
            assert done.returncode in (0, 3), (args, done)
            assert "internal error" not in done.stderr and "Traceback" not in done.stderr
            assert len(done.stderr.splitlines()) <= 1, done.stderr
    finally:
        from tests.reliability.helpers import scancel

        scancel([job["scheduler_id"]])
