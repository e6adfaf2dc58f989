"""Tests for the expression language used by specs and knob constraints."""

from __future__ import annotations

import pytest
from ktx.ir.errors import KtxError, Location
from ktx.ir.expr import Expr


@pytest.mark.parametrize(
    ("text", "env", "want"),
    [
        ("1 + 2 * 3", {}, 7),
        ("d // 8", {"d": 4096}, 512),
        ("d / 8", {"d": 4096}, 512.0),
        ("7 % 3", {}, 1),
        ("2 ** 10", {}, 1024),
        ("-x + +y", {"x": 2, "y": 5}, 3),
        ("min(d // 8, 256)", {"d": 11008}, 256),
        ("max(1, 2, 3)", {}, 3),
        ("min(4)", {}, 4),
        ("ceil_div(300, 128)", {}, 3),
        ("cdiv(256, 128)", {}, 2),
        ("ceil(2.1)", {}, 3),
        ("floor(2.9)", {}, 2),
        ("log2(1024)", {}, 10),
        ("log2(10)", {}, pytest.approx(3.321928)),
        ("abs(-3)", {}, 3),
        ("pow2(5)", {}, 32),
        ("d % (VEC * 32) == 0", {"d": 4096, "VEC": 8}, True),
        ("d % (VEC * 32) == 0", {"d": 4100, "VEC": 8}, False),
        ("0 < x <= 8", {"x": 8}, True),
        ("0 < x <= 8", {"x": 9}, False),
        ("a and not b or c", {"a": 1, "b": 0, "c": 0}, True),
        ("16 if n % 16 == 0 else 8", {"n": 24}, 8),
        ("true and True", {}, True),
        ("1.5e3", {}, 1500.0),
    ],
)
def test_evaluate(text: str, env: dict[str, int], want: object) -> None:
    assert Expr.parse(text).evaluate(env) == want


def test_names_exclude_functions_and_constants() -> None:
    e = Expr.parse("ceil_div(tokens * heads, BLOCK) + min(d, 4) if true else x")
    assert e.names == frozenset({"tokens", "heads", "BLOCK", "d", "x"})


@pytest.mark.parametrize(
    "text",
    [
        "min(d // 8, 256)",
        "(a + b) * c",
        "a - (b - c)",
        "2 ** 3 ** 2",
        "-x ** 2",
        "x if y else z",
        "not (a and b)",
        "a < b < c",
        "ceil_div(n, 32) * 32",
    ],
)
def test_str_round_trips(text: str) -> None:
    e = Expr.parse(text)
    again = Expr.parse(str(e))
    assert again == e
    assert str(again) == str(e)
    env = {k: 3 for k in e.names}
    assert again.evaluate(env) == e.evaluate(env)


def test_text_is_kept_and_equality_is_canonical() -> None:
    a = Expr.parse("a+b")
    b = Expr.parse("a  +  b")
    assert a.text == "a+b"
    assert a == b and hash(a) == hash(b)
    assert a != Expr.parse("b + a")


def test_numbers_are_accepted() -> None:
    assert Expr.parse(128).evaluate({}) == 128
    assert Expr.parse(0.5).evaluate({}) == 0.5


def test_evaluate_int_refuses_floats() -> None:
    with pytest.raises(KtxError, match="not an integer"):
        Expr.parse("d / 8").evaluate_int({"d": 4096})
    assert Expr.parse("d // 8").evaluate_int({"d": 4096}) == 512


@pytest.mark.parametrize(
    ("text", "fragment", "col"),
    [
        ("__import__('os')", "unknown function '__import__'", 1),
        ("a.b", "attribute access", 1),
        ("x + foo(1)", "unknown function 'foo'", 5),
        ("x[0]", "subscript", 1),
        ("'s' + 1", "constant 's'", 1),
        ("min()", "at least 1", 1),
        ("ceil_div(1)", "takes 2", 1),
        ("a << 2", "operator LShift", 1),
        ("lambda: 1", "lambda", 1),
        ("1 +", "unexpected", 4),
        ("d @ 2", "operator MatMult", 1),
        ("min", "without a call", 1),
        ("min(x, key=1)", "keyword", 12),
        ("a is b", "comparison Is", 1),
        ("", "empty", 0),
    ],
)
def test_parse_errors_name_token_and_column(text: str, fragment: str, col: int) -> None:
    with pytest.raises(KtxError) as info:
        Expr.parse(text, Location("k.toml", 7, 10))
    assert fragment in str(info.value)
    loc = info.value.location
    assert loc is not None and loc.path == "k.toml" and loc.line == 7
    if col:
        assert loc.col == 10 + col - 1


def test_unknown_name_at_evaluation_names_it_with_column() -> None:
    e = Expr.parse("  tokens * dd", Location("k.toml", 3, 5))
    with pytest.raises(KtxError) as info:
        e.evaluate({"tokens": 1, "d": 2})
    assert "unknown name 'dd'" in str(info.value)
    assert info.value.location == Location("k.toml", 3, 5 + 11)
    assert "known names: d, tokens" in info.value.hint


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("1 / 0", "division by zero"),
        ("1 // x", "division by zero"),
        ("5 % 0", "division by zero"),
        ("cdiv(4, 0)", "division by zero"),
        ("2 ** 1000", "exponent"),
        ("pow2(4096)", "exponent"),
        ("log2(0)", "non-positive"),
        ("cdiv(1.5, 2)", "integer arguments"),
    ],
)
def test_runtime_errors(text: str, fragment: str) -> None:
    with pytest.raises(KtxError, match=fragment):
        Expr.parse(text).evaluate({"x": 0})


def test_never_evaluates_python() -> None:
    # Names that would mean something to Python are just unknown variables here.
    with pytest.raises(KtxError, match="unknown name 'open'"):
        Expr.parse("open").evaluate({})
