"""The Slurm backend: sbatch to submit, one squeue (+ at most one sacct) to poll, scancel.

Parsing is done by pure functions (`parse_squeue`, `parse_sacct`) so tests can feed them
output captured from the real cluster.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from jobkit.backends.base import Backend, Observation, SubmitRequest, Submitted, TrackedJob
from jobkit.backends.slurm.states import normalize_slurm_state, slurm_state_word
from jobkit.core import proc
from jobkit.core.errors import JobkitError, SchedulerError, SpecError
from jobkit.core.run_files import read_exit_file
from jobkit.core.states import State

if TYPE_CHECKING:
    from jobkit.spec.schema import JobSpec

SUBMIT_TIMEOUT_S = 120.0
QUERY_TIMEOUT_S = 60.0
_HETJOB_LINE = re.compile(r"^#SBATCH\s+(hetjob|packjob)(\s|$)", re.IGNORECASE)
COMMENT_PREFIX = "jobkit:"

SQUEUE_FIELDS = (
    "JobArrayID",
    "ArrayJobID",
    "ArrayTaskID",
    "State",
    "Reason",
    "NodeList",
    "TimeUsed",
    "RestartCnt",
)
"""Job id (123 or 123_4), array base id, task id, state, reason, nodes, elapsed, requeues."""
SQUEUE_FORMAT = ",".join(f"{name}:|" for name in SQUEUE_FIELDS)
"""`--Format` with `|` after each field and no width, so nothing is cut."""
SACCT_FIELDS = "JobID,JobIDRaw,State,ExitCode,Elapsed,NodeList,Reason,MaxRSS,TotalCPU"
ACCOUNTING_DISABLED = "accounting storage is disabled"

_SBATCH_ID = re.compile(r"^(?P<id>\d+)(?:;(?P<cluster>\S+))?$")
_ARRAY_PENDING = re.compile(r"^\d+_\[")

_FINAL_ORDER = (
    State.OUT_OF_MEMORY,
    State.NODE_FAIL,
    State.TIMEOUT,
    State.FAILED,
    State.CANCELLED,
)
"""Which task state an array reports when its tasks ended differently (worst first)."""


@dataclass(frozen=True)
class SlurmId:
    """A Slurm job id as sbatch printed it: number and optional cluster."""

    job: str
    cluster: str | None = None

    @classmethod
    def parse(cls, text: str) -> SlurmId:
        """`123` or `123;cluster`."""
        job, _, cluster = text.partition(";")
        return cls(job, cluster or None)


def parse_sbatch_output(argv: list[str], stdout: str, stderr: str) -> str:
    """The job id from `sbatch --parsable` output (`123` or `123;cluster`)."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if lines and _SBATCH_ID.match(lines[-1]):
        return lines[-1]
    raise SchedulerError(argv, 0, stdout, stderr, reason="unexpected sbatch output")


def parse_elapsed(text: str) -> float | None:
    """Seconds from Slurm's `[D-][H:]M:S` (squeue %M, sacct Elapsed); None if not a time."""
    text = text.strip()
    days = 0
    if "-" in text:
        head, _, text = text.partition("-")
        if not head.isdigit():
            return None
        days = int(head)
    parts = text.split(":")
    if not parts or not all(p.isdigit() for p in parts) or len(parts) > 3:
        return None
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + int(part)
    return float(days * 86400 + seconds)


def parse_exit_code(text: str) -> tuple[int | None, int | None]:
    """(exit code, signal) from sacct's `code:signal`; zero signal becomes None."""
    code, _, sig = text.strip().partition(":")
    if not code.isdigit():
        return None, None
    signal = int(sig) if sig.isdigit() and int(sig) else None
    return int(code), signal


_RSS = re.compile(r"^(?P<n>\d+(?:\.\d+)?)(?P<unit>[KMGTP]?)$")
_RSS_FACTORS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}


