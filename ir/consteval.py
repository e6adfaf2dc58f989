"""Evaluate C integer constant expressions found in the tree (``256``, ``(4 * 32)``, ``kA / 2``).

Only what launch constants and loop bounds use in practice: literals, names of constants
already known, unary and binary arithmetic, shifts, parentheses and casts to integer types.
Anything else yields ``None`` rather than a guess.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import tree_sitter as ts
from ktx.ir.syntax import node_text as _text

_INT_LITERAL = re.compile(r"^(0[xX][0-9a-fA-F']+|0[bB][01']+|0[0-7']*|[1-9][0-9']*)([uUlLzZ]*)$")

_BINARY: dict[str, Callable[[int, int], int | None]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: None if b == 0 else int(a / b),  # C truncates toward zero
    "%": lambda a, b: None if b == 0 else a - b * int(a / b),
    "<<": lambda a, b: a << b if 0 <= b < 64 else None,
    ">>": lambda a, b: a >> b if 0 <= b < 64 else None,
    "&": lambda a, b: a & b,
    "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b,
}


#: Sizes of the element types kernels use, for ``16 / sizeof(__nv_bfloat16)``.
SIZEOF = {
    "char": 1,
    "int8_t": 1,
    "uint8_t": 1,
    "__nv_fp8_e4m3": 1,
    "__nv_fp8_e5m2": 1,
    "short": 2,
    "int16_t": 2,
    "uint16_t": 2,
    "half": 2,
    "__half": 2,
    "__nv_bfloat16": 2,
    "nv_bfloat16": 2,
    "int": 4,
    "unsigned": 4,
    "unsigned int": 4,
    "int32_t": 4,
    "uint32_t": 4,
    "float": 4,
    "__half2": 4,
    "__nv_bfloat162": 4,
    "long long": 8,
    "int64_t": 8,
    "uint64_t": 8,
    "size_t": 8,
    "double": 8,
    "float2": 8,
    "float4": 16,
    "int4": 16,
    "uint4": 16,
}


def int_literal(text: str) -> int | None:
    """The value of a C integer literal, or ``None`` if ``text`` is not one.

    A leading sign is accepted: tree-sitter reads ``-7`` in ``x = -7 / 2`` as one literal.
    """
    text = text.strip()
    sign = -1 if text.startswith("-") else 1
    if text[:1] in ("-", "+"):
        text = text[1:].lstrip()
    m = _INT_LITERAL.match(text)
    if not m:
        return None
    digits = m.group(1).replace("'", "")
    if digits.startswith(("0x", "0X")):
        return sign * int(digits, 16)
    if digits.startswith(("0b", "0B")):
        return sign * int(digits[2:], 2)
    if len(digits) > 1 and digits.startswith("0"):
        return sign * int(digits, 8)
    return sign * int(digits)


def const_eval(node: ts.Node, env: Mapping[str, int]) -> int | None:
    """The integer value of ``node`` given known constants ``env``, or ``None``."""
    kind = node.type
    if kind == "number_literal":
        return int_literal(_text(node))
    if kind == "identifier":
        return env.get(_text(node))
    if kind in ("parenthesized_expression", "condition_clause"):
        inner = node.named_children
        return const_eval(inner[0], env) if len(inner) == 1 else None
    if kind == "unary_expression":
        op = node.child_by_field_name("operator")
        arg = node.child_by_field_name("argument")
        if op is None or arg is None:
            return None
        value = const_eval(arg, env)
        if value is None:
            return None
        return {"-": -value, "+": value, "~": ~value}.get(_text(op))
    if kind == "binary_expression":
        left = node.child_by_field_name("left")
        right = node.child_by_field_name("right")
        op = node.child_by_field_name("operator")
        if left is None or right is None or op is None:
            return None
        a, b = const_eval(left, env), const_eval(right, env)
        fn = _BINARY.get(_text(op))
        if a is None or b is None or fn is None:
            return None
        return fn(a, b)
    if kind == "sizeof_expression":
        target = node.child_by_field_name("type") or node.child_by_field_name("value")
        if target is None:
            return None
        name = " ".join(_text(target).strip("() ").split())
        return SIZEOF.get(name)
    if kind == "cast_expression":
        value_node = node.child_by_field_name("value")
        return const_eval(value_node, env) if value_node is not None else None
    return None
