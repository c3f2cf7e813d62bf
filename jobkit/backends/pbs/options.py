"""The job spec's `pbs:` section: PBS's own options (composed into JobSpec by spec/schema.py).

They were `scheduler.pbs_flavor` and `scheduler.pbs_spawner`; those keys still work, with a
one-line deprecation note at spec loading (spec/load.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from jobkit.spec.model import StrictModel

DEPRECATED_KEYS = {"scheduler.pbs_flavor": "pbs.flavor", "scheduler.pbs_spawner": "pbs.spawner"}
"""Old key -> the key that replaced it."""


class PbsOptions(StrictModel):
    """PBS options; used only with `backend: pbs`."""

    flavor: Literal["pro", "torque"] = Field("pro", description="PBS Pro or Torque syntax.")
    spawner: Literal["pbsdsh", "mpiexec", "ssh"] = Field(
        "pbsdsh",
        description="How a multi-node PBS job starts one torchrun on each host: pbsdsh,"
        " mpiexec, or ssh (with the ssh: options).",
    )
