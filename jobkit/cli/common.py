"""Options shared by the verbs that take a job spec (render, submit).

    @click.command()
    @spec_options
    def render(spec_args: SpecArgs) -> None:
        loaded = spec_args.load()

SpecArgs itself lives in cli/specargs.py (no click: `jobkit render SPEC` loads it alone);
the schema and pydantic are imported only when `load()` runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

from jobkit.backends.registry import builtin_names
from jobkit.cli.specargs import SpecArgs as SpecArgs  # re-exported: the verbs import it here

F = TypeVar("F", bound=Callable[..., Any])

BACKEND_NAMES = builtin_names()
"""For --help only; the schema checks the value (an unknown one is a one-line SpecError)."""


def spec_options(command: F) -> F:
    """Add SPEC, --backend, --set, --profile, --template-dir and --ignore-unsupported; pass
    them as `spec_args`."""

    @functools.wraps(command)
    def wrapper(
        *args: Any,
        spec: str,
        backend: str | None,
        sets: tuple[str, ...],
        profile: str | None,
        template_dir: str | None,
        ignore_unsupported: bool,
        **kwargs: Any,
    ) -> Any:
        spec_args = SpecArgs(spec, backend, tuple(sets), profile, template_dir, ignore_unsupported)
        return command(*args, spec_args=spec_args, **kwargs)

    options = [
        click.argument("spec", metavar="SPEC"),
        click.option(
            "--backend",
            "-b",
            metavar="NAME",
            help=f"Override the spec's backend ({', '.join(BACKEND_NAMES)}).",
        ),
        click.option(
            "--set",
            "sets",
            metavar="KEY=VALUE",
            multiple=True,
            help="Override one key, value parsed as YAML: --set resources.nodes=2,"
            " --set env.modules=[cuda,nccl]. Repeatable; later wins.",
        ),
        click.option(
            "--profile",
            metavar="NAME",
            help="Site profile to layer under the spec (instead of its `profile:`).",
        ),
        click.option(
            "--template-dir",
            metavar="DIR",
            help="Render with the templates in DIR instead of the bundled (or profile's) ones.",
        ),
        click.option(
            "--ignore-unsupported",
            is_flag=True,
            help="Go on without the keys this backend cannot honour (one spec for several"
            " backends): each is listed on stderr instead of refused.",
        ),
    ]
    decorated: Any = wrapper
    for option in reversed(options):
        decorated = option(decorated)
    return decorated  # type: ignore[no-any-return]
