"""The classes that cannot happen on this machine, from log text recorded elsewhere.

No GPU here (NCCL, CUDA out of memory, duplicate GPU), and the shared test cluster must not
lose a node or be reconfigured (node failure, preemption, cgroup OOM kill): these lines were
copied from real runs of torch 2.x / NCCL 2.18-2.21 / Slurm 22-23 and are written into a run
folder laid out as jobkit's templates lay it out (tests/doctor/recorded.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jobkit.doctor.classes import BY_NAME, CLASSES
from jobkit.doctor.classify import diagnose_record
from tests.doctor.recorded import job_with_logs

HOST0 = "jobkit: host 0 (gpu01) of 2: torchrun with 2 process(es)\n"
HOST1 = "jobkit: host 1 (gpu02) of 2: torchrun with 2 process(es)\n"
JOB_OUT = "jobkit: job 4242 (t) on 2 node(s): gpu01 gpu02\n"
STEPD = "slurmstepd: error: *** JOB 4242 ON gpu02 CANCELLED AT 2024-05-01T10:00:00"

NCCL_WARN = (
    "[rank3]:gpu02:81234:81290 [1] NCCL WARN NET/Socket : no usable interface found\n"
    "[rank3]: torch.distributed.DistBackendError: NCCL error in:"
    " ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error"
    " (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n"
)
WATCHDOG = (
    "[rank{r}]:[E1125 10:0{m}:00.000000 81234 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog"
    " caught collective operation timeout: WorkNCCL(SeqNum=41, OpType=ALLREDUCE, NumelIn=1,"
    " NumelOut=1, Timeout(ms)=600000) ran for 600031 milliseconds before timing out.\n"
)
CUDA_OOM = (
    "[rank2]: Traceback (most recent call last):\n"
    '[rank2]:   File "/home/u/proj/train.py", line 88, in step\n'
    "[rank2]:     loss = model(batch).sum()\n"
    "[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0"
    " has a total capacity of 79.15 GiB of which 1.06 GiB is free.\n"
)
DUPLICATE = (
    "[rank1]: torch.distributed.DistBackendError: NCCL error in:"
    " ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, invalid usage (run with"
    " NCCL_DEBUG=WARN for details), NCCL version 2.18.1\n"
    "[rank1]: ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\n"
    "[rank1]: Last error:\n"
    "[rank1]: Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000\n"
)


def test_nccl_error_names_the_rank_and_its_host(tmp_path: Path) -> None:
    record = job_with_logs(
        tmp_path,
        {"OUT": JOB_OUT, "node-0.out": HOST0, "node-1.out": HOST1 + NCCL_WARN},
        nodes=2,
        nproc=2,
        ranks={0: 0, 1: 0, 2: 1, 3: 1},
    )
    found = diagnose_record(record)
    assert (found.cls, found.rank, found.host, found.node) == ("nccl_error", 3, "gpu02", 1)
    assert "env.nccl: ethernet" in (found.fix or "")
    assert found.evidence[0].where.endswith("node-1.out:2"), found.evidence


def test_nccl_watchdog_first_rank_is_the_earliest(tmp_path: Path) -> None:
    """Every rank times out; the first to report (by glog's time) is named."""
    record = job_with_logs(
        tmp_path,
        {
            "node-0.out": HOST0 + WATCHDOG.format(r=0, m=5) + WATCHDOG.format(r=1, m=4),
            "node-1.out": HOST1 + WATCHDOG.format(r=2, m=3) + WATCHDOG.format(r=3, m=6),
        },
        nodes=2,
        nproc=2,
        ranks={0: 0, 1: 0, 2: 1, 3: 1},
    )
    found = diagnose_record(record)
    assert (found.cls, found.rank, found.host) == ("nccl_timeout", 2, "gpu02")
    assert "jobkit doctor jktest1" in (found.fix or "")


def test_cuda_oom_with_its_frame(tmp_path: Path) -> None:
    record = job_with_logs(
        tmp_path, {"node-1.out": HOST1 + CUDA_OOM}, nodes=2, nproc=2, ranks={2: 1}
    )
    found = diagnose_record(record)
    assert (found.cls, found.rank, found.host) == ("cuda_oom", 2, "gpu02")
    assert found.frame == "/home/u/proj/train.py:88 in step"
    assert "data.batch_size_per_rank" in (found.fix or "")


def test_duplicate_gpu_beats_the_nccl_error_it_causes(tmp_path: Path) -> None:
    record = job_with_logs(tmp_path, {"node-0.out": HOST0 + DUPLICATE}, nproc=2)
    found = diagnose_record(record)
    assert (found.cls, found.rank, found.host) == ("duplicate_gpu", 1, "gpu01")
    assert "launch.nproc_per_node" in (found.fix or "")
    assert "NCCL error" in found.also


def test_trainer_duplicate_gpu_guard(tmp_path: Path) -> None:
    """The bundled trainer's own guard (train/ranks/dist.py find_shared_devices), as it prints."""
    line = "train: ranks 0, 1 on host gpu01 share one GPU (GPU-8a7c2f9e-1b3d)\n"
    found = diagnose_record(job_with_logs(tmp_path, {"node-0.out": HOST0 + line}, nproc=2))
    assert found.cls == "duplicate_gpu" and found.host == "gpu01"


@pytest.mark.parametrize(
    ("state", "line", "cls", "fix"),
    [
        (
            "NODE_FAIL",
            f"{STEPD} DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***",
            "node_failure",
            "scheduler.requeue",
        ),
        ("TIMEOUT", f"{STEPD} DUE TO TIME LIMIT ***", "time_limit", "resources.time"),
        ("PREEMPTED", f"{STEPD} DUE TO PREEMPTION ***", "preempted", "scheduler.signal"),
        ("CANCELLED", f"{STEPD} ***", "cancelled", "jobkit submit"),
        (
            "OUT_OF_MEMORY",
            "slurmstepd: error: Detected 1 oom_kill event in StepId=4242.0. Some of the step"
            " tasks have been OOM Killed.",
            "host_oom",
            "resources.mem",
        ),
    ],
)
def test_scheduler_states(tmp_path: Path, state: str, line: str, cls: str, fix: str) -> None:
    """The step daemon's line names the host; the state alone names the class."""
    record = job_with_logs(tmp_path, {"ERR": line + "\n", "OUT": JOB_OUT}, state=state, nodes=2)
    found = diagnose_record(record)
    assert found.cls == cls and fix in (found.fix or ""), found.lines()
    assert found.evidence and found.evidence[0].where.endswith("t-1.err:1")
    bare = job_with_logs(tmp_path / "bare", {}, state=state)
    assert diagnose_record(bare).cls == cls
    assert diagnose_record(bare).evidence[0].where == "scheduler"


def test_state_wins_over_the_noise_it_causes(tmp_path: Path) -> None:
    """A time limit kills every rank: their connection errors are 'also seen'."""
    lines = f"{STEPD} DUE TO TIME LIMIT ***\n"
    noise = (
        "[rank1]: RuntimeError: [../third_party/gloo/transport/tcp/pair.cc:534] Connection"
        " closed by peer [10.0.0.2]:4242\n"
    )
    record = job_with_logs(
        tmp_path, {"ERR": lines, "node-0.out": HOST0 + noise}, state="TIMEOUT", nproc=2
    )
    found = diagnose_record(record)
    assert found.cls == "time_limit" and "rendezvous connection failed" in found.also


def test_scontrol_not_found_in_a_container(tmp_path: Path) -> None:
    line = "/var/spool/slurmd/job04242/slurm_script: line 88: scontrol: command not found\n"
    found = diagnose_record(job_with_logs(tmp_path, {"ERR": line}))
    assert found.cls == "command_not_found" and "scontrol: command not found" in (
        found.summary or ""
    )


def test_killed_by_sigkill(tmp_path: Path) -> None:
    found = diagnose_record(job_with_logs(tmp_path, {}, exit_code=None, signal=9))
    assert found.cls == "killed" and "resources.mem" in (found.fix or "")


def test_missing_environment_note(tmp_path: Path) -> None:
    note = "jobkit: env.venv: /x/.venv/bin/activate not found on n1\n"
    found = diagnose_record(job_with_logs(tmp_path, {"failure": note, "ERR": note}))
    assert found.cls == "environment_missing" and found.summary == note.strip()


def test_unknown_shows_the_last_lines(tmp_path: Path) -> None:
    found = diagnose_record(job_with_logs(tmp_path, {"ERR": "step 3\nsomething odd\n"}))
    assert found.cls == "unknown"
    assert [e.text for e in found.evidence] == [
        "state FAILED, exit code 1",
        "step 3",
        "something odd",
    ]


def test_the_table_has_enough_classes_each_shown_somehow() -> None:
    assert len(CLASSES) >= 15
    assert len({c.name for c in CLASSES}) == len(CLASSES)
    for cls in CLASSES:
        assert cls.patterns or cls.states or cls.signals, cls.name
        assert cls.explanation and cls.fix, cls.name


def test_troubleshooting_doc_lists_every_class() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "troubleshooting.md").read_text()
    missing = [name for name in BY_NAME if f"`{name}`" not in doc]
    assert not missing, f"docs/troubleshooting.md lacks {missing}"


