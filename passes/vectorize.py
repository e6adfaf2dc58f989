"""``vectorize``: scalar, contiguous loads and stores of a loop become packed accesses (``VEC_<loop>``).

A loop such as ``for (int i = threadIdx.x; i < d; i += blockDim.x) out[i] = f(x[i], y[i]);``
moves 2 bytes per access for fp16. The pass rewrites it so that each iteration moves ``VEC``
consecutive elements with one 4-, 8- or 16-byte instruction per pointer::

    #if KTX_VEC_L0 > 1
      const int ktx_packs_L0 = (ktx::aligned<KTX_VEC_L0>(x) && ...) ? d / KTX_VEC_L0 : 0;
      for (int ktx_p = threadIdx.x; ktx_p < ktx_packs_L0; ktx_p += blockDim.x) {
        const auto ktx_x = ktx::load<KTX_VEC_L0>(x + ktx_p * KTX_VEC_L0);
        ...
        #pragma unroll
        for (int ktx_j = 0; ktx_j < KTX_VEC_L0; ++ktx_j) { ...the body, on element ktx_j... }
        ktx::store(out + ktx_p * KTX_VEC_L0, ktx_out);
      }
      for (int i = ktx_packs_L0 * KTX_VEC_L0 + threadIdx.x; i < d; i += blockDim.x) ...the body...
    #else
      ...the original loop...
    #endif

``VEC = 1`` (the default) is the original loop. For ``VEC > 1`` the packed loop runs only when
every packed pointer is aligned to ``VEC`` elements, checked at run time, and a scalar loop
takes the elements past the last whole pack: odd sizes and unaligned rows stay correct without
a constraint. Accesses inside a loop nested in the body (the TOPK loads of a MoE sum) are packed
too: the nested loop stays, each of its iterations loads one pack per pointer, and locals that
live across statements become arrays of ``VEC`` (the accumulator of the sum).

Legality comes from :mod:`ktx.ir.access`:

* the loop is ``for (T i = start; i < n; i += step)`` with ``start``/``step`` one of the usual
  thread-partitioned strides (``threadIdx.x``/``blockDim.x``, the grid-stride pair, a lane of a
  warp, ``0``/``1``), so that packs partition the index space the same way; a step the facts
  equate with ``blockDim.x`` counts (``col += block_size`` for a template block size every
  launch passes, ``col += WARP_SIZE`` under ``dim3(WARP_SIZE, nwarps)``, ``i += THREADS`` in a
  kernel that instantiates ``cub::BlockReduce<T, THREADS>``), and the packed loop keeps that step;
  a start of ``threadIdx.x`` plus an offset the same for the block's threads (``blockIdx.x *
  group + threadIdx.x``) packs from that offset (aligned there, checked at run time; not with
  ``peel`` or ``tail=false``);
* packed accesses are ``p[i + off]`` with ``off`` loop-invariant (affine in the variables of
  nested loops), not under a condition, through a named parameter or ``__shared__`` array;
* every write of the body is to element ``i`` of some row (no ``out[0] = ...``), no write may
  alias another access (both pointers ``__restrict__``, or different memory spaces) unless the
  two are subscripted alike (``out[i] = x[i] * s`` with no ``__restrict__``): then the packed
  loop runs only where ``ktx::apart`` finds the two ranges the same elements or disjoint
  (``ktx::disjoint`` alone where the body reaches an element through one pointer after writing
  it through the other: each pointer has its own pack), and the scalar loop, in the original
  order, takes everything otherwise; a pointer the body writes and also reaches under a condition
  stays scalar; a running reduction is read only by its own update (except in a loop a thread
  walks whole, from 0 by 1); values carried across
  iterations are reductions (``sum += ...``, ``m = fmaxf(m, ...)``), and the body has no barrier,
  shuffle, ``break``, ``continue`` or ``return``;
* memory the loop writes is not touched elsewhere in the kernel without a ``__syncthreads()``
  in between (threads now own different elements); code in another branch of the same
  ``#if``/``#elif`` chain (``row-owner``'s copy for another ``THREADS_PER_ROW``) never runs with it.

``peel=true`` takes the first elements of a row that starts off a pack boundary (a row of odd
length: every row after the first starts elsewhere) scalar, up to the boundary, and packs the
rest where every packed pointer is as far off; with no packs, nothing is peeled and the scalar
loop runs as written. ``tests/passes/test_vectorize_host.py`` runs head, packs and tail against
the original on the host for pointers on and off the boundary, overlapping or not.

``tie=true`` gives every loop one knob, ``VEC_LOOPS`` (the rules planner asks for it: the loops of
a row kernel want one width, and one knob per loop multiplies the space a round must sample).

*One element per thread* (``i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) {...}`` or
``if (i >= n) return; ...``, the index ``int``, ``unsigned`` or ``size_t``) is the other site: each
thread takes ``VEC_THREAD`` consecutive elements and the grid's x is divided by it::

    #if KTX_VEC_THREAD > 1
      const int ktx_p = blockIdx.x * blockDim.x + threadIdx.x;
      if (ktx::aligned<KTX_VEC_THREAD>(out) && ... && ktx_p * KTX_VEC_THREAD + KTX_VEC_THREAD <= n) {
        ...packed loads, the body on each element, packed stores...
      } else {
        for (int ktx_j = 0; ktx_j < KTX_VEC_THREAD; ++ktx_j) {
          const int i = ktx_p * KTX_VEC_THREAD + ktx_j;
          ...the guard and the body...
        }
      }
    #else
      ...the original...
    #endif

The pointers' alignment and the pack's bounds are checked at run time: the thread holding the
last ``n % VEC`` elements, and every thread when a pointer is misaligned, take them one by one.
:mod:`ktx.ir.facts.elements` reads the idiom and the body; it refuses, naming the line, bodies
that read thread builtins, synchronise, return early, loop, store through ``*p``, split the index
(``idx / C``) for their stores, or read memory at another offset from ``i`` than a write to memory
that may alias (``out[i] = in[i + 1]`` without ``__restrict__``).

A kernel with neither (no loop of its own, no such index) gets one remark that names the
statement and line that kept it out: loops in a ``__device__`` helper it calls, or the first
thread index it declares, which is not one element per thread (scaled by 8: each thread already
takes a pack; on ``threadIdx.y``; without the block offset).

Element types and sizes (through the kernel's template arguments and libclang) give the
domain: 1 and the powers of two with ``VEC * sizeof(element) <= 16`` bytes for every pointer.

``tail=false`` drops the run-time check and the scalar loop and states what they guarded as
constraints instead: the bound a multiple of ``VEC`` and every row offset too
(``VEC_L0 == 1 or (d) % VEC_L0 == 0``; ``token * 2 * d`` gives ``2 * d``), over the kernel's
integer parameters, which must be the spec's shape variables of the same name. It is what
hand-written kernels assume (FlashInfer's ``d % 8 == 0``); the harness's odd-size variants of a
shape break such constraints on purpose, so verify those configs without them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import tree_sitter as ts
from ktx.ir import Loop, Module, syntax
from ktx.ir.access import conflict_text
from ktx.ir.facts.canon import balanced
from ktx.ir.facts.elements import ElementBody, nothing_to_pack
from ktx.ir.facts.packing import (
    Plan,
    Refusal,
    constants,
    element_plan,
    factors,
    groups,
    loop_plan,
    pointer_terms,
    pragma_of,
    statements,
    to_expr,
    varies,
)
from ktx.ir.memref import MemRef
from ktx.ir.syntax import text as _text
from ktx.passes import _pack_text as ptext
from ktx.passes._common import LoopSite, shrink_grid
from ktx.passes._device import PreludeSite, insert_prelude, prelude_site
from ktx.passes._pack_text import fitted, offset_text, pack_disjoint, range_check

from ktx.passbase import KnobSpec, Option, OptionValue, Pass, Phase, Refuse, Rewriter, Site, Skip, Target

#: The one width knob of ``vectorize{tie=true}``.
TIED = "VEC_LOOPS"


@dataclass(frozen=True)
class VecSite(LoopSite):
    plan: Plan | None = None


@dataclass(frozen=True)
class ElemSite(Site):
    """A one-element-per-thread kernel whose threads will take ``VEC_THREAD`` elements each."""

    body: ElementBody
    accesses: tuple[MemRef, ...]
    sizes: tuple[tuple[str, int], ...]
    notes: tuple[str, ...]
    apart: tuple[tuple[MemRef, MemRef], ...] = ()
    unsized: tuple[str, ...] = ()
    named: tuple[str, ...] = ()
    twin: int = 0


class Vectorize(Pass[VecSite | ElemSite | PreludeSite]):
    name = "vectorize"
    phase = Phase.VECTORIZE
    summary = "contiguous scalar loads and stores of a loop become packed 2- to 16-byte accesses"
    description = __doc__ or ""
    knobs = (
        KnobSpec(
            "VEC_<loop>",
            "1, 2, 4, 8, 16 (elements; at most 16 bytes per access for every pointer)",
            "1 (the original scalar loop)",
            "elements per packed access; a run-time alignment check and a scalar tail keep any size correct",
        ),
        KnobSpec(
            "VEC_THREAD",
            "1, 2, 4, 8, 16 (elements; at most 16 bytes per access for every pointer)",
            "1 (one element per thread, as written)",
            "one-element-per-thread kernels: consecutive elements each thread takes, packed where aligned; "
            "the grid's x is divided by it (kept where another definition of the kernel shares its launches)",
        ),
    )
    options = (
        Option("max_bytes", "int", 16, "widest access offered, in bytes (4, 8 or 16)"),
        Option(
            "tail",
            "bool",
            True,
            "true: run-time alignment check and scalar tail, any size; false: packs only, with "
            "divisibility and alignment as constraints on the kernel's size parameters",
        ),
        Option(
            "loops",
            "strs",
            (),
            "loops to vectorize, as ktx inspect names them (L0|L2); default: every loop that qualifies",
        ),
        Option(
            "peel",
            "bool",
            False,
            "true: rows that start off a pack boundary (an odd row length: C = 50257) run their first "
            "few elements scalar and the rest packed, where every packed pointer is off by as much; "
            "false: such rows run scalar throughout (tail=true only)",
        ),
        Option(
            "tie",
            "bool",
            False,
            f"true: one knob {TIED} for every vectorized loop (a kernel's loops over one row take one "
            "width, and the search has one dimension instead of one per loop); a loop whose widest "
            f"pointer allows fewer elements bounds {TIED} by a constraint",
        ),
    )
    after = ("expose", "hoist", "rows-per-block")

    def __init__(self, **options: OptionValue) -> None:
        super().__init__(**options)
        self._rewritten: list[str] = []

    # -- sites ---------------------------------------------------------------------------------

    def sites(self, target: Target) -> Iterator[VecSite | ElemSite | PreludeSite | Skip]:
        self._rewritten = []
        wanted = set(self.list_option("loops"))
        facts = target.module.facts(target.kernel, target.template_args)
        if not wanted:
            launched = bool(target.mapping or target.launches)
            element = element_plan(facts, self.int_option("max_bytes"), launched)
            if isinstance(element, Refusal):
                yield Skip(element.reason, target.kernel.name, element.span)
            elif element is not None:
                e = element
                sized = (e.sizes, e.notes, e.apart, e.unsized, e.named, e.twin)
                yield ElemSite(target.kernel.name, e.span, e.body, e.accesses, *sized)
            elif not target.loops:
                why, node = nothing_to_pack(target.module, target.kernel)
                yield Skip(why, target.kernel.name, target.module.span(node.start_byte, node.end_byte))
        for loop in target.loops:
            label = target.label(loop)
            if wanted and label not in wanted:
                continue
            plan = loop_plan(facts, loop, self.int_option("max_bytes"))
            if isinstance(plan, str):
                yield Skip(plan, label, loop.span)
            else:
                yield VecSite(label, loop.span, loop, plan)
        if self._rewritten:
            site = prelude_site(target)
            if site is not None:
                yield site

    def rewrite(self, site: VecSite | ElemSite | PreludeSite, rw: Rewriter) -> None:
        if isinstance(site, PreludeSite):
            insert_prelude(site, rw)
            return
        if isinstance(site, ElemSite):
            _rewrite_elements(site, rw, self.int_option("max_bytes"))
            if not self.option("tail"):
                rw.note("tail=false applies to loops only: this site keeps its run-time check and scalar")
            self._rewritten.append(site.label)
            return
        assert site.plan is not None
        _rewrite(
            site.label,
            site.loop,
            site.plan,
            rw,
            self.int_option("max_bytes"),
            bool(self.option("tail")),
            bool(self.option("tie")),
            bool(self.option("peel")),
        )
        self._rewritten.append(site.label)


# -- the rewrite ---------------------------------------------------------------------------------


@dataclass
class _Emit:
    module: Module
    plan: Plan
    vec: str
    indent_unit: str
    packs: dict[tuple[int, str, str], str] = field(default_factory=dict)
    counter: int = 0
    pack_of_access: dict[int, str] = field(default_factory=dict)
    head: str = ""
    """``peel``: the variable holding the elements before the first aligned pack ('' for none)."""

    def text(self, node: ts.Node) -> str:
        return _text(self.module, node)

    def at(self) -> str:
        """The first element of pack ``ktx_p``."""
        return f"{self.head} + ktx_p * {self.vec}" if self.head else f"ktx_p * {self.vec}"


def _knob(rw: Rewriter, label: str, values: list[int], sizes: str, tie: bool) -> tuple[str, str]:
    """The loop's width knob (its name and placeholder): its own ``VEC_<loop>``, or with ``tie``
    the kernel's one :data:`TIED`, declared by the first loop and bounded by each later loop whose
    pointers allow fewer elements."""
    if not tie:
        return f"VEC_{label}", rw.knob(
            f"VEC_{label}",
            values,
            1,
            f"elements per packed access in loop {label} (1: scalar, as written; {sizes})",
        )
    shared = rw.target.knobs.get(TIED)
    if shared is None:
        what = (
            f"elements per packed access in every vectorized loop (1: scalar, as written; {label}: {sizes})"
        )
        macro = rw.knob(TIED, values, 1, what)
        return TIED, macro
    if max(values) < max(shared.values):
        rw.constraint(f"{TIED} <= {max(values)}")
        rw.note(f"{TIED} <= {max(values)} here ({sizes})")
    return TIED, shared.macro


def _rewrite(
    label: str,
    loop: Loop,
    plan: Plan,
    rw: Rewriter,
    max_bytes: int,
    tail: bool = True,
    tie: bool = False,
    peel: bool = False,
) -> None:
    module = rw.target.module
    source = module.source
    first = loop.pragma.span.start if loop.pragma is not None else loop.span.start
    line_start = syntax.line_start(source, first)
    if source[line_start:first].strip():
        raise Refuse("the loop shares its line with other code; the rewrite needs lines of its own")
    largest = max(s for _, s in plan.sizes)
    values = [1] + [v for v in (2, 4, 8, 16) if v * largest <= max_bytes]
    sizes = ", ".join(f"{p}: {s} B" for p, s in plan.sizes)
    name, vec = _knob(rw, label, values, sizes, tie)
    macro = vec
    widths: list[str] = []
    if plan.unsized:
        widths = fitted(plan, label, vec, max_bytes)
        vec = f"ktx_vec_{label}"
        rw.note(f"{label}: " + ptext.unsized_note(plan.unsized, plan.named, max_bytes, False))
    indent = syntax.indentation(source, loop.span.start)
    unit = "  "
    parent = plan.node.parent
    braces = parent is None or parent.type != "compound_statement"
    em = _Emit(module, plan, vec, unit)
    inner = indent + unit if braces else indent
    packs_name = f"ktx_packs_{label}"
    bound = em.text(plan.bound)
    if plan.limit is not None:  # `if (i >= N) break;` first in the body: packs stop at min(bound, N)
        n = em.text(plan.limit)
        bound = f"({bound}) < ({n}) ? ({bound}) : ({n})"
    bound_text = bound if re.fullmatch(r"[\w.]+", bound) else f"({bound})"
    if plan.offset is not None:
        # ``for (j = base + threadIdx.x; j < end; j += blockDim.x)``: packs from base
        if not tail:
            raise Refuse(
                "tail=false: the loop starts at a block offset, whose alignment only a run-time check tells"
            )
        if plan.apart or plan.ranged or plan.limit is not None:
            raise Refuse(
                "the loop starts at a block offset and needs a run-time aliasing check or a second "
                "bound, which packs from an offset do not carry"
            )
        if peel:
            rw.note(
                "peel=true: not for a loop from a block offset; its packs run where the offset row is aligned"
            )
            peel = False
        em.head = plan.offset
    lines: list[str] = [f"#if {macro} > 1"]
    if braces:
        lines.append(indent + "{")
    lines.extend(inner + line for line in widths)
    if tail and peel:
        em.head = f"ktx_head_{label}"
        first_ptr = _packed_base(em, plan.packed[0])
        checks = _checks(em)
        cond = (" &&\n" + inner + " " * (len(f"const {plan.var_type} {packs_name} = ("))).join(checks)
        lines.append(f"{inner}// {name}: the elements before {first_ptr} reaches a pack boundary run scalar,")
        lines.append(
            f"{inner}// then packs where every packed pointer is as far off (checked here), then the"
        )
        lines.append(f"{inner}// scalar loop takes the elements past the last whole pack.")
        lines.append(f"{inner}{plan.var_type} {em.head} = ktx::head<{vec}>({first_ptr}, {bound_text});")
        lines.append(
            f"{inner}const {plan.var_type} {packs_name} = ({cond}) ? ({bound_text} - {em.head}) / {vec} : 0;"
        )
        # no packs: no head either, so the scalar loop below runs every element in the original order
        lines.append(f"{inner}if ({packs_name} == 0) {em.head} = 0;")
        lines.append(
            inner + _head_header(em) + em.text(plan.body).replace("\n", "\n" + (unit if braces else ""))
        )
    elif tail:
        checks = _checks(em)
        cond = (" &&\n" + inner + " " * (len(f"const {plan.var_type} {packs_name} = ("))).join(checks)
        lines.append(
            f"{inner}// {name}: packed accesses where every packed row is aligned (checked here); the"
        )
        lines.append(
            f"{inner}// scalar loop after the packed one takes the elements past the last whole pack."
        )
        if plan.offset is not None:
            off = plan.offset
            lines.append(
                f"{inner}const {plan.var_type} {packs_name} = ({cond}) && {bound_text} > {off} ? "
                f"({bound_text} - {off}) / {vec} : 0;"
            )
        else:
            lines.append(f"{inner}const {plan.var_type} {packs_name} = ({cond}) ? {bound_text} / {vec} : 0;")
    else:
        if plan.apart or plan.ranged:
            a, b = plan.apart[0] if plan.apart else (plan.ranged[0].write, plan.ranged[0].read)
            raise Refuse(
                f"aliasing: {conflict_text(a, b)}; only a run-time check can tell, and tail=false has none"
            )
        if plan.limit is not None:
            raise Refuse(
                "tail=false: the loop stops at a `break` on a second bound, which needs the scalar tail"
            )
        if peel:
            rw.note("peel=true applies with tail=true only: with tail=false every row must start on a pack")
        assumed = _assumptions(rw, plan, name)
        for text in assumed:
            rw.constraint(text)
        lines.append(
            f"{inner}// {name}: packed accesses only; the constraints on {name} keep rows aligned and"
        )
        lines.append(f"{inner}// sizes whole multiples of the pack.")
        lines.append(f"{inner}const {plan.var_type} {packs_name} = {bound_text} / {vec};")
    pragma = module.text(loop.pragma.span).strip() if loop.pragma is not None else ""
    if pragma:
        lines.append(pragma)
    start = "threadIdx.x" if plan.offset is not None else em.text(plan.start)
    step_update = "++ktx_p" if plan.step == "1" else f"ktx_p += {plan.step}"
    lines.append(f"{inner}for ({plan.var_type} ktx_p = {start}; ktx_p < {packs_name}; {step_update}) {{")
    body = [st for st in statements(plan.body) if plan.limit_stmt is None or st.id != plan.limit_stmt.id]
    lines.extend(_render_list(em, body, inner + unit))
    lines.append(f"{inner}}}")
    if pragma and tail:
        lines.append(pragma)
    if tail:
        lines.append(
            inner
            + _tail_header(em, packs_name)
            + em.text(plan.body).replace("\n", "\n" + (unit if braces else ""))
        )
    if braces:
        lines.append(indent + "}")
    lines.append("#else")
    newline = "\r\n" if b"\r\n" in source else "\n"
    rw.insert(line_start, newline.join(lines) + newline)
    end = plan.node.end_byte
    eol = source.find(b"\n", end)
    rest = source[end : eol if eol >= 0 else len(source)]
    closing = newline + "#endif"
    if rest.strip() and not rest.strip().startswith(b"//"):
        closing += newline + indent
    rw.insert(end, closing)
    pointers = sorted({a.pointer for a in plan.packed})
    rw.note(f"packed {len(pointers)} pointer(s): {', '.join(pointers)}")
    ranges = dict.fromkeys((rr.write.pointer, rr.read.pointer, rr.lo, rr.hi) for rr in plan.ranged)
    for w, r, lo, hi in ranges:
        rw.note(
            f"{w} and {r} may alias: packed only where a run-time check finds {r}[{lo} .. "
            f"{hi.replace('{bound}', 'n')}) apart from the {w} elements the loop writes"
        )
    for p, q in dict.fromkeys((a.pointer, b.pointer) for a, b in plan.apart):
        how = "disjoint" if frozenset((p, q)) in plan.disjoint else "apart or the same"
        rw.note(f"{p} and {q} may alias: packed only where a run-time check finds them {how}")


def _constants_of(rw: Rewriter) -> dict[str, str]:
    return constants(rw.target.module.facts(rw.target.kernel, rw.target.template_args))


def _assumptions(rw: Rewriter, plan: Plan, knob: str) -> list[str]:
    """Constraints under which packs need neither a run-time check nor a scalar tail.

    The bound must be a multiple of VEC, and every packed address ``p + off`` aligned for every
    row: each additive term of ``off`` (and of the initialisers of the local pointers ``p`` is
    computed from) must be a multiple of VEC whatever the values of its per-thread factors
    (``token * 2 * d`` needs ``2 * d``). Parameters of the kernel are taken to be the spec's
    shape variables of the same name; allocations are taken to be aligned (CUDA gives 256 bytes).
    """
    module = rw.target.module
    fn = rw.target.kernel
    params = {p.name for p in fn.params if p.pointer_depth == 0}
    constants = _constants_of(rw)
    fn_body = module.node(fn.body)
    out: list[str] = []

    def need(expr: str) -> None:
        core = expr
        while core.startswith("(") and core.endswith(")") and balanced(core[1:-1]):
            core = core[1:-1]
        text = f"{knob} == 1 or ({core}) % {knob} == 0"
        if text not in out:
            out.append(text)

    bound = to_expr(module, plan.bound, params, constants)
    if bound is None:
        raise Refuse(
            f"the bound `{_text(module, plan.bound)}` is not an expression of the kernel's parameters"
        )
    need(bound)
    loop_vars = {v for _, v in plan.inner_vars}
    for a in plan.packed:
        terms = [t.node for t in a.offset_terms] + pointer_terms(
            module, fn_body, a.pointer, plan.node.start_byte
        )
        for term in terms:
            parts_of = factors(term)
            kept = [f for f in parts_of if not varies(module, f, params, constants, loop_vars)]
            if len(kept) == len(parts_of) and not syntax.names_in(module, term) & params:
                continue  # a constant offset: checked below if it is not a multiple
            if not kept:
                raise Refuse(
                    f"the offset `{_text(module, term)}` of {a.pointer} varies per thread with no size "
                    "factor to constrain; use tail=true"
                )
            parts = [to_expr(module, f, params, constants) for f in kept]
            if any(p is None for p in parts):
                raise Refuse(
                    f"cannot state the alignment of {a.pointer} (`{_text(module, term)}`); use tail=true"
                )
            texts = [p for p in parts if p is not None]
            need(texts[0] if len(texts) == 1 else " * ".join(f"({p})" for p in texts))
    rw.note("tail=false: constraints name the kernel's parameters " + ", ".join(sorted(params)))
    return out


def _tail_header(em: _Emit, packs_name: str) -> str:
    """The original loop header with the start moved past the packed elements."""
    module, plan = em.module, em.plan
    body = plan.body
    head = module.source[plan.node.start_byte : body.start_byte].decode("utf-8", "replace")
    s0 = plan.start.start_byte - plan.node.start_byte
    s1 = plan.start.end_byte - plan.node.start_byte
    start_text = head[s0:s1]
    lead = f"{em.head} + " if em.head and plan.offset is None else ""  # an offset start holds it
    new_start = f"{lead}{packs_name} * {em.vec} + {start_text}"
    return head[:s0] + new_start + head[s1:]


def _head_header(em: _Emit) -> str:
    """The original loop header with the bound cut to the peeled head (``i < ktx_head_L0``)."""
    module, plan = em.module, em.plan
    head = module.source[plan.node.start_byte : plan.body.start_byte].decode("utf-8", "replace")
    b0 = plan.bound.start_byte - plan.node.start_byte
    b1 = plan.bound.end_byte - plan.node.start_byte
    return head[:b0] + em.head + head[b1:]


def _base_offset(em: _Emit, a: MemRef) -> tuple[list[str], str]:
    """The nested loop variables in a packed access's offset, and the offset with them at 0."""
    loop_vars = set(dict(em.plan.inner_vars).values())
    names = sorted({v for t in a.offset_terms for v in syntax.names_in(em.module, t.node) & loop_vars})
    return names, offset_text(em.module, a, {v: "0" for v in names})


