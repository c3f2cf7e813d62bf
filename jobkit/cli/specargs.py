"""The job spec and its command-line layers as the user gave them (SpecArgs), loaded.

Kept apart from cli/common.py's click options so that `jobkit render SPEC` can load a spec
without importing click (cli/rendering.py). The schema and pydantic are imported only when
`load()` runs, and only for a spec not validated before (spec/remembered.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobkit.cli.echo import echo

if TYPE_CHECKING:
    from jobkit.spec.load import LoadedSpec


@dataclass(frozen=True)
class SpecArgs:
    """The job spec and its command-line layers, as the user gave them."""

    spec: str
    backend: str | None = None
    sets: tuple[str, ...] = ()
    profile: str | None = None
    template_dir: str | None = None
    ignore_unsupported: bool = False

    remembered: bool = False
    """Inputs that passed before are not validated again (spec/remembered.py; the spec is
    then a SpecView): what `jobkit render` asks for."""

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
            remembered=self.remembered,
        )
        for note in loaded.notes:
            echo(f"jobkit: {note}", err=True)
        return loaded
