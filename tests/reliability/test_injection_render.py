"""Injection, statically: every hostile string in every slot of every field, every backend.

Each (field slot, string, backend) goes through the real loader (a YAML file, `--backend`
and `--set` layers as the CLI gives them). It is either refused with one clean line, or the
spec renders, and then the script keeps every value inside its word(s) (shellshape.py):
the hostile rendering splits into the same words as a rendering with placeholders.
Rendering is done once per (string, backend, run variant) with the string in every slot
that accepted it. The submitit backend renders no script: its setup lines and the exact
parameters handed to submitit are compared instead.
"""

from __future__ import annotations

import json
import shlex
import unicodedata
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jobkit.core.errors import JobkitError, SpecError
from jobkit.manager.submit import plan_submission
from jobkit.spec.load import load_spec
from tests.plugins.invoke import CliResult
from tests.reliability.fieldmap import BACKENDS, Slot, combined, slots, spec_with
from tests.reliability.helpers import Hostile, hostile_strings, write_spec
from tests.reliability.shellshape import compare, placeholder

pytestmark = pytest.mark.usefixtures("reuse_the_jinja_environment", "parse_each_yaml_file_once")

WORD_SPLIT = {("scheduler", "extra")}
"""Fields split into words by contract (each word then quoted): docs/spec.md."""
NO_TWIN = {("submitit", ("scheduler", "extra")), ("sge", ("scheduler", "dependency"))}
"""submitit parses scheduler.extra as --name=value words: no placeholder has its shape (the
values it accepts go to submitit, which quotes each #SBATCH value itself). Grid Engine takes
only `afterany:ID[:ID]` dependencies (digits, nothing to quote): no placeholder has that shape."""
STATIC_CANARY = Path("/nonexistent/jobkit-canary")
"""Nothing runs in these tests: the canary paths only need to be the same everywhere."""
UNSAFE_CATEGORIES = {"Cc", "Cf", "Zl", "Zp"}
"""Characters that must never reach the terminal raw in an error message."""


def load_for(path: Path, backend: str, slot: Slot | None = None) -> Any:
    """load_spec as `jobkit render PATH --backend B --ignore-unsupported [--set
    pbs.flavor=F]` does: keys the backend cannot honour still render (as comments, say), so
    their quoting is tested too.

    When the slot under test is the backend (or PBS flavour) itself, the file's own value
    is what counts, so that option is left out.
    """
    name, _, flavor = backend.partition("-")
    sets = [f"pbs.flavor={flavor}"] if flavor else []
    if slot is not None and slot.path in (("pbs", "flavor"), ("scheduler", "pbs_flavor")):
        sets = []
    chosen = None if slot is not None and slot.path == ("backend",) else name
    return load_spec(path, backend=chosen, sets=sets, profile_dirs=[], ignore_unsupported=True)


def check_refusal(err: JobkitError) -> str:
    """A refusal is one printable line; returns it."""
    line = err.show()
    assert "\n" not in line and "\r" not in line, line
    bad = [ch for ch in line if unicodedata.category(ch) in UNSAFE_CATEGORIES]
    assert not bad, f"raw control characters {bad!r} in the message {line!r}"
    return line


def render_parts(spec: Any, workdir: Path) -> tuple[str, str]:
    """(script, submitit plan) for a spec: the script jobkit would submit and, for submitit,
    the submit plan (setup lines and the executor's parameters) as text."""
    plan = plan_submission(spec, workdir=workdir)
    if spec.backend != "submitit":
        return plan.script, ""
    from jobkit.backends.submitit.backend import executor_parameters

    params = executor_parameters(spec, "tok")
    setup = "\n".join(params.pop("slurm_setup"))
    return setup, json.dumps(params, sort_keys=True, ensure_ascii=False)


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str, str], str]:
    """(backend, slot key, string id) -> "" when the loader accepts, else the refusal line."""
    folder = tmp_path_factory.mktemp("specs")
    corpus = hostile_strings(STATIC_CANARY)
    found: dict[tuple[str, str, str], str] = {}
    path = folder / "job.yaml"
    for slot in slots():
        for hostile in corpus:
            spec = spec_with("slurm", slot, hostile.value)
            write_spec(path, spec)
            for backend in BACKENDS:
                try:
                    load_for(path, backend, slot)
                except JobkitError as err:
                    found[(backend, slot.key, hostile.id)] = check_refusal(err)
                else:
                    found[(backend, slot.key, hostile.id)] = ""
    return found


