"""Spec fuzzing: malformed and mutated job specs through the real loader and the real CLI.

Every input either loads (and then `jobkit render` prints a script, or refuses it with one
line) or is refused with one `file:line: key: message` line and exit 2. Never a traceback,
never an internal error (exit 70). Hypothesis runs derandomized (the same examples in CI
every time); a fixed set of nasty files also goes through real `python -m jobkit`
processes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobkit.core.errors import JobkitError
from jobkit.spec.load import load_spec
from jobkit.spec.walk import iter_fields
from tests.plugins.invoke import CliResult
from tests.reliability.helpers import JOBKIT, assert_one_clean_line

pytestmark = pytest.mark.usefixtures("reuse_the_jinja_environment")

Invoke = Callable[..., CliResult]
FIELD_PATHS = [path for path, _ in iter_fields()]


@contextmanager
def same_corpus_in_any_order() -> Iterator[None]:
    """Hypothesis (6.131 and later) draws about 5 % of its strings and numbers from constants
    it finds in the local modules imported at that moment, and jobkit is an editable install
    (local): a derandomized corpus changed with the tests that happened to run before (the
    remembered-spec test saw 11 valid specs alone, more in a CI shard). Inside this block it
    draws from its own constants only, so the corpus is the same alone and in any order.
    Hypothesis has no setting for it: the private hook is replaced, and a Hypothesis without
    it fails here, loudly, rather than fuzzing another corpus in silence."""
    from hypothesis.internal.conjecture import providers
    from hypothesis.internal.constants_ast import Constants

    real = providers._get_local_constants
    providers._get_local_constants = Constants  # an empty set of constants
    providers.CONSTANTS_CACHE.cache.clear()  # choices cached with the local constants
    try:
        yield
    finally:
        providers._get_local_constants = real
        providers.CONSTANTS_CACHE.cache.clear()


def fuzz_settings(examples: int) -> settings:
    """Derandomized, no deadline (a loaded CI machine), no example database."""
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
        ],
    )


BASES: list[dict[str, Any]] = [
    {"name": "a", "run": {"command": "python3 train.py --epochs 3"}},
    {
        "name": "b",
        "backend": "slurm",
        "resources": {"nodes": 2, "gpus_per_node": 4, "time": "01:00:00", "mem": "32G"},
        "scheduler": {"array": "0-3%2", "signal": "USR2@120", "requeue": True},
        "env": {"modules": ["cuda"], "vars": {"A": 1}, "nccl": "ethernet"},
        "run": {"train": {"config": "tiny-lm", "overrides": {"train.steps": 10}}},
    },
    {
        "name": "c",
        "backend": "ssh",
        "resources": {"nodes": 2},
        "ssh": {"hosts": ["n1", "n2"], "port": 2222, "options": ["BatchMode=yes"]},
        "run": {"command": ["python3", "x.py"], "workdir": "w"},
        "logs": {"dir": "out"},
    },
    {
        "name": "d",
        "backend": "pbs",
        "pbs": {"flavor": "torque"},
        "scheduler": {"mail_user": "a@b", "mail_type": ["END"]},
        "launch": {"launcher": "mpirun", "nproc_per_node": 2},
        "run": {"command": ["./a.out"]},
    },
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.sampled_from([0, -1, 10**30, 2**63, -(2**63) - 1, 65536, 1_000_000]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(["", " ", "auto", "null", "~", "yes", "1e400", "0x10", "1:2:3:4", "-1"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
keys = st.one_of(
    st.sampled_from(FIELD_PATHS), st.lists(st.text(max_size=10), min_size=1, max_size=4)
)


def _set(data: dict[str, Any], path: tuple[str, ...] | list[str], value: Any) -> None:
    node: Any = data
    for part in path[:-1]:
        if not isinstance(node, dict):
            return
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    if isinstance(node, dict):
        node[path[-1]] = value


def _delete(data: dict[str, Any], path: tuple[str, ...] | list[str]) -> None:
    node: Any = data
    for part in path[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(path[-1], None)


@st.composite
def mutated_specs(draw: st.DrawFn) -> str:
    """A valid base spec with 1-4 structural mutations, as YAML text."""
    data = json.loads(json.dumps(draw(st.sampled_from(BASES))))
    deep = 0
    raw = "x"
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(["set", "set", "delete", "deep", "section", "raw"]))
        path = draw(keys)
        if action == "set":
            _set(data, path, draw(values))
        elif action == "delete":
            _delete(data, path)
        elif action == "raw":
            raw = draw(st.sampled_from(RAW_SCALARS))
            _set(data, path, "JKRAW")
        elif action == "deep":
            deep = draw(st.sampled_from([2, 10, 63, 64, 65, 100, 1000, 5000]))
            _set(data, path, "JKDEEP")
        else:
            _set(
                data,
                [draw(st.sampled_from(["resources", "env", "run", "ssh", "logs"]))],
                draw(scalars),
            )
    flow = draw(st.booleans())
    text = yaml.safe_dump(data, default_flow_style=flow, allow_unicode=draw(st.booleans()))
    if deep:
        text = text.replace("JKDEEP", "[" * deep + "]" * deep)
    return text.replace("JKRAW", raw)


RAW_SCALARS = [
    "2001-13-45",
    "2001-02-30",
    "9999-99-99",
    "2001-12-14t25:61:61.10-05:00",
    "9" * 5000,
    "-" + "9" * 4400,
    "1e99999",
    "0o99",
    "0x",
    "0b102",
    "190:20:30",
    "1_000",
    ".inf",
    "-.nan",
    "~",
    "=",
    "!!binary ###",
    "!!timestamp nope",
    "!!int abc",
    "!!float x",
    "!!bool maybe",
    "!!null x",
    "!!set {a: 1}",
    "!!omap [1]",
    "!!pairs [a]",
    "!!python/name:os.system",
    "!custom x",
    "<<",
]
"""Plain YAML scalars and tags written as they are (not quoted by the dumper)."""

YAML_SNIPPETS = [
    b"\t",
    b"&a ",
    b"*a",
    b"*nope",
    b"<<: *a\n",
    b"!!python/object/apply:os.system ['touch /tmp/jobkit-fuzz-canary']",
    b"!!binary aGk=",
    b"--- \n",
    b"...\n",
    b"%YAML 1.1\n",
    b"? [a, b]\n: c\n",
    b"{",
    b"[",
    b": :",
    b"'",
    b'"',
    b"\\",
    b"\xef\xbb\xbf",
    b"\x00",
    b"\xff\xfe",
    b"\xc3",
    b"\r",
    b"\xe2\x80\xa8",
    b"#",
    b"- ",
    b"|\n",
    b">-\n",
    b"!!int x",
    b"!!float 1e999",
    b"2001-12-14t21:59:43.10-05:00",
    *(f" {raw}\n".encode() for raw in RAW_SCALARS),
]


@st.composite
def mutated_texts(draw: st.DrawFn) -> bytes:
    """A valid spec's YAML text with 1-5 byte-level mutations."""
    data = draw(st.sampled_from(BASES))
    text = bytearray(yaml.safe_dump(data, default_flow_style=draw(st.booleans())).encode())
    for _ in range(draw(st.integers(1, 5))):
        lines = bytes(text).split(b"\n")
        action = draw(
            st.sampled_from(
                ["insert", "snippet", "snippet", "delete", "dup-line", "swap", "tabs", "cut"]
            )
        )
        pos = draw(st.integers(0, len(text)))
        if action == "insert":
            text[pos:pos] = draw(st.binary(max_size=16))
        elif action == "snippet":
            text[pos:pos] = draw(st.sampled_from(YAML_SNIPPETS))
        elif action == "delete":
            end = draw(st.integers(pos, min(len(text), pos + 40)))
            del text[pos:end]
        elif action == "dup-line" and lines:
            i = draw(st.integers(0, len(lines) - 1))
            lines.insert(i, lines[i])  # the same key twice
            text = bytearray(b"\n".join(lines))
        elif action == "swap" and len(lines) > 1:
            i = draw(st.integers(0, len(lines) - 2))
            lines[i], lines[i + 1] = lines[i + 1], lines[i]
            text = bytearray(b"\n".join(lines))
        elif action == "tabs":
            text = bytearray(bytes(text).replace(b"  ", b"\t", draw(st.integers(1, 3))))
        else:
            del text[pos:]
    return bytes(text)