def _packed_base(em: _Emit, a: MemRef) -> str:
    """``p + off`` of a packed access at the loop's first element (nested loop variables 0)."""
    base = _base_offset(em, a)[1]
    return f"{a.pointer} + {base}" if base else a.pointer


def _checks(em: _Emit) -> list[str]:
    """Run-time conditions for the packed loop: every packed address aligned for every iteration."""
    module, plan = em.module, em.plan
    out: list[str] = []
    bound = em.text(plan.bound)
    if plan.limit is not None:  # `if (i >= N) break;` first in the body: packs stop at min(bound, N)
        n = em.text(plan.limit)
        bound = f"({bound}) < ({n}) ? ({bound}) : ({n})"
    pairs: set[frozenset[str]] = set()
    for a, b in plan.apart:
        off = offset_text(module, a, {})
        plus = f" + {off}" if off else ""
        pair = frozenset((f"{a.pointer}{plus}", f"{b.pointer}{plus}"))
        if pair in pairs:
            continue  # ktx::apart is symmetric
        pairs.add(pair)
        test = "disjoint" if frozenset((a.pointer, b.pointer)) in plan.disjoint else "apart"
        out.append(f"ktx::{test}({a.pointer}{plus}, {b.pointer}{plus}, {bound})")
    for rr in plan.ranged:
        out.append(range_check(module, rr, bound))
    for a in plan.packed:
        names, base = _base_offset(em, a)
        zero = {v: "0" for v in names}
        at = " + ".join(t for t in (a.pointer, base, em.head) if t)
        out.append(f"ktx::aligned<{em.vec}>({at})")
        for v in names:
            one = {**zero, v: "1"}
            step = offset_text(module, a, one)
            out.append(f"(({step}) - ({base})) % {em.vec} == 0")
    seen: list[str] = []
    for c in out:
        if c not in seen:
            seen.append(c)
    return seen


