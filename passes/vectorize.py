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
  warp, ``0``/``1``), so that packs partition the index space the same way;
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
:mod:`ktx.passes._per_thread` reads the idiom and the body; it refuses, naming the line, bodies
that read thread builtins, synchronise, return early, loop, store through ``*p``, split the index
(``idx / C``) for their stores, or read memory at another offset from ``i`` than a write to memory
that may alias (``out[i] = in[i + 1]`` without ``__restrict__``).

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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import tree_sitter as ts
from ktx.ir import Function, Loop, Module
from ktx.ir.access import (
    Access,
    LoopAccesses,
    Root,
    affine,
    analyze_loop,
    assigned_names,
    conflict_text,
    roots,
    same_index,
    substitute,
)
from ktx.ir.affine import kernel_index
from ktx.passes._common import LoopSite, shrink_grid
from ktx.passes._device import PreludeSite, insert_prelude, prelude_site
from ktx.passes._per_thread import (
    ElementAccess,
    ElementBody,
    body_refusal,
    element_accesses,
    element_body,
    reorder_conflict,
    type_size,
)
from ktx.passes._per_thread import balanced as _balanced
from ktx.passes._per_thread import canon as _canon
from ktx.passes._per_thread import expand as _expand

from ktx import syntax
from ktx.passbase import KnobSpec, Option, OptionValue, Pass, Phase, Refuse, Rewriter, Site, Skip, Target
from ktx.syntax import text as _text

_EXITS = frozenset({"break_statement", "continue_statement", "return_statement", "goto_statement"})
_REDUCE_CALLS = frozenset({"fmaxf", "fminf", "max", "min", "fmax", "fmin", "__hmax", "__hmin"})


# -- the plan ------------------------------------------------------------------------------------


#: The one width knob of ``vectorize{tie=true}``.
TIED = "VEC_LOOPS"


@dataclass(frozen=True)
class Plan:
    """What vectorizing one loop takes, worked out before any text is written."""

    node: ts.Node
    body: ts.Node
    var: str
    var_type: str
    start: ts.Node
    bound: ts.Node
    step: str
    update: ts.Node
    packed: tuple[Access, ...]
    opened: frozenset[int]
    """Node ids of the nested ``for`` loops that stay loops around per-iteration packs."""
    widened: tuple[str, ...]
    sizes: tuple[tuple[str, int], ...]
    """(pointer, element size in bytes) of each packed pointer."""
    inner_vars: tuple[tuple[int, str], ...] = field(default=())
    apart: tuple[tuple[Access, Access], ...] = field(default=())
    """Pairs of pointers, indexed alike, that may alias: packs are taken only where a run-time
    check finds them the same elements or disjoint over the loop's range."""
    disjoint: frozenset[frozenset[str]] = field(default=frozenset())
    """Of those, the pairs that must be disjoint: the body reaches an element through one after
    the other wrote it, which separate packs would not see."""


@dataclass(frozen=True)
class VecSite(LoopSite):
    plan: Plan | None = None


@dataclass(frozen=True)
class ElemSite(Site):
    """A one-element-per-thread kernel whose threads will take ``VEC_THREAD`` elements each."""

    body: ElementBody
    accesses: tuple[ElementAccess, ...]
    sizes: tuple[tuple[str, int], ...]
    notes: tuple[str, ...]


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
            "the grid's x is divided by it",
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
        known = roots(target.module, target.kernel)
        if not wanted:
            element = _element_site(target, self.int_option("max_bytes"))
            if element is not None:
                yield element
        for loop in target.loops:
            label = target.label(loop)
            if wanted and label not in wanted:
                continue
            plan = _plan(target, loop, known, self.int_option("max_bytes"))
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


# -- legality ------------------------------------------------------------------------------------


#: (start, step) pairs whose starts, over the threads that run the loop, are 0 .. step-1.
_PARTITIONS = {
    (_canon("threadIdx.x"), _canon("blockDim.x")),
    (_canon("blockIdx.x*blockDim.x+threadIdx.x"), _canon("blockDim.x*gridDim.x")),
    (_canon("threadIdx.y*blockDim.x+threadIdx.x"), _canon("blockDim.x*blockDim.y")),
    (_canon("threadIdx.x%32"), "32"),
    (_canon("threadIdx.x&31"), "32"),
    ("0", "1"),
}


def _partitioned(
    module: Module, fn_body: ts.Node, start: ts.Node, step: str, step_node: ts.Node | None, at: int
) -> bool:
    s = _canon(_expand(module, fn_body, start, at))
    t = _canon(_expand(module, fn_body, step_node, at)) if step_node is not None else _canon(step)
    return (s, t) in _PARTITIONS


def _header(
    module: Module, node: ts.Node
) -> tuple[str, str, ts.Node, ts.Node, str, ts.Node | None, ts.Node] | str:
    """(var, var type, start, bound, step text, step node, update) of a canonical loop, or why not."""
    init = node.child_by_field_name("initializer")
    cond = node.child_by_field_name("condition")
    update = node.child_by_field_name("update")
    if init is None or cond is None or update is None:
        return "the loop header is not `for (T i = start; i < n; i += step)`"
    if init.type != "declaration":
        return "the loop variable is declared outside the loop (its final value may be used after it)"
    decls = init.children_by_field_name("declarator")
    type_node = init.child_by_field_name("type")
    if len(decls) != 1 or decls[0].type != "init_declarator" or type_node is None:
        return "the loop header declares more than one variable"
    ident = decls[0].child_by_field_name("declarator")
    start = decls[0].child_by_field_name("value")
    if ident is None or ident.type != "identifier" or start is None:
        return "the loop variable has no plain initialiser"
    var = _text(module, ident)
    var_type = " ".join(
        _text(module, c) for c in init.children if c.type != "init_declarator" and c.type != ";"
    )
    if cond.type != "binary_expression":
        return "the loop condition is not `i < n`"
    op = cond.child_by_field_name("operator")
    left = cond.child_by_field_name("left")
    right = cond.child_by_field_name("right")
    if op is None or left is None or right is None:
        return "the loop condition is not `i < n`"
    if op.type == "<" and left.type == "identifier" and _text(module, left) == var:
        bound = right
    elif op.type == ">" and right.type == "identifier" and _text(module, right) == var:
        bound = left
    else:
        return "the loop condition is not `i < n`"
    step_text, step_node = _step(module, update, var)
    if step_text is None:
        return "the loop step is not `i += step` or `++i`"
    return var, var_type.replace("const ", "").strip(), start, bound, step_text, step_node, update


