"""The layers of ktx, read from the imports themselves (issue 21, item 6).

Two rules keep the house standing:

* ``ir/`` (``ktx.ir``) is the analysis layer: it reads the source and answers questions about
  it. It imports nothing of ``ktx`` outside ``ktx.ir`` (:data:`IR_MAY_IMPORT` is empty: the
  leaves it needed, ``errors``, ``expr`` and the C type table, live in ``ir/`` now), or the
  analysis would again depend on the code that consumes it (the 12-module cycle between
  ``ir/facts/`` and ``ktx/syntax.py`` was that).
* No import cycle anywhere in the package: a cycle makes the import order matter, invites
  function-local imports to dodge it, and means neither module can be read, tested or moved
  without the other.

The graph is built with :mod:`ast` over ``ktx/``, ``ir/`` and ``passes/`` (installed as ``ktx``,
``ktx.ir`` and ``ktx.passes``). It counts every import statement, function-local ones too: a
local import is still a dependency, only a deferred one, and deferring it is how cycles hide.
Two kinds are left out, on purpose:

* imports under ``if TYPE_CHECKING:``: they never run, and exist for annotations only (the
  checker still sees them, and ``ir/`` may not use them to reach above it: the layer test counts
  them);
* the implicit import of a parent package (``import ktx.ir.facts.kinds`` runs
  ``ktx/ir/__init__.py``): every submodule would otherwise sit in a cycle with the package that
  re-exports it. An import of the package itself (``from ktx.ir import Module``) is an edge.

Run ``python tests/test_layers.py`` to print the cycles and the ir/ imports found.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
#: Folder -> the package it installs as (pyproject's ``package-dir``).
PACKAGES = {"ktx": "ktx", "ir": "ktx.ir", "passes": "ktx.passes"}
#: What ``ktx.ir`` may import from ``ktx`` outside ``ktx.ir``: nothing (issue 21, item 6). Were a
#: leaf ever added, it must import nothing of ktx but the others (:func:`test_allowed_modules_are_leaves`).
IR_MAY_IMPORT: frozenset[str] = frozenset()


def module_files() -> dict[str, Path]:
    """Every module of the package, by dotted name (``ktx.ir.facts.kinds``)."""
    out: dict[str, Path] = {}
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([package, *parts])] = path
    return out


def _type_checking_only(tree: ast.Module) -> set[int]:
    """The ids of the import nodes under an ``if TYPE_CHECKING:`` block."""
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).split(".")[-1] == "TYPE_CHECKING":
            ids |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return ids


def imports(name: str, path: Path, known: set[str], *, type_checking: bool) -> Iterator[str]:
    """The modules of ``known`` that module ``name`` (at ``path``) imports.

    ``from pkg import x`` is an import of ``pkg.x`` when that is a module, else of ``pkg``.
    With ``type_checking`` False, imports under ``if TYPE_CHECKING:`` are skipped.
    """
    tree = ast.parse(path.read_text(), str(path))
    skipped = set() if type_checking else _type_checking_only(tree)
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                if f"{target}.{alias.name}" in known:
                    yield f"{target}.{alias.name}"
                elif target in known:
                    yield target


def import_graph(*, type_checking: bool = False) -> nx.DiGraph:
    """Module -> module it imports, over the whole package."""
    files = module_files()
    known = set(files)
    graph = nx.DiGraph()
    graph.add_nodes_from(known)
    for name, path in files.items():
        for target in imports(name, path, known, type_checking=type_checking):
            if target != name:
                graph.add_edge(name, target)
    return graph


def ir_imports_above() -> list[tuple[str, str]]:
    """(ir module, ktx module above ir it imports), TYPE_CHECKING imports included."""
    graph = import_graph(type_checking=True)
    return sorted(
        (a, b)
        for a, b in graph.edges
        if a.startswith("ktx.ir") and not b.startswith("ktx.ir") and b not in IR_MAY_IMPORT
    )


def cycles() -> list[list[str]]:
    return sorted(sorted(c) for c in nx.simple_cycles(import_graph()))


def test_the_graph_sees_the_imports() -> None:
    """The reader is not blind: known edges are found (a regression here would pass the rest)."""
    graph = import_graph()
    assert graph.has_edge("ktx.ir.module", "ktx.ir.errors")  # a module-level import
    assert graph.has_edge("ktx.pipeline", "ktx.ir")  # ``from ktx.ir import ...`` is the package
    assert graph.has_edge("ktx.passes.vectorize", "ktx.ir.syntax")
    assert len(graph) > 120 and graph.number_of_edges() > 500


def test_function_local_and_type_checking_imports(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ktx.spec import Spec\n"
        "def f():\n    from ktx import check\n    import ktx.expr\n"
        "from . import errors\n"
    )
    known = {"ktx.spec", "ktx.check", "ktx.expr", "ktx.errors"}
    path = tmp_path / "m.py"
    assert set(imports("ktx.m", path, known, type_checking=False)) == {"ktx.check", "ktx.expr", "ktx.errors"}
    assert "ktx.spec" in set(imports("ktx.m", path, known, type_checking=True))


def test_ir_imports_nothing_above_it_but_leaves() -> None:
    assert ir_imports_above() == []


def test_ir_imports_nothing_of_ktx_outside_ir() -> None:
    """ir/ stands on the ground floor: every ktx module it imports (TYPE_CHECKING too) is ktx.ir's."""
    graph = import_graph(type_checking=True)

    def in_ir(name: str) -> bool:
        return name == "ktx.ir" or name.startswith("ktx.ir.")

    outside = sorted((a, b) for a, b in graph.edges if in_ir(a) and not in_ir(b))
    assert outside == []
    assert not IR_MAY_IMPORT


def test_allowed_modules_are_leaves() -> None:
    graph = import_graph(type_checking=True)
    for leaf in IR_MAY_IMPORT:
        assert set(graph.successors(leaf)) <= IR_MAY_IMPORT, leaf


def test_no_import_cycles() -> None:
    assert cycles() == []


if __name__ == "__main__":
    found = cycles()
    print(f"{len(found)} cycle(s)")
    for cycle in found:
        print(f"  {len(cycle)}: {' '.join(cycle)}")
    above = ir_imports_above()
    print(f"{len(above)} ir import(s) above ir")
    for a, b in above:
        print(f"  {a} -> {b}")
    sys.exit(1 if found or above else 0)
