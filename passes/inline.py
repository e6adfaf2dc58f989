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

from ktx.ir import Function, Module, syntax
from ktx.ir.facts.tailcalls import TailCall, tail_calls

from ktx.passbase import Pass, Phase, Rewriter, Site, Skip, Target


@dataclass(frozen=True)
class InlineSite(Site):
    calls: tuple[TailCall, ...]
    """Each call statement in tail position, the device function it calls and its arguments."""


class Inline(Pass[InlineSite]):
    name = "inline"
    phase = Phase.OWNERSHIP
    summary = "a kernel that only calls a __device__ function of its file takes that body in (no knob)"
    description = __doc__ or ""
    automatic = True  # the pipeline runs it first where it applies (pipeline._inline_first)

    def sites(self, target: Target) -> Iterator[InlineSite | Skip]:
        fn = target.kernel
        calls = tail_calls(target.module, fn)
        if isinstance(calls, str):
            yield Skip(calls, fn.name, fn.span)
            return
        yield InlineSite(fn.name, fn.span, calls)

    def rewrite(self, site: InlineSite, rw: Rewriter) -> None:
        module = rw.target.module
        kernel = rw.target.kernel
        for call in site.calls:
            rw.replace_bytes(call.stmt.start_byte, call.stmt.end_byte, _inlined(module, kernel, call))
        names = ", ".join(dict.fromkeys(c.callee.name for c in site.calls))
        rw.note(f"inlined {names}: the passes after it see the body in the kernel")


def _inlined(module: Module, kernel: Function, call: TailCall) -> str:
    """The block that replaces the call statement: the parameters, then the callee's body."""
    stmt, callee, arguments = call.stmt, call.callee, call.arguments
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
