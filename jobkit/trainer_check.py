"""The bundled trainer's config, checked when the job is rendered, not after the queue wait.

    check_trainer_config(loaded, workdir=Path.cwd())   # SpecError naming file:line:key

`run.train.config` and `run.train.overrides` are checked by the trainer's own loader
(train/config.py, torch-free), with the overrides as the exact `--set key=value` words the
script passes. A problem is one SpecError at the job file's line of the key at fault.
A config given as a path is looked up where the trainer will run: relative to the
submission directory, or to run.workdir when that is set. Plug-in models and datasets
(`package.module:factory`) are the user's code: only their names are checked here.
"""

from __future__ import annotations

from pathlib import Path

from jobkit.errors import SpecError
from jobkit.render import shell_word
from jobkit.spec import LoadedSpec


def trainer_overrides(overrides: dict[str, object]) -> list[str]:
    """The `key=value` words the script passes to `python -m train --set`."""
    return [f"{key}={shell_word(value)}" for key, value in overrides.items()]


def _config_argument(config: str, workdir: Path, run_workdir: str | None) -> str:
    """`config` as the trainer will resolve it from its working directory."""
    from train.config import CONFIG_DIR

    if "/" not in config and (CONFIG_DIR / f"{config}.yaml").is_file():
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
    from train.config import ConfigError, load_config

    config = _config_argument(train.config, workdir, loaded.spec.run.workdir)
    try:
        load_config(config, trainer_overrides(dict(train.overrides)))
    except ConfigError as err:
        if err.where == "--config" and config != train.config:
            err.message += f" (looked for {config})"
            err.message = err.message.replace(repr(config), repr(train.config), 1)
        raise _spec_error(loaded, err, list(train.overrides)) from None


def _spec_error(loaded: LoadedSpec, err: object, override_keys: list[str]) -> SpecError:
    """The trainer's ConfigError, placed at the job file's line of the key at fault."""
    where = str(getattr(err, "where", ""))
    key = getattr(err, "key", None)
    message = str(getattr(err, "message", err))
    spec_key: tuple[str, ...]
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
        message,
        file=location.file if location else str(loaded.path),
        line=location.line if location else None,
        key=shown,
    )
