"""A small, safe expression language over shape variables and knobs.

Specs (``ktx.toml``) and pass templates describe sizes, launch geometry and constraints as text:
``"min(d // 8, 256)"``, ``"d % (VEC * 32) == 0"``. Those strings come from files a user edits,
so they are parsed with :mod:`ast` into a whitelist of node types and interpreted here; nothing
is ever handed to ``eval``.

Semantics (chosen to be unsurprising to people who write launch code in Python *and* C++):

* integers are exact Python ints; ``/`` is true division (always a float), ``//`` is floor
  division and ``%`` the matching modulo (Python's, which equals C's for non-negative operands,
  the only case sizes have);
* ``ceil_div(a, b)`` / ``cdiv(a, b)`` round up: the usual ``(a + b - 1) / b`` of C++ launch code;
* comparisons chain (``0 < x <= 8``) and yield bools; ``and``/``or``/``not`` take and yield bools;
* ``x if cond else y`` picks a value (launch code is full of such choices);
* functions: ``min``, ``max`` (one or more arguments), ``ceil_div``/``cdiv``, ``ceil`` and
  ``floor`` (to int), ``log2`` (an exact int for a power-of-two int, else a float), ``abs``,
  ``pow2(n) = 2**n``.

Launch sizes must be integers: :meth:`Expr.evaluate_int` refuses a float result instead of
rounding it silently, which is how ``d / 8`` where ``d // 8`` was meant gets caught.

>>> e = Expr.parse("min(d // 8, 256)")
>>> sorted(e.names), e.evaluate({"d": 4096})
(['d'], 256)
>>> Expr.parse("ceil_div(n, 128) * 128").evaluate_int({"n": 300})
384
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ktx.ir.errors import KtxError, Location

Value = int | float | bool

#: Largest exponent ``**`` and ``pow2`` accept: sizes never need more, and a cap keeps a typo
#: such as ``2 ** 10 ** 10`` from hanging the process.
MAX_EXPONENT = 128


class _EvalError(Exception):
    """Raised inside evaluation with the offending node; turned into a located KtxError."""

    def __init__(self, node: ast.AST, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.node = node
        self.message = message
        self.hint = hint


def _int_arg(node: ast.AST, name: str, value: Value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _EvalError(node, f"{name}() needs integer arguments, got {value!r}")
    return value


def _ceil_div(node: ast.AST, args: list[Value]) -> Value:
    a, b = (_int_arg(node, "ceil_div", v) for v in args)
    if b == 0:
        raise _EvalError(node, "division by zero in ceil_div()")
    return -(-a // b)


def _log2(node: ast.AST, args: list[Value]) -> Value:
    (x,) = args
    if x <= 0:
        raise _EvalError(node, f"log2() of non-positive value {x!r}")
    if isinstance(x, int) and not isinstance(x, bool) and x & (x - 1) == 0:
        return x.bit_length() - 1
    return math.log2(x)


def _pow2(node: ast.AST, args: list[Value]) -> Value:
    (n,) = args
    if isinstance(n, int) and abs(n) > MAX_EXPONENT:
        raise _EvalError(node, f"pow2() exponent {n} is larger than {MAX_EXPONENT}")
    if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
        return 1 << n
    return 2.0**n


def _min(node: ast.AST, args: list[Value]) -> Value:
    return min(args)


def _max(node: ast.AST, args: list[Value]) -> Value:
    return max(args)


def _ceil(node: ast.AST, args: list[Value]) -> Value:
    return math.ceil(args[0])


def _floor(node: ast.AST, args: list[Value]) -> Value:
    return math.floor(args[0])


def _abs(node: ast.AST, args: list[Value]) -> Value:
    return abs(args[0])


_Fn = Callable[[ast.AST, list[Value]], Value]

#: name -> (implementation, minimum arity, maximum arity or None for variadic)
FUNCTIONS: Mapping[str, tuple[_Fn, int, int | None]] = {
    "min": (_min, 1, None),
    "max": (_max, 1, None),
    "ceil_div": (_ceil_div, 2, 2),
    "cdiv": (_ceil_div, 2, 2),
    "ceil": (_ceil, 1, 1),
    "floor": (_floor, 1, 1),
    "log2": (_log2, 1, 1),
    "abs": (_abs, 1, 1),
    "pow2": (_pow2, 1, 1),
}

_BINOPS: Mapping[type[ast.operator], tuple[str, Callable[[Value, Value], Value]]] = {
    ast.Add: ("+", operator.add),
    ast.Sub: ("-", operator.sub),
    ast.Mult: ("*", operator.mul),
    ast.Div: ("/", operator.truediv),
    ast.FloorDiv: ("//", operator.floordiv),
    ast.Mod: ("%", operator.mod),
    ast.Pow: ("**", operator.pow),
}

_CMPOPS: Mapping[type[ast.cmpop], Callable[[Value, Value], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}

_CONSTANTS: Mapping[str, Value] = {"True": True, "False": False, "true": True, "false": False}


def _describe(node: ast.AST) -> str:
    """A short user-facing name for a node we refuse."""
    names = {
        ast.Attribute: "attribute access",
        ast.Subscript: "subscript",
        ast.Lambda: "lambda",
        ast.List: "list",
        ast.Tuple: "tuple",
        ast.Dict: "dict",
        ast.Set: "set",
        ast.JoinedStr: "f-string",
        ast.Starred: "star argument",
        ast.NamedExpr: "assignment",
    }
    for kind, text in names.items():
        if isinstance(node, kind):
            return text
    if isinstance(node, ast.BinOp):
        return f"operator {type(node.op).__name__}"
    if isinstance(node, ast.UnaryOp):
        return f"operator {type(node.op).__name__}"
    if isinstance(node, ast.Constant):
        return f"constant {node.value!r}"
    return type(node).__name__


@dataclass(frozen=True, eq=False)
class Expr:
    """A parsed expression. Immutable; equal when the canonical forms are equal.

    ``text`` is what the user wrote; ``str(expr)`` is a canonical form that parses back to an
    equal expression. ``where`` (optional) is where ``text`` starts in its file, so errors point
    at the exact column of the bad token.
    """

    text: str
    where: Location | None = None
    _tree: ast.expr = field(default=ast.Constant(0), repr=False, compare=False)
    _names: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str | int | float, where: Location | None = None) -> Expr:
        """Parse ``text``; a bare number is accepted too (TOML values are often numbers)."""
        if isinstance(text, bool) or not isinstance(text, str | int | float):
            raise KtxError(f"expected an expression string, got {text!r}", where)
        source = str(text)
        stripped = source.strip()
        if not stripped:
            raise KtxError("empty expression", where, "write a number or a formula")
        lead = len(source) - len(source.lstrip())
        try:
            module = ast.parse(stripped, mode="eval")
        except SyntaxError as exc:
            offset = exc.offset or 0
            at = offset - 1 if 0 < offset <= len(stripped) else len(stripped)
            col = lead + at
            bad = repr(stripped[at]) if at < len(stripped) else "end of text"
            raise KtxError(
                f"invalid expression {stripped!r}: {exc.msg}, unexpected {bad} at column {col + 1}",
                _shift(where, col),
                "use numbers, names, + - * / // % **, comparisons, and/or/not, " + ", ".join(FUNCTIONS),
            ) from None
        names: set[str] = set()
        _check(module.body, stripped, lead, where, names)
        return cls(source, where, module.body, frozenset(names))

    # -- queries --------------------------------------------------------------------------

    @property
    def names(self) -> frozenset[str]:
        """Free variables (function names excluded)."""
        return self._names

    def __str__(self) -> str:
        return ast.unparse(self._tree)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Expr) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    def evaluate(self, env: Mapping[str, Value]) -> Value:
        """Evaluate with ``env`` binding every free name; errors name the token and column."""
        try:
            return _eval(self._tree, env)
        except _EvalError as exc:
            col = getattr(exc.node, "col_offset", 0) + self._lead
            raise KtxError(
                f"in {self.text.strip()!r}: {exc.message}", _shift(self.where, col), exc.hint
            ) from None

    def evaluate_int(self, env: Mapping[str, Value]) -> int:
        """Evaluate and insist on an integer (launch sizes, shapes, byte counts)."""
        value = self.evaluate(env)
        if isinstance(value, bool) or not isinstance(value, int):
            raise KtxError(
                f"{self.text.strip()!r} evaluates to {value!r}, not an integer",
                self.where,
                "use // for integer division, or ceil()/floor()",
            )
        return value

    def evaluate_bool(self, env: Mapping[str, Value]) -> bool:
        """Evaluate a predicate (constraints); any number is truthy when non-zero, as in C."""
        return bool(self.evaluate(env))

    @property
    def _lead(self) -> int:
        return len(self.text) - len(self.text.lstrip()) if isinstance(self.text, str) else 0


def _shift(where: Location | None, col: int) -> Location | None:
    """Location of the character ``col`` (0-based) into an expression that starts at ``where``."""
    if where is None:
        return Location(None, 1, col + 1)
    if where.line <= 0:
        return where
    return Location(where.path, where.line, where.col + col)


def _check(node: ast.AST, text: str, lead: int, where: Location | None, names: set[str]) -> None:
    """Refuse every node outside the whitelist, collecting free names on the way."""

    def fail(bad: ast.AST, message: str, hint: str = "") -> KtxError:
        col = lead + getattr(bad, "col_offset", 0)
        return KtxError(f"in {text!r}: {message} at column {col + 1}", _shift(where, col), hint)

    if isinstance(node, ast.Constant):
        if not isinstance(node.value, int | float):
            raise fail(node, f"{_describe(node)} is not allowed", "only numbers are constants")
        return
    if isinstance(node, ast.Name):
        if node.id in FUNCTIONS:
            raise fail(node, f"function {node.id!r} used without a call")
        if node.id not in _CONSTANTS:
            names.add(node.id)
        return
    if isinstance(node, ast.BinOp):
        if type(node.op) not in _BINOPS:
            raise fail(node, f"{_describe(node)} is not allowed", "use + - * / // % **")
        _check(node.left, text, lead, where, names)
        _check(node.right, text, lead, where, names)
        return
    if isinstance(node, ast.UnaryOp):
        if not isinstance(node.op, ast.USub | ast.UAdd | ast.Not):
            raise fail(node, f"{_describe(node)} is not allowed")
        _check(node.operand, text, lead, where, names)
        return
    if isinstance(node, ast.BoolOp):
        for value in node.values:
            _check(value, text, lead, where, names)
        return
    if isinstance(node, ast.Compare):
        for op in node.ops:
            if type(op) not in _CMPOPS:
                raise fail(node, f"comparison {type(op).__name__} is not allowed")
        _check(node.left, text, lead, where, names)
        for comparator in node.comparators:
            _check(comparator, text, lead, where, names)
        return
    if isinstance(node, ast.IfExp):
        for part in (node.test, node.body, node.orelse):
            _check(part, text, lead, where, names)
        return
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name):
            raise fail(node, "only plain function calls are allowed")
        spec = FUNCTIONS.get(node.func.id)
        if spec is None:
            raise fail(node, f"unknown function {node.func.id!r}", "functions: " + ", ".join(FUNCTIONS))
        if node.keywords:
            raise fail(node.keywords[0].value, "keyword arguments are not allowed")
        _, lo, hi = spec
        count = len(node.args)
        if count < lo or (hi is not None and count > hi):
            want = f"{lo}" if hi == lo else f"at least {lo}" if hi is None else f"{lo} to {hi}"
            raise fail(node, f"{node.func.id}() takes {want} argument(s), got {count}")
        for arg in node.args:
            _check(arg, text, lead, where, names)
        return
    raise fail(node, f"{_describe(node)} is not allowed")


def _eval(node: ast.expr, env: Mapping[str, Value]) -> Value:
    if isinstance(node, ast.Constant):
        value = node.value
        assert isinstance(value, int | float)  # checked at parse time
        return value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        known = ", ".join(sorted(env)) or "none"
        raise _EvalError(node, f"unknown name {node.id!r}", f"known names: {known}")
    if isinstance(node, ast.BinOp):
        left = _eval(node.left, env)
        right = _eval(node.right, env)
        symbol, fn = _BINOPS[type(node.op)]
        if symbol in ("/", "//", "%") and right == 0:
            raise _EvalError(node, f"division by zero in {symbol!r}")
        if symbol == "**" and abs(right) > MAX_EXPONENT:
            raise _EvalError(node, f"exponent {right!r} is larger than {MAX_EXPONENT}")
        try:
            return fn(left, right)
        except (OverflowError, ZeroDivisionError, ValueError) as exc:
            raise _EvalError(node, f"{symbol!r} failed: {exc}") from None
    if isinstance(node, ast.UnaryOp):
        operand = _eval(node.operand, env)
        if isinstance(node.op, ast.Not):
            return not operand
        return -operand if isinstance(node.op, ast.USub) else +operand
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            return all(bool(_eval(v, env)) for v in node.values)
        return any(bool(_eval(v, env)) for v in node.values)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = _eval(comparator, env)
            if not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _eval(node.body if _eval(node.test, env) else node.orelse, env)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        fn_impl, _, _ = FUNCTIONS[node.func.id]
        args = [_eval(a, env) for a in node.args]
        try:
            return fn_impl(node, args)
        except (OverflowError, ValueError) as exc:
            raise _EvalError(node, f"{node.func.id}() failed: {exc}") from None
    raise _EvalError(node, f"{_describe(node)} is not allowed")  # pragma: no cover (checked)


#: A ``{expr}`` placeholder inside a name expression or a spec string.
PLACEHOLDER = re.compile(r"\{([^{}]+)\}")


def expand(text: str, env: Mapping[str, Value], where: Location | None = None) -> str:
    """Replace ``{expr}`` in a name expression by its value (``moe_sum_kernel<T, {topk}>``)."""

    def one(match: re.Match[str]) -> str:
        value = Expr.parse(match.group(1), where).evaluate(env)
        return str(int(value)) if isinstance(value, bool) else str(value)

    return PLACEHOLDER.sub(one, text)