def _step(module: Module, update: ts.Node, var: str) -> tuple[str | None, ts.Node | None]:
    if update.type == "update_expression":
        arg = update.child_by_field_name("argument")
        op = update.child_by_field_name("operator")
        if arg is not None and _text(module, arg) == var and op is not None and op.type == "++":
            return "1", None
        return None, None
    if update.type == "assignment_expression":
        left = update.child_by_field_name("left")
        op = update.child_by_field_name("operator")
        right = update.child_by_field_name("right")
        if left is None or op is None or right is None or _text(module, left) != var:
            return None, None
        if op.type == "+=":
            return _text(module, right), right
        if op.type == "=" and right.type == "binary_expression":
            rop = right.child_by_field_name("operator")
            a = right.child_by_field_name("left")
            b = right.child_by_field_name("right")
            if rop is not None and rop.type == "+" and a is not None and b is not None:
                if _text(module, a) == var:
                    return _text(module, b), b
                if _text(module, b) == var:
                    return _text(module, a), a
    return None, None


def _plan(target: Target, loop: Loop, known: dict[str, Root], max_bytes: int) -> Plan | str:
    module = target.module
    fn = target.kernel
    if loop.kind != "for":
        return f"a {loop.kind} loop; only `for` loops are vectorized"
    info = analyze_loop(module, fn, loop, known)
    node, body = info.node, info.body
    if module.errors_in(loop.span):
        return "the loop contains code tree-sitter could not parse"
    header = _header(module, node)
    if isinstance(header, str):
        return header
    var, var_type, start, bound, step, step_node, update = header
    fn_body = module.node(fn.body)
    for n in syntax.walk(body):
        if n.type in _EXITS:
            return f"the body has a `{_text(module, n).split()[0].rstrip(';')}`: packs cannot stop mid-way"
        if n.type in ("preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif"):
            return "the body has preprocessor conditionals"
    barrier = next(syntax.calls(module, body, syntax.BARRIERS | syntax.SHUFFLES), None)
    if barrier is not None:
        callee = barrier.child_by_field_name("function")
        name = _text(module, callee) if callee is not None else "a barrier"
        return f"the body calls {name}: threads would reach it a different number of times"
    if var in info.assigned:
        return f"the body writes the loop variable {var}"
    header_names = syntax.names_in(module, bound) | syntax.names_in(module, start)
    if step_node is not None:
        header_names |= syntax.names_in(module, step_node)
    moving = sorted(header_names & (info.assigned | info.declared))
    if moving:
        return f"the loop bounds use {', '.join(moving)}, which the body changes"
    # ``i = threadIdx.x; i += BLOCK_SIZE`` where every launch passes BLOCK_SIZE: it is blockDim.x.
    shape = kernel_index(module, fn).loop_shape(loop)
    start_form = shape.start if shape is not None else None
    partitioned = shape is not None and shape.stride == "block" and start_form is not None
    partitioned = partitioned and start_form is not None and start_form.is_sym("threadIdx.x")
    if not partitioned and not _partitioned(module, fn_body, start, step, step_node, node.start_byte):
        return (
            f"cannot tell that start `{_text(module, start)}` and step `{step}` split the index space "
            "between threads (expected threadIdx.x/blockDim.x, a grid stride, a lane, or 0/1)"
        )
    # a loop from 0 by 1 is one thread's own (every thread that runs it walks the whole range):
    # packs keep its order, and do not change which thread touches which element
    sequential = _canon(_text(module, start)) == "0" and _canon(step) == "1"
    problem = _carried(module, info, body, sequential)
    if problem:
        return problem
    if info.pointer_writes:
        w = info.pointer_writes[0]
        return f"the body writes through a pointer expression (`{_text(module, w)}`), which cannot be checked"
    apart: list[tuple[Access, Access]] = []
    for a, b in info.conflict_pairs():
        if not _checkable_alias(module, a, b, info):
            return "aliasing: " + conflict_text(a, b)
        apart.append((a, b))
    opened, inner_vars = _openable(module, info, body, var)
    packed: list[Access] = []
    for a in info.accesses:
        if not a.writes and not a.reads:
            continue
        if a.writes and not a.contiguous:
            return (
                f"the body writes {a.pointer}[{_text(module, a.index)}], which is not element {var} of a "
                "row; packs would change which thread writes it"
            )
        if a.kind == "address":
            return f"the body takes the address of {a.pointer}[...], which may be used in any order"
        if a.root.space == "local":
            if a.writes and a.root.name not in info.declared:
                return f"the body writes the per-thread array {a.pointer} declared outside the loop"
            continue
        if _packable(module, a, info, opened, inner_vars, body):
            packed.append(a)
    # A pointer the body writes, reached both through packs and through accesses that stay scalar
    # (under a condition: `if (o[i] > m) m = o[i];` after `o[i] = ...`), stays scalar throughout:
    # a pack is stored only at its end, and the scalar accesses would read memory before it.
    chosen = {a.node.id for a in packed}
    written = {a.pointer for a in info.accesses if a.writes}
    scalar = {a.pointer for a in info.accesses if (a.reads or a.writes) and a.node.id not in chosen}
    mixed = written & scalar
    packed = [a for a in packed if a.pointer not in mixed]
    if not packed:
        if mixed:
            return (
                f"{', '.join(sorted(mixed))} is written and also accessed under a condition or out of "
                "line in the body: packs would read it before their stores"
            )
        return f"no unconditional, contiguous access p[{var} + offset] through a named pointer"
    problem = "" if sequential else _ownership(module, fn, fn_body, node, info, known)
    if problem:
        return problem
    sizes: list[tuple[str, int]] = []
    for a in packed:
        elem = a.root.element_type
        # typedefs followed into the file's local headers too (llm.c's floatX in common.h)
        found = type_size(module, fn, target.template_args, elem)
        size = None if found is None else found[0]
        if size is None:
            return (
                f"unknown size of element type {elem!r} of {a.pointer} (give the kernel's template arguments)"
            )
        if (a.pointer, size) not in sizes:
            sizes.append((a.pointer, size))
    if max(s for _, s in sizes) * 2 > max_bytes:
        return f"elements of {max(s for _, s in sizes)} bytes leave no pack width within {max_bytes} bytes"
    widened = _widened(module, body, opened)
    if isinstance(widened, str):
        return widened
    return Plan(
        node,
        body,
        var,
        var_type,
        start,
        bound,
        step,
        update,
        tuple(packed),
        frozenset(opened),
        tuple(widened),
        tuple(sizes),
        tuple(sorted(inner_vars.items())),
        tuple(apart),
        frozenset(
            frozenset((a.pointer, b.pointer))
            for a, b in apart
            if not _same_address_ok(info.accesses, a.pointer, b.pointer)
        ),
    )


