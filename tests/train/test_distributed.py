"""Data-parallel equivalence and the `--check` health check on 2 gloo ranks."""

from __future__ import annotations

import re

from tests.train.launch import Launcher
from train.ranks.dist import DeviceInfo, find_shared_devices
from train.resume.checkpoint import checkpoint_path, load_checkpoint


def test_two_ranks_of_b_equal_one_rank_of_2b(launcher: Launcher) -> None:
    """DDP averages gradients: 2 ranks x batch 32 must train like 1 rank x batch 64 (fp32)."""
    common = (
        "data.args={samples: 2048}",
        "train.steps=20",
        "optim.grad_clip=0",
        "optim.lr_scaling=none",
        "checkpoint.every_steps=0",
    )
    two = launcher.run("two", "mlp", (*common, "data.batch_size_per_rank=32"), ranks=2)
    one = launcher.run("one", "mlp", (*common, "data.batch_size_per_rank=64"), ranks=1)
    assert two.returncode == 0, two.explain()
    assert one.returncode == 0, one.explain()
    assert "= 64 samples per optimizer step (global)" in two.stdout
    assert "= 64 samples per optimizer step (global)" in one.stdout
    left = load_checkpoint(checkpoint_path(two.run_dir / "checkpoints", 20))["model"]
    right = load_checkpoint(checkpoint_path(one.run_dir / "checkpoints", 20))["model"]
    assert left.keys() == right.keys()
    worst = max(float((left[k] - right[k]).abs().max()) for k in left)
    assert worst <= 1e-5, worst
    # and training did move the weights (the comparison is not between two initial states)
    assert abs(float(two.final_loss) - float(one.final_loss)) <= 1e-5


def test_health_check_on_two_ranks(launcher: Launcher) -> None:
    process = launcher.run("check", "mlp", (), nproc=2, extra=["--check"])
    assert process.returncode == 0, process.explain()
    out = process.stdout
    assert "check: world size 2, backend gloo, launcher torchrun" in out
    assert re.search(r"^check: rank 0 local_rank 0 host \S+ device cpu$", out, re.M)
    assert re.search(r"^check: rank 1 local_rank 1 host \S+ device cpu$", out, re.M)
    assert "check: all-reduce ok (sum 2 = world size)" in out
    sizes = re.findall(r"^check: all-reduce (\d+) MiB: [\d.]+ ms, algbw ([\d.]+) GB/s", out, re.M)
    assert [size for size, _ in sizes] == ["1", "8", "32"]
    assert all(float(bw) > 0 for _, bw in sizes)
    assert out.rstrip().endswith("check: healthy")


def test_health_check_alone_without_config(launcher: Launcher) -> None:
    done = launcher.run("check1", None, (), extra=["--check"])
    assert done.returncode == 0, done.explain()
    assert "check: world size 1, backend gloo, launcher single" in done.stdout


def test_two_ranks_on_one_gpu_are_reported() -> None:
    infos = [
        DeviceInfo(0, 0, "n1", "cuda:0", "GPU-aaa"),
        DeviceInfo(1, 1, "n1", "cuda:0", "GPU-aaa"),
        DeviceInfo(2, 0, "n2", "cuda:0", "GPU-aaa"),  # same uuid text on another host: fine
        DeviceInfo(3, 1, "n2", "cuda:1", "GPU-bbb"),
        DeviceInfo(4, 0, "n3", "cpu", None),
        DeviceInfo(5, 1, "n3", "cpu", None),  # CPU ranks share the host's CPUs by design
    ]
    assert find_shared_devices(infos) == ["ranks 0, 1 on host n1 share one GPU (GPU-aaa)"]
    assert find_shared_devices(infos[2:]) == []