def _rss_bytes(text: str) -> float:
    match = _RSS.match(text.strip())
    if not match:
        return -1.0
    return float(match["n"]) * _RSS_FACTORS[match["unit"]]


def _none_if_blank(text: str) -> str | None:
    value = text.strip()
    return None if value in ("", "None", "(null)", "None assigned", "N/A") else value


@dataclass(frozen=True)
class SqueueRow:
    """One line of `squeue -o SQUEUE_FORMAT`."""

    job_id: str
    base_id: str
    task_id: str | None
    raw_state: str
    reason: str | None
    nodes: str | None
    elapsed_s: float | None
    restarts: int | None


def parse_squeue(stdout: str) -> list[SqueueRow]:
    """Rows of `squeue --noheader --array --Format=SQUEUE_FORMAT`; CLUSTER: lines skipped."""
    rows: list[SqueueRow] = []
    for line in stdout.splitlines():
        if not line.strip() or line.startswith("CLUSTER:"):
            continue
        fields = line.split("|")
        if len(fields) < len(SQUEUE_FIELDS):
            continue
        job_id, base, task, state, reason, nodes, elapsed, restarts = (
            f.strip() for f in fields[: len(SQUEUE_FIELDS)]
        )
        rows.append(
            SqueueRow(
                job_id=job_id,
                base_id=base or job_id.split("_")[0],
                task_id=_none_if_blank(task),
                raw_state=state,
                reason=_none_if_blank(reason),
                nodes=_none_if_blank(nodes),
                elapsed_s=parse_elapsed(elapsed),
                restarts=int(restarts) if restarts.isdigit() else None,
            )
        )
    return rows


@dataclass(frozen=True)
class SacctRun:
    """One allocation line of sacct (one run of one job or array task) with its steps."""

    job_id: str
    base_id: str
    task_id: str | None
    raw_state: str
    exit_code: int | None
    signal: int | None
    elapsed_s: float | None
    nodes: str | None
    reason: str | None
    max_rss: str | None
    cpu_time: str | None
    runs: int
    """How many allocation lines sacct -D showed for this id (1 + requeues)."""


def parse_sacct(stdout: str) -> list[SacctRun]:
    """The latest run of each job / array task in `sacct -n -P -D --format=SACCT_FIELDS`.

    Step lines (`123.batch`, `123_4.0`) add their MaxRSS (the largest is kept);
    earlier runs of a requeued job count in `runs`.
    """
    latest: dict[str, SacctRun] = {}
    runs: dict[str, int] = defaultdict(int)
    rss: dict[str, str] = {}
    order: list[str] = []
    for line in stdout.splitlines():
        if not line.strip() or line.startswith("CLUSTER:"):
            continue
        fields = line.split("|")
        if len(fields) < 9:
            continue
        job_id, _raw, state, exit_text, elapsed, nodes, reason, max_rss, cpu = (
            f.strip() for f in fields[:9]
        )
        alloc_id, dot, _step = job_id.partition(".")
        if dot:
            if _rss_bytes(max_rss) > _rss_bytes(rss.get(alloc_id, "")):
                rss[alloc_id] = max_rss
            continue
        base, _, task = alloc_id.partition("_")
        code, signal = parse_exit_code(exit_text)
        runs[alloc_id] += 1
        if alloc_id not in latest:
            order.append(alloc_id)
        latest[alloc_id] = SacctRun(
            job_id=alloc_id,
            base_id=base,
            task_id=task or None,
            raw_state=state,
            exit_code=code,
            signal=signal,
            elapsed_s=parse_elapsed(elapsed),
            nodes=_none_if_blank(nodes),
            reason=_none_if_blank(reason),
            max_rss=None,
            cpu_time=_none_if_blank(cpu),
            runs=0,
        )
    return [
        replace(latest[key], runs=runs[key], max_rss=_none_if_blank(rss.get(key, "")))
        for key in order
    ]


