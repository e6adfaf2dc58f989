"""Vectorize's legality, as facts: which loops pack, which per-thread bodies widen.

(Filled in by moving ``passes/vectorize.py``'s checks here; see below.)
"""

from __future__ import annotations

from collections.abc import Iterator

import tree_sitter as ts
from ktx.ir.module import Module
from ktx.ir.syntax import text as _text
from ktx.ir.syntax import walk as _walk

_REDUCE_CALLS = frozenset({"fmaxf", "fminf", "max", "min", "fmax", "fmin", "__hmax", "__hmin"})


def carried_updates(module: Module, scope: ts.Node) -> Iterator[ts.Node]:
    """Assignments under ``scope`` that fold a value into their target (``s += x``, ``m = fmaxf(m, x)``).

    An adapter standing in for :func:`ktx.ir.facts.reductions.reductions` until that lands.
    """
    for n in _walk(scope):
        if n.type != "assignment_expression":
            continue
        left, right, op = (n.child_by_field_name(f) for f in ("left", "right", "operator"))
        if left is None or right is None or op is None or left.type != "identifier":
            continue
        parent = n.parent
        if parent is not None and parent.type == "for_statement" and _is_step(parent, n):
            continue  # the loop's own step
        name = _text(module, left)
        folds = op.type in ("+=", "*=", "|=", "&=", "^=")
        if folds or (op.type == "=" and is_reduction(module, right, name)):
            yield n


def is_reduction(module: Module, node: ts.Node, name: str) -> bool:
    """Whether ``node``, assigned to ``name``, folds a value into it: ``name + x``, ``fmaxf(name, x)``."""
    n = node
    while n.type == "parenthesized_expression" and n.named_child_count == 1:
        n = n.named_children[0]
    if n.type == "call_expression":
        fn = n.child_by_field_name("function")
        args = n.child_by_field_name("arguments")
        if fn is None or args is None or _text(module, fn) not in _REDUCE_CALLS:
            return False
        named = [a for a in args.named_children if a.type != "comment"]
        return len(named) == 2 and any(_text(module, a).strip() == name for a in named)
    if n.type == "binary_expression":
        op = n.child_by_field_name("operator")
        left = n.child_by_field_name("left")
        right = n.child_by_field_name("right")
        if op is None or left is None or right is None or op.type not in ("+", "*", "|", "&", "^"):
            return False
        return _text(module, left).strip() == name or _text(module, right).strip() == name
    return False


def _is_step(loop: ts.Node, node: ts.Node) -> bool:
    return loop.child_by_field_name("update") == node
