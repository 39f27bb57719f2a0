"""The import graph of ``src/chatjinja``, built from the source: layers import only downward, and nothing imports in a cycle.

Imports inside functions count as edges (they run, only later); imports under ``if TYPE_CHECKING:``
do not. Importing ``chatjinja.a.b`` also runs ``chatjinja/a/__init__.py``, so it is an edge to the
package ``chatjinja.a`` too. An import that stays inside a function says why on its first line
(``# lazy: <reason>``), and there are at most :data:`MAX_LAZY_IMPORTS` of them.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"

#: The layers, top to bottom; a layer's columns may not import each other (the two halves).
#: A module may import its own column of its own layer, or any layer below. This is the one
#: declaration of the layers (docs/design.md draws it).
LAYERS: tuple[tuple[str, tuple[tuple[str, ...], ...]], ...] = (
    ("entry", (("chatjinja", "chatjinja.__main__", "chatjinja.cli", "chatjinja.commands"),)),
    ("front door", (("chatjinja.template", "chatjinja.batch"),)),
    ("jobs", ((
        "chatjinja.release",
        "chatjinja.conform",
        "chatjinja.portability",
        "chatjinja.serving",
        "chatjinja.training",
        "chatjinja.probing",
        "chatjinja.observation",
        "chatjinja.loading",
        "chatjinja.report",
    ),)),
    ("halves", (("chatjinja.runtime",), ("chatjinja.lint", "chatjinja.analysis", "chatjinja.syntax"))),
    ("base", (("chatjinja.version", "chatjinja.source", "chatjinja.errors", "chatjinja.limits", "chatjinja.files",
               "chatjinja.parameters"),)),
)

#: a third of the 164 imports inside functions there were before the layers
MAX_LAZY_IMPORTS = 54


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the chatjinja module imported
    line: int
    inner: bool  # inside a function


def _modules() -> dict[str, Path]:
    modules = {}
    for path in sorted((SRC / "chatjinja").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _type_checking(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for child in ast.walk(node))
    return skipped


def _inner(tree: ast.AST) -> set[int]:
    inner: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inner.update(id(child) for child in ast.walk(node) if isinstance(child, (ast.Import, ast.ImportFrom)))
    return inner


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            package = module if is_package else module.rpartition(".")[0]
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{node.module}" if node.module else package
        else:
            base = node.module or ""
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
    found = []
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name.startswith("chatjinja"):
            found.append(name)
    return found


def _packages_run(module: str, target: str) -> list[str]:
    """The packages whose ``__init__`` importing ``target`` runs, other than those ``module`` is inside already."""
    parts = target.split(".")
    ancestors = [".".join(parts[:i]) for i in range(2, len(parts))]  # never the root: its __init__ imports lazily
    return [p for p in ancestors if not (module == p or module.startswith(p + "."))]


def import_graph() -> tuple[dict[str, Path], list[Import]]:
    modules = _modules()
    imports = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped, inner = _type_checking(tree), _inner(tree)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or id(node) in skipped:
                continue
            for target in _targets(module, path.name == "__init__.py", node, modules):
                for t in (target, *_packages_run(module, target)):
                    if t != module:
                        imports.append(Import(module, t, node.lineno, id(node) in inner))
    return modules, imports


def _place(module: str) -> tuple[int, int]:
    """(layer index, column index) of the longest declared prefix of ``module``."""
    best: tuple[int, int, int] | None = None
    for layer, (_, columns) in enumerate(LAYERS):
        for column, prefixes in enumerate(columns):
            for prefix in prefixes:
                if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[2]):
                    best = (layer, column, len(prefix))
    if best is None:
        raise AssertionError(f"{module} is in no layer: declare it in tests/test_layers.py LAYERS")
    return best[0], best[1]


def _cycles(modules: dict[str, Path], imports: list[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for i in imports:
        edges[i.module].add(i.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in modules:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


@pytest.fixture(scope="module")
def graph() -> tuple[dict[str, Path], list[Import]]:
    return import_graph()


def test_every_module_has_a_layer(graph: tuple[dict[str, Path], list[Import]]) -> None:
    modules, _ = graph
    for module in modules:
        _place(module)


def test_no_import_cycle(graph: tuple[dict[str, Path], list[Import]]) -> None:
    modules, imports = graph
    assert _cycles(modules, imports) == []


def test_layers_import_only_downward(graph: tuple[dict[str, Path], list[Import]]) -> None:
    _, imports = graph
    wrong = []
    for i in imports:
        (layer, column), (to_layer, to_column) = _place(i.module), _place(i.target)
        if to_layer < layer or (to_layer == layer and to_column != column):
            wrong.append(f"{i.module}:{i.line} imports {i.target} ({LAYERS[layer][0]} -> {LAYERS[to_layer][0]})")
    assert wrong == []


def _lazy_imports() -> list[tuple[str, int, str]]:
    out = []
    for path in sorted((SRC / "chatjinja").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                for child in ast.walk(node):
                    if isinstance(child, (ast.Import, ast.ImportFrom)):
                        out.append((str(path.relative_to(SRC)), child.lineno, lines[child.lineno - 1]))
    return sorted(set(out))


def test_imports_inside_functions_are_few_and_say_why() -> None:
    lazy = _lazy_imports()
    unexplained = [f"{path}:{line}: {text.strip()}" for path, line, text in lazy if "# lazy: " not in text]
    assert unexplained == []
    assert len(lazy) <= MAX_LAZY_IMPORTS, "\n".join(f"{p}:{n}: {t.strip()}" for p, n, t in lazy)


def test_the_checks_see_what_they_guard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cycle, an upward import and an unexplained lazy import in a small tree are each found."""
    package = tmp_path / "chatjinja"
    (package / "runtime").mkdir(parents=True)
    (package / "lint").mkdir()
    (package / "__init__.py").write_text("")
    (package / "errors.py").write_text("from .runtime import render\n")  # base -> halves: upward
    (package / "runtime" / "__init__.py").write_text("")
    (package / "runtime" / "render.py").write_text("from . import sandbox\n")
    (package / "runtime" / "sandbox.py").write_text("def f():\n    from . import render\n")  # a cycle, lazily
    (package / "lint" / "__init__.py").write_text("from ..runtime import sandbox\n")  # one half -> the other
    monkeypatch.setattr(sys.modules[__name__], "SRC", tmp_path)
    modules, imports = import_graph()
    assert _cycles(modules, imports) == [["chatjinja.runtime.render", "chatjinja.runtime.sandbox"]]
    upward = [(i.module, i.target) for i in imports if _place(i.target)[0] < _place(i.module)[0]
              or (_place(i.target)[0] == _place(i.module)[0] and _place(i.target)[1] != _place(i.module)[1])]
    assert ("chatjinja.errors", "chatjinja.runtime.render") in upward
    assert ("chatjinja.lint", "chatjinja.runtime.sandbox") in upward
    assert [(p, n) for p, n, t in _lazy_imports() if "# lazy: " not in t] == [("chatjinja/runtime/sandbox.py", 2)]
