"""Which float values of a function end rounded to an integer (``roundf``, ``(int8_t)x``, ...).

Why a pass cares: a fast division (``__fdividef``, reciprocal-multiply) is off by an ulp or two,
which a relative tolerance on a float result absorbs. Rounded to an integer, the same ulp moves a
value that sat near a rounding boundary across it, and the error becomes a whole step: ggml's
``quantize_q8_1`` computes ``d = amax / 127.0f`` and ``q = roundf(xi / d)``, and with
``__fdividef`` two quants in a few million came out one higher (session 9, ``FAST_MATH=2`` and
``3`` both wrong against the original at ``atol = 0``). No tolerance on the quantized bytes can
state "off by one quant is fine" without also accepting real bugs, so ``fast-math`` leaves such a
division exact instead.

The analysis is a backward flow over names, function-local and deliberately coarse (a name is a
name in every scope of the function, so it errs on the side of leaving a division alone):

* sinks: the arguments of a rounding call, a cast to an integer type (C cast or ``static_cast``),
  the initialiser of an integer-typed local, the right side of an assignment to an integer lvalue;
* a local whose declaration or assignment is read by a sink, directly or through other locals,
  feeds the rounding too.

A division the flow reaches, or one written inside a sink, is "rounded". A value that leaves the
function (a device function's return) is not followed into its caller.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

import tree_sitter as ts
from ktx.ir import Function, Module, syntax

#: Float-to-integer roundings by name (the C library's and CUDA's conversion intrinsics).
ROUNDING_CALLS = frozenset(
    {
        "roundf",
        "rintf",
        "nearbyintf",
        "lrintf",
        "llrintf",
        "lroundf",
        "llroundf",
        "floorf",
        "ceilf",
        "truncf",
        "round",
        "rint",
        "nearbyint",
        "lrint",
        "llrint",
        "lround",
        "llround",
        "floor",
        "ceil",
        "trunc",
    }
)
_CONVERSION = re.compile(r"__(float|double)2(u?int|u?ll)_r[nzud]$")
_INT_TYPE = re.compile(
    r"(?:(?:un)?signed\s+)?(?:char|short|int|long|long\s+long|size_t|u?int(?:8|16|32|64)_t|(?:un)?signed)"
)
_QUALIFIERS = ("const", "volatile", "__restrict__", "static", "register", "constexpr")

#: An expression's kind in a function (``float``, ``double``, ``int`` or None), from the caller's
#: type facts; a module-level function, so that the cache below keys on it.
KindOf = Callable[[Module, Function, ts.Node], "str | None"]


def is_int_type(type_text: str) -> bool:
    """Whether a declared (non-pointer) type is an integer type."""
    words = [w for w in type_text.split() if w not in _QUALIFIERS]
    return "*" not in type_text and _INT_TYPE.fullmatch(" ".join(words)) is not None


def rounding_call(module: Module, node: ts.Node) -> bool:
    if node.type != "call_expression":
        return False
    callee = node.child_by_field_name("function")
    name = syntax.text(module, callee).split("::")[-1].strip() if callee is not None else ""
    return name in ROUNDING_CALLS or _CONVERSION.match(name) is not None


def _sink(module: Module, fn: Function, node: ts.Node, kind_of: KindOf) -> ts.Node | None:
    """The part of ``node`` whose value is rounded to an integer, when ``node`` rounds one."""
    if rounding_call(module, node):
        return node.child_by_field_name("arguments")
    if node.type == "cast_expression":
        type_node = node.child_by_field_name("type")
        if type_node is not None and is_int_type(syntax.text(module, type_node)):
            return node.child_by_field_name("value")
    if node.type == "call_expression":
        callee = node.child_by_field_name("function")
        if callee is not None and callee.type == "template_function":
            name = callee.child_by_field_name("name")
            targs = callee.child_by_field_name("arguments")
            if (
                name is not None
                and targs is not None
                and syntax.text(module, name) == "static_cast"
                and is_int_type(syntax.text(module, targs).strip("<> "))
            ):
                return node.child_by_field_name("arguments")
    if node.type == "init_declarator" and node.parent is not None and node.parent.type == "declaration":
        type_node = node.parent.child_by_field_name("type")
        target = node.child_by_field_name("declarator")
        if (
            type_node is not None
            and target is not None
            and target.type == "identifier"
            and is_int_type(syntax.text(module, type_node))
        ):
            return node.child_by_field_name("value")
    if node.type == "assignment_expression":
        left = node.child_by_field_name("left")
        if left is not None and kind_of(module, fn, left) == "int":
            return node.child_by_field_name("right")
    return None


def _definitions(module: Module, body: ts.Node) -> list[tuple[str, ts.Node]]:
    """``(name, value)`` for every local initialiser and plain assignment in ``body``."""
    out: list[tuple[str, ts.Node]] = []
    for n in syntax.walk(body):
        if n.type == "init_declarator":
            target = n.child_by_field_name("declarator")
            value = n.child_by_field_name("value")
            ident = syntax.declarator_identifier(target) if target is not None else None
            if ident is not None and value is not None:
                out.append((syntax.text(module, ident), value))
        elif n.type == "assignment_expression":
            left = n.child_by_field_name("left")
            right = n.child_by_field_name("right")
            if left is not None and right is not None and left.type == "identifier":
                out.append((syntax.text(module, left), right))
    return out


@lru_cache(maxsize=16)
def _rounded_names_cached(module: Module, fn: Function, kind_of: KindOf) -> frozenset[str]:
    body = module.node(fn.body)
    names: set[str] = set()
    for n in syntax.walk(body):
        part = _sink(module, fn, n, kind_of)
        if part is not None:
            names |= syntax.names_in(module, part)
    definitions = _definitions(module, body)
    grew = True
    while grew:
        grew = False
        for name, value in definitions:
            if name in names:
                more = syntax.names_in(module, value) - names
                if more:
                    names |= more
                    grew = True
    return frozenset(names)


def rounded_names(module: Module, fn: Function, kind_of: KindOf) -> frozenset[str]:
    """Names in ``fn`` whose value reaches a rounding to an integer."""
    return _rounded_names_cached(module, fn, kind_of)


def feeds_rounding(module: Module, fn: Function, node: ts.Node, kind_of: KindOf) -> ts.Node | None:
    """The rounding ``node``'s value reaches in ``fn`` (the sink or the local it defines), or None."""
    current: ts.Node | None = node
    defined: ts.Node | None = None
    while current is not None and current.type != "compound_statement":
        parent = current.parent
        if parent is not None:
            part = _sink(module, fn, parent, kind_of)
            if part is not None and part.start_byte <= node.start_byte and node.end_byte <= part.end_byte:
                return parent
            if parent.type == "init_declarator" and parent.child_by_field_name("value") == current:
                defined = parent.child_by_field_name("declarator")
            if parent.type == "assignment_expression" and parent.child_by_field_name("right") == current:
                left = parent.child_by_field_name("left")
                defined = left if left is not None and left.type == "identifier" else defined
        current = parent
    if defined is None:
        return None
    ident = syntax.declarator_identifier(defined) if defined.type != "identifier" else defined
    if ident is not None and syntax.text(module, ident) in rounded_names(module, fn, kind_of):
        return ident
    return None


def float_division(module: Module, fn: Function, node: ts.Node, kind_of: KindOf) -> bool:
    """Whether ``node`` is ``a / b`` with a float operand and the other float or integer."""
    op = node.child_by_field_name("operator")
    left = node.child_by_field_name("left")
    right = node.child_by_field_name("right")
    if node.type != "binary_expression" or op is None or op.type != "/" or left is None or right is None:
        return False
    types = (kind_of(module, fn, left), kind_of(module, fn, right))
    return "float" in types and all(t in ("float", "int") for t in types)


def rounded_divisions(module: Module, fn: Function, kind_of: KindOf) -> list[ts.Node]:
    """Float divisions of ``fn`` whose quotient reaches a rounding to an integer (left exact)."""
    return [
        n
        for n in syntax.walk(module.node(fn.body))
        if float_division(module, fn, n, kind_of) and feeds_rounding(module, fn, n, kind_of) is not None
    ]
