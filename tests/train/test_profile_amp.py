"""Profiling a window of steps, and fp16's GradScaler knobs and overflow-skip count (on CPU:
torch 2.13 runs fp16 autocast and a GradScaler on the CPU, so these are real fp16 runs)."""

from __future__ import annotations

import json
import re

import torch

from tests.train.launch import SMALL_MLP, Launcher
from train.config.load import AmpConfig
from train.loop.ampscale import OverflowCounter, build_scaler
from train.reporting.profiling import trace_path


def test_profile_traces_exactly_the_window(launcher: Launcher) -> None:
    overrides = (*SMALL_MLP, "train.steps=6", "profile={start_step: 3, steps: 2}")
    result = launcher.run("prof", "mlp", overrides)
    assert result.returncode == 0, result.explain()
    path = trace_path(result.run_dir, 0, 3, 4)
    assert [p.name for p in path.parent.iterdir()] == [path.name]
    assert f"profile: steps 3-4, trace {path} (top 15 by self_cpu_time_total)" in result.stdout
    assert "Self CPU time total" in result.stdout  # the summary table follows
    events = json.loads(path.read_text())["traceEvents"]
    marks = {e["name"]: e for e in events if e.get("name", "").startswith("step ")}
    assert sorted(marks) == ["step 3", "step 4"]
    start = marks["step 3"]["ts"]
    end = marks["step 4"]["ts"] + marks["step 4"]["dur"]
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    assert any(e["name"] == "aten::addmm" for e in ops)
    # nothing was recorded outside steps 3 and 4
    assert all(start <= e["ts"] and e["ts"] + e["dur"] <= end for e in ops)


def test_fp16_scaler_knobs_and_overflow_skips(launcher: Launcher) -> None:
    """A start scale too big for fp16: the first steps overflow and are skipped; the scale
    then moves only by the configured factors, and every fall is one counted skip."""
    overrides = (
        *SMALL_MLP,
        "train.steps=20",
        "amp.dtype=fp16",
        "amp.init_scale=1048576",
        "amp.growth_interval=2",
        "amp.growth_factor=4",
        "amp.backoff_factor=0.25",
    )
    result = launcher.run("fp16", "mlp", overrides)
    assert result.returncode == 0, result.explain()
    assert "amp: fp16 (GradScaler)" in result.stdout
    assert "lr_scheduler.step()" not in result.stderr  # a skipped step is counted, not warned
    records = [
        json.loads(line) for line in (result.run_dir / "metrics.jsonl").read_text().splitlines()
    ]
    assert [r["step"] for r in records] == list(range(1, 21))
    lines = {int(m[1]): m[0] for m in re.finditer(r"^step (\d+)/20 .*$", result.stdout, re.M)}
    scale, total, good, grown = 1048576.0, 0, 0, 0
    for record in records:
        ratio = record["loss_scale"] / scale
        skipped = ratio == 0.25
        assert ratio in (0.25, 1.0, 4.0), record
        assert record["overflow_skips"] == int(skipped), record
        total += skipped
        assert record["overflow_skips_total"] == total
        good = 0 if skipped else good + 1
        assert (ratio == 4.0) == (good == 2), record  # grows after 2 good steps in a row
        grown += ratio == 4.0
        good = 0 if ratio == 4.0 else good
        shown = lines[record["step"]].endswith(" skipped 1 (inf/nan grads)")
        assert shown == skipped, lines[record["step"]]
        scale = record["loss_scale"]
    assert total >= 1 and grown >= 1, (total, grown)


def test_overflow_counter_with_a_real_scaler_on_cpu() -> None:
    """The count alone: gradients forced to inf are skipped and counted, good ones are not."""
    param = torch.nn.Parameter(torch.ones(3))
    optimizer = torch.optim.SGD([param], lr=0.1)
    config = AmpConfig.model_validate({"init_scale": 1024.0, "backoff_factor": 0.5})
    scaler = build_scaler(config, torch.device("cpu"), enabled=True)
    counter = OverflowCounter(torch.device("cpu"))
    for grad, skipped in ((float("inf"), True), (1.0, False), (float("nan"), True)):
        scaler.scale(param.sum()).backward()
        param.grad = torch.full_like(param, grad)
        before = param.detach().clone()
        counter.step_and_update(scaler, optimizer)
        optimizer.zero_grad()
        assert torch.equal(param.detach(), before) == skipped
    assert scaler.get_scale() == 256.0
    assert counter.since_last_report() == (2, 2)
    assert counter.since_last_report() == (0, 2)
