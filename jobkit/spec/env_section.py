"""The job spec's `env:` section: modules, conda or venv, the Python, setup lines, variables,
NCCL settings (a preset plus overrides), log level and debug (spec/schema.py composes it)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, model_validator

from jobkit.core.errors import CrossFieldError
from jobkit.spec.model import StrictModel, default_section, empty_dict, empty_list
from jobkit.spec.values import EnvName, PythonChoice, SafeStr, ScalarValue, StrList


class Nccl(StrictModel):
    """NCCL network settings: a preset plus overrides."""

    preset: Literal["auto", "ethernet", "infiniband"] = Field(
        "auto",
        description="auto: NCCL decides; ethernet: sockets only, 4 threads x 4 sockets;"
        " infiniband: IB verbs (docs/spec.md, NCCL presets).",
    )
    socket_ifname: SafeStr | None = Field(None, description="NCCL_SOCKET_IFNAME, e.g. eth0.")
    ib_hca: SafeStr | None = Field(None, description="NCCL_IB_HCA, e.g. mlx5.")
    ib_gid_index: int | None = Field(
        None, ge=0, le=255, description="NCCL_IB_GID_INDEX (RoCE: often 3)."
    )
    p2p_level: Literal["LOC", "NVL", "PIX", "PXB", "PHB", "SYS"] | None = Field(
        None, description="NCCL_P2P_LEVEL: how far apart two GPUs may be for peer-to-peer."
    )
    socket_nthreads: int | None = Field(
        None, ge=1, le=16, description="NCCL_SOCKET_NTHREADS (ethernet preset: 4)."
    )
    nsocks_perthread: int | None = Field(
        None, ge=1, le=64, description="NCCL_NSOCKS_PERTHREAD (ethernet preset: 4)."
    )
    vars: dict[EnvName, ScalarValue] = Field(
        default_factory=empty_dict, description="Any NCCL_* overrides."
    )

    @model_validator(mode="after")
    def _check_sockets(self) -> Nccl:
        threads, socks = self.socket_nthreads, self.nsocks_perthread
        if threads is not None and socks is not None and threads * socks > 64:
            raise CrossFieldError(
                "env.nccl.nsocks_perthread",
                f"NCCL allows at most 64 sockets: socket_nthreads x nsocks_perthread is"
                f" {threads} x {socks}",
            )
        return self


def _nccl_shorthand(value: object) -> object:
    return {"preset": value} if isinstance(value, str) else value


def _upper(value: object) -> object:
    return value.upper() if isinstance(value, str) else value


class Env(StrictModel):
    """The software environment the job runs in."""

    modules: StrList = Field(
        default_factory=empty_list, description="`module load` these, in order."
    )
    conda: SafeStr | None = Field(None, description="Conda environment name or prefix.")
    venv: SafeStr | None = Field(None, description="Python venv folder to activate.")
    python: PythonChoice = Field(
        "auto",
        description="The Python the job runs with. auto: without env.venv or env.conda, the"
        " environment jobkit runs from (the active virtualenv or conda env, else jobkit's own"
        " interpreter), written into the script as an absolute path whose bin/ goes first on"
        " PATH (so torchrun and python come from it); system: whatever PATH finds on the node;"
        " or an absolute path to a python. On a cluster the path must exist on the compute"
        " nodes (a shared file system).",
    )
    setup: StrList = Field(
        default_factory=empty_list,
        description="Shell lines run before launch. The one field rendered as code, unquoted.",
    )
    vars: dict[EnvName, ScalarValue] = Field(
        default_factory=empty_dict, description="Exported vars."
    )
    nccl: Annotated[Nccl, BeforeValidator(_nccl_shorthand)] = Field(
        default_factory=default_section(Nccl),
        description="NCCL network settings; a preset name alone is short for {preset: NAME}.",
    )
    log_level: (
        Annotated[Literal["DEBUG", "INFO", "WARNING", "ERROR"], BeforeValidator(_upper)] | None
    ) = Field(
        None,
        description="The bundled trainer's console level, torchrun's LOGLEVEL and"
        " TORCH_CPP_LOG_LEVEL; DEBUG adds TORCH_DISTRIBUTED_DEBUG=DETAIL (docs/spec.md,"
        " Logging and debugging).",
    )
    debug: bool = Field(
        False,
        description="CUDA_LAUNCH_BLOCKING=1, TORCH_DISTRIBUTED_DEBUG=DETAIL, NCCL_DEBUG=INFO and"
        " friends (docs/spec.md, Logging and debugging).",
    )
