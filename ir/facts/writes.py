"""Which memory a kernel may write: stores, updates, and pointers handed to code that may write.

The read-only path (``__ldg``, ``ld.global.nc``) is undefined on memory written during the
kernel, so a pass that offers it (``cache-hints``) needs this answer, and it must count what the
kernel hands to helpers: a pointer passed to a function counts as written unless the callee's
parameter is a pointer to ``const`` (the file's own helpers) or the callee is a load intrinsic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import tree_sitter as ts
from ktx.ir import syntax
from ktx.ir.memref import Root
from ktx.ir.nodes import Function

if TYPE_CHECKING:
    from ktx.ir.module import Module  # a type only: Module.facts() imports the facts


def written_roots(module: Module, fn: Function, known: dict[str, Root]) -> set[str]:
    """Roots the kernel may write: subscript and dereference stores, pointers passed to writers.

    A pointer passed to a call counts as written unless the callee's matching parameter is a
    pointer to const (the file's helpers), or the callee is a known read-only intrinsic.
    """
    body = module.node(fn.body)
    out: set[str] = set()
    params_of = param_types(module)
    for n in syntax.walk(body):
        target: ts.Node | None = None
        if n.type == "assignment_expression":
            target = n.child_by_field_name("left")
        elif n.type == "update_expression":
            target = n.child_by_field_name("argument")
        if target is not None:
            for ident in syntax.identifiers(target):
                root = known.get(syntax.text(module, ident))
                if root is not None and root.name and target.type != "identifier":
                    out.add(root.name)
        if n.type == "call_expression":
            callee = n.child_by_field_name("function")
            args = n.child_by_field_name("arguments")
            if callee is None or args is None:
                continue
            text = syntax.text(module, callee)
            if text.startswith(("ktx::load", "ktx::ld", "__ld")):
                continue  # reads
            types = params_of.get(callee_name(module, callee))
            for i, arg in enumerate(a for a in args.named_children if a.type != "comment"):
                root = pointer_root(module, arg, known)
                if root is None:
                    continue
                if types is not None and all(i < len(t) and _const_pointer(t[i]) for t in types):
                    continue
                out.add(root.name)
    return out


def pointer_root(module: Module, node: ts.Node, known: dict[str, Root]) -> Root | None:
    """The root of a pointer-valued expression (``p``, ``p + k``, ``&p[i]``, casts of those)."""
    n = node
    while n.type == "parenthesized_expression" and n.named_child_count == 1:
        n = n.named_children[0]
    if n.type == "identifier":
        root = known.get(syntax.text(module, n))
        return root if root is not None and root.name else None
    if n.type == "binary_expression":
        op = n.child_by_field_name("operator")
        if op is not None and op.type in ("+", "-"):
            for side in ("left", "right"):
                child = n.child_by_field_name(side)
                found = pointer_root(module, child, known) if child is not None else None
                if found is not None:
                    return found
        return None
    if n.type == "pointer_expression":
        op = n.child_by_field_name("operator")
        arg = n.child_by_field_name("argument")
        while arg is not None and arg.type == "parenthesized_expression" and arg.named_child_count == 1:
            arg = arg.named_children[0]  # ``&(out[i])`` (bitsandbytes' cub stores)
        if op is not None and op.type == "&" and arg is not None and arg.type == "subscript_expression":
            base = arg.child_by_field_name("argument")
            return pointer_root(module, base, known) if base is not None else None
        return None
    if n.type == "cast_expression":
        value = n.child_by_field_name("value")
        return pointer_root(module, value, known) if value is not None else None
    if n.type == "call_expression":
        callee = n.child_by_field_name("function")
        args = n.child_by_field_name("arguments")
        if callee is not None and callee.type == "field_expression":
            # ``dst_ptr[i].data()``: a member call on an element, a pointer into it (lmdeploy's
            # ``Store(dst_ptr[i].data(), v)``, MoeGatherKernel's only write to dst)
            obj = callee.child_by_field_name("argument")
            while obj is not None and obj.type == "parenthesized_expression" and obj.named_child_count == 1:
                obj = obj.named_children[0]
            if obj is not None and obj.type == "subscript_expression":
                base = obj.child_by_field_name("argument")
                return pointer_root(module, base, known) if base is not None else None
            return None
        if callee is not None and "_cast" in syntax.text(module, callee) and args is not None:
            named = [a for a in args.named_children if a.type != "comment"]
            return pointer_root(module, named[0], known) if len(named) == 1 else None
    return None


def _const_pointer(type_text: str) -> bool:
    head = type_text.split("*")[0]
    return "*" in type_text and "const" in head.split()


def param_types(module: Module) -> dict[str, list[list[str]]]:
    out: dict[str, list[list[str]]] = {}
    for f in module.functions:
        out.setdefault(f.name, []).append([p.type for p in f.params])
    return out


def callee_name(module: Module, callee: ts.Node) -> str:
    if callee.type == "template_function":
        name = callee.child_by_field_name("name")
        callee = name if name is not None else callee
    if callee.type == "field_expression":
        field = callee.child_by_field_name("field")
        return syntax.text(module, field) if field is not None else ""
    if callee.type == "qualified_identifier":
        name = callee.child_by_field_name("name")
        if name is not None:
            return callee_name(module, name)
    return syntax.text(module, callee).split("::")[-1].strip()


def read_only_problem(root: Root, written: set[str] | frozenset[str], known: dict[str, Root]) -> str:
    """Why loads of ``root`` may not take the read-only path, or '' when they may."""
    if root.space != "global" or not root.name:
        return "not global memory"
    if root.name in written:
        return "the kernel writes it"
    if not root.const:
        return "not declared const"
    if not root.restrict:
        others = sorted(w for w in written if known.get(w, root).space == "global")
        if others:
            return f"not __restrict__, and the kernel writes {', '.join(others)}, which may alias it"
    return ""
