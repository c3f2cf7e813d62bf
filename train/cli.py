"""`python -m train --config NAME|PATH [--set key=value]... [--check]`."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from train.config.load import ConfigError, DistributedConfig, load_config
from train.env.launch import LaunchEnvError, detect_launch_env
from train.startup import import_torch_quietly

if TYPE_CHECKING:
    from train.config.load import LoadedConfig
    from train.env.launch import LaunchEnv
    from train.parts.userstep import UserParts

EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m train",
        description="The jobkit DDP+AMP trainer. Reads torchrun, srun, mpirun or PBS ranks.",
    )
    parser.add_argument("--config", help="A bundled config name (tiny-lm, mlp) or a YAML path.")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Override one config key, e.g. --set train.steps=200 (repeatable).",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="Health check: all-reduce on every rank, one device per rank, bandwidth.",
    )
    parser.add_argument(
        "--spawn",
        type=int,
        metavar="N",
        help="Start N processes on this node with torch.multiprocessing (launcher spawn).",
    )
    parser.add_argument(
        "--local-rank",
        "--local_rank",
        dest="local_rank",
        type=int,
        metavar="R",
        help="This process's local rank, as torch.distributed.launch without --use_env passes"
        " it (LOCAL_RANK in the environment says the same).",
    )
    return parser


def _take_local_rank(local_rank: int | None) -> str | None:
    """Export --local-rank as LOCAL_RANK; an error line when the environment says otherwise."""
    if local_rank is None:
        return None
    current = os.environ.get("LOCAL_RANK", "").strip()
    if current and current != str(local_rank):
        return f"--local-rank {local_rank} contradicts LOCAL_RANK={current} in the environment"
    os.environ["LOCAL_RANK"] = str(local_rank)
    return None


def _child_argv(args: argparse.Namespace) -> list[str]:
    """The arguments each spawned process runs with: these, less --spawn."""
    argv = ["--config", args.config] if args.config else []
    for override in args.overrides:
        argv += ["--set", override]
    return [*argv, "--check"] if args.check else argv


def main(argv: Sequence[str] | None = None) -> int:
    """Run the trainer or the health check; returns the exit code (0, 1, 2 or 75)."""
    args = _parser().parse_args(argv)
    if not args.check and not args.config:
        print("python -m train: give --config NAME|PATH (or --check)", file=sys.stderr)
        return EXIT_USAGE
    problem = _take_local_rank(args.local_rank)
    if problem is None and args.spawn is not None and not 1 <= args.spawn <= 1024:
        problem = f"--spawn {args.spawn}: give a number of processes between 1 and 1024"
    if problem is not None:
        print(f"python -m train: {problem}", file=sys.stderr)
        return EXIT_USAGE
    prepared = prepare(args.config, args.overrides)
    if isinstance(prepared, int):
        return prepared
    loaded, env = prepared
    import_torch_quietly(for_training=args.spawn is None and not args.check)
    if args.spawn is not None:
        from train.ranks.spawn import run_spawned

        signals = loaded.config.train.preempt_signals if loaded else []
        return run_spawned(main, _child_argv(args), args.spawn, env, signals)
    if args.check:
        from train.loop.state import TrainSetupError
        from train.ranks.check import run_check
        from train.ranks.dist import DistSetupError, shutdown

        distributed = loaded.config.distributed if loaded else DistributedConfig.model_validate({})
        device = loaded.config.train.device if loaded else "auto"
        try:
            return run_check(env, distributed, device)
        except (TrainSetupError, DistSetupError) as err:
            print(f"train: {err}", file=sys.stderr)
            return EXIT_USAGE
        finally:
            shutdown()
    assert loaded is not None
    return train_rank(loaded, env)


def prepare(
    config: str | None, overrides: Sequence[str]
) -> tuple[LoadedConfig | None, LaunchEnv] | int:
    """The config (None without one) and this rank's launch environment, or the exit code
    after one line on stderr (torch is not imported yet)."""
    try:
        loaded = load_config(config, list(overrides)) if config else None
        return loaded, detect_launch_env()
    except ConfigError as err:
        print(err.show(), file=sys.stderr)
        return err.exit_code
    except LaunchEnvError as err:
        print(f"launch environment: {err}", file=sys.stderr)
        return EXIT_USAGE


def train_rank(loaded: LoadedConfig, env: LaunchEnv, parts: UserParts | None = None) -> int:
    """Run the bundled loop for this rank with preemption signals handled; the exit code
    (0, 75, or 2 after one line on stderr). Leaves the process group destroyed."""
    from train.loop.loop import run_training
    from train.loop.state import TrainSetupError
    from train.ranks.dist import DistSetupError, shutdown
    from train.resume.preempt import StopRequest

    stop = StopRequest()
    stop.install(loaded.config.train.preempt_signals)
    try:
        return run_training(loaded, env, stop, parts)
    except ConfigError as err:
        print(err.show(), file=sys.stderr)
        return err.exit_code
    except (TrainSetupError, DistSetupError) as err:
        print(f"train: {err}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        stop.uninstall()
        shutdown()
