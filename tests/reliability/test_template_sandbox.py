"""Hostile site templates through the real CLI (`jobkit render --template-dir`, and a site
profile's template_dir): escapes towards Python internals are refused by the sandbox,
files outside the template folders cannot be read, undefined values are errors (never
an empty string). Each one: exit 2, one line, nothing on stdout, no canary file.

tests/render/test_site_templates.py has the first cases of each kind; this is the corpus.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.plugins.invoke import CliResult
from tests.reliability.helpers import assert_one_clean_line, write_spec

Invoke = Callable[..., CliResult]
SANDBOX = "refused by the template sandbox"
UNDEFINED = "undefined value"
NOT_FOUND = "template not found"

ESCAPES = {
    "str-mro": "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "cycler-globals-os": "{{ cycler.__init__.__globals__.os.system('touch CANARY') }}",
    "joiner-globals": "{{ joiner.__init__.__globals__ }}",
    "namespace-globals": "{{ namespace.__init__.__globals__ }}",
    "lipsum-globals-os": "{{ lipsum.__globals__['os'].system('touch CANARY') }}",
    "self-globals": "{{ self.__init__.__globals__ }}",
    "self-context": "{{ self._TemplateReference__context }}",
    "spec-subclasses": "{{ spec.__class__.__base__.__subclasses__() }}",
    "method-func-globals": "{{ spec.model_copy.__func__.__globals__ }}",
    "method-self": "{{ spec.model_dump.__self__ }}",
    "attr-filter": "{{ spec|attr('__class__') }}",
    "attr-filter-chain": "{{ ''|attr('__class__')|attr('__mro__') }}",
    "format-method": "{{ '{0.__class__.__init__.__globals__}'.format(spec) }}",
    "format-filter": "{{ '%s'|format(spec.__class__) }}",
    "setattr": "{% set x = spec.resources.__setattr__('nodes', 99) %}",
    "list-append": "{{ hosts.append('evil') }}",
    "list-pop": "{{ program.pop() }}",
    "dict-clear": "{{ spec.__dict__.clear() }}",
    "macro-globals": "{% macro x() %}{% endmacro %}{{ x.__globals__ }}",
    "imported-macro-globals": (
        '{% import "common/macros.sh.j2" as m with context %}{{ m.run_dir.__globals__ }}'
    ),
    "int-base": "{{ (1).__class__.__base__ }}",
    "type-mro": "{{ dict.mro() }}",
    "type-subclasses": "{{ dict.__subclasses__() }}",
    "loop-subclasses": ("{% for c in ''.__class__.__base__.__subclasses__() %}{{ c }}{% endfor %}"),
    "join-self": "{{ ''.join.__self__ }}",
    "range-self": "{{ range.__self__ }}",
    "getattr-globals": "{{ lipsum|attr('__globals__') }}",
    "dunder-via-item": "{{ spec['__class__'] }}",
}
"""Site templates that try to reach Python internals; all must be refused."""

FILE_ESCAPES = {
    "include-dotdot": "{% include '../../../../../../etc/passwd' %}",
    "include-absolute": "{% include '/etc/passwd' %}",
    "extends-absolute": "{% extends '/etc/hostname' %}",
    "include-builtin-dotdot": "{% include 'builtin/../../../../../etc/passwd' %}",
}
"""Templates that try to read files outside the template folders."""

UNDEFINEDS = {
    "bare": "{{ no_such_thing }}",
    "if": "{% if no_such_thing %}x{% endif %}",
    "quoted": "{{ no_such_thing | q }}",
    "spec-key": "{{ spec.resources.no_such_key }}",
    "nested": "{{ no_such_thing.attr }}",
    "for": "{% for x in no_such_thing %}{{ x }}{% endfor %}",
    "index": "{{ hosts[99] }}",
    "concat": "{{ no_such_thing ~ 'x' }}",
    "or": "{{ no_such_thing or 'fallback' }}",
    "request": "{{ request.application }}",
    "config": "{{ config.items() }}",
    "filter-arg": "{{ 'x' | replace(no_such_thing, 'y') }}",
    "macro-arg": "{% macro f(a) %}{{ a.missing }}{% endmacro %}{{ f(spec) }}",
}
"""Undefined values: an error, never an empty string."""


def site_with(folder: Path, body: str, canary: Path) -> Path:
    """A site template folder whose slurm template is `body` (CANARY -> a real path)."""
    site = folder / "site"
    (site / "slurm").mkdir(parents=True, exist_ok=True)
    text = "#!/bin/bash\n# a site template\n" + body.replace("CANARY", str(canary)) + "\n"
    (site / "slurm" / "job.sh.j2").write_text(text)
    return site


def spec_file(folder: Path) -> Path:
    return write_spec(
        folder / "job.yaml",
        {"name": "site", "backend": "slurm", "run": {"command": ["true"]}},
    )


REFUSED = (SANDBOX, UNDEFINED)
"""An escape stops at the sandbox, or earlier at an attribute that is not there (a macro
has no __globals__, an unsafe attribute reads as undefined when used again)."""

CASES = (
    [(name, body, REFUSED) for name, body in ESCAPES.items()]
    + [(name, body, (NOT_FOUND,)) for name, body in FILE_ESCAPES.items()]
    + [(name, body, (UNDEFINED,)) for name, body in UNDEFINEDS.items()]
)


@pytest.mark.parametrize(("name", "body", "why"), CASES, ids=[c[0] for c in CASES])
def test_hostile_site_template_is_refused(
    name: str,
    body: str,
    why: tuple[str, ...],
    tmp_path: Path,
    jobkit: Invoke,
    tally: Callable[[str, int], None],
) -> None:
    canary = tmp_path / "canary"
    site = site_with(tmp_path, body, canary)
    result = jobkit("render", str(spec_file(tmp_path)), "--template-dir", str(site))
    assert_one_clean_line(result.err, result.code, allowed=(2,))
    assert any(reason in result.err for reason in why), result.err
    assert result.out == "", "nothing may be printed from a refused template"
    assert not canary.exists()
    kind = {REFUSED: "sandbox escapes", (NOT_FOUND,): "file escapes"}
    tally(f"templates: {kind.get(why, 'undefined values')} refused", 1)
    if why == REFUSED and SANDBOX in result.err:
        tally("templates: ... of the escapes stopped by the sandbox itself", 1)


def test_profile_template_dir_goes_through_the_same_sandbox(
    tmp_path: Path, jobkit: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A site profile naming a template folder: its templates are sandboxed the same way."""
    canary = tmp_path / "canary"
    site = site_with(tmp_path, ESCAPES["cycler-globals-os"], canary)
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "site.yaml").write_text(f"template_dir: {site}\n")
    monkeypatch.setenv("JOBKIT_PROFILES", str(profiles))
    spec = write_spec(
        tmp_path / "job.yaml",
        {"name": "p", "backend": "slurm", "profile": "site", "run": {"command": ["true"]}},
    )
    result = jobkit("render", str(spec))
    assert_one_clean_line(result.err, result.code, allowed=(2,))
    assert SANDBOX in result.err and result.out == ""
    assert not canary.exists()
    submitted = jobkit("submit", str(spec), "--dry-run")
    assert_one_clean_line(submitted.err, submitted.code, allowed=(2,))
    assert SANDBOX in submitted.err and not canary.exists()


def test_a_defined_default_is_not_an_error(tmp_path: Path, jobkit: Invoke) -> None:
    """Only what a template asks for explicitly may stand in for an undefined value."""
    site = site_with(
        tmp_path,
        "{{ no_such_thing | default('fallback') }} {{ no_such_thing is defined }}",
        tmp_path,
    )
    result = jobkit("render", str(spec_file(tmp_path)), "--template-dir", str(site))
    assert result.code == 0, result.err
    assert result.out.splitlines()[-1] == "fallback False"
