"""The import graph of jobkit/ and train/ is layered (docs/design.md, "Layers"): no import
circle, and no module imports one of a higher layer.

Imports are read from the source (ast), at module level and inside functions alike: an
import hidden in a function is still a dependency. Imports under `if TYPE_CHECKING:` are left
out (they never run). `import a.b.c` and `from a.b import c` count as importing the module
a.b.c (or the nearest enclosing module that exists): `from train.resume import checkpoint`
depends on train.resume.checkpoint, `from jobkit.core.units import parse_duration` on
jobkit.core.units. A package's own `__init__` importing its submodules is an edge like any
other (`train/__init__` loading train.api), but the parent packages Python runs before any
submodule are not.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("jobkit", "train")

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("core", ("jobkit.core",)),
    ("backend names", ("jobkit.backends.registry",)),
    (
        "spec values",
        (
            "jobkit.spec.model",
            "jobkit.spec.values",
            "jobkit.spec.scalars",
            "jobkit.spec.noderange",
        ),
    ),
    ("trainer", ("train",)),
    (
        "sections",
        (
            "jobkit.spec.sections",
            "jobkit.spec.env_section",
            "jobkit.spec.sweep",
            "jobkit.spec.derived",
            "jobkit.spec.commands",
            "jobkit.backends.honours",
            "jobkit.backends.preflight",
            "jobkit.backends.ssh_options",
            "jobkit.backends.pbs.options",
            "jobkit.backends.sge.options",
            "jobkit.container.spec",
            "jobkit.container.mounts",
            "jobkit.container.checks",
            "jobkit.notify.spec",
        ),
    ),
    ("spec", ("jobkit.spec",)),
    ("logs", ("jobkit.logs",)),
    ("container", ("jobkit.container",)),
    ("render", ("jobkit.render",)),
    ("backends", ("jobkit.backends",)),
    ("registry", ("jobkit.registry",)),
    ("diagnosis", ("jobkit.doctor", "jobkit.hang", "jobkit.report", "jobkit.plot")),
    ("check", ("jobkit.check",)),
    ("provenance", ("jobkit.provenance",)),
    ("manager", ("jobkit.manager", "jobkit.notify.jobfile")),
    (
        "verbs",
        (
            "jobkit.chain",
            "jobkit.notify",
            "jobkit.remote",
            "jobkit.manager.followup",
            "jobkit.provenance.read",
            "jobkit.provenance.rerun",
            "jobkit.provenance.compare",
            "jobkit.provenance.view",
        ),
    ),
    ("cli", ("jobkit.cli",)),
    ("api", ("jobkit.api",)),
    ("entry", ("jobkit", "jobkit.__main__")),
)
"""Lowest first; a module belongs to the layer of its longest matching prefix. Kept the same
as the table in docs/design.md."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {
        module_name(path): path for package in PACKAGES for path in (REPO / package).rglob("*.py")
    }


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported_names(tree: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    """Every dotted name an import statement in `tree` may load (module and attribute forms)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _type_checking(node):
            for other in node.orelse:
                yield from _imported_names(
                    ast.Module(body=[other], type_ignores=[]), module, is_package
                )
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join([*base, *([node.module] if node.module else [])])
            else:
                origin = node.module or ""
            for alias in node.names:  # a submodule if it is one, else the origin module
                yield f"{origin}.{alias.name}"
        yield from _imported_names(node, module, is_package)


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of jobkit/ and train/ it imports."""
    modules = all_modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        targets: set[str] = set()
        for name in _imported_names(tree, module, path.name == "__init__.py"):
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
        graph[module] = targets
    return graph


def layer_of(module: str) -> int:
    best, best_length = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_length:
                best, best_length = index, len(prefix)
    assert best >= 0, f"{module} is in no layer of LAYERS"
    return best


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_every_module_has_a_layer() -> None:
    for module in all_modules():
        layer_of(module)


def test_no_import_circle() -> None:
    graph = import_graph()
    described = [
        " / ".join(f"{m} -> {sorted(graph[m] & set(c))}" for m in c) for c in circles(graph)
    ]
    assert not described, "import circles:\n" + "\n".join(described)


def test_no_import_from_a_lower_layer_to_a_higher() -> None:
    graph = import_graph()
    upward = [
        f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if layer_of(target) > layer_of(module)
    ]
    assert not upward, "imports up the layers:\n" + "\n".join(upward)


def test_the_scanner_sees_function_level_imports() -> None:
    """A guard on the scanner itself: an import inside a function counts, one under
    TYPE_CHECKING does not."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import jobkit.cli\n"
        "def f():\n    from jobkit.core import units\n"
    )
    names = set(_imported_names(ast.parse(source), "jobkit.spec.x", False))
    assert "jobkit.core.units" in names
    assert "jobkit.cli" not in names
