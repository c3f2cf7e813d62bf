"""The bundled trainer's config, checked when the job is rendered, not after the queue wait.

    check_trainer_config(loaded, workdir=Path.cwd())   # SpecError naming file:line:key

`run.train.config` and `run.train.overrides` are checked by the trainer's own loader
(train/config/load.py, torch-free), with the overrides as the exact `--set key=value` words the
script passes. A problem is one SpecError at the job file's line of the key at fault.
A config given as a path is looked up where the trainer will run: relative to the
submission directory, or to run.workdir when that is set. Plug-in models and datasets
(`package.module:factory`) are the user's code: only their names are checked here.
Inputs that passed once are remembered in the template cache folder (a hit skips importing
the trainer's config models).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
from pathlib import Path

from jobkit.core.errors import SpecError
from jobkit.core.overrides import set_word
from jobkit.spec.load import LoadedSpec

_CONFIG_CODE = (
    "train/config/load.py",
    "train/config/schema.py",
    "train/config/sections.py",
    "train/config/args.py",
    "jobkit/core/yamlsrc.py",
    "jobkit/core/overrides.py",
    "jobkit/spec/scalars.py",
)
"""The code that reads a trainer config, relative to the folder above `train` (hashed)."""


def trainer_overrides(overrides: dict[str, object]) -> list[str]:
    """The `key=value` words the script passes to `python -m train --set` (as the render
    writes them, jobkit/render/engine.py): the trainer reads back each value jobkit read."""
    return [set_word(key, value) for key, value in overrides.items()]


def _trainer_folder() -> Path | None:
    """Where the `train` package is, found without importing it."""
    found = importlib.util.find_spec("train")
    if found is None or not found.origin:
        return None
    return Path(found.origin).parent


def _config_argument(config: str, workdir: Path, run_workdir: str | None) -> str:
    """`config` as the trainer will resolve it from its working directory."""
    trainer = _trainer_folder()
    if "/" not in config and trainer and (trainer / "configs" / f"{config}.yaml").is_file():
        return config  # a bundled config name
    path = Path(config).expanduser()
    if path.is_absolute():
        return str(path)
    base = workdir / Path(run_workdir).expanduser() if run_workdir else workdir
    return str(base / path)


def check_trainer_config(loaded: LoadedSpec, workdir: Path) -> None:
    """Raise SpecError when the trainer would refuse run.train's config or overrides."""
    train = loaded.spec.run.train
    if train is None:
        return
    config = _config_argument(train.config, workdir, loaded.spec.run.workdir)
    overrides = trainer_overrides(dict(train.overrides))
    passed = _passed_marker(config, [*overrides, f"world_size={loaded.spec.world_size}"])
    if passed is not None and passed.exists():
        return  # these very inputs passed before: the check is not run again
    from train.config.load import ConfigError, load_config

    try:
        strategy = load_config(config, overrides).config.distributed.strategy
    except ConfigError as err:
        if err.where == "--config" and config != train.config:
            err.message += f" (looked for {config})"
            err.message = err.message.replace(repr(config), repr(train.config), 1)
        raise _spec_error(loaded, err, list(train.overrides)) from None
    _check_strategy(loaded, strategy)
    if passed is not None:
        with contextlib.suppress(OSError):
            passed.touch()


def _check_strategy(loaded: LoadedSpec, strategy: str) -> None:
    """distributed.strategy single and dp run one process (dp: DataParallel over the node's
    GPUs): a spec starting more is refused here, not after the queue wait."""
    spec = loaded.spec
    if strategy not in ("single", "dp") or spec.world_size == 1:
        return
    what = "one process using every GPU of its node" if strategy == "dp" else "one process"
    gpus = spec.resources.gpus_per_node
    seen = f" (it sees all {gpus} GPUs of resources.gpus_per_node)" if gpus > 1 else ""
    nodes = spec.resources.nodes
    fix = "launch.nproc_per_node: 1" + seen if nodes == 1 else "distributed.strategy ddp"
    key = "launch.nproc_per_node" if nodes == 1 else "run.train.config"
    origins = loaded.origins
    location = (
        origins.get(tuple(key.split(".")))
        or origins.get(("resources", "gpus_per_node"))
        or origins.get(("run", "train"))
    )
    raise SpecError(
        f"the trainer's distributed.strategy {strategy} runs {what}, but this spec starts"
        f" {spec.world_size} ({nodes} node(s) x {spec.procs_per_node}): set {fix}",
        file=location.file if location else str(loaded.path),
        line=location.line if location else None,
        key=key,
    )


def _passed_marker(config: str, overrides: list[str]) -> Path | None:
    """A file in the template cache folder whose existence says that this config and these
    overrides passed the check (its name hashes them, the config file's bytes, the trainer's
    config code and pydantic's version: a change to any is a miss). The check costs about
    18 ms of `jobkit render`, mostly importing the trainer's models; a hit costs a hash."""
    from jobkit.core.cache_folder import cache_dir, private_folder

    folder, trainer = cache_dir(), _trainer_folder()
    if folder is None or trainer is None:
        return None
    path = trainer / "configs" / f"{config}.yaml" if "/" not in config else Path(config)
    digest = hashlib.sha256()
    try:
        for source in (*(trainer.parent / code for code in _CONFIG_CODE), path):
            digest.update(source.read_bytes() + b"\0")
    except OSError:
        return None  # not there: the check itself says so
    from jobkit.spec.remembered import pydantic_marks

    digest.update("\0".join([config, *overrides, repr(pydantic_marks())]).encode())
    if not private_folder(folder):
        return None
    return folder / f"trainer-config-ok-{digest.hexdigest()[:32]}"


def _spec_error(loaded: LoadedSpec, err: object, override_keys: list[str]) -> SpecError:
    """The trainer's ConfigError, placed at the job file's line of the key at fault."""
    where = str(getattr(err, "where", ""))
    key = getattr(err, "key", None)
    message = str(getattr(err, "message", err))
    spec_key: tuple[str, ...]
    if where.startswith("--set "):  # an override the trainer cannot read: `--set ITEM`
        where, key = "--set", where.removeprefix("--set ").partition("=")[0].strip()
    if where == "--set" and key is not None:
        # The override the trainer names, or the one it descends from (`a.b` for `a.b.c`).
        written = next((k for k in override_keys if key == k or key.startswith(k + ".")), str(key))
        spec_key = ("run", "train", "overrides", written)
        shown = f"run.train.overrides.{written}"
    else:
        spec_key = ("run", "train", "config")
        shown = "run.train.config"
        if where not in ("--config", ""):
            inner = f"{key}: " if key else ""
            message = f"{where}: {inner}{message}"
    location = loaded.origins.get(spec_key) or loaded.origins.get(spec_key[:3])
    return SpecError(
        _printable(message),
        file=location.file if location else str(loaded.path),
        line=location.line if location else None,
        key=shown,
    )


def _printable(text: str) -> str:
    """`text` with every unprintable character escaped (a path holding a line separator
    must not break the one-line error)."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)
