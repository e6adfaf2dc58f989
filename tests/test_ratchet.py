"""A ratchet on tree navigation inside ``passes/``: it may fall, never rise.

Passes should ask the facts layer (:mod:`ktx.ir.facts`) what the code means, not walk the
syntax tree each on its own (issue 17: four reduction recognisers, three load/store
classifiers and two "who assigns x" walkers had grown in the passes, and disagreed). This test
counts, per file of ``passes/``, with Python's :mod:`ast` (not a regex, so comments, strings
and docstrings never count):

* calls of ``child_by_field_name``, ``children_by_field_name``;
* reads of ``.named_children``, ``.children`` and ``.parent``;
* node-type tests: a comparison whose left side is ``<something>.type`` with ``==``, ``!=``,
  ``in`` or ``not in``.

It fails when a file's count rises above its budget below. To lower a budget after moving a
question into the facts layer, run ``python tests/test_ratchet.py`` and copy the printed table
into :data:`BUDGET` (the lead lowers it after each merge). A new file under ``passes/`` gets a
budget of 0 unless it is added here, deliberately.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PASSES = Path(__file__).resolve().parents[1] / "passes"

_CALLS = frozenset({"child_by_field_name", "children_by_field_name"})
_ATTRIBUTES = frozenset({"named_children", "children", "parent"})
_TYPE_TESTS = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)

#: Tree navigations per file, recorded after the issue 17 merges (was 826 in all at 339cb2d).
BUDGET: dict[str, int] = {
    "__init__.py": 0,
    "_common.py": 0,
    "_device.py": 3,
    "_per_thread.py": 0,
    "_variants.py": 0,
    "block_size.py": 5,
    "cache_hints.py": 73,
    "cluster_rows.py": 33,
    "coarsen.py": 23,
    "early_loads.py": 43,
    "expose.py": 17,
    "fast_math.py": 61,
    "hoist.py": 34,
    "launch_bounds.py": 0,
    "loads_first.py": 25,
    # the fused loop's body statements: the splice points of the rewrite, not analysis (its
    # legality is ir/facts/online.py's)
    "online.py": 5,
    "row_owner.py": 66,
    "rows_per_block.py": 7,
    # the split-off loop's initializer, value and body: where the peeled packs are spliced (the
    # row facts are ir/facts/rowkeep.py's)
    "row_registers.py": 5,
    "split.py": 40,
    "tile.py": 24,
    "unroll.py": 0,
    "vectorize.py": 25,
    "_pack_text.py": 4,  # moved from vectorize.py with the packed-loop text (s9-vheld): the total stays 29
    "warp_reduce.py": 15,
}


def navigation(source: str) -> int:
    """How many tree navigations ``source`` (Python) makes.

    >>> navigation("a = n.child_by_field_name('x').parent\\nif n.type == 'for_statement': pass")
    3
    >>> navigation("# n.parent in a comment\\ns = 'n.children'")
    0
    """
    return sum(1 for node in ast.walk(ast.parse(source)) if _navigates(node))


def _navigates(node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Attribute) and node.func.attr in _CALLS
    if isinstance(node, ast.Attribute):
        return node.attr in _ATTRIBUTES and isinstance(node.ctx, ast.Load)
    if isinstance(node, ast.Compare):
        return (
            isinstance(node.left, ast.Attribute)
            and node.left.attr == "type"
            and any(isinstance(op, _TYPE_TESTS) for op in node.ops)
        )
    return False


def counts() -> dict[str, int]:
    """The navigation count of every Python file directly under ``passes/``."""
    return {p.name: navigation(p.read_text()) for p in sorted(PASSES.glob("*.py"))}


def test_navigation_in_passes_does_not_rise() -> None:
    found = counts()
    risen = {name: n - BUDGET.get(name, 0) for name, n in found.items() if n > BUDGET.get(name, 0)}
    assert not risen, (
        "tree navigation in passes/ rose: "
        + ", ".join(f"{n} by {d} (now {found[n]}, budget {BUDGET.get(n, 0)})" for n, d in risen.items())
        + ". Ask the facts layer (ktx.ir.facts) instead of walking the tree in the pass; if the new"
        " navigation is truly needed, raise that file's entry in BUDGET in tests/test_ratchet.py"
        " and say why in the commit."
    )


def test_the_counter_sees_each_kind() -> None:
    source = (
        "x = n.child_by_field_name('a')\n"
        "y = n.children_by_field_name('b')\n"
        "z = [c for c in n.named_children] + n.children\n"
        "p = n.parent\n"
        "ok = n.type == 'if_statement' or n.type in ('a', 'b') or n.type != 'c'\n"
        "n.parent = None\n"  # a store is no navigation
        "t = node.type\n"  # reading the type alone is no test
    )
    assert navigation(source) == 8


def test_budget_names_only_existing_files() -> None:
    assert set(BUDGET) <= set(counts()), sorted(set(BUDGET) - set(counts()))


if __name__ == "__main__":  # print the current table, to paste into BUDGET after lowering
    for name, n in counts().items():
        sys.stdout.write(f'    "{name}": {n},\n')
