"""Running a command inside a running Slurm job, on one of its nodes, beside its tasks."""

from __future__ import annotations

from collections.abc import Sequence


def overlap_argv(job_id: str, node: str, argv: Sequence[str]) -> list[str]:
    """`srun --overlap --jobid JOB -w NODE` with one task: it shares the job's allocation
    (and cgroup) instead of waiting for free CPUs, so it runs while the job's steps run."""
    return [
        "srun",
        "--overlap",
        f"--jobid={job_id}",
        f"--nodelist={node}",
        "--nodes=1",
        "--ntasks=1",
        "--quiet",
        *argv,
    ]
