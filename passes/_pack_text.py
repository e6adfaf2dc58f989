"""The texts of vectorize's packed loops that are sums of source expressions: a packed access's
offset, the run-time check that a read's range and a loop's writes are apart, and the pack
width where ``sizeof`` decides it. Apart from :mod:`ktx.passes.vectorize` so that the pass stays
one readable file (``tests/ir/test_facts_layout.py`` holds it under 900 lines).
"""

from __future__ import annotations

from collections.abc import Sequence

import tree_sitter as ts
from ktx.ir import Module
from ktx.ir.access import substitute
from ktx.ir.facts.elements import ElementBody
from ktx.ir.facts.packing import ASSUMED_SIZE, Plan, ReadRange
from ktx.ir.memref import MemRef
from ktx.ir.syntax import text as _text


def fitted(plan: Plan, label: str, macro: str, max_bytes: int) -> list[str]:
    """The declarations of the pack width where some element sizes are the compiler's to tell:
    the widest element (the known sizes and ``sizeof`` of each unknown type), then the knob where
    ``knob * widest <= max_bytes``, else ``max_bytes / widest`` (the widest pack that fits:
    element sizes are powers of two). Written out in the kernel, not in the shared prelude, so
    that only these loops carry it."""
    unknown = {a.pointer for a in plan.packed if a.memory.element_type in plan.unsized}
    known = [s for p, s in plan.sizes if p not in unknown]
    widest = str(max(known)) if known else ""
    for t in plan.unsized:
        size = f"int(sizeof({t}))"
        widest = f"({size} > {widest} ? {size} : {widest})" if widest else size
    w = f"ktx_bytes_{label}"
    fits = f"({max_bytes} / {w} > 0 ? {max_bytes} / {w} : 1)"
    return [
        f"constexpr int {w} = {widest};  // the widest packed element, as compiled",
        f"constexpr int ktx_vec_{label} = {macro} * {w} <= {max_bytes} ? {macro} : {fits};",
    ]


def range_check(module: Module, rr: ReadRange, bound: str) -> str:
    """``true`` where the bytes the loop writes through ``rr.write`` (``[p + off, p + off +
    bound)``) and those it may read through ``rr.read`` (``[q + lo, q + hi)``) are disjoint (and
    that range is not empty: a ``%`` by a modulus below 1 is not bounded so), compared as
    addresses, as ``ktx::disjoint`` does; written here rather than in the shared prelude."""
    w, r = rr.write.pointer, rr.read.pointer
    off = offset_text(module, rr.write, {})
    start = f"{w} + {off}" if off else w
    lo, hi = rr.lo, rr.hi.replace("{bound}", bound)

    def addr(p: str) -> str:
        return f"reinterpret_cast<unsigned long long>({p})"

    end = f"{addr(start)} + sizeof(*{w}) * static_cast<unsigned long long>({bound})"
    return (
        f"(({hi}) > ({lo}) && ({end} <= {addr(f'{r} + ({lo})')} || {addr(f'{r} + ({hi})')} <= {addr(start)}))"
    )


def offset_text(module: Module, a: MemRef, values: dict[str, str]) -> str:
    parts: list[str] = []
    for t in a.offset_terms:
        piece = substitute(module, t.node, values) if values else _text(module, t.node)
        if not parts:
            parts.append(piece if t.sign > 0 else f"-({piece})")
        else:
            parts.append(f"+ {piece}" if t.sign > 0 else f"- ({piece})")
    text = " ".join(parts)
    if not parts:
        return ""
    simple = (
        "identifier",
        "number_literal",
        "call_expression",
        "field_expression",
        "parenthesized_expression",
    )
    lone = len(a.offset_terms) == 1 and a.offset_terms[0].sign > 0
    if lone and (a.offset_terms[0].node.type in simple or _is_product(a.offset_terms[0].node)):
        return text
    return f"({text})"


def _is_product(node: ts.Node) -> bool:
    op = node.child_by_field_name("operator") if node.type == "binary_expression" else None
    return op is not None and op.type == "*"


#: The end of the note for a per-thread pair checked by :func:`pack_disjoint`.
APART = "thread's elements of each apart"


def pack_disjoint(module: Module, x: MemRef, y: MemRef, vec: str) -> str:
    """``ktx::disjoint`` of the ``vec`` elements one thread's pack takes through ``x`` and ``y``
    (``p + off + ktx_p * vec``): two pointers of a one-element-per-thread body that may alias at
    different offsets are packed only where it holds (one by one, in order, otherwise)."""
    ends = []
    for a in (x, y):
        off = offset_text(module, a, {})
        ends.append(f"{a.pointer} + {off + ' + ' if off else ''}ktx_p * {vec}")
    return f"ktx::disjoint({ends[0]}, {ends[1]}, {vec})"


