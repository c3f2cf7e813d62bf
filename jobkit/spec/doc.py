"""Generate docs/spec.md, the job-spec reference, from the schema.

python -m jobkit.spec.doc            # print it
python -m jobkit.spec.doc --write    # rewrite docs/spec.md
python -m jobkit.spec.doc --check    # exit 1 and show the diff when docs/spec.md is stale
"""

from __future__ import annotations

import argparse
import difflib
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from jobkit.spec import env_section, noderange, values
from jobkit.spec.schema import JobSpec
from jobkit.spec.walk import iter_fields, section_model

ROOT = Path(__file__).resolve().parents[2]
DOC_PATH = ROOT / "docs" / "spec.md"
EXAMPLES_DIR = ROOT / "examples"
TEMPLATE = "spec.md.j2"
"""Beside this module: the reference's prose, where the generated tables go."""

_SPECIAL_TYPES = {
    values._duration: "duration",
    values._memory: "memory size",
    values._array: "array range",
    values._signal: "SIGNAL@SECONDS",
    values._as_argv: "command (string or list)",
    values._as_list: "list of strings (one string allowed)",
    env_section._nccl_shorthand: "section or preset name",
    noderange.node_count: "node count or range MIN:MAX",
    values._job_name: "name",
    values._host: "host name",
    values._env_name: "variable name",
}


def generate(examples_dir: Path = EXAMPLES_DIR) -> str:
    """The whole reference as Markdown: the prose of spec.md.j2 with the tables filled in."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).parent)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    return env.get_template(TEMPLATE).render(
        first_spec=_first_spec(examples_dir).rstrip("\n") + "\n",
        key_tables=_key_tables().rstrip("\n"),
        honours_rows=_honours_rows(),
        example_lines=_example_lines(examples_dir),
    )


def describe_type(annotation: Any, extra: list[Any] | None = None) -> str:
    """A short human name for a field's type: integer, duration, list of strings, ..."""
    for func in _validators(annotation, extra or []):
        if func in _SPECIAL_TYPES:
            return _SPECIAL_TYPES[func]
    base = annotation
    while get_origin(base) is Annotated:
        base = get_args(base)[0]
    origin = get_origin(base)
    if origin in (Union, types.UnionType):
        members = [arg for arg in get_args(base) if arg is not type(None)]
        if {_plain(arg) for arg in members} == {str, int, float, bool}:
            return "string, number or boolean"
        names = [describe_type(arg) for arg in members]
        return " or ".join(dict.fromkeys(names))
    if origin is Literal:
        values = [f"`{value}`" for value in get_args(base)]
        return values[0] if len(values) == 1 else "one of " + ", ".join(values)
    if origin is list:
        inner = describe_type(get_args(base)[0])
        simple = not any(mark in inner for mark in ("(", " or ", ","))
        return f"list of {inner}s" if simple else f"list of ({inner})"
    if origin is dict:
        key, value = (describe_type(arg) for arg in get_args(base))
        return f"mapping of {key} to {value}"
    if isinstance(base, type) and issubclass(base, BaseModel):
        return "section"
    return {int: "integer", bool: "boolean", str: "string", float: "number"}.get(base, str(base))


def _validators(annotation: Any, extra: list[Any]) -> Iterator[Any]:
    """Validator functions attached to a type (outermost first), and those in `extra`."""
    for item in extra:
        func = getattr(item, "func", None)
        if func is not None:
            yield func
    if get_origin(annotation) is Annotated:
        inner, *metadata = get_args(annotation)
        for item in metadata:
            func = getattr(item, "func", None)
            if func is not None:
                yield func
        yield from _validators(inner, [])