def _task_observation(
    raw_state: str,
    source: str,
    *,
    exit_code: int | None = None,
    signal: int | None = None,
    reason: str | None = None,
    nodes: str | None = None,
    elapsed_s: float | None = None,
    requeues: int | None = None,
    max_rss: str | None = None,
    cpu_time: str | None = None,
) -> Observation:
    return Observation(
        state=normalize_slurm_state(raw_state, exit_code, reason),
        raw_state=raw_state,
        source=source,
        exit_code=exit_code,
        signal=signal,
        reason=reason,
        nodes=nodes,
        elapsed_s=elapsed_s,
        requeues=requeues,
        max_rss=max_rss,
        cpu_time=cpu_time,
    )


TaskMap = dict[str | None, Observation]
"""A job's tasks by task id (`"4"`, a pending range `"[5-9]"`; None for a plain job)."""


WAIT_REASONS = frozenset({"BeginTime", "Priority", "Resources", "Dependency", "None"})
"""Reasons a job waits in the queue: stale once it runs or ended."""


def _current_reason(word: str, reason: str | None) -> str | None:
    """The reason, unless it is a wait reason of a job no longer waiting (a requeued job
    keeps BeginTime in squeue and sacct after it ran again)."""
    return None if word != "PENDING" and reason in WAIT_REASONS else reason


def squeue_tasks(rows: Sequence[SqueueRow]) -> dict[str, TaskMap]:
    """Per base job id, each task's observation from squeue (COMPLETED means exit 0)."""
    tasks: dict[str, TaskMap] = defaultdict(dict)
    for row in rows:
        word = slurm_state_word(row.raw_state)
        exit_code = 0 if word == "COMPLETED" else None
        tasks[row.base_id][row.task_id] = _task_observation(
            row.raw_state,
            "squeue",
            exit_code=exit_code,
            reason=_current_reason(word, row.reason),
            nodes=row.nodes,
            elapsed_s=row.elapsed_s,
            requeues=row.restarts,
        )
    return dict(tasks)


NO_CODE_STATES = frozenset({"FAILED", "NODE_FAIL", "BOOT_FAIL"})
"""Ends where sacct's ExitCode `0:0` means "no code", not success."""


def sacct_exit_code(run: SacctRun) -> int | None:
    """The run's exit code, or None where sacct's `0:0` is no exit code.

    A failed node (NODE_FAIL, BOOT_FAIL) ended the job, not the program. And when
    slurmdbd was down while a job ran, slurmctld may record it later as FAILED with
    ExitCode 0:0 (the job-start record carries the state, the lost completion record
    the code).
    """
    word = slurm_state_word(run.raw_state)
    if run.exit_code == 0 and not run.signal and word in NO_CODE_STATES:
        return None
    return run.exit_code


def sacct_tasks(runs: Sequence[SacctRun]) -> dict[str, TaskMap]:
    """Per base job id, each task's observation from sacct (latest run of each)."""
    tasks: dict[str, TaskMap] = defaultdict(dict)
    for run in runs:
        tasks[run.base_id][run.task_id] = _task_observation(
            run.raw_state,
            "sacct",
            exit_code=sacct_exit_code(run),
            signal=run.signal,
            reason=_current_reason(slurm_state_word(run.raw_state), run.reason),
            nodes=run.nodes,
            elapsed_s=run.elapsed_s,
            requeues=max(run.runs - 1, 0),
            max_rss=run.max_rss,
            cpu_time=run.cpu_time,
        )
    return dict(tasks)


def _summary(tasks: TaskMap) -> Observation:
    """A plain job's observation, or an array's tasks aggregated."""
    if set(tasks) == {None}:
        return tasks[None]
    return aggregate([obs for key, obs in tasks.items() if key is not None])


def observe_squeue(rows: Sequence[SqueueRow]) -> dict[str, Observation]:
    """One observation per base job id (array tasks aggregated)."""
    return {base: _summary(tasks) for base, tasks in squeue_tasks(rows).items()}


