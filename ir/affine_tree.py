"""Tree helpers of the affine reader: builtins, declarators, casts, subscripts, comparisons.

Small questions about one tree-sitter node that :mod:`ktx.ir.kernel_index` asks while reading
expressions, loops and memory into :mod:`ktx.ir.affine_form` values; kept apart so that the
reader reads as the analysis it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

import tree_sitter as ts
from ktx.ir.affine_form import BUILTINS
from ktx.ir.consteval import SIZEOF
from ktx.ir.nodes import Function
from ktx.ir.syntax import text as _text
from ktx.ir.syntax import walk as _walk

if TYPE_CHECKING:
    from ktx.ir.module import Module  # a type only: Module.facts() imports the facts

WIDE = frozenset(
    {"size_t", "int64_t", "uint64_t", "long", "long long", "unsigned long", "unsigned long long", "ptrdiff_t"}
)


def fold(op: str, a: int, b: int) -> int | None:
    if op == "/" and b:
        return int(a / b)
    if op == "%" and b:
        return a - b * int(a / b)
    if op == ">>" and 0 <= b < 64:
        return a >> b
    if op == "&":
        return a & b
    if op == "|":
        return a | b
    return None


def strip(node: ts.Node) -> ts.Node:
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    return node


def builtin(module: Module, node: ts.Node) -> str | None:
    arg = node.child_by_field_name("argument")
    fld = node.child_by_field_name("field")
    if arg is None or fld is None:
        return None
    base, f = _text(module, arg).strip(), _text(module, fld).strip()
    if f not in ("x", "y", "z"):
        return None
    if base in BUILTINS:
        return f"{base}.{f}"
    group = block_group_builtin(module, strip(arg))
    return f"{group}.{f}" if group is not None else None


#: What a cooperative-groups ``thread_block`` method returns, as the builtin it equals: CUDA
#: defines ``thread_block::thread_index()`` as ``threadIdx`` and ``group_index()`` as ``blockIdx``
#: (``dim_threads()``, formerly ``group_dim()``, as ``blockDim``). Only a ``thread_block``:
#: ``grid_group::thread_index()`` is a global index, so the receiver's declaration must say
#: ``thread_block``.
_BLOCK_METHODS = {
    "thread_index": "threadIdx",
    "group_index": "blockIdx",
    "dim_threads": "blockDim",
    "group_dim": "blockDim",
}
_THREAD_BLOCK_TYPE = re.compile(r"^(?:const\s+)?(?:(?:cooperative_groups|cg)\s*::\s*)?thread_block$")
_THIS_THREAD_BLOCK = re.compile(r"^(?:(?:cooperative_groups|cg)\s*::\s*)?this_thread_block\s*\(\s*\)$")


def block_group_builtin(module: Module, call: ts.Node) -> str | None:
    """``tb.thread_index()`` -> ``threadIdx`` where ``tb`` is declared in the enclosing function
    as ``cg::thread_block tb = cg::this_thread_block();`` (or ``auto tb = ...``); else None."""
    if call.type != "call_expression":
        return None
    fn, args = call.child_by_field_name("function"), call.child_by_field_name("arguments")
    if fn is None or fn.type != "field_expression" or args is None or args.named_child_count:
        return None
    receiver, method = fn.child_by_field_name("argument"), fn.child_by_field_name("field")
    if receiver is None or method is None or receiver.type != "identifier":
        return None
    builtin = _BLOCK_METHODS.get(_text(module, method).strip())
    if builtin is None or _text(module, fn).count(".") != 1:
        return None
    scope = call.parent
    while scope is not None and scope.type != "function_definition":
        scope = scope.parent
    if scope is None:
        return None
    name = _text(module, receiver).strip()
    for decl in _walk(scope):
        if decl.type != "declaration":
            continue
        kind = decl.child_by_field_name("type")
        type_text = " ".join(_text(module, kind).split()) if kind is not None else ""
        qualifiers = " ".join(_text(module, c) for c in decl.children if c.type == "type_qualifier")
        for init in decl.children_by_field_name("declarator"):
            ident = init.child_by_field_name("declarator") if init.type == "init_declarator" else None
            if ident is None or ident.type != "identifier" or _text(module, ident).strip() != name:
                continue
            value = init.child_by_field_name("value")
            if value is None or not _THIS_THREAD_BLOCK.match(" ".join(_text(module, value).split())):
                return None
            if type_text == "auto" or _THREAD_BLOCK_TYPE.match(f"{qualifiers} {type_text}".strip()):
                return builtin
            return None
    return None


def declared(node: ts.Node | None) -> tuple[ts.Node | None, int, bool]:
    depth, array = 0, False
    while node is not None and node.type != "identifier":
        if node.type == "pointer_declarator":
            depth += 1
        elif node.type == "array_declarator":
            array = True
        elif node.type not in (
            "init_declarator",
            "parenthesized_declarator",
            "reference_declarator",
            "attributed_declarator",
        ):
            return None, depth, array
        inner = node.child_by_field_name("declarator")
        if inner is None:
            inner = next((c for c in node.named_children if c.type != "type_qualifier"), None)
        node = inner
    return node, depth, array


def element(declared: str) -> str:
    words = declared.replace("*", " ").replace("&", " ").split()
    skip = {"const", "volatile", "__restrict__", "__restrict", "restrict", "static", "__shared__", "extern"}
    return " ".join(w for w in words if w not in skip)


def size(type_text: str) -> int | None:
    return SIZEOF.get(" ".join(type_text.split()))


def is_wide(type_text: str) -> bool:
    return element(type_text) in WIDE


def cast_parts(module: Module, n: ts.Node) -> tuple[str, ts.Node] | None:
    """``(target element type, value)`` of ``(T*)p`` or ``reinterpret_cast<T*>(p)``."""
    if n.type == "cast_expression":
        t = n.child_by_field_name("type")
        v = n.child_by_field_name("value")
        if t is not None and v is not None and "*" in _text(module, t):
            return element(_text(module, t)), v
        return None
    if n.type == "call_expression":
        fn = n.child_by_field_name("function")
        args = n.child_by_field_name("arguments")
        if fn is None or args is None or fn.type != "template_function":
            return None
        name = _text(module, fn.child_by_field_name("name") or fn)
        targs = fn.child_by_field_name("arguments")
        named = [c for c in args.named_children if c.type != "comment"]
        casts = ("reinterpret_cast", "static_cast", "const_cast")
        if name in casts and targs is not None and len(named) == 1:
            target = _text(module, targs).strip("<> \n")
            if "*" in target:
                return element(target), named[0]
    return None


def index_node(sub: ts.Node) -> ts.Node | None:
    indices = sub.child_by_field_name("indices") or sub.child_by_field_name("index")
    if indices is None:
        return None
    if indices.type == "subscript_argument_list":
        named = [c for c in indices.named_children if c.type != "comment"]
        return named[0] if len(named) == 1 else None
    return indices


def comparison(module: Module, cond: ts.Node, var: str) -> tuple[str, ts.Node] | None:
    """``(op, bound)`` with ``var`` on the left of ``var OP bound`` (mirrored when written right)."""
    c = strip(condition(cond))
    if c.type != "binary_expression":
        return None
    op = c.child_by_field_name("operator")
    left, right = c.child_by_field_name("left"), c.child_by_field_name("right")
    if op is None or left is None or right is None:
        return None
    mirror = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "!=": "!=", "==": "=="}
    if op.type not in mirror:
        return None
    if is_name(module, left, var):
        return op.type, right
    if is_name(module, right, var):
        return mirror[op.type], left
    return None


def condition(cond: ts.Node) -> ts.Node:
    """The expression inside a ``condition_clause`` (``while (c)``), or ``cond`` itself."""
    if cond.type == "condition_clause" and cond.named_children:
        return cond.named_children[0]
    return cond


def is_name(module: Module, node: ts.Node, var: str) -> bool:
    n = strip(node)
    while n.type == "cast_expression":
        inner = n.child_by_field_name("value")
        if inner is None:
            break
        n = strip(inner)
    return n.type == "identifier" and _text(module, n) == var


def only_return(node: ts.Node) -> bool:
    if node.type == "return_statement":
        return True
    if node.type == "compound_statement":
        named = [c for c in node.named_children if c.type != "comment"]
        return len(named) == 1 and named[0].type == "return_statement"
    return False


def assignments(module: Module, scope: ts.Node, var: str) -> Iterator[ts.Node]:
    """The writes of ``var`` under ``scope``: :func:`ktx.ir.facts.assign.assignments`, the one
    walker (imported here when called: the facts package imports this module)."""
    from ktx.ir.facts.assign import assignments

    return assignments(module, scope, var)


def top_level_in(node: ts.Node, body: ts.Node) -> bool:
    """Whether ``node`` runs on every iteration: an expression statement directly in ``body``."""
    stmt = node.parent
    return (
        stmt is not None
        and stmt.type == "expression_statement"
        and stmt.parent is not None
        and (stmt.parent.id == body.id)
    )


def function_body(module: Module, fn: Function) -> ts.Node:
    node = module.node(fn.body)
    while node.type != "compound_statement" and node.parent is not None:
        node = node.parent
    return node
