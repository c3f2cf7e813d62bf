"""YAML loading that remembers the line of every key, so errors can say `file:line: key`."""

from __future__ import annotations

from typing import Any

import yaml

KeyPath = tuple[str, ...]


class YamlSourceError(ValueError):
    """Unreadable YAML: carries the file, the line (1-based) and a one-line message."""

    def __init__(self, message: str, line: int | None = None) -> None:
        self.message = message
        self.line = line
        super().__init__(message)


def _construct(
    loader: yaml.SafeLoader, node: yaml.Node, path: KeyPath, lines: dict[KeyPath, int]
) -> Any:
    if isinstance(node, yaml.MappingNode):
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise YamlSourceError("keys must be plain names", key_node.start_mark.line + 1)
            key = str(loader.construct_object(key_node))
            key_path = (*path, key)
            if key in result:
                raise YamlSourceError(
                    f"{'.'.join(key_path)}: duplicate key (first at line {lines[key_path]})",
                    key_node.start_mark.line + 1,
                )
            lines[key_path] = key_node.start_mark.line + 1
            result[key] = _construct(loader, value_node, key_path, lines)
        return result
    if isinstance(node, yaml.SequenceNode):
        items = []
        for index, item in enumerate(node.value):
            item_path = (*path, str(index))
            lines[item_path] = item.start_mark.line + 1
            items.append(_construct(loader, item, item_path, lines))
        return items
    return loader.construct_object(node, deep=True)


def load_yaml_with_lines(text: str) -> tuple[Any, dict[KeyPath, int]]:
    """The document's data and, for every key path (list items by index), its 1-based line.

    Duplicate keys and YAML syntax errors raise YamlSourceError with a line.
    """
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        lines: dict[KeyPath, int] = {}
        data = {} if node is None else _construct(loader, node, (), lines)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = err.problem or err.context or "invalid YAML"
        raise YamlSourceError(f"invalid YAML: {problem}", line) from None
    except yaml.YAMLError as err:
        raise YamlSourceError(f"invalid YAML: {err}") from None
    finally:
        loader.dispose()
    return data, lines