def observe_sacct(runs: Sequence[SacctRun]) -> dict[str, Observation]:
    """One observation per base job id (array tasks aggregated)."""
    return {base: _summary(tasks) for base, tasks in sacct_tasks(runs).items()}


def array_size(spec: str) -> int | None:
    """How many tasks an array spec names: `0-9` 10, `1,3,5` 3, `0-10:2` 6, `0-99%10` 100."""
    total = 0
    for part in spec.split("%", 1)[0].split(","):
        bounds, _, step_text = part.strip().partition(":")
        first, _, last = bounds.partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            return None
        step = int(step_text) if step_text.isdigit() and int(step_text) > 0 else 1
        if step_text and not step_text.isdigit():
            return None
        high = int(last) if last else int(first)
        if high < int(first):
            return None
        total += (high - int(first)) // step + 1
    return total or None


def _task_order(key: str | None) -> tuple[int, int, str]:
    """Tasks by number, pending ranges last: the first failed task gives an array's code."""
    text = key or ""
    return (0, int(text), "") if text.isdigit() else (1, 0, text)


def _task_count(key: str | None) -> int:
    """1 for a task; the size of a pending range `[5-9]`."""
    if key is not None and key.startswith("["):
        return array_size(key.strip("[]")) or 1
    return 1


def array_observation(
    live: TaskMap | None, done: TaskMap | None, expected: int | None
) -> Observation | None:
    """An array job from both sources, task by task (sacct for ended tasks, squeue else).

    Right after the end, sacct may know only the base record (without a task id) and
    squeue may have dropped early tasks: while fewer tasks than the array has are
    accounted for, an all-ended view is reported as still RUNNING, not as final.
    """
    keys = sorted((set(live or {}) | set(done or {})) - {None}, key=_task_order)
    merged = {
        key: obs
        for key in keys
        if (obs := _choose((live or {}).get(key), (done or {}).get(key))) is not None
    }
    if not merged:
        return None
    obs = aggregate(list(merged.values()))
    seen = sum(_task_count(key) for key in merged)
    if expected is not None and seen < expected and obs.state.is_final:
        return replace(
            obs,
            state=State.RUNNING,
            exit_code=None,
            reason=f"{seen} of {expected} tasks reported so far ({obs.reason})",
        )
    return obs


def aggregate(tasks: Sequence[Observation]) -> Observation:
    """One observation for a job array from its tasks' observations."""
    counts: dict[str, int] = defaultdict(int)
    for task in tasks:
        counts[slurm_state_word(task.raw_state)] += 1
    raw = ",".join(f"{word}={n}" for word, n in sorted(counts.items()))
    states = [t.state for t in tasks]
    live = [s for s in states if not s.is_final]
    state: State
    if live:
        for candidate in (State.RUNNING, State.SUSPENDED, State.QUEUED, State.PREEMPTED):
            if candidate in live:
                state = candidate
                break
        else:
            state = State.HELD if all(s is State.HELD for s in live) else live[0]
    elif all(s is State.SUCCEEDED for s in states):
        state = State.SUCCEEDED
    else:
        state = next((s for s in _FINAL_ORDER if s in states), State.UNKNOWN)
    failed_codes = [t.exit_code for t in tasks if t.exit_code]
    all_known = all(t.exit_code is not None for t in tasks)
    exit_code = failed_codes[0] if failed_codes else (0 if all_known and not live else None)
    nodes = sorted({t.nodes for t in tasks if t.nodes})
    elapsed = [t.elapsed_s for t in tasks if t.elapsed_s is not None]
    requeues = [t.requeues for t in tasks if t.requeues is not None]
    return Observation(
        state=state,
        raw_state=f"array[{raw}]",
        source=tasks[0].source,
        exit_code=exit_code,
        signal=next((t.signal for t in tasks if t.signal), None),
        reason=f"{len(tasks)} tasks: {raw}",
        nodes=",".join(nodes) or None,
        elapsed_s=max(elapsed) if elapsed else None,
        requeues=sum(requeues) if requeues else None,
        max_rss=None,
        cpu_time=None,
    )


