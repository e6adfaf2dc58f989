"""Where a read may land over a whole loop, as source text: the ``[lo, hi)`` of a run-time check.

vectorize packs a loop that writes ``p[var + off]`` and reads ``q[e]`` (``q`` not
``__restrict__``, ``e`` another index) only behind a check that ``q``'s elements over the whole
loop and the written ones share no byte (:class:`ktx.ir.facts.packing.ReadRange`). This module
answers the one question that check needs: a range that holds every ``e`` of the loop, written
so that it can be evaluated *before* the loop.

Why each form is safe:

* ``var`` itself runs over ``[0, bound)`` (the written range assumes the same).
* A literal ``c``: ``[c, c + 1)``.
* ``e % m``, ``m`` the same for the whole loop: ``(-m, m)`` (a negative ``e`` gives a negative
  remainder in C++).
* ``var / m``: ``[0, (bound - 1) / m + 1)`` for ``m > 0``, else empty (the check then fails and
  the scalar loop runs).
* An index the same for every iteration *and* every thread that shares the loop's elements
  (``i`` where ``const long i = blockIdx.x;`` in a block-stride loop, a parameter):
  ``[e, e + 1)``. The check decides packs or scalar for all those threads together, so it may
  only read what they all see alike: a value that differs between them (``threadIdx``, a load,
  a call, a local set in branches, ``blockIdx`` in a grid-stride loop) would let some threads
  take packs and others the scalar loop, and elements would be taken twice or not at all.
* ``c ? a : b``: each branch's range, and the check tests their hull (the smallest range that
  holds both). The condition is never evaluated by the check, so it may be anything: whichever
  branch an iteration takes, its element lies in the hull (CTranslate2's
  ``a_scales[transpose_a ? j : i]``).

Anything else gives None, and vectorize keeps its aliasing refusal.
"""

from __future__ import annotations

import re
from collections.abc import Set as AbstractSet

import tree_sitter as ts
from ktx.ir import syntax
from ktx.ir.affine import kernel_index
from ktx.ir.facts import assign
from ktx.ir.facts.canon import canon
from ktx.ir.module import Module
from ktx.ir.nodes import Function
from ktx.ir.syntax import text as _text

Span = tuple[str, str]
"""``(lo, hi)``: source text of the bounds; ``hi`` may name ``{bound}``, the loop's bound."""

#: Nodes whose value may differ between threads or calls, or that change state.
_OPAQUE = frozenset(
    {
        "call_expression",
        "subscript_expression",
        "assignment_expression",
        "update_expression",
        "pointer_expression",
        "sizeof_expression",
        "new_expression",
        "lambda_expression",
    }
)
_BUILTIN = re.compile(r"(threadIdx|blockIdx|blockDim|gridDim)\.[xyz]")
_CALL = re.compile(r"[\w>]\s*\(")


def _unparen(node: ts.Node) -> ts.Node:
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    return node


def uniform(
    module: Module, fn: Function, node: ts.Node, body_names: AbstractSet[str], block_shared: bool
) -> bool:
    """Whether ``node`` has one value for every iteration of the loop and every thread that
    shares its elements, and may be read before the loop: built from scalar parameters the
    kernel never assigns, template parameters, constants, ``blockDim``/``gridDim`` and, where
    only a block's threads share the loop (``block_shared``), ``blockIdx``; through locals
    defined once from those. No load, no call, no name the loop body declares or assigns."""
    if any(n.type in _OPAQUE for n in syntax.walk(node)):
        return False
    for n in syntax.walk(node):
        if n.type == "field_expression" and not _BUILTIN.fullmatch(" ".join(_text(module, n).split())):
            return False
    if syntax.names_in(module, node) & body_names:
        return False
    form = kernel_index(module, fn).affine(node)
    if form is None:
        return False
    # a local defined once is substituted by its value; an opaque piece of that value (a load,
    # a call) stays an atom whose text shows it
    if any("[" in name or _CALL.search(name) for name, _ in form.atoms):
        return False
    fn_body = module.node(fn.body)
    assigned = assign.assigned(module, fn_body)
    scalars = {
        p.name for p in fn.params if p.pointer_depth == 0 and "&" not in p.type and not assigned.get(p.name)
    }
    templates = {t.name for t in fn.template_params}
    for s in form.free:
        if s.startswith(("blockDim.", "gridDim.")) or s in scalars or s in templates:
            continue
        if s.startswith("blockIdx.") and block_shared:
            continue
        return False
    return True


def _wide(text: str) -> str:
    return f"static_cast<long long>({text})"


def hull(a: Span, b: Span) -> Span:
    """The smallest range holding both (as ``long long``: a signed bound beside an unsigned one
    would otherwise compare as unsigned)."""
    (lo1, hi1), (lo2, hi2) = a, b
    if a == b:
        return a
    lo = f"({_wide(lo1)} < {_wide(lo2)} ? {_wide(lo1)} : {_wide(lo2)})"
    hi = f"({_wide(hi1)} > {_wide(hi2)} ? {_wide(hi1)} : {_wide(hi2)})"
    return lo, hi


def index_span(
    module: Module,
    fn: Function,
    index: ts.Node,
    var: str,
    body_names: AbstractSet[str],
    block_shared: bool,
) -> Span | None:
    """``[lo, hi)`` holding every value of ``index`` over the loop (the forms in the module's
    docstring), or None. ``body_names`` are what the loop body declares or assigns, the loop
    variable included; ``block_shared``: only one block's threads share the loop's elements."""
    index = _unparen(index)
    if index.type == "conditional_expression":
        yes = index.child_by_field_name("consequence")
        no = index.child_by_field_name("alternative")
        if yes is None or no is None:
            return None
        spans = [index_span(module, fn, b, var, body_names, block_shared) for b in (yes, no)]
        if spans[0] is None or spans[1] is None:
            return None
        return hull(spans[0], spans[1])
    if index.type == "identifier" and _text(module, index) == var:
        return "0", "({bound})"
    if index.type == "number_literal" and _text(module, index).isdigit():
        c = int(_text(module, index))
        return str(c), str(c + 1)
    op = index.child_by_field_name("operator") if index.type == "binary_expression" else None
    m = index.child_by_field_name("right") if op is not None and op.type in ("%", "/") else None
    if m is not None and not syntax.names_in(module, m) & body_names:
        mt = _text(module, m)
        if not any(b in mt for b in ("threadIdx", "blockIdx", "(")):  # per-thread or a call
            if op is not None and op.type == "/":
                # var runs over [0, bound) (as the written range assumes), so for m > 0 the
                # quotient lies in [0, (bound - 1) / m + 1); for m <= 0 the range is empty
                left = index.child_by_field_name("left")
                if left is not None and canon(_text(module, left)) == var:
                    return "0", f"(({mt}) > 0 ? (({{bound}}) - 1) / ({mt}) + 1 : 0)"
            else:
                return f"1 - ({mt})", f"({mt})"
    if uniform(module, fn, index, body_names, block_shared):
        t = " ".join(_text(module, index).split())
        return f"({t})", f"({t}) + 1"
    return None