def _evaluated_at(a: Access) -> int:
    """Where an access takes effect in the body's order: a store when its assignment completes
    (``out[i] = x[i]`` reads ``x[i]`` first), anything else where it stands."""
    if a.kind == "store" and a.node.parent is not None and a.node.parent.type == "assignment_expression":
        return a.node.parent.end_byte
    return a.node.start_byte


def _same_address_ok(accesses: Sequence[Access], p: str, q: str) -> bool:
    """Whether ``p`` and ``q`` may be one and the same array under packs: each is packed on its
    own (loaded at the pack's start, stored at its end), which matches the scalar order only if
    nothing reaches an element through one pointer after the other has written it."""
    mine = [a for a in accesses if a.pointer in (p, q)]
    for w in mine:
        if not w.writes:
            continue
        if any(o.pointer != w.pointer and _evaluated_at(o) > _evaluated_at(w) for o in mine):
            return False
    return True


def _checkable_alias(module: Module, a: Access, b: Access, info: LoopAccesses) -> bool:
    """Whether two accesses that may alias can be packed behind a run-time check: both contiguous
    subscripts written alike (``x[i]``, ``out[i]``), in no nested loop, neither an escaping
    address. Then the two pointers' ranges over the loop are ``[p + off, p + off + bound)``, and
    if those are the same elements (same address, same element size) or disjoint, packing reads
    and writes each element as the scalar loop did (llm.c's layernorm writes ``out_idx[i]`` from
    ``x[i]`` with no ``__restrict__``)."""
    return (
        a.kind != "address"
        and b.kind != "address"
        and a.stride == 1
        and b.stride == 1
        and a.offset is not None
        and b.offset is not None
        and not a.loops
        and not b.loops
        and same_index(a, b)
        # the check sits before the loop: its offset may not name what the body declares
        and not any(syntax.names_in(module, t.node) & (info.declared | info.assigned) for t in a.offset_terms)
    )


def _carried(module: Module, info: LoopAccesses, body: ts.Node, sequential: bool = False) -> str:
    """Why a value is carried from one iteration to the next (other than a reduction), or ''.

    A reduction's running value may be read only by its own updates, unless the loop is one
    thread's own (``sequential``: packs keep its order): threads of a strided loop take other
    elements under packs, and a running value read elsewhere (``o[i] = m;`` after
    ``if (x[i] > m) m = x[i];``) would change."""
    for name, writes in assigned_names(module, body).items():
        if name in info.declared:
            continue
        spans: list[tuple[int, int]] = []
        for w in writes:
            spans.append((w.start_byte, w.end_byte))
            if w.type == "update_expression":
                continue
            op = w.child_by_field_name("operator")
            if op is not None and op.type in ("+=", "-=", "*=", "|=", "&=", "^="):
                continue
            right = w.child_by_field_name("right")
            if right is not None and _is_reduction(module, right, name):
                continue
            guard = _guarded_extremum(module, w, name)
            if guard is not None:
                spans.append((guard.start_byte, guard.end_byte))
                continue
            return (
                f"the body assigns {name}, declared outside the loop, from one iteration to the next "
                f"(line {w.start_point[0] + 1}); only reductions (+=, fmaxf(...)) can be reordered"
            )
        if sequential:
            continue
        for n in syntax.walk(body):
            if (
                n.type == "identifier"
                and _text(module, n) == name
                and not any(a <= n.start_byte < b for a, b in spans)
            ):
                return (
                    f"the body reads {name}, a running reduction, outside its update (line "
                    f"{n.start_point[0] + 1}): threads would see other partial values under packs"
                )
    return ""


