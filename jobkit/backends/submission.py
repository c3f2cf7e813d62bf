"""What a submission hands a backend and what it gets back: After (the job a chain's stage
waits for), SubmitRequest, Submitted."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the schema pulls in pydantic (~0.1 s): not needed to poll or cancel
    from jobkit.spec.schema import JobSpec


@dataclass(frozen=True)
class After:
    """A job this one starts after (a chain's previous stage, docs/chains.md): its scheduler
    id, the condition ("ok": it succeeded, "any": it ended, "fail": it failed) and the facts
    its row keeps (a launcher's pid and run folder: local and ssh wait for it themselves)."""

    scheduler_id: str
    condition: str
    facts: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SubmitRequest:
    """Everything a backend needs to launch one job."""

    jobkit_id: str
    spec: JobSpec
    script: str
    """The rendered script, byte for byte what `jobkit render` prints (empty for submitit)."""
    script_path: Path
    """Where the CLI wrote `script` (inside job_dir)."""
    job_dir: Path
    """jobkit's own folder for this job (under JOBKIT_HOME): script, pid and exit-code files."""
    workdir: Path
    """The submission directory; relative paths in the spec are relative to it."""
    token: str
    """A unique submission token (put in the job's comment so a lost reply can be adopted)."""
    exclude_nodes: tuple[str, ...] = ()
    """Nodes the job must not run on (bad nodes, manager/badnodes.py); honoured where the
    backend's `excludes_nodes` is True."""
    task: str | None = None
    """The sweep task this job is ("0", "1", ...) on a backend whose `sweep_mode` is "each":
    the launcher gets JOBKIT_TASK_ID=<task> (None: not a task of a sweep)."""
    sweep_id: str | None = None
    """The sweep the task belongs to: its tasks share one set of sweep.max_parallel slots
    (backends/slots.py)."""
    after: tuple[After, ...] = ()
    """The jobs this one waits for (`Backend.dependency_args`; docs/chains.md)."""
    keep_broken: bool = False
    """A dependency that can no longer be met leaves the job waiting (jobkit shows it) rather
    than the scheduler cancelling it (Slurm's --kill-on-invalid-dep)."""
    code_dir: Path | None = None
    """The code snapshot's copy of the submit folder, the job's working folder (None: the
    submit folder itself); docs/provenance.md. It travels as JOBKIT_CODE_DIR."""
    provenance_file: Path | None = None
    """The submit side's provenance.json, which the job copies into its run folder
    (JOBKIT_PROVENANCE)."""
    notify_file: Path | None = None
    """`notify.from: job`: the 0600 file the job reads its notify section from
    (JOBKIT_NOTIFY_FILE; notify/jobfile.py)."""

    def code_env(self) -> dict[str, str]:
        """JOBKIT_CODE_DIR, JOBKIT_PROVENANCE and JOBKIT_NOTIFY_FILE for the job's
        environment, empty when there is none (a value inherited from the submitter's own
        environment is never used)."""
        return {
            "JOBKIT_CODE_DIR": str(self.code_dir or ""),
            "JOBKIT_PROVENANCE": str(self.provenance_file or ""),
            "JOBKIT_NOTIFY_FILE": str(self.notify_file or ""),
        }


@dataclass(frozen=True)
class Submitted:
    """What a successful submission returned."""

    scheduler_id: str
    argv: list[str]
    log_paths: dict[str, str] = field(default_factory=dict)
    """Absolute paths: 'out', 'err' (may equal 'out'), 'run_dir' (per-rank logs, checkpoints)."""
    extra: dict[str, str] = field(default_factory=dict)
    """Backend-specific facts to keep (pgid, host list, submitit folder...)."""
