"""`$JOBKIT_HOME/clusters.yaml`: the clusters a laptop submits to over ssh (docs/remote.md).

Read with the spec's YAML loader, so a bad entry is one `file:line: key: message` line.
Every value that reaches a remote shell or an sbatch script is checked here: a host name
cannot start with `-` (an ssh option), a workdir is an absolute path of plain characters.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from jobkit.backends.registry import DEFAULT_REMOTE, remote_commands, remote_names
from jobkit.core import private
from jobkit.core.errors import JobkitError, SpecError
from jobkit.core.yamlsrc import KeyPath, YamlDoc, load_yaml_file

CLUSTERS_FILE = "clusters.yaml"
KEYS = ("host", "workdir", "backend", "python", "defaults")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_HOST = re.compile(r"^[A-Za-z0-9_.@:%\[\]-]+$")
_PATH = re.compile(r"^/[A-Za-z0-9._/+@~-]*$")


@dataclass(frozen=True)
class Cluster:
    """One cluster: the ssh name of its login node and where jobkit keeps files there."""

    name: str
    host: str
    """Any name ~/.ssh/config knows (its User, ProxyJump, keys apply)."""
    workdir: str
    """Absolute path on the cluster: snapshots/, jobs/, lib/ and logs/ go under it."""
    backend: str = DEFAULT_REMOTE
    python: str | None = None
    """The job's Python there (env.python); None: the spec's own choice."""
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """`key.path: value` applied like `--set` before the user's own --set."""

    def default_sets(self) -> list[str]:
        """The cluster's facts as `--set` strings: backend, env.python, defaults."""
        sets = [f"backend={self.backend}"]
        if self.python:
            sets.append(f"env.python={self.python}")
        for key, value in self.defaults.items():
            sets.append(f"{key}={json.dumps(value)}")  # JSON is YAML: the value as written
        return sets

    def to_yaml_dict(self) -> dict[str, Any]:
        """The entry as clusters.yaml holds it."""
        entry: dict[str, Any] = {"host": self.host, "workdir": self.workdir}
        entry["backend"] = self.backend
        if self.python:
            entry["python"] = self.python
        if self.defaults:
            entry["defaults"] = dict(self.defaults)
        return entry


def clusters_file() -> Path:
    """$JOBKIT_HOME/clusters.yaml."""
    from jobkit.registry.db import jobkit_home

    return jobkit_home() / CLUSTERS_FILE


def load_clusters(path: Path | None = None) -> dict[str, Cluster]:
    """Every cluster in the file (none when it does not exist); SpecError on a bad entry."""
    file = path or clusters_file()
    if not file.exists():
        return {}
    doc = load_yaml_file(file, str(file), what="a clusters file", empty_ok=True)
    top = doc.data.get("clusters", {})
    for key in doc.data:
        if key != "clusters":
            raise _error(doc, (key,), "unknown key (the file holds `clusters:` only)")
    if not isinstance(top, dict):
        raise _error(doc, ("clusters",), "must be a mapping of cluster name -> settings")
    return {name: _cluster(doc, name, entry) for name, entry in top.items()}


def get_cluster(name: str, path: Path | None = None) -> Cluster:
    """The named cluster; a JobkitError naming the file and the known names otherwise."""
    clusters = load_clusters(path)
    if name not in clusters:
        known = ", ".join(sorted(clusters)) or "none"
        raise JobkitError(
            f"no cluster {name!r} in {path or clusters_file()} (known: {known});"
            " add it with `jobkit clusters add`"
        )
    return clusters[name]


def save_cluster(cluster: Cluster, path: Path | None = None) -> Path:
    """Add or replace one entry (the file is rewritten: comments in it are not kept)."""
    file = path or clusters_file()
    clusters = load_clusters(file)
    clusters[cluster.name] = cluster
    data = {"clusters": {name: c.to_yaml_dict() for name, c in sorted(clusters.items())}}
    text = yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
    load_clusters_text_check(text, file)
    private.make_dir(file.parent)
    tmp = file.with_name(f".{file.name}.tmp")
    private.write_file(tmp, text)
    tmp.replace(file)
    return file


def load_clusters_text_check(text: str, file: Path) -> None:
    """The text about to be written must read back (a value refused is refused before)."""
    from jobkit.core.yamlsrc import load_yaml_text

    doc = load_yaml_text(text, str(file), empty_ok=True)
    for name, entry in doc.data.get("clusters", {}).items():
        try:
            _cluster(doc, name, entry)
        except SpecError as err:  # the line of a file not yet written would mislead
            raise SpecError(err.message, file="jobkit clusters add", key=err.key) from None


def _cluster(doc: YamlDoc, name: Any, entry: Any) -> Cluster:
    where: KeyPath = ("clusters", name)
    if not isinstance(name, str) or not _NAME.match(name):
        raise _error(doc, where, "a cluster name is letters, digits, `.`, `_` or `-`")
    if not isinstance(entry, dict):
        raise _error(doc, where, "must be a mapping (host, workdir, backend, python, defaults)")
    for key in entry:
        if key not in KEYS:
            raise _error(doc, (*where, key), f"unknown key (known: {', '.join(KEYS)})")
    host = _text(doc, entry, (*where, "host"), required=True)
    if not _HOST.match(host) or host.startswith("-"):
        raise _error(doc, (*where, "host"), f"{host!r} is not a host name ssh could be given")
    workdir = _path(doc, entry, (*where, "workdir"), required=True) or "/"
    backend = _text(doc, entry, (*where, "backend"), required=False) or DEFAULT_REMOTE
    if not remote_commands(backend):
        raise _error(
            doc,
            (*where, "backend"),
            f"{backend!r} cannot be used on a remote cluster yet (supported: "
            f"{', '.join(remote_names())})",
        )
    python = _path(doc, entry, (*where, "python"), required=False)
    defaults = entry.get("defaults", {}) or {}
    if not isinstance(defaults, dict):
        raise _error(doc, (*where, "defaults"), "must be a mapping of key.path: value")
    for key, value in defaults.items():
        if key in ("backend", "env.python") or not re.match(r"^[A-Za-z_][A-Za-z0-9_.]*$", key):
            raise _error(doc, (*where, "defaults", key), "not a spec key path jobkit can set here")
        if isinstance(value, (dict, list)):
            raise _error(doc, (*where, "defaults", key), "must be a single value")
    return Cluster(name, host, workdir, backend, python, dict(defaults))


def _text(doc: YamlDoc, entry: dict[str, Any], path: KeyPath, *, required: bool) -> str:
    value = entry.get(str(path[-1]))
    if value is None:
        if required:
            raise _error(doc, path[:-1], f"`{path[-1]}` is required")
        return ""
    if not isinstance(value, str) or not value:
        raise _error(doc, path, "must be a non-empty string")
    return value


def _path(doc: YamlDoc, entry: dict[str, Any], path: KeyPath, *, required: bool) -> str | None:
    value = _text(doc, entry, path, required=required)
    if not value:
        return None
    if not _PATH.match(value) or "/../" in f"{value}/":
        raise _error(
            doc,
            path,
            f"{value!r} must be an absolute path on the cluster of letters, digits and ._/+@~-"
            " (no `~`-expansion, no spaces)",
        )
    return value.rstrip("/") or "/"


def _error(doc: YamlDoc, path: KeyPath, message: str) -> SpecError:
    line = doc.lines.get(path) or doc.lines.get(path[:-1])
    key = ".".join(str(part) for part in path)
    return SpecError(message, file=doc.file, line=line, key=key)
