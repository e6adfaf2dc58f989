"""``inline``: a kernel that only calls a ``__device__`` function of its file takes that body in.

Real kernels are often thin wrappers: apex's ``cuApplyLayerNorm`` and ``cuApplyRMSNorm`` are one
call to ``cuApplyLayerNorm_``, exllamav2's ``rope_cuda_kernel`` picks ``rope_cuda_arr_neox`` or
``rope_cuda_arr_gptj``. Every pass reads the kernel's own body, so on such a kernel each one
said "no loop in the kernel" or "never reads blockDim" and the planner proposed nothing (session
9: those three at 1.000x). The pass replaces each call by the callee's body in a block of its
own, the parameters declared at its top from the call's arguments::

    cuApplyLayerNorm_<T, U, V>(output_vals, mean, invvar, vals, n1, n2, epsilon, gamma, beta, false);

becomes ``{ const bool rms_only = false; <cuApplyLayerNorm_'s body> }``; a parameter whose
argument is the kernel's variable of the same name and type needs no declaration. The other
passes then see the loops, accesses and launch use of the body, and rewrite them in the kernel.

When it applies: the kernel's body is a call statement, or an ``if``/``else`` whose branches are
(chains of the same), so that every call is the last thing the kernel does: a ``return`` of the
callee then still ends the kernel, as it did when the callee returned to a kernel with nothing
left to run. The callee is a ``void`` ``__device__`` function defined once in the file, not
recursive, with exactly as many arguments as parameters, none of them an array or a parameter
pack; a template callee is called with its own template parameter names (``f<T, U, V>`` inside
a kernel whose parameters are ``T, U, V``), since a block cannot rename a template parameter.

The pass has no knob: the code is the same program (``nvcc`` inlines ``__forceinline__``
helpers anyway), so it is the new baseline for the passes after it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import tree_sitter as ts
from ktx.ir import Function, Module, syntax
from ktx.passes._common import kernel_node, line_of

from ktx.passbase import Pass, Phase, Refuse, Rewriter, Site, Skip, Target


@dataclass(frozen=True)
class InlineSite(Site):
    calls: tuple[tuple[ts.Node, Function], ...]
    """Each call statement in tail position and the device function it calls."""


class Inline(Pass[InlineSite]):
    name = "inline"
    phase = Phase.OWNERSHIP
    summary = "a kernel that only calls a __device__ function of its file takes that body in (no knob)"
    description = __doc__ or ""
    automatic = True  # the pipeline runs it first where it applies (pipeline._inline_first)

    def sites(self, target: Target) -> Iterator[InlineSite | Skip]:
        module = target.module
        fn = target.kernel
        body = kernel_node(target).child_by_field_name("body")
        if body is None:
            return
        statements: list[ts.Node] = []
        why = _tail_calls(module, body, statements)
        if why is None and not statements:
            why = "the kernel's body holds no call"
        calls: list[tuple[ts.Node, Function]] = []
        for stmt in statements if why is None else []:
            callee = _callee(module, fn, stmt)
            if isinstance(callee, str):
                why = callee
                break
            calls.append((stmt, callee))
        if why is not None:
            yield Skip(why, fn.name, fn.span)
            return
        yield InlineSite(fn.name, fn.span, tuple(calls))

    def rewrite(self, site: InlineSite, rw: Rewriter) -> None:
        module = rw.target.module
        kernel = rw.target.kernel
        for stmt, callee in site.calls:
            rw.replace_bytes(stmt.start_byte, stmt.end_byte, _inlined(module, kernel, stmt, callee))
        names = ", ".join(dict.fromkeys(c.name for _, c in site.calls))
        rw.note(f"inlined {names}: the passes after it see the body in the kernel")


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


def _callee(module: Module, kernel: Function, stmt: ts.Node) -> Function | str:
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
    return callee


def _inlined(module: Module, kernel: Function, stmt: ts.Node, callee: Function) -> str:
    """The block that replaces ``stmt``: the parameters, then the callee's body."""
    call = stmt.named_children[0]
    args_node = call.child_by_field_name("arguments")
    if args_node is None:  # pragma: no cover - _callee checked it
        raise Refuse("the call has no arguments")
    arguments = [a for a in args_node.named_children if a.type != "comment"]
    indent = syntax.indentation(module.source, stmt.start_byte)
    inner = indent + "  "
    own = {p.name: " ".join(p.type.split()) for p in kernel.params}
    declared: list[str] = []
    temps: list[str] = []
    decls: list[str] = []
    for i, (p, a) in enumerate(zip(callee.params, arguments, strict=True)):
        text = syntax.text(module, a)
        if text.strip() == p.name and own.get(p.name) == " ".join(p.type.split()):
            continue  # the kernel's own variable, same name and type
        names = syntax.names_in(module, a)
        value = text
        if p.name in names or names & set(declared):
            value = f"ktx_arg{i}"  # read before any parameter shadows what it names
            temps.append(f"{inner}auto&& {value} = {text};")
        decls.append(f"{inner}{syntax.text(module, module.node(p.span))} = {value};")
        declared.append(p.name)
    body = module.node(callee.body)
    text = module.source[body.start_byte + 1 : body.end_byte - 1].decode("utf-8", "replace")
    shift = _reindent(text, inner)
    line = module.span(callee.span.start, callee.span.start).line
    head = f"{indent}{{  // ktx inline: {callee.name}, line {line}"
    out = [head, *temps, *decls, shift.rstrip("\n"), f"{indent}}}"]
    return "\n".join(out).lstrip(" \t")


def _reindent(text: str, inner: str) -> str:
    """A body's text between its braces, its lines moved so that the least indented starts at
    ``inner`` (code on the brace's own line, ``{ x = 1; ...``, starts a line of its own)."""
    rows = text.split("\n")
    head = rows[0].strip()
    rows = rows[1:]
    while rows and not rows[-1].strip():
        rows.pop()
    widths = [len(r) - len(r.lstrip(" ")) for r in rows if r.strip() and not r.lstrip().startswith("#")]
    cut = min(widths) if widths else 0
    out = [inner + head] if head else []
    for r in rows:
        if not r.strip() or r.lstrip().startswith("#"):
            out.append(r.rstrip() if not r.strip() else r)
        else:
            out.append(inner + r[cut:])
    return "\n".join(out)
