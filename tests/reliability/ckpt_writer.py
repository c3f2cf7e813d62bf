"""A checkpoint writer to kill: imports torch once, then serves one command per stdin line.

    start DIR KEEP   fork a writer: it resumes from DIR's newest valid checkpoint (as the
                     trainer does: stale temp files removed, find_latest_valid), then saves
                     a checkpoint per step with train/resume/checkpoint.py (save_atomic, then
                     prune to KEEP) for ever, appending each saved step to DIR/progress
                     (first the step it resumed from, which is saved).
                     Prints the writer's pid.
    reap PID         wait for a killed writer; prints its wait status.
    check DIR        prints JSON: every checkpoint file and whether it loads with the right
                     content, the newest valid step, the temp files present.
    quit

Forking from one process keeps 50 kills cheap (torch is imported once).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch

from train.resume import checkpoint as ckpt

PAYLOAD = 1 << 20
"""Floats per checkpoint (4 MiB): a write takes long enough to be killed half way."""


def state_for(step: int) -> dict[str, Any]:
    """The checkpoint of `step`: the trainer's keys, tensors filled with the step number."""
    return {
        "format": ckpt.FORMAT,
        "version": ckpt.VERSION,
        "step": step,
        "epoch": 0,
        "position": step,
        "model": {"weight": torch.full((PAYLOAD,), float(step))},
        "optimizer": {"state": {}, "param_groups": []},
    }


def content_ok(step: int, state: dict[str, Any]) -> bool:
    """A loaded checkpoint holds what was written for its step."""
    weight = state["model"]["weight"]
    return (
        state["step"] == step
        and weight.shape == (PAYLOAD,)
        and bool(torch.all(weight == float(step)))
    )


def write_forever(folder: Path, keep: int) -> None:
    """The killed process: resume, then save and prune, step after step."""
    ckpt.remove_stale_temps(folder)
    found = ckpt.find_latest_valid(folder, lambda path, why: None)
    if found:  # as the trainer's resume: auto does (train/resume/checkpointer.py)
        ckpt.prune(folder, keep, up_to_step=int(found[1]["step"]))
    step = int(found[1]["step"]) + 1 if found else 0
    progress = os.open(folder / "progress", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    if found:
        # The step it resumes from is saved too: the writer before may have been killed after
        # saving it and before reporting it. Unreported, a kill after this writer's first save
        # found the newest checkpoint two steps past the last one reported (seen in CI).
        os.write(progress, f"{step - 1}\n".encode())
    while True:
        ckpt.save_atomic(state_for(step), ckpt.checkpoint_path(folder, step))
        os.write(progress, f"{step}\n".encode())
        ckpt.prune(folder, keep)
        step += 1


def check(folder: Path) -> dict[str, Any]:
    """What a resuming trainer would find in `folder`."""
    files = []
    for step, path in ckpt.list_checkpoints(folder):
        try:
            ok = content_ok(step, ckpt.load_checkpoint(path))
        except ckpt.CheckpointError:
            ok = False
        files.append({"step": step, "name": path.name, "ok": ok})
    skipped: list[str] = []
    found = ckpt.find_latest_valid(folder, lambda path, why: skipped.append(path.name))
    temps = sorted(p.name for p in folder.iterdir() if ".tmp-" in p.name)
    return {
        "files": files,
        "latest": int(found[1]["step"]) if found else None,
        "latest_ok": content_ok(int(found[1]["step"]), found[1]) if found else False,
        "skipped": skipped,
        "temps": temps,
    }


def main() -> None:
    torch.set_num_threads(1)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "start":
            folder, keep = Path(words[1]), int(words[2])
            folder.mkdir(parents=True, exist_ok=True)
            pid = os.fork()
            if pid == 0:
                try:
                    write_forever(folder, keep)
                finally:
                    os._exit(1)
            print(pid, flush=True)
        elif words[0] == "reap":
            _, status = os.waitpid(int(words[1]), 0)
            print(status, flush=True)
        elif words[0] == "check":
            print(json.dumps(check(Path(words[1]))), flush=True)
        elif words[0] == "quit":
            return


if __name__ == "__main__":
    main()