def _guarded_extremum(module: Module, assign: ts.Node, name: str) -> ts.Node | None:
    """``if (e > m) m = e;`` (or ``<``, ``>=``, ``<=``, either side; no ``else``): a max or min
    reduction written as a branch, as first drafts write softmax's row maximum. Any order of the
    elements gives the same extremum (NaN never wins a comparison, in any order)."""
    if assign.type != "assignment_expression":
        return None
    op = assign.child_by_field_name("operator")
    right = assign.child_by_field_name("right")
    stmt = assign.parent
    if op is None or op.type != "=" or right is None or stmt is None or stmt.type != "expression_statement":
        return None
    branch = stmt.parent
    if branch is not None and branch.type == "compound_statement" and branch.named_child_count == 1:
        branch = branch.parent
    if branch is None or branch.type != "if_statement" or branch.child_by_field_name("alternative"):
        return None
    cond = branch.child_by_field_name("condition")
    while cond is not None and cond.type in ("condition_clause", "parenthesized_expression"):
        inner = [c for c in cond.named_children if c.type != "comment"]
        cond = inner[0] if len(inner) == 1 else None
    if cond is None or cond.type != "binary_expression":
        return None
    cop = cond.child_by_field_name("operator")
    a, b = cond.child_by_field_name("left"), cond.child_by_field_name("right")
    if cop is None or cop.type not in ("<", ">", "<=", ">=") or a is None or b is None:
        return None
    value = _text(module, right).split()
    sides = (_text(module, a).split(), _text(module, b).split())
    if name in syntax.names_in(module, right):
        return None  # `if (m + x > m) m = m + x;` is no extremum
    if (sides[0] == [name] and sides[1] == value) or (sides[1] == [name] and sides[0] == value):
        return branch
    return None


def _is_reduction(module: Module, node: ts.Node, name: str) -> bool:
    n = node
    while n.type == "parenthesized_expression" and n.named_child_count == 1:
        n = n.named_children[0]
    if n.type == "call_expression":
        fn = n.child_by_field_name("function")
        args = n.child_by_field_name("arguments")
        if fn is None or args is None or _text(module, fn) not in _REDUCE_CALLS:
            return False
        named = [a for a in args.named_children if a.type != "comment"]
        return len(named) == 2 and any(_text(module, a).strip() == name for a in named)
    if n.type == "binary_expression":
        op = n.child_by_field_name("operator")
        left = n.child_by_field_name("left")
        right = n.child_by_field_name("right")
        if op is None or left is None or right is None or op.type not in ("+", "*", "|", "&", "^"):
            return False
        return _text(module, left).strip() == name or _text(module, right).strip() == name
    return False


def _openable(module: Module, info: LoopAccesses, body: ts.Node, var: str) -> tuple[set[int], dict[int, str]]:
    """Nested ``for`` loops that may stay loops around packs: invariant headers, direct children."""
    opened: set[int] = set()
    inner_vars: dict[int, str] = {}
    for n in syntax.walk(body):
        if n.type != "for_statement" or n.id == info.node.id:
            continue
        header = _header(module, n)
        if isinstance(header, str):
            continue
        ivar, _, istart, ibound, _, istep, _ = header
        parent = n.parent
        if parent is None or parent.type != "compound_statement":
            continue
        names = syntax.names_in(module, istart) | syntax.names_in(module, ibound)
        if istep is not None:
            names |= syntax.names_in(module, istep)
        names.discard(ivar)
        if var in names or names & (info.declared | info.assigned):
            continue
        if ivar in {k for k, ws in assigned_names(module, n.child_by_field_name("body") or n).items() if ws}:
            continue
        opened.add(n.id)
        inner_vars[n.id] = ivar
    # A loop stays open only if every loop around it does and it sits directly in a list.
    result: set[int] = set()
    for n in syntax.walk(body):
        if n.id not in opened:
            continue
        chain_ok = True
        p = n.parent
        while p is not None and p.id != body.id:
            if p.type == "for_statement":
                if p.id not in opened:
                    chain_ok = False
                    break
            elif p.type != "compound_statement":
                chain_ok = False
                break
            p = p.parent
        if chain_ok:
            result.add(n.id)
    return result, {k: v for k, v in inner_vars.items() if k in result}


def _packable(
    module: Module,
    a: Access,
    info: LoopAccesses,
    opened: set[int],
    inner_vars: dict[int, str],
    body: ts.Node,
) -> bool:
    if not a.contiguous or a.conditional or a.root.space not in ("global", "shared") or not a.root.name:
        return False
    if a.pointer in info.declared or a.pointer in info.assigned:
        return False
    if any(lp.id not in opened for lp in a.loops):
        return False
    # The access must sit in a statement of a list (the body or an open loop's body), not deeper
    # inside another loop.
    p = a.node.parent
    while p is not None and p.id != body.id:
        if (
            p.type in ("for_statement", "while_statement", "do_statement", "for_range_loop")
            and p.id not in opened
        ):
            return False
        p = p.parent
    loop_vars = {inner_vars[lp.id] for lp in a.loops}
    for t in a.offset_terms:
        names = syntax.names_in(module, t.node)
        if names & ((info.assigned | info.declared) - loop_vars):
            return False
        if not affine(module, t.node, loop_vars):
            return False
    return True