junk = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=300).map(str.encode),
    st.lists(st.sampled_from(YAML_SNIPPETS), max_size=20).map(b"".join),
)


class Outcomes:
    """Counts of what the fuzzed inputs did."""

    def __init__(self) -> None:
        self.loaded = 0
        self.refused = 0
        self.rendered = 0
        self.render_refused = 0


def check_load(path: Path, outcomes: Outcomes) -> bool:
    """load_spec accepts or raises a one-line JobkitError; nothing else. True if it loaded."""
    try:
        load_spec(path, profile_dirs=[])
    except JobkitError as err:
        line = err.show()
        assert "\n" not in line and "\r" not in line, line
        assert line, "an empty error message"
        outcomes.refused += 1
        return False
    outcomes.loaded += 1
    return True


_DEPRECATED = re.compile(
    r"^jobkit: \S.*: [\w.]+: deprecated: write [\w.]+ \(the old key still works\)$"
)


def _a_note(line: str) -> bool:
    """A line render may print beside the script: a note, or a deprecated key's line."""
    return line.startswith("jobkit: note: ") or _DEPRECATED.match(line) is not None


def check_cli(jobkit: Invoke, path: Path, outcomes: Outcomes, *extra: str) -> None:
    """`jobkit render PATH`: exit 0 with a script, or exit 2 with one line."""
    result = jobkit("render", str(path), *extra)
    if result.code == 0:
        assert result.out.startswith("#!/bin/bash"), result.out[:200]
        # Nothing on stderr but render/notes.py's one-line notes (a value reinterpreted) and
        # spec/unsupported.py's `WHERE: KEY: deprecated: write NEW (the old key still works)`.
        assert all(_a_note(line) for line in result.err.splitlines()), result.err
        outcomes.rendered += 1
    else:
        assert_one_clean_line(result.err, result.code, allowed=(2,))
        assert result.out == ""
        outcomes.render_refused += 1