def splice(module: Module, start: int, end: int, edits: Sequence[tuple[int, int, str]]) -> str:
    out: list[str] = []
    pos = start
    for s, e, text in sorted(e for e in edits if start <= e[0] and e[1] <= end):
        if s < pos:
            continue
        out.append(module.source[pos:s].decode("utf-8", "replace"))
        out.append(text)
        pos = e
    out.append(module.source[pos:end].decode("utf-8", "replace"))
    return "".join(out)


def reindent(text: str, old: str, new: str) -> list[str]:
    """``text`` (starting at column ``len(old)``) as lines indented ``new`` instead of ``old``."""
    first, *rest = text.split("\n")
    out = [new + first]
    for line in rest:
        if line.startswith(old):
            out.append(new + line[len(old) :])
        elif line.strip() and not line.lstrip().startswith("#"):
            out.append(new + line.lstrip())
        else:
            out.append(line)
    return out


def widest_element(sizes: Sequence[tuple[str, int]], unsized: Sequence[str], unknown: set[str]) -> str:
    """The widest packed element as the compiler sees it: the known ``sizes`` (pointer, bytes) of
    pointers not in ``unknown``, and ``sizeof`` of each template type in ``unsized`` (no launch names
    it, so only the compiler knows its size)."""
    known = [s for p, s in sizes if p not in unknown]
    widest = str(max(known)) if known else ""
    for t in unsized:
        size = f"int(sizeof({t}))"
        widest = f"({size} > {widest} ? {size} : {widest})" if widest else size
    return widest


def unsized_note(unsized: Sequence[str], named: Sequence[str], max_bytes: int, per_thread: bool) -> str:
    """Why sizeof decides the width of packs of these template types: no launch in the file names
    them (counted as ``ASSUMED_SIZE`` bytes), or a template argument does (``named``) and the file
    compiles the same text for other instantiations as well (llm-awq's dtype dispatch compiled
    ``quant_kernel<float>`` beside the spec's ``half``: 8 floats made a 32-byte word)."""
    wider = (
        f"where VEC_THREAD elements of it exceed {max_bytes} B, each thread takes them one by one "
        "(if constexpr)"
        if per_thread
        else f"sizeof narrows the pack to {max_bytes} B at compile time for a wider type"
    )
    parts = []
    assumed = [t for t in unsized if t not in named]
    if assumed:
        parts.append(
            f"the size of {', '.join(assumed)} is not in this file (no launch names it): widths count "
            f"it as {ASSUMED_SIZE} B"
        )
    if named:
        parts.append(
            f"the file's own launches compile this text with other {', '.join(named)} too (or ones "
            "not known here): widths count the template argument's size"
        )
    return (
        "; ".join([*parts, wider]) if named else "; ".join(parts) + ("; " if per_thread else ", and ") + wider
    )


def element_notes(
    twin: int,
    eb: ElementBody,
    pointers: Sequence[str],
    apart: Sequence[tuple[MemRef, MemRef]],
    notes: Sequence[str],
    unsized: Sequence[str],
    named: Sequence[str],
    max_bytes: int,
    bound: str,
) -> list[str]:
    """The remarks of a one-element-per-thread rewrite: what was packed, how the grid changed,
    and what the user should know (aliasing checks, sizes the compiler decides, wrap-around)."""
    grid = (
        f"grid kept as written: another definition of the kernel (line {twin}) shares its launches; "
        "threads past the last pack do nothing"
        if twin
        else f"grid {eb.axis} divided by VEC_THREAD"
    )
    out = [f"{eb.var}: packed {len(pointers)} pointer(s): {', '.join(pointers)}; {grid}"]
    out += [f"{x.pointer} and {y.pointer} may alias: packed only where a run-time check finds a {APART}"
            for x, y in apart]  # fmt: skip
    out += list(notes)
    if unsized:
        out.append(unsized_note(unsized, named, max_bytes, True))
    if eb.var_type.split()[-1] in ("int", "unsigned"):
        out.append(
            f"ktx_p * VEC_THREAD is {eb.var_type}, as {eb.var} was: it wraps when {bound} is within "
            "VEC_THREAD * blockDim.x of the type's limit"
        )
    return out
