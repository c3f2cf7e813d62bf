"""The job spec's `sge:` section: Grid Engine's own options (schema in spec/schema.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from jobkit.spec.model import StrictModel


class SgeOptions(StrictModel):
    """Grid Engine options; used only with `backend: sge`."""

    pe: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="Parallel environment for jobs of more than one slot (-pe PE SLOTS, one slot"
        " per process); its allocation_rule must give each host launch.nproc_per_node slots.",
    )
    spawner: Literal["qrsh", "ssh"] = Field(
        "qrsh",
        description="How the script starts torchrun on the other hosts: `qrsh -inherit` (the"
        " PE needs control_slaves TRUE) or ssh (with the ssh: options).",
    )
    gpu_resource: str = Field(
        "gpu",
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="The consumable complex that counts GPUs (-l NAME=GPUS per slot).",
    )