@pytest.fixture
def fuzz_file(tmp_path: Path) -> Path:
    return tmp_path / "fuzz.yaml"


def _run_fuzz(
    strategy: st.SearchStrategy[Any],
    examples: int,
    fuzz_file: Path,
    jobkit: Invoke,
    tally: Callable[[str, int], None],
    label: str,
) -> None:
    outcomes = Outcomes()

    @fuzz_settings(examples)
    @given(strategy)
    def one(content: str | bytes) -> None:
        raw = content.encode() if isinstance(content, str) else content
        fuzz_file.write_bytes(raw)
        check_load(fuzz_file, outcomes)
        check_cli(jobkit, fuzz_file, outcomes)

    with same_corpus_in_any_order():
        one()
    tried = outcomes.loaded + outcomes.refused
    assert tried >= examples // 2, f"hypothesis ran only {tried} examples"
    assert not Path("/tmp/jobkit-fuzz-canary").exists()
    tally(f"fuzz: {label}: specs tried", tried)
    tally(f"fuzz: {label}: refused by the loader (one line)", outcomes.refused)
    tally(f"fuzz: {label}: rendered by the CLI", outcomes.rendered)
    tally(f"fuzz: {label}: refused by the CLI (exit 2, one line)", outcomes.render_refused)


def test_mutated_specs(fuzz_file: Path, jobkit: Invoke, tally: Callable[[str, int], None]) -> None:
    """Wrong types, missing and unknown keys, huge numbers, empty strings, deep nesting."""
    _run_fuzz(mutated_specs(), 1500, fuzz_file, jobkit, tally, "structural mutations")


def test_mutated_yaml_text(
    fuzz_file: Path, jobkit: Invoke, tally: Callable[[str, int], None]
) -> None:
    """Invalid YAML, binary bytes, duplicate keys, tabs, aliases, tags, cut files."""
    _run_fuzz(mutated_texts(), 1500, fuzz_file, jobkit, tally, "text mutations")


def test_junk_files(fuzz_file: Path, jobkit: Invoke, tally: Callable[[str, int], None]) -> None:
    """Random bytes, random text, runs of YAML syntax."""
    _run_fuzz(junk, 400, fuzz_file, jobkit, tally, "junk")


set_values = st.one_of(
    st.text(max_size=30),
    st.sampled_from(
        ["[", "{a: ", "*x", "!!python/name:os.system", "1e999", "", "null", "[[[[[[[]]]]]]]"]
    ),
)


def test_set_options(tmp_path: Path, jobkit: Invoke, tally: Callable[[str, int], None]) -> None:
    """Random `--set KEY=VALUE` options (known and unknown keys, odd values) on a valid spec."""
    spec = tmp_path / "base.yaml"
    spec.write_text(yaml.safe_dump(BASES[1]))
    outcomes = Outcomes()
    key_text = st.one_of(
        st.sampled_from([".".join(p) for p in FIELD_PATHS]),
        st.text(max_size=20),
        st.sampled_from(["", ".", "a..b", "resources.nodes.x", "env.vars.A.B", "=", "run"]),
    )

    @fuzz_settings(600)
    @given(st.lists(st.tuples(key_text, set_values), min_size=1, max_size=3))
    def one(pairs: list[tuple[str, str]]) -> None:
        args = [arg for key, value in pairs for arg in ("--set", f"{key}={value}")]
        check_cli(jobkit, spec, outcomes, *args)

    with same_corpus_in_any_order():
        one()
    tried = outcomes.rendered + outcomes.render_refused
    tally("fuzz: --set options: command lines tried", tried)