def _ownership(
    module: Module, fn: Function, fn_body: ts.Node, loop: ts.Node, info: LoopAccesses, known: dict[str, Root]
) -> str:
    """Why another part of the kernel may depend on which thread handled which element, or ''."""
    inside_written = {a.root.name for a in info.accesses if a.writes and a.root.name}
    inside_all = {a.root.name for a in info.accesses if a.root.name}
    outside: list[tuple[str, ts.Node, bool]] = []
    for n in syntax.walk(fn_body):
        if loop.start_byte <= n.start_byte < loop.end_byte:
            continue
        if n.type in ("subscript_expression", "call_expression") and syntax.exclusive(n, loop):
            continue  # another #if branch (row-owner's code for other THREADS_PER_ROW): never both
        if n.type == "subscript_expression":
            base = n.child_by_field_name("argument")
            if base is None or base.type != "identifier":
                continue
            root = known.get(_text(module, base))
            if root is None or not root.name:
                continue
            kind = _write_kind(n)
            outside.append((root.name, n, kind))
        elif n.type == "call_expression":
            args = n.child_by_field_name("arguments")
            if args is None:
                continue
            for ident in syntax.identifiers(args):
                root = known.get(_text(module, ident))
                if root is not None and root.name and root.space != "local":
                    outside.append((root.name, n, not root.const))
    barriers = [c.start_byte for c in syntax.calls(module, fn_body) if _synchronizes(module, c)]
    for name, n, writes in outside:
        touches = (name in inside_written) or (writes and name in inside_all)
        if not touches:
            continue
        lo, hi = (
            (n.end_byte, loop.start_byte) if n.start_byte < loop.start_byte else (loop.end_byte, n.start_byte)
        )
        if not any(lo <= b < hi for b in barriers):
            return (
                f"{name} is also accessed at line {n.start_point[0] + 1} with no __syncthreads() in between; "
                "packs change which thread owns each element"
            )
    del fn
    return ""


def _synchronizes(module: Module, call: ts.Node) -> bool:
    """A barrier between the threads that share a row: ``__syncthreads()`` and the like, or
    ``row-owner``'s ``ktx_row_reduce<T>`` (a ``__syncwarp`` among the row's lanes for a warp, two
    ``__syncthreads()`` for a block: its loops stride the row over exactly those threads)."""
    fn = call.child_by_field_name("function")
    name = "" if fn is None else _text(module, fn)
    return name in syntax.BARRIERS or name.startswith("ktx_row_reduce<")


def _write_kind(sub: ts.Node) -> bool:
    parent = sub.parent
    if parent is None:
        return False
    if parent.type == "assignment_expression" and parent.child_by_field_name("left") == sub:
        return True
    return parent.type == "update_expression"


def _list(node: ts.Node) -> list[ts.Node]:
    """The statements of a loop body: a compound statement's children, or the single statement."""
    if node.type == "compound_statement":
        return [c for c in node.named_children]
    return [node]


def _widened(module: Module, body: ts.Node, opened: set[int]) -> list[str] | str:
    """Locals declared in one run of statements and used outside it: they become arrays of VEC."""
    widened: list[str] = []

    def visit(stmts: list[ts.Node]) -> str:
        for group in _groups(stmts, opened):
            if isinstance(group, ts.Node):
                inner = group.child_by_field_name("body")
                if inner is not None:
                    err = visit(_list(inner))
                    if err:
                        return err
                continue
            spans = [(s.start_byte, s.end_byte) for s in group]
            for stmt in group:
                if stmt.type != "declaration":
                    continue
                for decl in stmt.children_by_field_name("declarator"):
                    target = (
                        decl.child_by_field_name("declarator") if decl.type == "init_declarator" else decl
                    )
                    if target is None:
                        continue
                    if target.type != "identifier":
                        name_node = syntax.declarator_identifier(target)
                        if name_node is not None and _used_outside(
                            module, body, _text(module, name_node), spans
                        ):
                            return (
                                f"{_text(module, name_node)} (an array or pointer declared in the body) "
                                "is used across statements that packs split apart"
                            )
                        continue
                    name = _text(module, target)
                    if not _used_outside(module, body, name, spans):
                        continue
                    type_node = stmt.child_by_field_name("type")
                    if type_node is None or _text(module, type_node) == "auto":
                        return f"{name} is declared `auto` and used across statements; give it a type"
                    widened.append(name)
        return ""

    err = visit(_list(body))
    return err if err else widened


def _used_outside(module: Module, body: ts.Node, name: str, spans: list[tuple[int, int]]) -> bool:
    for ident in syntax.identifiers(body):
        if _text(module, ident) != name:
            continue
        if not any(s <= ident.start_byte < e for s, e in spans):
            return True
    return False


def _groups(stmts: list[ts.Node], opened: set[int] | frozenset[int]) -> list[ts.Node | list[ts.Node]]:
    """Split a statement list into open loops (kept as loops) and runs of other statements.

    A ``#pragma`` right before an open loop goes with it (it is emitted before its header).
    """
    out: list[ts.Node | list[ts.Node]] = []
    run: list[ts.Node] = []
    for s in stmts:
        if s.id in opened:
            if run and run[-1].type == "preproc_call" and _pragma_of(run[-1], s):
                run.pop()
            if run:
                out.append(run)
            run = []
            out.append(s)
        else:
            run.append(s)
    if run:
        out.append(run)
    return out


