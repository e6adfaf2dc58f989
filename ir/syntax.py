"""Node text and tree walking: the one copy the IR, :mod:`ktx.syntax` and the passes share.

The tree is parsed from a masked copy of the source (:mod:`ktx.ir.mask` blanks attribute-like
macros without moving a byte), so a node's offsets point into the original text while
``node.text`` is the masked copy's. :func:`text` reads the original bytes (what a pass prints
or edits); :func:`node_text` reads what the parser saw (enough for names and literals, and all
that code holding no module has).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import tree_sitter as ts


class HasSource(Protocol):
    """A :class:`ktx.ir.Module` or anything else holding the original bytes."""

    @property
    def source(self) -> bytes: ...


def source_text(source: bytes, node: ts.Node) -> str:
    """The text of ``node`` in ``source`` (the original bytes the tree's offsets point into)."""
    return source[node.start_byte : node.end_byte].decode("utf-8", "replace")


def text(module: HasSource, node: ts.Node) -> str:
    """The original source text of ``node``."""
    return source_text(module.source, node)


def node_text(node: ts.Node | None) -> str:
    """The text the parser saw for ``node`` (masked macros blank); ``""`` for None."""
    return "" if node is None or node.text is None else node.text.decode("utf-8", "replace")


def walk(node: ts.Node) -> Iterator[ts.Node]:
    """Every node under ``node`` (itself included), in source order."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


_BRANCHES = frozenset({"preproc_if", "preproc_ifdef", "preproc_elif", "preproc_else"})


def _branches(node: ts.Node) -> dict[int, int]:
    """For each ``#if`` chain ``node`` sits in: the chain's first node's id -> the id of the
    branch (``#if``, ``#elif`` or ``#else`` node) whose own lines hold ``node``."""
    out: dict[int, int] = {}
    child, parent = node, node.parent
    while parent is not None:
        if parent.type in _BRANCHES:
            alternative = parent.child_by_field_name("alternative")
            inside_alt = (
                alternative is not None and alternative.start_byte <= child.start_byte < alternative.end_byte
            )
            if not inside_alt:
                root = parent
                while root.parent is not None and root.parent.type in _BRANCHES:
                    alt = root.parent.child_by_field_name("alternative")
                    if alt is None or alt.id != root.id:
                        break
                    root = root.parent
                out.setdefault(root.id, parent.id)
        child, parent = parent, parent.parent
    return out


def exclusive(a: ts.Node, b: ts.Node) -> bool:
    """Whether ``a`` and ``b`` sit in different branches of one ``#if``/``#elif``/``#else``
    chain, so that no build compiles both (a pass's rewrite puts each knob value's code in its
    own branch; an access in one branch never meets the other's)."""
    ours, theirs = _branches(a), _branches(b)
    return any(theirs.get(root, branch) != branch for root, branch in ours.items())