def nasty_files(folder: Path) -> list[Path]:
    """Inputs for the real-process sample: one file per kind of trouble."""
    base = yaml.safe_dump(BASES[1]).encode()
    contents: dict[str, bytes] = {
        "empty": b"",
        "bom-only": b"\xef\xbb\xbf",
        "nul": b"name: a\x00\n",
        "latin1": "name: caf\xe9\n".encode("latin-1"),
        "binary": bytes(range(256)) * 4,
        "top-list": b"- a\n- b\n",
        "top-scalar": b"just text\n",
        "two-docs": base + b"---\n" + base,
        "dup-key": b"name: a\nname: b\nrun: {command: x}\n",
        "tab-indent": base.replace(b"  ", b"\t"),
        "unclosed": b"name: [a\n",
        "python-tag": b"name: !!python/object/apply:os.system ['touch /tmp/jobkit-fuzz-canary']\n",
        "unknown-alias": b"name: *nope\n",
        "alias-bomb": b"a: &a [x,x,x,x,x,x,x,x,x,x]\n"
        + b"".join(
            b"%c: &%c [*%c,*%c,*%c,*%c,*%c,*%c,*%c,*%c,*%c,*%c]\n" % ((c, c) + (c - 1,) * 10)
            for c in range(ord("b"), ord("k"))
        ),
        "deep": b"name: a\nrun: {command: " + b"[" * 5000 + b"]" * 5000 + b"}\n",
        # 1 MiB of nesting: PyYAML alone would scan it in quadratic time (hours)
        "deep-1mib": b"name: a\nrun: {command: " + b"[" * 500_000 + b"]" * 500_000 + b"}\n",
        "deep-mappings": b"name: a\nrun: " + b"{a: " * 5000 + b"}" * 5000 + b"\n",
        "huge-int": b"name: a\nrun: {command: x}\nresources: {nodes: " + b"9" * 5000 + b"}\n",
        "huge-float": b"name: a\nrun: {command: x}\nresources: {time: 1e999}\n",
        "nan": b"name: a\nrun: {command: x}\nresources: {nodes: .nan}\n",
        "wrong-section": b"name: a\nrun: {command: x}\nresources: 12\n",
        "unknown-key": b"name: a\nrun: {command: x}\nresourses: {nodes: 2}\n",
        "missing-run": b"name: a\n",
        "empty-name": b"name: ''\nrun: {command: x}\n",
        "crlf": base.replace(b"\n", b"\r\n"),
        "too-big": b"name: a\nrun: {command: x}\n#" + b"x" * (1 << 21) + b"\n",
        "newline-key": b'name: a\nrun: {command: x}\nenv: {vars: {"a\\nb": 1}}\n',
        "escape-value": b'name: "\\e[31mred"\nrun: {command: x}\n',
    }
    paths = []
    for name, content in contents.items():
        path = folder / f"{name}.yaml"
        path.write_bytes(content)
        paths.append(path)
    paths.append(folder / "does-not-exist.yaml")
    directory = folder / "a-directory.yaml"
    directory.mkdir()
    paths.append(directory)
    return paths


def test_nasty_files_through_real_processes(
    tmp_path: Path, tally: Callable[[str, int], None]
) -> None:
    """A fixed sample through `python -m jobkit render` and `submit --dry-run` processes."""
    files = nasty_files(tmp_path)
    env = {**os.environ, "JOBKIT_HOME": str(tmp_path / "home")}
    env.pop("JOBKIT_DEBUG", None)

    def run(args: list[str]) -> tuple[list[str], subprocess.CompletedProcess[str]]:
        done = subprocess.run(
            [*JOBKIT, *args], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path
        )
        return args, done

    commands = [["render", str(f)] for f in files] + [
        ["submit", "--dry-run", str(f)] for f in files[::3]
    ]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(run, commands))
    for args, done in results:
        if Path(args[-1]).name == "crlf.yaml":  # CR LF line ends are valid YAML
            assert done.returncode == 0 and done.stdout.startswith("#!/bin/bash"), done.stderr
            continue
        assert done.returncode == 2, (args, done.returncode, done.stderr)
        assert_one_clean_line(done.stderr, done.returncode, allowed=(2,))
        assert done.stdout == "", args
    assert not Path("/tmp/jobkit-fuzz-canary").exists()
    assert not (tmp_path / "home" / "jobkit.db").exists()  # --dry-run records nothing
    tally("fuzz: nasty files through real jobkit processes", len(results))
