"""The one "who assigns x" walker, and the helpers that now delegate to it."""

from __future__ import annotations

import doctest

import pytest
from ktx.ir import Module, parse
from ktx.ir.access import assigned_names
from ktx.ir.facts import assign
from ktx.ir.facts.assign import assigned, assignments, written_name
from ktx.ir.syntax import text, walk


def _module(body: str) -> Module:
    return parse("__global__ void k(float* x, int n) {\n" + body + "\n}\n")


def _writes(body: str) -> dict[str, list[str]]:
    m = _module(body)
    return {k: [" ".join(text(m, n).split()) for n in v] for k, v in assigned(m, m.tree.root_node).items()}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("float s; s = 1.f;", {"s": ["s = 1.f"]}),
        ("float s; s += x[0]; s -= 1.f; s *= 2.f;", {"s": ["s += x[0]", "s -= 1.f", "s *= 2.f"]}),
        ("int i = 0; ++i; i--; i <<= 1;", {"i": ["++i", "i--", "i <<= 1"]}),
        ("float s; (s) = 2.f;", {"s": ["(s) = 2.f"]}),
        ("float s; ((s)) += 2.f;", {"s": ["((s)) += 2.f"]}),
        ("for (int i = 0; i < n; i++) x[i] = 0.f;", {"i": ["i++"]}),
    ],
)
def test_variable_writes(body: str, expected: dict[str, list[str]]) -> None:
    assert _writes(body) == expected


@pytest.mark.parametrize(
    "body",
    [
        "x[0] = 1.f;",  # memory, not a variable
        "*x = 1.f;",
        "float2 v; v.x = 1.f;",
        "float s = 0.f;",  # a declaration is no assignment
        "float s = 0.f; float t = s + 1.f;",  # reads are no writes
    ],
)
def test_not_variable_writes(body: str) -> None:
    assert _writes(body) == {}


def test_source_order_and_one_name() -> None:
    m = _module("int a = 0, b = 0; a = 1; b = 2; a += b; { a++; }")
    found = [text(m, n) for n in assignments(m, m.tree.root_node, "a")]
    assert found == ["a = 1", "a += b", "a++"]


def test_written_name_refuses_non_writes() -> None:
    m = _module("float s = 0.f; s = x[0] + s;")
    kinds = {n.type: written_name(m, n) for n in walk(m.tree.root_node)}
    assert kinds["assignment_expression"] == "s"
    assert kinds["binary_expression"] is None


def test_access_helper_delegates() -> None:
    m = _module("float s; (s) += x[0]; x[1] = s;")
    assert {k: len(v) for k, v in assigned_names(m, m.tree.root_node).items()} == {"s": 1}


def test_docstring_examples() -> None:
    result = doctest.testmod(assign)
    assert result.attempted > 0 and result.failed == 0
