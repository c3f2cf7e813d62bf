"""env.log_level, env.debug, the NCCL presets and keys, elastic node ranges: the exact lines
they put into rendered scripts (docs/spec.md, "Logging and debugging" and "NCCL")."""

from __future__ import annotations

from typing import Any

import pytest

from jobkit.render.engine import render
from tests.render.helpers import GOLDEN_PYTHON, spec_from


def script(backend: str = "slurm", **sections: Any) -> str:
    data: dict[str, Any] = {"name": "k", "backend": backend, "run": {"command": "prog"}}
    data.update(sections)
    return render(spec_from(data), interpreter=GOLDEN_PYTHON)


def program_exports(text: str) -> list[str]:
    """The export lines of the env block (templates/common/env.sh.j2), where the knobs land."""
    lines = [line.strip() for line in text.split("\n")]
    start = next((i for i, line in enumerate(lines) if line.startswith("# Variables for")), None)
    if start is None:
        return []
    found = []
    for line in lines[start + 1 :]:
        if line.startswith("export "):
            found.append(line)
        elif not line.startswith("#"):
            break
    return found


@pytest.mark.parametrize(
    ("level", "lines"),
    [
        (
            "DEBUG",
            [
                "export JOBKIT_LOG_LEVEL=DEBUG",
                "export LOGLEVEL=DEBUG",
                "export TORCH_CPP_LOG_LEVEL=INFO",
                "export TORCH_DISTRIBUTED_DEBUG=DETAIL",
            ],
        ),
        (
            "info",
            [
                "export JOBKIT_LOG_LEVEL=INFO",
                "export LOGLEVEL=INFO",
                "export TORCH_CPP_LOG_LEVEL=INFO",
            ],
        ),
        (
            "WARNING",
            [
                "export JOBKIT_LOG_LEVEL=WARNING",
                "export LOGLEVEL=WARNING",
                "export TORCH_CPP_LOG_LEVEL=WARNING",
            ],
        ),
        (
            "ERROR",
            [
                "export JOBKIT_LOG_LEVEL=ERROR",
                "export LOGLEVEL=ERROR",
                "export TORCH_CPP_LOG_LEVEL=ERROR",
            ],
        ),
    ],
)
def test_log_level_exports(level: str, lines: list[str]) -> None:
    for backend in ("slurm", "local", "pbs", "sge"):
        assert program_exports(script(backend, env={"log_level": level})) == lines, backend


def test_debug_exports_cuda_launch_blocking_and_the_distributed_debug_set() -> None:
    assert program_exports(script(env={"debug": True})) == [
        "export TORCH_DISTRIBUTED_DEBUG=DETAIL",
        "export TORCH_CPP_LOG_LEVEL=INFO",
        "export TORCH_SHOW_CPP_STACKTRACES=1",
        "export TORCH_NCCL_ASYNC_ERROR_HANDLING=1",
        "export NCCL_DEBUG=INFO",
        "export NCCL_DEBUG_SUBSYS=INIT,NET",
        "export PYTHONFAULTHANDLER=1",
        "export LOGLEVEL=INFO",
        "export CUDA_LAUNCH_BLOCKING=1",
    ]


def test_an_explicit_log_level_wins_over_debug_for_the_level_variables() -> None:
    lines = program_exports(script(env={"debug": True, "log_level": "WARNING"}))
    assert "export LOGLEVEL=WARNING" in lines and "export TORCH_CPP_LOG_LEVEL=WARNING" in lines
    assert "export CUDA_LAUNCH_BLOCKING=1" in lines and "export LOGLEVEL=INFO" not in lines


def test_nccl_presets() -> None:
    assert program_exports(script(env={"nccl": "ethernet"})) == [
        "export NCCL_IB_DISABLE=1",
        "export NCCL_SOCKET_NTHREADS=4",
        "export NCCL_NSOCKS_PERTHREAD=4",
    ]
    assert program_exports(script(env={"nccl": "infiniband"})) == ["export NCCL_IB_DISABLE=0"]
    assert program_exports(script()) == []


def test_nccl_keys_and_overrides_win_over_the_preset_and_are_quoted() -> None:
    nccl = {
        "preset": "ethernet",
        "socket_nthreads": 2,
        "ib_gid_index": 3,
        "p2p_level": "NVL",
        "socket_ifname": "=eth0",
        "vars": {"NCCL_NSOCKS_PERTHREAD": 8, "NCCL_IB_TIMEOUT": "22 x"},
    }
    assert program_exports(script(env={"nccl": nccl})) == [
        "export NCCL_IB_DISABLE=1",
        "export NCCL_SOCKET_NTHREADS=2",
        "export NCCL_NSOCKS_PERTHREAD=8",
        "export NCCL_SOCKET_IFNAME==eth0",
        "export NCCL_IB_GID_INDEX=3",
        "export NCCL_P2P_LEVEL=NVL",
        "export NCCL_IB_TIMEOUT='22 x'",
    ]


def test_too_many_nccl_sockets_are_refused() -> None:
    with pytest.raises(ValueError, match="at most 64 sockets"):
        script(env={"nccl": {"socket_nthreads": 16, "nsocks_perthread": 8}})


def test_an_elastic_slurm_job_asks_for_a_node_range_and_torchrun_min_max() -> None:
    text = script(resources={"nodes": "2:4"}, launch={"rdzv_timeout": 120})
    assert "#SBATCH --nodes=2-4\n" in text
    assert (
        "    sh -c 'export JOBKIT_NODE_INDEX=$SLURM_NODEID; exec torchrun \"$@\"' torchrun \\\n"
        "    --nnodes 2:4 --nproc-per-node 1 \\\n"
        '    --rdzv-backend c10d --rdzv-endpoint "$MASTER_ADDR:$MASTER_PORT"'
        ' --rdzv-id "$JOBKIT_JOB_ID" \\\n'
        "    --rdzv-conf join_timeout=120 \\\n"
    ) in text
    # The latest-node-N.out links cover the most nodes the job may get.
    assert "for (( jobkit_i = 0; jobkit_i < 4; jobkit_i++ )); do\n" in text


def test_a_fixed_node_count_renders_as_before() -> None:
    text = script(resources={"nodes": 2})
    assert "#SBATCH --nodes=2\n" in text
    assert '    --nnodes "$SLURM_JOB_NUM_NODES" --nproc-per-node 1 \\\n' in text
    assert "join_timeout" not in text
