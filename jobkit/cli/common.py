"""Options shared by the verbs that take a job spec (render, submit).

    @click.command()
    @spec_options
    def render(spec_args: SpecArgs) -> None:
        loaded = spec_args.load()

The schema and pydantic are imported only when `load()` runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import click

from jobkit.backends.registry import builtin_names

if TYPE_CHECKING:
    from jobkit.spec.load import LoadedSpec

F = TypeVar("F", bound=Callable[..., Any])

BACKEND_NAMES = builtin_names()
"""For --help only; the schema checks the value (an unknown one is a one-line SpecError)."""


@dataclass(frozen=True)
class SpecArgs:
    """The job spec and its command-line layers, as the user gave them."""

    spec: str
    backend: str | None = None
    sets: tuple[str, ...] = ()
    profile: str | None = None
    template_dir: str | None = None
    ignore_unsupported: bool = False

    def load(self) -> LoadedSpec:
        """Load and validate the spec with these layers; SpecError (one line) on a problem.
        Deprecated keys and keys ignored with --ignore-unsupported: one line each on stderr."""
        from jobkit.spec.load import load_spec

        loaded = load_spec(
            self.spec,
            sets=self.sets,
            backend=self.backend,
            profile=self.profile,
            template_dir=self.template_dir,
            ignore_unsupported=self.ignore_unsupported,
        )
        for note in loaded.notes:
            click.echo(f"jobkit: {note}", err=True)
        return loaded


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
