"""Where this process is in the world: rank, world size, node and master, from any launcher.

Stdlib only (no torch), so your own programs can use it too: `from train.env import
detect_launch_env, apply_to_environ` (docs/train.md, "Launch environment"). The public names
are train/env/launch.py's; common.py holds the types and shared reads, detect.py one detector
per launcher, hostlist.py Slurm's compact host lists.
"""

from __future__ import annotations

from train.env.launch import (
    DEFAULT_PORT,
    DETECTION_ORDER,
    LaunchEnv,
    LaunchEnvError,
    Reader,
    Resolver,
    apply_to_environ,
    detect_launch_env,
    port_from_job_id,
)

__all__ = [
    "DEFAULT_PORT",
    "DETECTION_ORDER",
    "LaunchEnv",
    "LaunchEnvError",
    "Reader",
    "Resolver",
    "apply_to_environ",
    "detect_launch_env",
    "port_from_job_id",
]