class SlurmBackend(Backend):
    """Slurm: sbatch / squeue + sacct / scancel."""

    name = "slurm"
    template = "slurm/job.sh.j2"
    launchers = ("torchrun", "srun", "mpirun")

    @classmethod
    def check_script(cls, spec: JobSpec, script: str) -> None:
        """A backslash in logs.dir stops sbatch expanding %j; an #SBATCH line starting with
        the word hetjob (or packjob) splits the job in two."""
        if "\\" in spec.logs.dir:
            raise SpecError(
                "must not contain a backslash with the slurm backend (sbatch then stops"
                " expanding %j in --output)",
                key="logs.dir",
            )
        for number, line in enumerate(script.split("\n"), start=1):
            if _HETJOB_LINE.match(line):
                raise SpecError(
                    f"line {number} of the script ({line!r}) would make a heterogeneous job,"
                    " which jobkit does not support",
                    key="scheduler.extra",
                )

    def submit_argv(self, request: SubmitRequest) -> list[str]:
        """`sbatch --parsable --comment=jobkit:<token> <script>` (the token adopts lost replies)."""
        return [
            "sbatch",
            "--parsable",
            f"--comment={COMMENT_PREFIX}{request.token}",
            str(request.script_path),
        ]

    def submit(self, request: SubmitRequest) -> Submitted:
        """Run sbatch in the submission directory and return the job id and its log paths."""
        _check_submission_dir(request)
        argv = self.submit_argv(request)
        done = proc.run(
            argv,
            timeout=SUBMIT_TIMEOUT_S,
            cwd=request.workdir,
            env={"JOBKIT_ID": request.jobkit_id},
        )
        scheduler_id = parse_sbatch_output(argv, done.stdout, done.stderr)
        return Submitted(
            scheduler_id=scheduler_id,
            argv=argv,
            log_paths=self.log_paths(request, scheduler_id),
            extra=self.submit_extra(request, scheduler_id),
        )

    def log_paths(self, request: SubmitRequest, scheduler_id: str) -> dict[str, str]:
        """`{logs.dir}/{name}-{id}.out/.err` and the run folder; arrays use `{id}_{task}`."""
        spec = request.spec
        job = SlurmId.parse(scheduler_id).job
        stem = f"{spec.name}-{job}_{{task}}" if spec.scheduler.array else f"{spec.name}-{job}"
        logs_dir = (request.workdir / spec.logs.dir).resolve()
        return {
            "out": str(logs_dir / f"{stem}.out"),
            "err": str(logs_dir / f"{stem}.err"),
            "run_dir": str(logs_dir / stem),
        }

    def submit_extra(self, request: SubmitRequest, scheduler_id: str) -> dict[str, str]:
        """Facts kept with the job: the array range and the run folder for the exit file."""
        extra = {"run_dir": self.log_paths(request, scheduler_id)["run_dir"]}
        if request.spec.scheduler.array:
            extra["array"] = request.spec.scheduler.array
        return extra

    # -- polling ----------------------------------------------------------------------------

    def poll(self, jobs: Sequence[TrackedJob]) -> dict[str, Observation]:
        """One squeue for all jobs, then one sacct for those squeue shows ended or not at all."""
        result: dict[str, Observation] = {}
        for cluster, group in _by_cluster(jobs).items():
            result.update(self._poll_cluster(cluster, group))
        return result

    def _poll_cluster(
        self, cluster: str | None, jobs: Sequence[TrackedJob]
    ) -> dict[str, Observation]:
        by_number = {SlurmId.parse(j.scheduler_id).job: j for j in jobs}
        numbers = list(by_number)
        live = squeue_tasks(parse_squeue(self._squeue(numbers, cluster)))
        need_sacct = [n for n, job in by_number.items() if not _settled_live(live.get(n), job)]
        done: dict[str, TaskMap] = {}
        accounting = True
        if need_sacct:
            try:
                done = sacct_tasks(parse_sacct(self._sacct(need_sacct, cluster)))
            except SchedulerError as err:
                if ACCOUNTING_DISABLED not in (err.stderr + err.stdout).lower():
                    raise
                accounting = False
        result: dict[str, Observation] = {}
        for number, job in by_number.items():
            if job.extra.get("array"):
                obs = array_observation(
                    live.get(number), done.get(number), array_size(job.extra["array"])
                )
            else:
                obs = _choose(_plain(live.get(number)), _plain(done.get(number)))
            if not accounting and (obs is None or obs.exit_code is None):
                obs = _exit_file_fallback(obs, job)
            elif obs is not None and obs.state is State.FAILED and obs.exit_code is None:
                obs = _lost_exit_code(obs, job)
            if obs is not None:
                result[job.scheduler_id] = obs
        return result

    def _squeue(self, numbers: Sequence[str], cluster: str | None) -> str:
        argv = ["squeue", "--noheader", "--array", "--states=all"]
        argv += _cluster_args(cluster)
        argv += [f"--jobs={','.join(numbers)}", f"--Format={SQUEUE_FORMAT}"]
        done = proc.run(argv, timeout=QUERY_TIMEOUT_S, check=False)
        if done.returncode != 0:
            if "invalid job id" in done.stderr.lower():
                return ""  # a single id Slurm has forgotten: not an error
            raise SchedulerError(argv, done.returncode, done.stdout, done.stderr)
        return done.stdout

    def _sacct(self, numbers: Sequence[str], cluster: str | None) -> str:
        argv = ["sacct", "--noheader", "--parsable2", "--duplicates"]
        argv += _cluster_args(cluster)
        argv += [f"--jobs={','.join(numbers)}", f"--format={SACCT_FIELDS}"]
        return proc.run(argv, timeout=QUERY_TIMEOUT_S).stdout

    # -- adoption of lost submissions ------------------------------------------------------

    def find_lost(
        self, requests: Mapping[str, SubmitRequest | None], since: float
    ) -> dict[str, str]:
        """Scheduler ids of jobs whose comment carries one of these tokens.

        One squeue of this user's jobs; sacct (from `since`) only for tokens squeue
        did not show. Returns token -> scheduler id.
        """
        wanted = {f"{COMMENT_PREFIX}{t}": t for t in requests}
        found: dict[str, str] = {}
        argv = ["squeue", "--noheader", "--me", "--states=all", "--format=%F|%k"]
        for line in proc.run(argv, timeout=QUERY_TIMEOUT_S).stdout.splitlines():
            job, _, comment = line.partition("|")
            if comment.strip() in wanted:
                found[wanted[comment.strip()]] = job.strip()
        if len(found) < len(wanted):
            found.update(self._find_in_sacct(wanted, found, since))
        return found

    def _find_in_sacct(
        self, wanted: Mapping[str, str], found: Mapping[str, str], since: float
    ) -> dict[str, str]:
        start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since - 60))
        argv = [
            "sacct",
            "--noheader",
            "--parsable2",
            "--allocations",
            f"--starttime={start}",
            "--format=JobIDRaw,JobID,Comment",
        ]
        try:
            stdout = proc.run(argv, timeout=QUERY_TIMEOUT_S).stdout
        except SchedulerError as err:
            if ACCOUNTING_DISABLED in (err.stderr + err.stdout).lower():
                return {}
            raise
        extra: dict[str, str] = {}
        for line in stdout.splitlines():
            fields = line.split("|")
            if len(fields) < 3:
                continue
            token = wanted.get(fields[2].strip())
            if token and token not in found:
                extra[token] = fields[1].split("_")[0].strip()
        return extra

    # -- cancel -----------------------------------------------------------------------------

    def cancel(self, jobs: Sequence[TrackedJob]) -> None:
        """One scancel for all jobs (per cluster)."""
        for cluster, group in _by_cluster(jobs).items():
            numbers = [SlurmId.parse(j.scheduler_id).job for j in group]
            proc.run(["scancel", *_cluster_args(cluster), *numbers], timeout=QUERY_TIMEOUT_S)


