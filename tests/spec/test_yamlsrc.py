"""YAML loading with a line for every key path."""

from __future__ import annotations

import pytest

from jobkit.core.errors import SpecError
from jobkit.core.yamlsrc import format_path, load_yaml_text, lookup, parse_value


def test_lines_of_keys_and_list_items() -> None:
    doc = load_yaml_text(
        "name: demo\nssh:\n  hosts:\n    - n1\n    - n2\nenv: {vars: {A: 1}}\n", "job.yaml"
    )
    assert doc.data == {"name": "demo", "ssh": {"hosts": ["n1", "n2"]}, "env": {"vars": {"A": 1}}}
    assert doc.lines[("name",)] == 1
    assert doc.lines[("ssh", "hosts")] == 3
    assert doc.lines[("ssh", "hosts", 0)] == 4
    assert doc.lines[("ssh", "hosts", 1)] == 5
    assert doc.lines[("env", "vars", "A")] == 6


def test_keys_are_taken_as_written() -> None:
    doc = load_yaml_text("on: 1\n2: two\nnull: x\n", "f.yaml")
    assert doc.data == {"on": 1, "2": "two", "null": "x"}


def test_merge_keys_and_aliases() -> None:
    text = "base: &b {nodes: 2, time: 10}\nresources:\n  <<: *b\n  nodes: 4\nagain: *b\n"
    doc = load_yaml_text(text, "f.yaml")
    assert doc.data["resources"] == {"nodes": 4, "time": 10}
    assert doc.data["again"] == {"nodes": 2, "time": 10}
    assert doc.lines[("resources", "nodes")] == 4


def test_duplicate_key_in_a_flow_mapping() -> None:
    with pytest.raises(SpecError) as caught:
        load_yaml_text("env: {vars: {A: 1, A: 2}}\n", "f.yaml")
    assert caught.value.show() == "f.yaml:1: env.vars.A: duplicate key"


def test_a_key_must_be_plain_text() -> None:
    with pytest.raises(SpecError) as caught:
        load_yaml_text("? [a, b]\n: 1\n", "f.yaml")
    assert caught.value.show() == "f.yaml:1: a key must be plain text (got a list)"


def test_recursive_alias_is_refused() -> None:
    with pytest.raises(SpecError) as caught:
        load_yaml_text("a: &x [*x]\n", "f.yaml")
    assert caught.value.show() == "f.yaml:1: a[0]: an alias refers to itself"


def test_multiple_documents_are_refused() -> None:
    with pytest.raises(SpecError) as caught:
        load_yaml_text("a: 1\n---\nb: 2\n", "f.yaml")
    assert caught.value.show() == (
        "f.yaml:2: invalid YAML: expected a single document in the stream, but found another"
        " document"
    )


def test_unknown_tag_is_one_line() -> None:
    with pytest.raises(SpecError) as caught:
        load_yaml_text("a: !!python/object:os.system x\n", "f.yaml")
    message = caught.value.show()
    assert message.startswith("f.yaml:1: a: invalid YAML value: could not determine a constructor")
    assert "\n" not in message


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2", 2),
        ("[cuda,nccl]", ["cuda", "nccl"]),
        ("{a: 1}", {"a": 1}),
        ("", None),
        ("python3 train.py --lr 0.1", "python3 train.py --lr 0.1"),
        ("01:00:00", "01:00:00"),
        ("yes", True),
    ],
)
def test_parse_value(text: str, value: object) -> None:
    assert parse_value(text, "--set x") == value


def test_parse_value_error_has_no_line() -> None:
    with pytest.raises(SpecError) as caught:
        parse_value("[a", "--set k=[a")
    assert caught.value.line is None
    assert caught.value.show().startswith("--set k=[a: invalid YAML: ")


def test_format_path_and_lookup() -> None:
    assert format_path(("ssh", "hosts", 1)) == "ssh.hosts[1]"
    assert format_path(()) == ""
    data = {"ssh": {"hosts": ["n1", "n2"]}}
    assert lookup(data, ("ssh", "hosts", 1)) == (True, "n2")
    assert lookup(data, ("ssh", "hosts", 2)) == (False, None)
    assert lookup(data, ("ssh", "port")) == (False, None)