def _pragma_of(pragma: ts.Node, loop: ts.Node) -> bool:
    return pragma.end_byte <= loop.start_byte and (pragma.text or b"").lstrip().startswith(b"#pragma")


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
    indent = syntax.indentation(source, loop.span.start)
    unit = "  "
    parent = plan.node.parent
    braces = parent is None or parent.type != "compound_statement"
    em = _Emit(module, plan, vec, unit)
    inner = indent + unit if braces else indent
    packs_name = f"ktx_packs_{label}"
    bound = em.text(plan.bound)
    bound_text = bound if re.fullmatch(r"[\w.]+", bound) else f"({bound})"
    lines: list[str] = [f"#if {vec} > 1"]
    if braces:
        lines.append(indent + "{")
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
        lines.append(f"{inner}const {plan.var_type} {packs_name} = ({cond}) ? {bound_text} / {vec} : 0;")
    else:
        if plan.apart:
            a, b = plan.apart[0]
            raise Refuse(
                f"aliasing: {conflict_text(a, b)}; only a run-time check can tell, and tail=false has none"
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
    start = em.text(plan.start)
    step_update = "++ktx_p" if plan.step == "1" else f"ktx_p += {plan.step}"
    lines.append(f"{inner}for ({plan.var_type} ktx_p = {start}; ktx_p < {packs_name}; {step_update}) {{")
    lines.extend(_render_list(em, _list(plan.body), inner + unit))
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
    for p, q in dict.fromkeys((a.pointer, b.pointer) for a, b in plan.apart):
        how = "disjoint" if frozenset((p, q)) in plan.disjoint else "apart or the same"
        rw.note(f"{p} and {q} may alias: packed only where a run-time check finds them {how}")


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
    constants = _constants(rw)
    fn_body = module.node(fn.body)
    out: list[str] = []

    def need(expr: str) -> None:
        core = expr
        while core.startswith("(") and core.endswith(")") and _balanced(core[1:-1]):
            core = core[1:-1]
        text = f"{knob} == 1 or ({core}) % {knob} == 0"
        if text not in out:
            out.append(text)

    bound = _to_expr(module, plan.bound, params, constants)
    if bound is None:
        raise Refuse(
            f"the bound `{_text(module, plan.bound)}` is not an expression of the kernel's parameters"
        )
    need(bound)
    loop_vars = {v for _, v in plan.inner_vars}
    for a in plan.packed:
        terms = [t.node for t in a.offset_terms] + _pointer_terms(
            module, fn_body, a.pointer, plan.node.start_byte
        )
        for term in terms:
            factors = _factors(term)
            kept = [f for f in factors if not _varies(module, f, params, constants, loop_vars)]
            if len(kept) == len(factors) and not syntax.names_in(module, term) & params:
                continue  # a constant offset: checked below if it is not a multiple
            if not kept:
                raise Refuse(
                    f"the offset `{_text(module, term)}` of {a.pointer} varies per thread with no size "
                    "factor to constrain; use tail=true"
                )
            parts = [_to_expr(module, f, params, constants) for f in kept]
            if any(p is None for p in parts):
                raise Refuse(
                    f"cannot state the alignment of {a.pointer} (`{_text(module, term)}`); use tail=true"
                )
            texts = [p for p in parts if p is not None]
            need(texts[0] if len(texts) == 1 else " * ".join(f"({p})" for p in texts))
    rw.note("tail=false: constraints name the kernel's parameters " + ", ".join(sorted(params)))
    return out


def _constants(rw: Rewriter) -> dict[str, str]:
    """Compile-time names and their values: template arguments, #define and constexpr integers."""
    values: dict[str, str] = {}
    fn = rw.target.kernel
    for tp, arg in zip(fn.template_params, rw.target.template_args, strict=False):
        if tp.kind == "value":
            values[tp.name] = arg.strip()
    for m in rw.target.module.macros:
        if m.int_value is not None:
            values[m.name] = str(m.int_value)
    for c in rw.target.module.constants:
        if c.int_value is not None:
            values[c.name] = str(c.int_value)
    return values


def _pointer_terms(module: Module, fn_body: ts.Node, pointer: str, before: int) -> list[ts.Node]:
    """The offset terms of the local pointer ``pointer``'s initialiser, followed through locals."""
    from ktx.ir.access import terms

    locals_: dict[str, ts.Node] = {}
    for n in syntax.walk(fn_body):
        if n.type != "declaration" or n.start_byte >= before:
            continue
        for decl in n.children_by_field_name("declarator"):
            ident = syntax.declarator_identifier(decl)
            value = decl.child_by_field_name("value") if decl.type == "init_declarator" else None
            if ident is not None and value is not None:
                locals_[syntax.text(module, ident)] = value
    out: list[ts.Node] = []
    seen: set[str] = set()
    todo = [pointer]
    while todo:
        name = todo.pop()
        value = locals_.get(name)
        if name in seen or value is None:
            continue
        seen.add(name)
        for t in terms(value):
            node = t.node
            if node.type == "identifier" and syntax.text(module, node) in locals_:
                todo.append(syntax.text(module, node))
            elif node.type != "identifier":
                out.append(node)
    return out


def _factors(node: ts.Node) -> list[ts.Node]:
    n = node
    while n.type == "parenthesized_expression" and n.named_child_count == 1:
        n = n.named_children[0]
    if n.type == "cast_expression":
        value = n.child_by_field_name("value")
        return _factors(value) if value is not None else [n]
    if n.type == "binary_expression":
        op = n.child_by_field_name("operator")
        left = n.child_by_field_name("left")
        right = n.child_by_field_name("right")
        if op is not None and op.type == "*" and left is not None and right is not None:
            return _factors(left) + _factors(right)
    return [n]


def _varies(
    module: Module, node: ts.Node, params: set[str], constants: dict[str, str], loop_vars: set[str]
) -> bool:
    """Whether a factor holds anything other than size parameters and compile-time constants."""
    names = syntax.names_in(module, node)
    known = {k for k, v in constants.items() if v.isdigit()}  # TOPK = "{topk}" is not known here
    return bool(names - params - known) or bool(names & loop_vars)


def _to_expr(module: Module, node: ts.Node, params: set[str], constants: dict[str, str]) -> str | None:
    """A C integer expression of parameters and constants as ktx.expr text, or None."""
    t = node.type
    if t == "number_literal":
        text = _text(module, node).rstrip("uUlL")
        return text if text.isdigit() else None
    if t == "identifier":
        name = _text(module, node)
        if name in params:
            return name
        value = constants.get(name)
        return value if value is not None and value.isdigit() else None
    if t == "parenthesized_expression" and node.named_child_count == 1:
        inner = _to_expr(module, node.named_children[0], params, constants)
        return f"({inner})" if inner is not None else None
    if t == "cast_expression":
        operand = node.child_by_field_name("value")
        return _to_expr(module, operand, params, constants) if operand is not None else None
    if t == "binary_expression":
        op = node.child_by_field_name("operator")
        left = node.child_by_field_name("left")
        right = node.child_by_field_name("right")
        if op is None or left is None or right is None or op.type not in ("+", "-", "*", "/", "%"):
            return None
        a = _to_expr(module, left, params, constants)
        b = _to_expr(module, right, params, constants)
        if a is None or b is None:
            return None
        return f"{a} {'//' if op.type == '/' else op.type} {b}"
    return None


def _tail_header(em: _Emit, packs_name: str) -> str:
    """The original loop header with the start moved past the packed elements."""
    module, plan = em.module, em.plan
    body = plan.body
    head = module.source[plan.node.start_byte : body.start_byte].decode("utf-8", "replace")
    s0 = plan.start.start_byte - plan.node.start_byte
    s1 = plan.start.end_byte - plan.node.start_byte
    start_text = head[s0:s1]
    lead = f"{em.head} + " if em.head else ""
    new_start = f"{lead}{packs_name} * {em.vec} + {start_text}"
    return head[:s0] + new_start + head[s1:]


def _head_header(em: _Emit) -> str:
    """The original loop header with the bound cut to the peeled head (``i < ktx_head_L0``)."""
    module, plan = em.module, em.plan
    head = module.source[plan.node.start_byte : plan.body.start_byte].decode("utf-8", "replace")
    b0 = plan.bound.start_byte - plan.node.start_byte
    b1 = plan.bound.end_byte - plan.node.start_byte
    return head[:b0] + em.head + head[b1:]


def _base_offset(em: _Emit, a: Access) -> tuple[list[str], str]:
    """The nested loop variables in a packed access's offset, and the offset with them at 0."""
    loop_vars = set(dict(em.plan.inner_vars).values())
    names = sorted({v for t in a.offset_terms for v in syntax.names_in(em.module, t.node) & loop_vars})
    return names, _offset_text(em.module, a, {v: "0" for v in names})


def _packed_base(em: _Emit, a: Access) -> str:
    """``p + off`` of a packed access at the loop's first element (nested loop variables 0)."""
    base = _base_offset(em, a)[1]
    return f"{a.pointer} + {base}" if base else a.pointer


def _checks(em: _Emit) -> list[str]:
    """Run-time conditions for the packed loop: every packed address aligned for every iteration."""
    module, plan = em.module, em.plan
    out: list[str] = []
    bound = em.text(plan.bound)
    pairs: set[frozenset[str]] = set()
    for a, b in plan.apart:
        off = _offset_text(module, a, {})
        plus = f" + {off}" if off else ""
        pair = frozenset((f"{a.pointer}{plus}", f"{b.pointer}{plus}"))
        if pair in pairs:
            continue  # ktx::apart is symmetric
        pairs.add(pair)
        test = "disjoint" if frozenset((a.pointer, b.pointer)) in plan.disjoint else "apart"
        out.append(f"ktx::{test}({a.pointer}{plus}, {b.pointer}{plus}, {bound})")
    for a in plan.packed:
        names, base = _base_offset(em, a)
        zero = {v: "0" for v in names}
        at = " + ".join(t for t in (a.pointer, base, em.head) if t)
        out.append(f"ktx::aligned<{em.vec}>({at})")
        for v in names:
            one = {**zero, v: "1"}
            step = _offset_text(module, a, one)
            out.append(f"(({step}) - ({base})) % {em.vec} == 0")
    seen: list[str] = []
    for c in out:
        if c not in seen:
            seen.append(c)
    return seen


def _offset_text(module: Module, a: Access, values: dict[str, str]) -> str:
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


def _render_list(em: _Emit, stmts: list[ts.Node], indent: str) -> list[str]:
    lines: list[str] = []
    for group in _groups(stmts, em.plan.opened):
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
    if prev is not None and prev.type == "preproc_call" and _pragma_of(prev, loop):
        lines.append(_text(module, prev).strip())
    head = module.source[loop.start_byte : body.start_byte].decode("utf-8", "replace").rstrip()
    lines.append(f"{indent}{head} {{")
    lines.extend(_render_list(em, _list(body), indent + em.indent_unit))
    lines.append(f"{indent}}}")
    return lines


def _render_group(em: _Emit, group: list[ts.Node], indent: str) -> list[str]:
    plan = em.plan
    spans = [(s.start_byte, s.end_byte) for s in group]
    in_group = [a for a in plan.packed if any(s <= a.node.start_byte < e for s, e in spans)]
    # One pack per (pointer, offset) in this run of statements.
    keys: dict[tuple[str, str], list[Access]] = {}
    for a in in_group:
        keys.setdefault((a.pointer, " ".join((a.offset or "").split())), []).append(a)
    names: dict[int, str] = {}
    before: list[str] = []
    after: list[str] = []
    for (pointer, offset), accs in keys.items():
        em.counter += 1
        base = f"ktx_{pointer}"
        name = base if not any(v == base for v in em.packs.values()) else f"{base}_{em.counter}"
        em.packs[(em.counter, pointer, offset)] = name
        for a in accs:
            names[a.node.id] = name
        address = f"{pointer} + {offset} + {em.at()}" if offset else f"{pointer} + {em.at()}"
        reads = any(a.reads for a in accs) and not _written_first(accs)
        writes = any(a.writes for a in accs)
        if reads:
            qual = "auto" if writes else "const auto"
            before.append(f"{indent}{qual} {name} = ktx::load<{em.vec}>({address});")
        else:
            elem = accs[0].root.element_type
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


def _written_first(accs: list[Access]) -> bool:
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
                    rendered = _splice(module, value.start_byte, value.end_byte, edits)
                    out.append(f"{indent}{name}[ktx_j] = {rendered};")
            return out
    text = _splice(module, stmt.start_byte, stmt.end_byte, edits)
    col = stmt.start_point[1]
    first, *rest = text.split("\n")
    out_lines = [indent + first]
    for line in rest:
        stripped = line[col:] if line[:col].strip() == "" else line.lstrip()
        out_lines.append(indent + stripped)
    return out_lines


def _splice(module: Module, start: int, end: int, edits: Sequence[tuple[int, int, str]]) -> str:
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


# -- one element per thread ----------------------------------------------------------------------


def _element_site(target: Target, max_bytes: int) -> ElemSite | Skip | None:
    """The kernel's one-element-per-thread body as a site, a refusal, or None (not that idiom)."""
    module, fn = target.module, target.kernel
    eb = element_body(module, fn)
    if eb is None:
        return None
    label = fn.name
    span = module.span(eb.decl.start_byte, eb.decl.end_byte) if not isinstance(eb, str) else fn.span
    if isinstance(eb, str):
        return Skip(eb, label, span)
    if target.mapping is None and not target.launches:
        return Skip(f"no launch of {fn.name} in this file and no launch mapping given", label, span)
    why = body_refusal(module, eb)
    if why is not None:
        return Skip(why, label, span)
    loops = [n for s in eb.stmts for n in syntax.walk(s) if n.type in _LOOP_TYPES]
    if loops:
        return Skip(
            f"the body of element {eb.var} has a loop (line {loops[0].start_point[0] + 1}): "
            "its loops are vectorized instead",
            label,
            span,
        )
    accesses = element_accesses(module, fn, eb)
    if isinstance(accesses, str):
        return Skip(accesses, label, span)
    conflict = reorder_conflict(accesses, eb.var)
    if conflict is not None:
        return Skip(conflict, label, span)
    packed = [e for e in accesses if e.packable]
    if not packed:
        return Skip(
            f"no unconditional access p[{eb.var} + offset] through a named pointer in the body of "
            f"element {eb.var}",
            label,
            span,
        )
    sizes: list[tuple[str, int]] = []
    notes: list[str] = []
    for e in packed:
        elem = e.access.root.element_type
        found = type_size(module, fn, target.template_args, elem)
        if found is None:
            return Skip(
                f"unknown size of element type {elem!r} of {e.access.pointer} "
                "(give the kernel's template arguments)",
                label,
                span,
            )
        size, how = found
        if how and f"{how} ({size} B)" not in notes:
            notes.append(f"{how} ({size} B)")
        if (e.access.pointer, size) not in sizes:
            sizes.append((e.access.pointer, size))
    if max(s for _, s in sizes) * 2 > max_bytes:
        return Skip(
            f"elements of {max(s for _, s in sizes)} bytes leave no pack width within {max_bytes} bytes",
            label,
            span,
        )
    return ElemSite(label, span, eb, tuple(accesses), tuple(sizes), tuple(notes))


_LOOP_TYPES = frozenset({"for_statement", "while_statement", "do_statement", "for_range_loop"})


def _reindent(text: str, old: str, new: str) -> list[str]:
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
    packed = tuple(e.access for e in site.accesses if e.packable)
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
    checks = [*eb.conditions, *_checks(em), f"ktx_p * {vec} + {vec} <= {bound_text}"]
    pad = " " * len(f"{indent}if (")
    lines = [f"#if {vec} > 1"]
    lines.append(f"{indent}// VEC_THREAD: each thread takes VEC_THREAD consecutive elements, packed where")
    lines.append(f"{indent}// every packed pointer is aligned and the pack is in bounds (checked here), else")
    lines.append(f"{indent}// one by one.")
    lines.append(f"{indent}const {eb.var_type} ktx_p = {em.text(eb.index)};")
    for s in eb.between:
        lines.extend(_reindent(em.text(s), indent, indent))
    lines.append(f"{indent}if ({(' &&' + chr(10) + pad).join(checks)}) {{")
    lines.extend(_render_list(em, list(eb.stmts), indent + unit))
    lines.append(f"{indent}}} else {{")
    lines.append(f"{indent}{unit}for (int ktx_j = 0; ktx_j < {vec}; ++ktx_j) {{")
    lines.append(f"{indent}{unit}{unit}const {eb.var_type} {eb.var} = ktx_p * {vec} + ktx_j;")
    guard = eb.guard
    edits: list[tuple[int, int, str]] = []
    if eb.form == "return":
        for n in syntax.walk(guard):
            if n.type == "return_statement":
                edits.append((n.start_byte, n.end_byte, "continue;"))
    original = _splice(module, guard.start_byte, eb.end, edits)
    lines.extend(_reindent(original, indent, indent + unit + unit))
    lines.append(f"{indent}{unit}}}")
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
    shrink_grid(rw, vec, "VEC_THREAD")
    pointers = sorted({a.pointer for a in packed})
    rw.note(
        f"{eb.var}: packed {len(pointers)} pointer(s): {', '.join(pointers)}; grid x divided by VEC_THREAD"
    )
    for note in site.notes:
        rw.note(note)
    if eb.var_type.split()[-1] in ("int", "unsigned"):
        rw.note(
            f"ktx_p * VEC_THREAD is {eb.var_type}, as {eb.var} was: it wraps when {bound} is within "
            "VEC_THREAD * blockDim.x of the type's limit"
        )
