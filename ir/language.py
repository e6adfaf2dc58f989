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