def test_loader_verdict_for_every_slot_string_and_backend(
    verdicts: dict[tuple[str, str, str], str], tally: Callable[[str, int], None]
) -> None:
    corpus = hostile_strings(STATIC_CANARY)
    every_slot = slots()
    assert len(corpus) >= 50 and len(every_slot) >= 40
    assert len(verdicts) == len(corpus) * len(every_slot) * len(BACKENDS)
    by_id = {h.id: h for h in corpus}
    for (backend, key, string_id), refusal in verdicts.items():
        value = by_id[string_id].value
        if any(ch in value for ch in "\n\r\x00"):
            # newline, CR and NUL would end a script line: refused in every slot
            assert refusal, f"{backend} {key} accepted {string_id}"
        if refusal:
            assert key.split("[")[0] in refusal or "--set" in refusal or "profile" in refusal, (
                f"{backend} {key} {string_id}: the message does not name the key: {refusal}"
            )
    accepted = sum(1 for v in verdicts.values() if not v)
    tally("injection: (slot, string, backend) cases through the loader", len(verdicts))
    tally("injection: ... accepted by the loader", accepted)
    tally("injection: ... refused with one clean line", len(verdicts) - accepted)
    tally("injection: hostile strings in the corpus", len(corpus))
    tally("injection: field slots walked from the schema", len(every_slot))


@pytest.mark.parametrize("backend", BACKENDS)
def test_accepted_values_stay_inside_their_words(
    backend: str,
    verdicts: dict[tuple[str, str, str], str],
    tmp_path: Path,
    tally: Callable[[str, int], None],
) -> None:
    corpus = hostile_strings(STATIC_CANARY)
    every_slot = slots()
    renders = 0
    render_refusals: Counter[str] = Counter()
    coerced: Counter[str] = Counter()  # text a non-text field took (exclusive: "yes")
    for hostile in corpus:
        accepted = [s for s in every_slot if verdicts[(backend, s.key, hostile.id)] == ""]
        coerced.update(s.key for s in accepted if not s.text_typed)
        for variant in (False, True):
            chosen = [
                s
                for s in accepted
                if s.train == variant and s.text_typed and (backend, s.path) not in NO_TWIN
            ]
            if not chosen:
                continue
            groups, refused = _groups(backend, chosen, hostile, tmp_path)
            render_refusals.update(refused)
            for group in groups:
                problems = _compare_once(backend, group, hostile, tmp_path)
                renders += 1
                assert not problems, (
                    f"{backend}: {hostile.id} ({hostile.why}) escaped its quoting in"
                    f" {[s.key for s in group]}:\n" + "\n".join(problems[:10])
                )
    tally(f"injection: combined renders compared word by word ({backend})", renders)
    tally(f"injection: refused at render time ({backend})", sum(render_refusals.values()))
    # booleans: a hostile word YAML reads as a boolean is a boolean (no text reaches the script)
    assert set(coerced) <= {
        "resources.exclusive",
        "scheduler.requeue",
        "env.debug",
        "launch.preflight",
        "code.snapshot",
        "code.include_untracked",
    }, coerced


def _renders(backend: str, chosen: list[Slot], value: str, folder: Path) -> JobkitError | None:
    """None when the combined spec loads and renders, else the refusal."""
    path = write_spec(
        folder / "combined.yaml", combined(backend, chosen, dict.fromkeys(chosen, value))
    )
    try:
        render_parts(load_for(path, backend).spec, folder)
    except JobkitError as err:
        return err
    return None


def _groups(
    backend: str, chosen: list[Slot], hostile: Hostile, folder: Path
) -> tuple[list[list[Slot]], list[str]]:
    """Split the slots into groups that render together; slots refused on their own (one
    clean line each) are returned by key. Two values may render alone but not together
    (an empty mail_user beside a mail_type): such a slot goes to the next group.

    First a few bulk groups (_bulk_groups); a slot their refusal names, and that is refused
    on its own too, is set aside and the rest tried again. Slot by slot only when that does
    not settle it."""
    refused: list[str] = []
    pending = list(chosen)
    while pending:
        bulk, err = _bulk_groups(backend, pending, hostile.value, folder)
        if err is None:
            return bulk, refused
        named = [slot for slot in pending if _names(err, slot)]
        if len(named) != 1:
            break
        alone = _renders(backend, named, hostile.value, folder)
        if alone is None:  # it renders on its own: refused only beside another slot
            break
        check_refusal(alone)
        refused.append(named[0].key)
        pending.remove(named[0])
    if not pending:
        return [], refused
    rendered: list[Slot] = []
    for slot in pending:
        err = _renders(backend, [slot], hostile.value, folder)
        if err is None:
            rendered.append(slot)
        else:
            check_refusal(err)
            refused.append(slot.key)
    groups: list[list[Slot]] = []
    while rendered:
        group: list[Slot] = []
        later: list[Slot] = []
        for slot in rendered:
            # one key per group, as in _bulk_groups
            has_key = slot.kind == "key" and any(other.kind == "key" for other in group)
            if not has_key and _renders(backend, [*group, slot], hostile.value, folder) is None:
                group.append(slot)
            else:
                later.append(slot)
        groups.append(group)
        rendered = later
    return groups, refused


