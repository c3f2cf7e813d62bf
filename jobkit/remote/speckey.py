"""`cluster: NAME` in a job spec: the same as `jobkit submit --on NAME` (docs/remote.md).

The key is read from the job file and the `--set` layers BEFORE the spec is validated:
the cluster's facts (its backend, its Python, its defaults) are layers of that validation,
so a spec written for the cluster validates as the cluster's job. `--on` wins over the
key, with one line saying so when they differ. An unknown name is a SpecError naming the
file, the line and the key (exit 2), before anything is rendered or copied.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from jobkit.core.errors import SpecError

KEY = "cluster"


@dataclass(frozen=True)
class ClusterKey:
    """The `cluster:` a spec names and where: `job.yaml:3` or `--set cluster=NAME`."""

    name: str
    file: str
    line: int | None

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


def spec_cluster(spec: str | Path, sets: Sequence[str] = ()) -> ClusterKey | None:
    """The cluster the job file or its `--set` layers name (the last one given wins); None
    when neither does. SpecError when the value is not a cluster name."""
    from jobkit.core.yamlsrc import load_yaml_file
    from jobkit.spec.load import parse_set

    doc = load_yaml_file(Path(spec), str(spec))
    found: ClusterKey | None = None
    if KEY in doc.data:
        found = _named(doc.data[KEY], str(spec), doc.lines.get((KEY,)))
    for item in sets:
        layer = parse_set(item)
        if KEY in layer.data:
            found = _named(layer.data[KEY], layer.where.file, None)
    return found


def chosen_cluster(spec: str | Path, sets: Sequence[str], on: str | None) -> str | None:
    """The cluster a submission goes to: `--on`, else the spec's `cluster:` (checked against
    clusters.yaml); None for a submission from here. Says so in one line (stderr) when
    `--on` overrides a different `cluster:`."""
    import click

    given = spec_cluster(spec, sets)
    if given is None:
        return on
    if on is not None:
        if on != given.name:
            click.echo(
                f"jobkit: --on {on} wins over cluster: {given.name} ({given.where})", err=True
            )
        return on
    _check_known(given)
    return given.name


def _named(value: object, file: str, line: int | None) -> ClusterKey | None:
    if value is None:  # `cluster: null` (e.g. `--set cluster=null`): submitted from here
        return None
    if not isinstance(value, str) or not value:
        raise SpecError(
            "must be the name of a cluster of clusters.yaml (a string)",
            file=file,
            line=line,
            key=KEY,
        )
    return ClusterKey(value, file, line)


def _check_known(given: ClusterKey) -> None:
    from jobkit.remote.clusters import clusters_file, load_clusters

    clusters = load_clusters()
    if given.name not in clusters:
        known = ", ".join(sorted(clusters)) or "none"
        raise SpecError(
            f"no cluster {given.name!r} in {clusters_file()} (known: {known}); add it with"
            " `jobkit clusters add`",
            file=given.file,
            line=given.line,
            key=KEY,
        )
