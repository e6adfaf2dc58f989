"""Who assigns a variable: the one walker every analysis and pass asks.

Three copies of this walk used to disagree at the edges (one stripped parentheses around the
target, one also looked through casts, one did neither), so a pass could see ``(s) += x`` as a
write where another did not. The rule here, for all of them: a *variable write* is an
``assignment_expression`` (``x = e``, ``x += e``, any compound operator) or an
``update_expression`` (``++x``, ``x--``) whose target, once parentheses and casts around it are
stripped, is a plain identifier. ``a[i] = e``, ``*p = e`` and ``s.f = e`` write memory, not a
variable, and are not reported (see :func:`ktx.ir.syntax.memory_writes`). Declarations
(``float s = 0;``) are not writes either: they introduce a name, which
:func:`ktx.ir.access.declared_names` reports.
"""

from __future__ import annotations

from collections.abc import Iterator

import tree_sitter as ts
from ktx.ir.syntax import HasSource, text, walk

__all__ = ["assigned", "assignments", "reassigned_after", "target", "written_name"]

_WRITES = ("assignment_expression", "update_expression")


def target(node: ts.Node) -> ts.Node | None:
    """The expression an assignment or ``++``/``--`` writes, or None for any other node.

    >>> from ktx.ir import parse
    >>> m = parse("__global__ void k() { float s; (s) += 1.f; }")
    >>> [text(m, t) for n in walk(m.tree.root_node) if (t := target(n)) is not None]
    ['(s)']
    """
    if node.type == "assignment_expression":
        return node.child_by_field_name("left")
    if node.type == "update_expression":
        return node.child_by_field_name("argument")
    return None


def written_name(module: HasSource, node: ts.Node) -> str | None:
    """The variable ``node`` (an assignment or ``++``/``--``) writes, or None.

    Parentheses and casts around the target are looked through: ``(s) = e`` writes ``s``.
    A target that is a subscript, a dereference or a field writes memory: None.
    """
    t = target(node)
    while t is not None:
        if t.type == "parenthesized_expression" and t.named_child_count == 1:
            t = t.named_children[0]
        elif t.type == "cast_expression":
            t = t.child_by_field_name("value")
        else:
            break
    if t is None or t.type != "identifier":
        return None
    return text(module, t)


def assignments(module: HasSource, scope: ts.Node, name: str | None = None) -> Iterator[ts.Node]:
    """The writes under ``scope`` (in source order) of ``name``, or of any variable when None."""
    for n in walk(scope):
        if n.type not in _WRITES:
            continue
        written = written_name(module, n)
        if written is not None and (name is None or written == name):
            yield n


def assigned(module: HasSource, scope: ts.Node) -> dict[str, list[ts.Node]]:
    """Every variable written under ``scope``, mapped to its writes in source order.

    A fresh dict each call (callers filter and extend it).

    >>> from ktx.ir import parse
    >>> m = parse("__global__ void k(float* x) { float s = 0; int n; s += x[0]; ++n; x[1] = s; }")
    >>> {k: len(v) for k, v in assigned(m, m.tree.root_node).items()}
    {'s': 1, 'n': 1}
    """
    found: dict[str, list[ts.Node]] = {}
    for n in assignments(module, scope):
        name = written_name(module, n)
        assert name is not None
        found.setdefault(name, []).append(n)
    return found


def reassigned_after(module: HasSource, scope: ts.Node, name: str, after: int) -> bool:
    """Whether ``name`` is written anywhere in ``scope`` after offset ``after``."""
    return any(n.start_byte >= after for n in assigned(module, scope).get(name, []))