def _plain(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _range(field: FieldInfo) -> str:
    lower = next((item.ge for item in field.metadata if isinstance(item, Ge)), None)
    upper = next((item.le for item in field.metadata if isinstance(item, Le)), None)
    if lower is not None and upper is not None:
        return f", {lower} to {upper}"
    bounds = []
    for item in field.metadata:
        if isinstance(item, Ge):
            bounds.append(f">= {item.ge}")
        elif isinstance(item, Gt):
            bounds.append(f"> {item.gt}")
        elif isinstance(item, Le):
            bounds.append(f"<= {item.le}")
        elif isinstance(item, Lt):
            bounds.append(f"< {item.lt}")
    return f", {' and '.join(bounds)}" if bounds else ""


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "**required**"
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
        if isinstance(value, BaseModel):
            return ""
    else:
        value = field.default
    if value is PydanticUndefined:
        return ""
    return f"`{_yaml_value(value)}`"


def _yaml_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_yaml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_yaml_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _key_tables() -> str:
    sections: dict[tuple[str, ...], list[str]] = {(): []}
    order: list[tuple[str, ...]] = [()]
    for path, field in iter_fields():
        sub = section_model(field.annotation)
        if sub is not None:
            sections[path] = []
            order.append(path)
        parent = path[:-1]
        description = field.description or (sub.__doc__ or "" if sub is not None else "")
        type_text = describe_type(field.annotation, list(field.metadata)) + _range(field)
        cells = [f"`{'.'.join(path)}`", _cell(type_text), _default(field), _cell(description)]
        sections.setdefault(parent, []).append("| " + " | ".join(cells) + " |")
    out = []
    for path in order:
        model = JobSpec if not path else _model(path)
        title = "Top level" if not path else f"`{'.'.join(path)}`"
        doc = " ".join((model.__doc__ or "").split())
        out.append(f"### {title}\n\n{doc}\n")
        out.append("| key | type | default | description |\n|---|---|---|---|")
        out.extend(sections[path])
        out.append("")
    return "\n".join(out)


def _model(path: tuple[str, ...]) -> type[BaseModel]:
    model: type[BaseModel] = JobSpec
    for part in path:
        sub = section_model(model.model_fields[part].annotation)
        assert sub is not None
        model = sub
    return model


def _honours_rows() -> str:
    """Which backend honours which scheduler key, and how (Backend.honours): the table."""
    from jobkit.backends.honours import SCHEDULER_KEYS
    from jobkit.backends.registry import backend_class, builtin_names

    names = builtin_names()
    rows = ["| key | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for key in SCHEDULER_KEYS:
        cells = [backend_class(name).honours.get(key, "-") for name in names]
        rows.append(f"| `{key}` | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _first_spec(examples_dir: Path) -> str:
    quickstart = examples_dir / "quickstart.yaml"
    if not quickstart.is_file():
        return ""
    text = quickstart.read_text(encoding="utf-8")
    return "A first spec (`examples/quickstart.yaml`):\n\n```yaml\n" + text.rstrip("\n") + "\n```\n"


def _example_lines(examples_dir: Path) -> str:
    return "\n".join(
        f"- [`examples/{path.name}`](../examples/{path.name}): {_summary(path)}"
        for path in sorted(examples_dir.glob("*.yaml"))
    )


def _summary(path: Path) -> str:
    """The leading comment of an example, without command lines and a closing `...:`."""
    words = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        if not line.startswith("#  "):
            words.append(line[1:].strip())
    text = " ".join(words)
    if text.endswith(":") and ". " in text:
        text = text[: text.rindex(". ") + 1]
    return text


def main(argv: list[str] | None = None) -> int:
    """Print, write or check docs/spec.md."""
    parser = argparse.ArgumentParser(prog="python -m jobkit.spec.doc", description=__doc__)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help=f"rewrite {DOC_PATH}")
    group.add_argument("--check", action="store_true", help="exit 1 if it is out of date")
    args = parser.parse_args(argv)
    text = generate()
    if args.write:
        DOC_PATH.write_text(text, encoding="utf-8")
        return 0
    if args.check:
        diff = stale_diff(text)
        sys.stdout.write(diff)
        return 1 if diff else 0
    sys.stdout.write(text)
    return 0


def stale_diff(text: str | None = None) -> str:
    """The unified diff from docs/spec.md to what the schema generates ('' when up to date)."""
    current = DOC_PATH.read_text(encoding="utf-8") if DOC_PATH.is_file() else ""
    wanted = generate() if text is None else text
    return "".join(
        difflib.unified_diff(
            current.splitlines(keepends=True),
            wanted.splitlines(keepends=True),
            "docs/spec.md",
            "generated from jobkit/spec/schema.py",
        )
    )


if __name__ == "__main__":
    sys.exit(main())