def _render_list(em: _Emit, stmts: list[ts.Node], indent: str) -> list[str]:
    lines: list[str] = []
    for group in groups(stmts, em.plan.opened):
        if isinstance(group, ts.Node):
            lines.extend(_render_open_loop(em, group, indent))
        else:
            lines.extend(_render_group(em, group, indent))
    return lines


def _render_open_loop(em: _Emit, loop: ts.Node, indent: str) -> list[str]:
    module = em.module
    body = loop.child_by_field_name("body")
    assert body is not None
    lines: list[str] = []
    prev = loop.prev_named_sibling
    if prev is not None and prev.type == "preproc_call" and pragma_of(prev, loop):
        lines.append(_text(module, prev).strip())
    head = module.source[loop.start_byte : body.start_byte].decode("utf-8", "replace").rstrip()
    lines.append(f"{indent}{head} {{")
    lines.extend(_render_list(em, statements(body), indent + em.indent_unit))
    lines.append(f"{indent}}}")
    return lines


def _render_group(em: _Emit, group: list[ts.Node], indent: str) -> list[str]:
    plan = em.plan
    spans = [(s.start_byte, s.end_byte) for s in group]
    in_group = [a for a in plan.packed if any(s <= a.node.start_byte < e for s, e in spans)]
    # One pack per (pointer, offset) in this run of statements.
    keys: dict[tuple[str, str], list[MemRef]] = {}
    for a in in_group:
        keys.setdefault((a.pointer, " ".join((a.offset or "").split())), []).append(a)
    names: dict[int, str] = {}
    before: list[str] = []
    after: list[str] = []
    for (pointer, offset), accs in keys.items():
        em.counter += 1
        base = f"ktx_{pointer}"
        # `ktx_p` and `ktx_j` are the pack and lane indices: a pointer named `p` or `j` (LightSeq's
        # Adam: `T* p`) takes a numbered pack name instead of shadowing the index
        taken = base in ("ktx_p", "ktx_j") or any(v == base for v in em.packs.values())
        name = f"{base}_{em.counter}" if taken else base
        em.packs[(em.counter, pointer, offset)] = name
        for a in accs:
            names[a.node.id] = name
        # the offset as a sum term: `(outIdx << 2) + i` keeps its parentheses (`<<`, `?:`, `&`
        # bind looser than `+`)
        term = f"({offset})" if re.search(r"<<|>>|[&|^?<>=,]", offset) else offset
        address = f"{pointer} + {term} + {em.at()}" if offset else f"{pointer} + {em.at()}"
        reads = any(a.reads for a in accs) and not _written_first(accs)
        writes = any(a.writes for a in accs)
        if reads:
            qual = "auto" if writes else "const auto"
            before.append(f"{indent}{qual} {name} = ktx::load<{em.vec}>({address});")
        else:
            elem = accs[0].memory.element_type
            before.append(f"{indent}ktx::pack<{elem}, {em.vec}> {name};")
        if writes:
            after.append(f"{indent}ktx::store({address}, {name});")
    widened = set(plan.widened)
    lines = list(before)
    body_lines: list[str] = []
    for stmt in group:
        body_lines.extend(_render_stmt(em, stmt, names, widened, indent + em.indent_unit, lines, indent))
    uses_var = any(re.search(rf"\b{re.escape(plan.var)}\b", line) for line in body_lines)
    lines.append(f"{indent}#pragma unroll".replace(indent + "#", "#"))
    lines.append(f"{indent}for (int ktx_j = 0; ktx_j < {em.vec}; ++ktx_j) {{")
    if uses_var:
        lines.append(f"{indent}{em.indent_unit}const {plan.var_type} {plan.var} = {em.at()} + ktx_j;")
    lines.extend(body_lines)
    lines.append(f"{indent}}}")
    lines.extend(after)
    return lines


