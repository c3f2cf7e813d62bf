"""The job spec's `ssh:` section: the ssh backend's hosts and how they are reached (composed
into JobSpec by spec/schema.py; Grid Engine and PBS read it too with `spawner: ssh`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from jobkit.spec.model import StrictModel, empty_list
from jobkit.spec.values import HostName, SafeStr, StrList


class Ssh(StrictModel):
    """Hosts for the ssh backend; host 0 is the rendezvous host."""

    hosts: list[HostName] = Field(
        default_factory=empty_list, description="Host names, one per node; the first is the master."
    )
    user: SafeStr | None = Field(None, description="Remote user (default: ssh's own choice).")
    port: int | None = Field(None, ge=1, le=65535, description="ssh port (default: ssh's).")
    identity_file: SafeStr | None = Field(None, description="Private key file (ssh -i).")
    options: StrList = Field(
        default_factory=empty_list,
        description="ssh -o options, e.g. StrictHostKeyChecking=accept-new.",
    )
    fanout: Literal["ssh", "pdsh"] = Field(
        "ssh",
        description="How the hosts are reached: ssh: one ssh per host, output in node-N.out;"
        " pdsh: one `pdsh -R ssh` for every host (it must be installed here), its output"
        " prefixed with the host name in the job's log and split into node-N.out, the exit"
        " code the worst host's.",
    )