def _bulk_groups(
    backend: str, chosen: list[Slot], value: str, folder: Path
) -> tuple[list[list[Slot]], JobkitError | None]:
    """The few groups that most often render at once, and the first refusal (None when
    each of them renders).

    The same text as a key of two mappings would be one variable: one key per group, the
    first with every other slot but the container's (a container refuses env.python), which
    make one more.
    """
    keys = [slot for slot in chosen if slot.kind == "key"]
    others = [slot for slot in chosen if slot.kind != "key" and slot.path[0] != "container"]
    inside = [slot for slot in chosen if slot.kind != "key" and slot.path[0] == "container"]
    groups = [group for group in [others + keys[:1], *([k] for k in keys[1:]), inside] if group]
    for group in groups:
        err = _renders(backend, group, value, folder)
        if err is not None:
            return groups, err
    return groups, None


def _names(err: JobkitError, slot: Slot) -> bool:
    """True when a refusal names this slot's field (not a mapping's key: its text is a name)."""
    return slot.kind != "key" and isinstance(err, SpecError) and err.key == ".".join(slot.path)


def _split(value: str) -> list[str]:
    """The words of a scheduler.extra entry (local and ssh do not use it, so they accept
    an entry that does not split: it then stands for itself)."""
    try:
        return shlex.split(value)
    except ValueError:
        return [value]


def _compare_once(backend: str, chosen: list[Slot], hostile: Hostile, folder: Path) -> list[str]:
    names = {slot: placeholder(i) for i, slot in enumerate(chosen)}
    safe_path = write_spec(folder / "safe.yaml", combined(backend, chosen, names))
    bad_path = write_spec(
        folder / "hostile.yaml", combined(backend, chosen, dict.fromkeys(chosen, hostile.value))
    )
    safe_script, safe_params = render_parts(load_for(safe_path, backend).spec, folder)
    bad_script, bad_params = render_parts(load_for(bad_path, backend).spec, folder)
    if hostile.value == "":
        # Optional fields take "" as unset ({% if x %}): lines and parts of lines go away,
        # so there is no word-for-word twin; it must add nothing (the run tests execute it).
        safe_lines, bad_lines = safe_script.split("\n"), bad_script.split("\n")
        return [] if len(bad_lines) <= len(safe_lines) else ["the empty string added lines"]
    values = {name: hostile.value for name in names.values()}
    split = {names[s]: _split(hostile.value) for s in chosen if s.path in WORD_SPLIT}
    problems = compare(safe_script, bad_script, values, split)
    if safe_params:
        expected = safe_params
        for name in names.values():
            expected = expected.replace(name, json.dumps(hostile.value, ensure_ascii=False)[1:-1])
        if expected != bad_params:
            problems.append(f"submitit parameters differ:\n{expected}\n{bad_params}")
    return problems


def test_refusals_through_the_real_cli(
    verdicts: dict[tuple[str, str, str], str],
    jobkit: Callable[..., CliResult],
    workdir: Path,
    tally: Callable[[str, int], None],
) -> None:
    """For each slot, its first refused string goes through `jobkit render`: exit 2, one line."""
    corpus = {h.id: h for h in hostile_strings(STATIC_CANARY)}
    tried = 0
    for slot in slots():
        refused = [
            string_id
            for (backend, key, string_id), why in verdicts.items()
            if backend == "slurm" and key == slot.key and why
        ]
        if not refused:
            continue
        spec = spec_with("slurm", slot, corpus[refused[0]].value)
        path = write_spec(workdir / "refused.yaml", spec)
        result = jobkit("render", str(path))
        assert result.code == 2 and result.out == "", (slot.key, result)
        expected = verdicts[("slurm", slot.key, refused[0])]
        assert result.err.startswith(f"jobkit: {path}:"), result.err
        assert result.err.split(".yaml:", 1)[1] == expected.split(".yaml:", 1)[1] + "\n"
        tried += 1
    assert tried >= 10
    tally("injection: refusals replayed through `jobkit render`", tried)


@pytest.mark.parametrize(
    ("safe", "hostile", "value"),
    [
        ("export A=jkph0z", "export A=x; touch /tmp/c", "x; touch /tmp/c"),
        ("echo jkph0z", "echo $(touch /tmp/c)", "$(touch /tmp/c)"),
        ("echo jkph0z", "echo it's", "it's"),
        ("#SBATCH --mail-user=jkph0z", "#SBATCH --mail-user=a --wrap=b", "a --wrap=b"),
        ("#SBATCH --output=jkph0z", "#SBATCH --output=a # b", "a # b"),
        ("cd -- jkph0z\nrun", "cd -- a\ntouch /tmp/c\nrun", "a\ntouch /tmp/c"),
    ],
)
def test_the_word_check_catches_an_unquoted_value(safe: str, hostile: str, value: str) -> None:
    """The checker itself: a value spliced in without quoting is reported."""
    assert compare(safe, hostile, {"jkph0z": value})
    if "\n" not in value and not safe.startswith("#"):
        quoted = safe.replace("jkph0z", shlex.quote(value))
        assert compare(safe, quoted, {"jkph0z": value}) == []
