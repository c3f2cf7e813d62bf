"""Where the bundled trainer writes outside the run folder (checkpoint.dir, logging.dir),
mounted at the same path so that what it writes outlives the container.

Without the mount an absolute `checkpoint.dir` lands in the image: read-only (Apptainer,
Charliecloud: the run fails) or the container's writable layer (Podman's `--rm` deletes it,
and the next attempt starts again from step 0, silently). The run folder is mounted anyway;
a relative directory is the working folder's, mounted too. Read from run.train.overrides and
from a config file jobkit can read here (a bundled config sets neither key).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from jobkit.spec.schema import JobSpec

OUTPUT_KEYS = ("checkpoint.dir", "logging.dir")
"""The trainer's settings naming a folder it writes into (train/config/schema.py)."""


def _config_values(config: str, run_workdir: str | None) -> dict[str, Any]:
    """OUTPUT_KEYS as a trainer YAML file sets them; {} for a bundled name or a file that
    cannot be read here (the trainer's own check reports that)."""
    path = Path(config).expanduser()
    if not path.is_absolute():
        path = (Path(run_workdir).expanduser() if run_workdir else Path()) / path
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    found: dict[str, Any] = {}
    for key in OUTPUT_KEYS:
        section, name = key.split(".")
        part = data.get(section) if isinstance(data, dict) else None
        if isinstance(part, dict) and part.get(name) is not None:
            found[key] = part[name]
    return found


def trainer_output_dirs(spec: JobSpec) -> list[str]:
    """The absolute folders the bundled trainer writes into besides the run folder, in the
    order of OUTPUT_KEYS (an override wins over the config file)."""
    train = spec.run.train
    if train is None:
        return []
    values = {**_config_values(train.config, spec.run.workdir), **train.overrides}
    folders = [str(values[key]) for key in OUTPUT_KEYS if values.get(key) is not None]
    return list(dict.fromkeys(folder for folder in folders if folder.startswith("/")))