def _written_first(accs: list[MemRef]) -> bool:
    """Whether every element of the pack is written before anything reads it: the first access
    is a plain, unconditional store at the loop's own level (``out[i] = e; sum += out[i];``), and
    its right-hand side does not read the same element. The pack then needs no load from memory
    (softmax's ``out_row[j] = expf(...); sum += out_row[j];`` read each row twice, not three times)."""
    first = min(accs, key=lambda a: a.node.start_byte)
    if first.kind != "store" or first.conditional or first.loops:
        return False
    assign = first.node.parent
    if assign is None or assign.type != "assignment_expression":
        return False
    return not any(a is not first and assign.start_byte <= a.node.start_byte < assign.end_byte for a in accs)


def _render_stmt(
    em: _Emit,
    stmt: ts.Node,
    packs: dict[int, str],
    widened: set[str],
    indent: str,
    decls_out: list[str],
    outer_indent: str,
) -> list[str]:
    """One statement of a lane loop, with packed accesses and widened locals substituted."""
    module = em.module
    if stmt.type == "comment":
        return [indent + _text(module, stmt)]
    edits: list[tuple[int, int, str]] = []
    for n in syntax.walk(stmt):
        if n.type in ("subscript_expression", "call_expression") and n.id in packs:  # __ldg(&p[i]) too
            edits.append((n.start_byte, n.end_byte, f"{packs[n.id]}.v[ktx_j]"))
        elif n.type == "identifier" and _text(module, n) in widened:
            parent = n.parent
            if (
                parent is not None
                and parent.type == "init_declarator"
                and parent.child_by_field_name("declarator") == n
            ):
                continue
            if parent is not None and parent.type == "declaration":
                continue
            edits.append((n.start_byte, n.end_byte, f"{_text(module, n)}[ktx_j]"))
    if stmt.type == "declaration":
        declared = []
        for decl in stmt.children_by_field_name("declarator"):
            target = decl.child_by_field_name("declarator") if decl.type == "init_declarator" else decl
            if target is not None and target.type == "identifier" and _text(module, target) in widened:
                declared.append(decl)
        if declared:
            if len(declared) != len(stmt.children_by_field_name("declarator")):
                raise Refuse("a declaration mixes locals used across packs with others; split it")
            type_node = stmt.child_by_field_name("type")
            assert type_node is not None
            out: list[str] = []
            for decl in declared:
                target = decl.child_by_field_name("declarator") if decl.type == "init_declarator" else decl
                assert target is not None
                name = _text(module, target)
                decls_out.append(f"{outer_indent}{_text(module, type_node)} {name}[{em.vec}];")
                value = decl.child_by_field_name("value") if decl.type == "init_declarator" else None
                if value is not None:
                    rendered = ptext.splice(module, value.start_byte, value.end_byte, edits)
                    out.append(f"{indent}{name}[ktx_j] = {rendered};")
            return out
    text = ptext.splice(module, stmt.start_byte, stmt.end_byte, edits)
    col = stmt.start_point[1]
    first, *rest = text.split("\n")
    out_lines = [indent + first]
    for line in rest:
        stripped = line[col:] if line[:col].strip() == "" else line.lstrip()
        out_lines.append(indent + stripped)
    return out_lines