# What torch and nvidia-smi print on a GPU node when the container was not given the GPUs
# (recorded from torch 2.x runs elsewhere: no GPU on this machine). The e2e test runs the
# cases this machine can: a CPU torch asked for cuda, a write into a read-only image.
GPU_NOT_VISIBLE = [
    "[rank0]: RuntimeError: Found no NVIDIA driver on your system. Please check that you have"
    " an NVIDIA GPU and installed a driver from http://www.nvidia.com/Download/index.aspx",
    "[rank0]: RuntimeError: No CUDA GPUs are available",
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure"
    " that the latest NVIDIA driver is installed and running.",
    "[rank0]: ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!",
    "train: the job asked for 4 GPU(s) per node (resources.gpus_per_node) but no CUDA device"
    " is visible on gpu01 (torch 2.3.1+cu121, CUDA build 12.1, CUDA_VISIBLE_DEVICES='0,1,2,3');"
    " not training on the CPU instead (train.device: cpu does that on purpose)",
]


@pytest.mark.parametrize("line", GPU_NOT_VISIBLE)
def test_gpu_not_visible_inside_a_container(tmp_path: Path, line: str) -> None:
    """In a container job the line is the container's GPU class (the runtime's GPU option is
    the fix); the same line from a job without a container is not."""
    files = {"node-0.out": HOST0 + line + "\n"}
    container = {"container": {"image": "/img/t.sif", "runtime": "apptainer"}}
    inside = diagnose_record(job_with_logs(tmp_path / "in", files, spec_extra=container))
    assert inside.cls == "container_gpu_missing", inside.lines()
    assert "--nv" in (inside.fix or "")
    assert line.removeprefix("[rank0]: ")[:150] in inside.evidence[0].text, inside.evidence
    outside = diagnose_record(job_with_logs(tmp_path / "out", files))
    assert outside.cls != "container_gpu_missing", outside.lines()


def test_a_read_only_file_system_outside_a_container(tmp_path: Path) -> None:
    line = "OSError: [Errno 30] Read-only file system: '/data/ckpt/step-10.pt'\n"
    found = diagnose_record(job_with_logs(tmp_path, {"node-0.out": HOST0 + line}))
    assert found.cls == "read_only_file_system" and "container.mounts" in (found.fix or "")
