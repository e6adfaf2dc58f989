"""Which calls end a kernel, and the ``__device__`` function each one calls (``inline``'s question).

A kernel that is only a call (or an ``if``/``else`` of calls) to a ``__device__`` function of its file
is a thin wrapper: every pass reads the kernel's own body and finds nothing there (apex's
``cuApplyLayerNorm``, exllamav2's ``rope_cuda_kernel``). :func:`tail_calls` says whether a kernel is
such a wrapper, and when it is not, why, with the construct and its line; ``passes/inline.py``
rewrites from the answer.
"""

from __future__ import annotations

from dataclasses import dataclass

import tree_sitter as ts
from ktx.ir import Function, Module, syntax


@dataclass(frozen=True)
class TailCall:
    """One call statement in tail position, the device function it calls and its argument nodes."""

    stmt: ts.Node
    callee: Function
    arguments: tuple[ts.Node, ...]


def tail_calls(module: Module, kernel: Function) -> tuple[TailCall, ...] | str:
    """The kernel's tail calls, or why its body is not only calls of one-definition device functions."""
    body = syntax.function_node(module, kernel).child_by_field_name("body")
    if body is None:
        return "the kernel has no body"
    statements: list[ts.Node] = []
    why = _tail_calls(module, body, statements)
    if why is None and not statements:
        why = "the kernel's body holds no call"
    if why is not None:
        return why
    calls: list[TailCall] = []
    for stmt in statements:
        callee = _callee(module, kernel, stmt)
        if isinstance(callee, str):
            return callee
        calls.append(callee)
    return tuple(calls)


def line_of(node: ts.Node) -> int:
    return node.start_point[0] + 1


def _tail_calls(module: Module, node: ts.Node, out: list[ts.Node]) -> str | None:
    """Collect the call statements of ``node`` (a block, an ``if`` or a statement) that end the
    kernel; the reason when anything else is there."""
    if node.type == "compound_statement":
        stmts = [c for c in node.named_children if c.type != "comment"]
        if len(stmts) != 1:
            return (
                f"the kernel's body is {len(stmts)} statements (line {line_of(node)}): only a body that "
                "is one call (or an if/else of calls) is inlined, so that a return still ends the kernel"
            )
        return _tail_calls(module, stmts[0], out)
    if node.type == "if_statement":
        consequence = node.child_by_field_name("consequence")
        alternative = node.child_by_field_name("alternative")
        if consequence is None:
            return f"an if without a body at line {line_of(node)}"
        why = _tail_calls(module, consequence, out)
        if why is None and alternative is not None:
            branch = alternative.named_children[-1] if alternative.type == "else_clause" else alternative
            why = _tail_calls(module, branch, out)
        return why
    if node.type == "expression_statement":
        call = node.named_children[0] if node.named_children else None
        if call is not None and call.type == "call_expression":
            out.append(node)
            return None
    first = syntax.text(module, node).split("\n")[0].strip()
    return f"`{first}` (line {line_of(node)}) is not a call of a device function"


def _callee(module: Module, kernel: Function, stmt: ts.Node) -> TailCall | str:
    """The device function ``stmt`` calls, or why it cannot be inlined."""
    call = stmt.named_children[0]
    target = call.child_by_field_name("function")
    args = call.child_by_field_name("arguments")
    if target is None or args is None:
        return f"no callee at line {line_of(stmt)}"
    targs: ts.Node | None = None
    if target.type == "template_function":
        targs = target.child_by_field_name("arguments")
        target = target.child_by_field_name("name") or target
    name = syntax.text(module, target).split("::")[-1].strip()
    found = [f for f in module.functions if f.name == name and (f.is_device or "__device__" in f.qualifiers)]
    where = f"{name} (line {line_of(stmt)})"
    if len(found) != 1:
        return f"{where}: {'no' if not found else 'more than one'} __device__ definition in this file"
    callee = found[0]
    if callee.is_kernel or callee.return_type.strip() != "void":
        return f"{where} returns {callee.return_type.strip()}: only void device functions are inlined"
    body = module.node(callee.body)
    if any(True for _ in syntax.calls(module, body, [name])):
        return f"{where} is recursive"
    arguments = [a for a in args.named_children if a.type != "comment"]
    if len(arguments) != len(callee.params) or any(p.name == "" for p in callee.params):
        return f"{where}: {len(arguments)} argument(s) for {len(callee.params)} parameter(s)"
    for p in callee.params:
        if "[" in p.type or "..." in p.type:
            return f"{where}: parameter {p.name} is an array or a pack"
    if callee.template_params:
        given = syntax.text(module, targs).strip("<> ") if targs is not None else ""
        own = ", ".join(tp.name for tp in callee.template_params)
        mine = {tp.name for tp in kernel.template_params}
        if " ".join(given.split()) != own or any(tp.name not in mine for tp in callee.template_params):
            return (
                f"{where}: template {name}<{own}> is called as <{given}>, not with the kernel's own "
                "template parameters of the same names (a block cannot rename them)"
            )
    return TailCall(stmt, callee, tuple(arguments))