def _rewrite_elements(site: ElemSite, rw: Rewriter, max_bytes: int) -> None:
    """Each thread takes VEC_THREAD consecutive elements: packed where aligned and in bounds.

    ::

        #if KTX_VEC_THREAD > 1
          const int ktx_p = blockIdx.x * blockDim.x + threadIdx.x;   // the pack this thread takes
          if (ktx::aligned<V>(out) && ktx::aligned<V>(inp) && ktx_p * V + V <= N) {
            const auto ktx_inp = ktx::load<V>(inp + ktx_p * V);
            ktx::pack<float, V> ktx_out;
            for (int ktx_j = 0; ktx_j < V; ++ktx_j) { ...the body on element ktx_j... }
            ktx::store(out + ktx_p * V, ktx_out);
          } else {
            for (int ktx_j = 0; ktx_j < V; ++ktx_j) { const int i = ktx_p * V + ktx_j; ...guard and body... }
          }
        #else
          ...the original...
        #endif

    and the grid's x is divided by ``VEC_THREAD``.
    """
    module = rw.target.module
    source = module.source
    eb = site.body
    start = syntax.line_start(source, eb.decl.start_byte)
    if source[start : eb.decl.start_byte].strip():
        raise Refuse("the index shares its line with other code; the rewrite needs lines of its own")
    largest = max(s for _, s in site.sizes)
    values = [1] + [v for v in (2, 4, 8, 16) if v * largest <= max_bytes]
    sizes = ", ".join(f"{p}: {s} B" for p, s in site.sizes)
    vec = rw.knob(
        "VEC_THREAD",
        values,
        1,
        f"consecutive elements each thread takes, packed (1: one per thread, as written; {sizes})",
    )
    indent = syntax.indentation(source, eb.decl.start_byte)
    inner = syntax.indentation(source, eb.stmts[0].start_byte)
    unit = inner[len(indent) :] if eb.form == "block" and inner.startswith(indent) else ""
    if unit.strip(" \t") or not unit:
        unit = "    " if len(indent) % 4 == 0 and indent else "  "
    packed = tuple(e for e in site.accesses if e.packable)
    plan = Plan(
        eb.guard,
        eb.guard,
        eb.var,
        eb.var_type,
        eb.index,
        eb.bound,
        "1",
        eb.decl,
        packed,
        frozenset(),
        (),
        site.sizes,
    )
    em = _Emit(module, plan, vec, unit)
    bound = em.text(eb.bound)
    bound_text = bound if re.fullmatch(r"[\w.]+", bound) else f"({bound})"
    if eb.inclusive:  # `if (i > n) return;`: element n runs too
        bound_text = f"{bound_text} + 1"
    checks = [*eb.conditions, *_checks(em), f"ktx_p * {vec} + {vec} <= {bound_text}"]
    checks[-1:-1] = [pack_disjoint(module, x, y, vec) for x, y in site.apart]
    pad = " " * len(f"{indent}if (")
    lines = [f"#if {vec} > 1"]
    lines.append(f"{indent}// VEC_THREAD: each thread takes VEC_THREAD consecutive elements, packed where")
    lines.append(f"{indent}// every packed pointer is aligned and the pack is in bounds (checked here), else")
    lines.append(f"{indent}// one by one.")
    lines.append(f"{indent}const {eb.var_type} ktx_p = {em.text(eb.index)};")
    for s in eb.between:
        lines.extend(ptext.reindent(em.text(s), indent, indent))
    guard = eb.guard
    edits: list[tuple[int, int, str]] = []
    if eb.form == "return":
        for n in syntax.walk(guard):
            if n.type == "return_statement":
                edits.append((n.start_byte, n.end_byte, "continue;"))
    original = ptext.splice(module, guard.start_byte, eb.end, edits)
    one_by_one = [
        f"{indent}{unit}for (int ktx_j = 0; ktx_j < {vec}; ++ktx_j) {{",
        f"{indent}{unit}{unit}const {eb.var_type} {eb.var} = ktx_p * {vec} + ktx_j;",
        *ptext.reindent(original, indent, indent + unit + unit),
        f"{indent}{unit}}}",
    ]
    opening = f"{indent}if ({(' &&' + chr(10) + pad).join(checks)}) {{"
    if site.twin:  # the grid is kept: threads past the last pack do nothing
        lines.append(f"{indent}if (ktx_p < {bound_text} / {vec} + ({bound_text} % {vec} != 0)) {{")
    if site.unsized:
        # sizeof(T) is the compiler's to tell: where the knob's elements of the widest type do not
        # fit one access, the pack is discarded (never instantiated) and the thread takes its
        # elements one by one; the grid still shrinks by the knob, so no host code needs sizeof
        unknown = {e.pointer for e in site.accesses if e.packable and e.memory.element_type in site.unsized}
        widest = ptext.widest_element(site.sizes, site.unsized, unknown)
        lines.append(f"{indent}if constexpr ({vec} * {widest} > {max_bytes}) {{")
        lines.extend(one_by_one)
        lines.append(f"{indent}}} else " + opening.lstrip())
    else:
        lines.append(opening)
    lines.extend(_render_list(em, list(eb.stmts), indent + unit))
    lines.append(f"{indent}}} else {{")
    lines.extend(one_by_one)
    lines.append(f"{indent}}}")
    if site.twin:
        lines.append(f"{indent}}}")
    lines.append("#else")
    newline = "\r\n" if b"\r\n" in source else "\n"
    lines = [piece for line in lines for piece in line.replace("\r", "").split("\n")]
    rw.insert(start, newline.join(lines) + newline)
    eol = source.find(b"\n", eb.end)
    rest = source[eb.end : eol if eol >= 0 else len(source)]
    closing = newline + "#endif"
    if rest.strip() and not rest.strip().startswith(b"//"):
        closing += newline + indent
    rw.insert(eb.end, closing)
    if not site.twin:
        shrink_grid(rw, vec, "VEC_THREAD", eb.axis)
    pointers = sorted({a.pointer for a in packed})
    for note in ptext.element_notes(
        site.twin, eb, pointers, site.apart, site.notes, site.unsized, site.named, max_bytes, bound
    ):
        rw.note(note)
