"""The tree-sitter CUDA grammar and the bundled ``.scm`` queries, loaded once."""

from __future__ import annotations

import functools
from importlib import resources

import tree_sitter as ts
import tree_sitter_cuda


@functools.cache
def language() -> ts.Language:
    return ts.Language(tree_sitter_cuda.language())


@functools.cache
def query(name: str) -> ts.Query:
    """The query ``ir/queries/<name>.scm``; queries are package data so users can read them."""
    text = (resources.files("ktx.ir") / "queries" / f"{name}.scm").read_text()
    result: ts.Query = ts.Query(language(), text)
    return result


def captures(name: str, node: ts.Node) -> dict[str, list[ts.Node]]:
    result: dict[str, list[ts.Node]] = ts.QueryCursor(query(name)).captures(node)
    return result


def parse_tree(source: bytes) -> ts.Tree:
    return ts.Parser(language()).parse(source)


#: Overwrites ``#define NAME`` (at least nine bytes) so a macro body parses as a function body.
_MACRO_WRAPPER_HEAD = b"void _(){"


@functools.lru_cache(maxsize=64)
def macro_body_tree(source: bytes, define_start: int, value_start: int, value_end: int) -> ts.Tree | None:
    """A ``#define`` body parsed as the body of a function, at its own byte offsets in ``source``.

    The body is opaque text to the file's tree. The copy parsed is blank except for the body,
    with the ``#define NAME(...)`` head overwritten by a function header, so that every node's
    offsets point into the original file (edits and spans work unchanged). None when the head
    is too short to hold that header. Cached: passes ask for the same launch's tree repeatedly.
    """
    head = _MACRO_WRAPPER_HEAD
    if value_start - define_start < len(head):
        return None
    copy = bytearray(b" " * len(source))
    copy[define_start : define_start + len(head)] = head
    copy[value_start:value_end] = source[value_start:value_end]
    copy += b"\n;}\n"
    return parse_tree(bytes(copy))
