"""container.mounts entries: HOST:CONTAINER[:ro], both absolute, read as one Mount."""

from __future__ import annotations

from typing import NamedTuple


class Mount(NamedTuple):
    """One bind mount: the host path, where it appears inside, and whether read-only."""

    host: str
    inside: str
    read_only: bool


def parse_mount(text: str) -> Mount:
    """`/data:/data:ro` -> Mount; ValueError (the spec error's words) for anything else."""
    parts = text.split(":")
    read_only = False
    if len(parts) == 3 and parts[2] in ("ro", "rw"):
        read_only = parts.pop() == "ro"
    if len(parts) != 2 or not all(parts):
        raise ValueError(f"is not HOST:CONTAINER or HOST:CONTAINER:ro: {text!r}")
    host, inside = parts
    for what, path in (("host", host), ("container", inside)):
        if not path.startswith("/"):
            raise ValueError(f"the {what} path must be absolute: {text!r}")
        if "," in path:
            raise ValueError(
                f"a path with a comma cannot be mounted (pyxis splits there): {text!r}"
            )
    return Mount(host, inside, read_only)


def check_mount(text: str) -> str:
    """The spec's validator: the text kept as written once it parses."""
    parse_mount(text)
    return text