def _check_submission_dir(request: SubmitRequest) -> None:
    """sbatch makes a relative --output absolute with the submission directory, then reads
    the whole path as a file-name pattern: a % or a backslash in the directory sends the
    output elsewhere and the job fails. Refuse before anything is submitted."""
    if Path(request.spec.logs.dir).is_absolute():
        return
    folder = str(request.workdir)
    for char in ("%", "\\"):
        if char in folder:
            raise JobkitError(
                f"cannot submit to Slurm from {folder!r}: sbatch would read the {char!r} in"
                " this directory as part of the --output file pattern and the job would fail;"
                " submit from another directory or make logs.dir absolute"
            )


def _cluster_args(cluster: str | None) -> list[str]:
    return [f"--clusters={cluster}"] if cluster else []


def _by_cluster(jobs: Iterable[TrackedJob]) -> dict[str | None, list[TrackedJob]]:
    groups: dict[str | None, list[TrackedJob]] = defaultdict(list)
    for job in jobs:
        groups[SlurmId.parse(job.scheduler_id).cluster].append(job)
    return groups


def _plain(tasks: TaskMap | None) -> Observation | None:
    """A plain job's one observation (None when the source does not know it)."""
    if not tasks:
        return None
    return tasks.get(None) or _summary(tasks)


