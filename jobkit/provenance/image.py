"""The container image a job ran in and its digest, taken by the job at start on its first
host (provenance/jobside.py), from the spec recorded at submit (docs/provenance.md):

- podman: the image's digest and id as `podman image inspect` gives them (the storage options
  among container.options, `--root` and the like, are passed on);
- a directory image (Charliecloud, an Apptainer sandbox) or a .sif file: a sha256 of its file
  list (each path, type, mode, size, modification time and link target), prefixed
  `listing-sha256:`. Not a hash of the contents: reading a 1.2 GB image took over 100 s here,
  at every job's start; any rebuild or edit changes the listing;
- docker://, pyxis and other registry names: the name only (the runtime resolves it when the
  job runs), said in `note`.
Standard library only: it runs under the job's Python.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
from pathlib import Path
from typing import Any

from jobkit.provenance.query import run_query

INSPECT_TIMEOUT_S = 30.0
PODMAN_STORAGE_OPTIONS = ("--root", "--runroot", "--storage-driver", "--storage-opt")
"""podman's global options that say which image store the name is looked up in."""


def container_image(spec: dict[str, Any], submit_folder: str | None) -> dict[str, Any] | None:
    """The image of the spec's `container:` section with its digest (None: no container)."""
    container = spec.get("container")
    if not isinstance(container, dict) or not container.get("image"):
        return None
    runtime, image = str(container.get("runtime") or ""), str(container["image"])
    found: dict[str, Any] = {"runtime": runtime, "image": image, "digest": None, "id": None}
    if runtime == "podman":
        found.update(podman_digest(image, _option_words(container.get("options"))))
        return found
    path = Path(image)
    is_path = runtime in ("charliecloud", "apptainer", "singularity") and "://" not in image
    if is_path:
        if not path.is_absolute() and submit_folder:
            path = Path(submit_folder) / path
        found["path"] = str(path)
        if path.exists():
            found["digest"] = listing_digest(path)
            found["digest_kind"] = "listing-sha256: names, modes, sizes, times (not contents)"
            return found
        found["note"] = f"{path} not found on this host: no digest"
        return found
    found["note"] = f"a registry image ({runtime}): the name only, resolved by the runtime"
    return found


def _option_words(options: Any) -> list[str]:
    words: list[str] = []
    for entry in options if isinstance(options, list) else []:
        try:
            words += shlex.split(str(entry))
        except ValueError:
            continue
    return words


def podman_digest(image: str, option_words: list[str]) -> dict[str, Any]:
    """{digest, id} from `podman image inspect` (a note instead when it cannot say)."""
    podman = shutil.which("podman")
    if podman is None:
        return {"note": "podman not found on PATH: no digest"}
    storage: list[str] = []
    for index, word in enumerate(option_words):
        name = word.split("=", 1)[0]
        if name in PODMAN_STORAGE_OPTIONS:
            takes_next = "=" not in word and index + 1 < len(option_words)
            storage += option_words[index : index + 2] if takes_next else [word]
    argv = [podman, *storage, "image", "inspect", "--format", "{{.Digest}} {{.Id}}", image]
    done = run_query(argv, INSPECT_TIMEOUT_S)
    if isinstance(done, Exception):
        return {"note": f"podman image inspect failed: {type(done).__name__}"}
    words = done.stdout.split()
    if done.returncode != 0 or len(words) != 2:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"note": f"podman image inspect {image}: {last[:200]}"}
    return {"digest": words[0], "id": words[1], "digest_kind": "podman image digest"}


def listing_digest(path: Path) -> str:
    """`listing-sha256:<hex>` over every entry under `path` (or the file itself), sorted."""
    digest = hashlib.sha256()
    if not path.is_dir():
        stat = path.stat()
        digest.update(f"{path.name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
        return f"listing-sha256:{digest.hexdigest()}"
    for folder, dirs, files in os.walk(path):
        dirs.sort()
        base = Path(folder)
        for name in sorted(files + [d for d in dirs if (base / d).is_symlink()]):
            entry = base / name
            try:
                stat = entry.lstat()
                target = os.readlink(entry) if entry.is_symlink() else ""
            except OSError:
                continue
            relative = os.fsencode(entry.relative_to(path))
            digest.update(relative + b"\0")
            digest.update(f"{stat.st_mode:o}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
            digest.update(os.fsencode(target) + b"\n")
    return f"listing-sha256:{digest.hexdigest()}"
