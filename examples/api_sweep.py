"""A learning-rate sweep from Python, then a longer run of the best task (docs/api.md).

Each `# %%` block is a notebook cell (VS Code, Jupyter's jupytext); as a script:

    python examples/api_sweep.py                     # on this machine (backend local)
    python examples/api_sweep.py --backend slurm --set resources.partition=debug

It trains the bundled tiny language model briefly with each learning rate, picks the task
whose final val_loss is lowest, and trains that configuration again for longer.
"""

# %%
from __future__ import annotations

import argparse
from typing import Any

import jobkit

LEARNING_RATES = ["1e-2", "3e-3", "1e-3"]
SHORT_STEPS = 20
LONG_STEPS = 60


def sweep_spec(
    backend: str, sets: dict[str, Any], learning_rates: list[str], steps: int
) -> jobkit.Spec:
    """The sweep: one task per learning rate, each evaluated on the validation split at its
    last step (eval.every_steps), so that its metrics end with a val_loss."""
    return jobkit.Spec.from_dict(
        {
            "name": "api-sweep",
            "backend": backend,
            "resources": {"nodes": 1, "time": "00:10:00"},
            "launch": {"nproc_per_node": 1},
            "run": {
                "train": {
                    "config": "tiny-lm",
                    "overrides": {
                        "train.steps": steps,
                        "logging.every_steps": 5,
                        "eval.every_steps": steps,
                        "eval.batches": 4,
                        "checkpoint.every_steps": 0,
                    },
                }
            },
            "sweep": {"grid": {"optim.lr": learning_rates}, "max_parallel": 2},
        },
        set=sets,
    )


def final_val_loss(job: jobkit.Job) -> float:
    """The last val_loss in the task's metrics.jsonl (inf when it has none: it failed)."""
    losses = [float(r["val_loss"]) for r in job.metrics() if "val_loss" in r]
    return losses[-1] if losses else float("inf")


def best_task(sweep: jobkit.Sweep) -> tuple[jobkit.Job, dict[str, Any]]:
    """The succeeded task with the lowest final val_loss, and its overrides."""
    done = [task for task in sweep.tasks if task.state == "SUCCEEDED"]
    if not done:
        raise SystemExit(f"every task of sweep {sweep.id} failed: {sweep}")
    best = min(done, key=final_val_loss)
    return best, sweep.overrides(best)


def main(
    backend: str,
    sets: dict[str, Any],
    *,
    learning_rates: list[str] = LEARNING_RATES,
    short_steps: int = SHORT_STEPS,
    long_steps: int = LONG_STEPS,
) -> jobkit.Job:
    """The sweep, its best task, and the longer run of it (returned, ended)."""
    # %% the sweep, submitted and followed to its end
    spec = sweep_spec(backend, sets, learning_rates, short_steps)
    sweep = jobkit.submit_sweep(spec)
    print(f"sweep {sweep.id}: {len(sweep.tasks)} tasks")
    sweep.wait()
    for task in sweep.tasks:
        print(
            f"  task {task.task} {task.id} {task.state} {sweep.overrides(task)}"
            f" val_loss {final_val_loss(task):.4f}"
        )

    # %% the best task's configuration, trained for longer
    best, overrides = best_task(sweep)
    print(f"best: task {best.task} ({overrides}) val_loss {final_val_loss(best):.4f}")
    longer = spec.with_set(
        {
            "sweep": None,
            "name": "api-sweep-best",
            **{f"run.train.overrides.{key}": value for key, value in overrides.items()},
            "run.train.overrides.train.steps": long_steps,
            "run.train.overrides.eval.every_steps": long_steps,
        }
    )
    job = jobkit.submit(longer).wait()
    print(f"longer run {job.id}: {job.state}, val_loss {final_val_loss(job):.4f}")
    return job


def _arguments() -> tuple[str, dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="local")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    options = parser.parse_args()
    sets = dict(item.split("=", 1) for item in options.set)
    return options.backend, sets


if __name__ == "__main__":
    chosen_backend, chosen_sets = _arguments()
    final = main(chosen_backend, chosen_sets)
    raise SystemExit(0 if final.state == "SUCCEEDED" else 1)