def _settled_live(tasks: TaskMap | None, job: TrackedJob) -> bool:
    """squeue alone answers: the job is there, not ended, and (arrays) every task is seen."""
    if not tasks:
        return False
    if job.extra.get("array"):
        expected = array_size(job.extra["array"])
        seen = sum(_task_count(key) for key in tasks if key is not None)
        if expected is not None and seen < expected:
            return False
    return not _summary(tasks).state.is_final


def _choose(live: Observation | None, done: Observation | None) -> Observation | None:
    """squeue's answer for a live job; sacct's once it ended (squeue's if sacct lags)."""
    if live is not None and not live.state.is_final:
        return live
    if done is not None and (done.state.is_final or live is None):
        return done
    return live


def _lost_exit_code(obs: Observation, job: TrackedJob) -> Observation:
    """A FAILED job whose exit code accounting lost: the run folder's exit_code file."""
    code = read_exit_file(job.extra.get("run_dir"))
    if not code:
        return obs
    note = "exit code from the run folder (accounting recorded none)"
    return replace(obs, exit_code=code, reason=f"{obs.reason}; {note}" if obs.reason else note)


def _exit_file_fallback(obs: Observation | None, job: TrackedJob) -> Observation | None:
    """Without accounting: the run folder's exit_code file, else UNKNOWN once it left squeue."""
    code = read_exit_file(job.extra.get("run_dir"))
    if obs is not None and obs.state.is_final:
        if code is None:
            return obs
        state = State.SUCCEEDED if code == 0 else State.FAILED
        if obs.state is State.SUCCEEDED or obs.state is State.FAILED:
            return replace(obs, state=state, exit_code=code, source="exit-file")
        return replace(obs, exit_code=code)
    if obs is not None:
        return obs
    if code is not None:
        return Observation(
            state=State.SUCCEEDED if code == 0 else State.FAILED,
            raw_state="",
            source="exit-file",
            exit_code=code,
            reason="left the queue; exit code from the run folder (accounting is disabled)",
        )
    return Observation(
        state=State.UNKNOWN,
        raw_state="",
        source="squeue",
        reason="left the queue; Slurm accounting is disabled, so how it ended is unknown",
    )
