"""Whether a loop body reads which thread runs it, other than through the loop variable.

Packing a loop changes which thread takes which element: with packs of ``V``, element ``e`` of a
block-stride loop goes to thread ``(e / V) % blockDim.x`` instead of ``e % blockDim.x``. The
rewrite is only the same computation if an element's value depends on the thread through the
element's index alone. ``y[i] = x[i] + threadIdx.x``, ``y[i] = x[i + o]`` with ``o = threadIdx.x
% 3``, or ``w[threadIdx.x]`` as a factor would each give other numbers under packs; so would
``blockIdx`` in a grid-stride loop, whose elements move between blocks.

Read conservatively from :mod:`ktx.ir.affine`: a ``threadIdx`` field in the body, or a name the
body does not declare whose value (a parameter, a local defined once before the loop) depends on
``threadIdx`` (or on ``blockIdx`` where blocks share the loop's elements). One exception keeps
warp-per-row kernels: a value that depends on ``threadIdx`` only through ``threadIdx.x / 32``
(or ``>> 5``, the warp's index) where only a warp's lanes share the loop (``lane`` stride).
"""

from __future__ import annotations

import re

import tree_sitter as ts
from ktx.ir import syntax
from ktx.ir.affine import Affine, kernel_index
from ktx.ir.module import Module
from ktx.ir.nodes import Function
from ktx.ir.syntax import text as _text

_BUILTIN = re.compile(r"(threadIdx|blockIdx)\.[xyz]")
_WARP = re.compile(r"\(?\s*threadIdx\.x\s*(/\s*(32|warpSize|WARP_SIZE)|>>\s*5)\s*\)?")


def _depends(form: Affine, varying: frozenset[str], warp: bool) -> bool:
    """Whether a value differs between the threads sharing the loop: it names a coordinate that
    the loop's start varies by (``threadIdx.x`` of a block-stride loop; ``blockIdx.x`` too in a
    grid-stride one), other than through the warp's index in a loop only a warp's lanes share."""
    hit = form.free & varying
    if hit and warp:
        through = [a for a, deps in form.atoms if deps & hit]
        direct = {s for s in form.symbols if s in hit}
        if not direct and through and all(_WARP.fullmatch(a.strip()) for a in through):
            return False
    return bool(hit)


def thread_read(
    module: Module, fn: Function, body: ts.Node, var: str, declared: set[str], start: Affine, warp: bool
) -> ts.Node | None:
    """The first node of ``body`` whose value differs between the threads that share the loop's
    elements other than through ``var`` (the loop variable), or None. ``declared``: names the
    body declares (their initializers are walked as part of the body). ``start``: the loop's
    start, whose thread and block coordinates say which threads share its elements; ``warp``:
    a lane-stride loop (32), shared by a warp's lanes."""
    varying = frozenset(s for s in start.free if s.startswith(("threadIdx.", "blockIdx.")))
    index = kernel_index(module, fn)
    for n in syntax.walk(body):
        if n.type == "field_expression":
            if _BUILTIN.fullmatch(" ".join(_text(module, n).split())):
                form = index.affine(n)
                if form is None or _depends(form, varying, warp):
                    return n
            continue
        if n.type != "identifier":
            continue
        name = _text(module, n)
        parent = n.parent
        if name == var or name in declared or name in ("threadIdx", "blockIdx", "blockDim", "gridDim"):
            continue
        callee = parent.child_by_field_name("function") if parent is not None else None
        if parent is not None and parent.type == "call_expression" and callee == n:
            continue
        form = index.affine(n)
        if form is not None and _depends(form, varying, warp):
            return n
    return None
