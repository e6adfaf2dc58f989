"""Vectorize's legality, as facts: which loops pack, and how; which per-thread bodies widen.

``passes/vectorize.py`` asks :func:`loop_plan` for each loop and :func:`element_plan` for a
one-element-per-thread kernel, then only writes text. The rules (the pass's description
lists them for users):

* a loop is ``for (T i = start; i < n; i += step)`` whose start and step split the index
  space among threads: read by :mod:`ktx.ir.affine` (``LoopShape``) or, failing that, matched as
  canonical text (:mod:`ktx.ir.facts.canon`) against the usual partitions;
* its packable accesses (:mod:`ktx.ir.access`) are ``p[i + off]`` with ``off`` invariant,
  unconditional, through a named parameter or ``__shared__`` array; writes are to element
  ``i``; aliasing pairs are either impossible or checkable at run time (``ktx::apart``);
* values carried across iterations are reductions; no barrier, shuffle or early exit;
* memory the loop writes is not touched elsewhere in the kernel without a barrier between;
* element sizes are known (:mod:`ktx.ir.facts.types`).

Every refusal is a sentence naming the construct, which the pass reports with the line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import tree_sitter as ts
from ktx.ir import syntax
from ktx.ir.access import (
    LoopAccesses,
    affine,
    assigned_names,
    conflict_text,
    index_source,
    same_index,
)
from ktx.ir.affine import Affine, LoopShape, kernel_index
from ktx.ir.facts import assign
from ktx.ir.facts.canon import canon as _canon
from ktx.ir.facts.canon import expand as _expand
from ktx.ir.facts.elements import (
    ElementBody,
    body_refusal,
    element_accesses,
    element_body,
    reorder_conflict,
)
from ktx.ir.facts.kernel import Facts
from ktx.ir.facts.kinds import access_kind
from ktx.ir.facts.owners import across_blocks, splits_exactly
from ktx.ir.facts.read_span import index_span
from ktx.ir.facts.reductions import unreorderable
from ktx.ir.facts.thread_values import thread_read
from ktx.ir.facts.types import type_size
from ktx.ir.memref import MemRef, Root
from ktx.ir.module import Module
from ktx.ir.nodes import Function, Loop
from ktx.ir.source import Span
from ktx.ir.syntax import text as _text

_EXITS = frozenset({"break_statement", "continue_statement", "return_statement", "goto_statement"})


# -- loops ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadRange:
    """A read that may alias a contiguous write of the loop, at another index (``bias[i % n]``,
    ``x[i + 1]``, ``scale[0]`` beside ``out[i]``, no ``__restrict__``), whose elements over the
    whole loop lie in ``[read.pointer + lo, read.pointer + hi)`` (source text; ``bound`` in
    ``hi`` is the loop's bound). Packs are taken only where a run-time check finds that range
    and the written ``[write.pointer + off, + bound)`` share no byte: then no write of the loop
    can change what it reads, in any order."""

    write: MemRef
    read: MemRef
    lo: str
    hi: str
    """May name ``{bound}``, replaced by the loop's bound as the check is written."""


#: The element size a packed pointer of unknown element type counts as when the widths are
#: offered: 2 bytes (half, bfloat16), the smallest element of the float kernels vectorize is for,
#: so that the domain reaches 16-byte packs of it. A wider ``T`` is narrowed by ``sizeof`` in
#: the emitted code (a width above what fits repeats the widest that does).
ASSUMED_SIZE = 2

_TYPE_NAME = re.compile(r"[A-Za-z_][\w:]*(\s*<[\w:<>, ]*>)?")


def _instantiated_otherwise(module: Module, fn: Function, elem: str, size: int) -> bool:
    """Whether the file's own launches compile ``fn`` with its type parameter ``elem`` of a size
    other than ``size`` (the one the template arguments in use give), or of one not known here.

    The rewritten text is compiled for every instantiation in the file, not only the spec's:
    llm-awq launches ``quant_kernel<scalar_t, ...>`` under a float/half/bf16 dispatch, and a pack
    of 8 sized for the spec's ``half`` was 32 bytes for ``float`` (a compile error, session 9).
    A launch that leaves the parameter to deduction counts as unknown."""
    name = " ".join(elem.split())
    pos = next((i for i, tp in enumerate(fn.template_params) if tp.kind == "type" and tp.name == name), None)
    if pos is None:
        return False
    for site in module.launches_of(fn.name):
        if len(site.template_args) <= pos:
            return True
        found = type_size(module, fn, site.template_args, elem)
        if found is None or found[0] != size:
            return True
    return False


def _sizeof_ok(elem: str) -> bool:
    """Whether ``sizeof(elem)`` may be written where the kernel's packs are: a named type (a
    template parameter, a qualified name), not ``void`` (a cast decides the element then)."""
    text = " ".join(elem.split())
    return bool(_TYPE_NAME.fullmatch(text)) and text not in ("void", "auto")


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
    packed: tuple[MemRef, ...]
    opened: frozenset[int]
    """Node ids of the nested ``for`` loops that stay loops around per-iteration packs."""
    widened: tuple[str, ...]
    sizes: tuple[tuple[str, int], ...]
    """(pointer, element size in bytes) of each packed pointer."""
    inner_vars: tuple[tuple[int, str], ...] = field(default=())
    apart: tuple[tuple[MemRef, MemRef], ...] = field(default=())
    """Pairs of pointers, indexed alike, that may alias: packs are taken only where a run-time
    check finds them the same elements or disjoint over the loop's range."""
    disjoint: frozenset[frozenset[str]] = field(default=frozenset())
    """Of those, the pairs that must be disjoint: the body reaches an element through one after
    the other wrote it, which separate packs would not see."""
    limit: ts.Node | None = None
    """``N`` of a leading ``if (i >= N) break;``: packs run while ``i < min(bound, N)``."""
    limit_stmt: ts.Node | None = None
    """That ``if`` statement: left out of the packed body (the scalar loops keep it)."""
    offset: str | None = None
    """``((start) - threadIdx.x)`` for a loop from ``base + threadIdx.x`` by ``blockDim.x`` where
    ``base`` is the same for every thread of the block (``blockIdx.x * group + threadIdx.x``):
    packs are taken from ``base``, thread ``t`` taking packs ``t, t + blockDim.x, ...``."""
    ranged: tuple[ReadRange, ...] = field(default=())
    """Reads that may alias a write at another index: packed only where a run-time check finds
    their range and the written range disjoint (:class:`ReadRange`)."""
    unsized: tuple[str, ...] = field(default=())
    """Element types of packed pointers whose size the file does not tell (a template's ``T``
    that no launch here names): their entry in ``sizes`` is :data:`ASSUMED_SIZE`, and the
    rewrite narrows the pack at compile time (by ``sizeof``) so that no access passes the byte
    limit whatever the type turns out to be (of 1 to 16 bytes, a power of two)."""
    named: tuple[str, ...] = field(default=())
    """The members of ``unsized`` whose size a template argument does give (the spec's): the
    same text is compiled for every instantiation of the kernel, and the file's own launcher may
    make others (llm-awq's ``quant_kernel`` under a dtype dispatch: ``T = float`` too), so sizeof
    still decides the width there; ``sizes`` holds the given size."""


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


def _flat(module: Module, node: ts.Node) -> str:
    """``node``'s text on one line, cut at 60 characters (a remark quotes the construct it refuses)."""
    text = " ".join(_text(module, node).split())
    return text if len(text) <= 60 else text[:57] + "..."


def _header(
    module: Module, node: ts.Node
) -> tuple[str, str, ts.Node, ts.Node, str, ts.Node | None, ts.Node] | str:
    """(var, var type, start, bound, step text, step node, update) of a canonical loop, or why not."""
    init = node.child_by_field_name("initializer")
    cond = node.child_by_field_name("condition")
    update = node.child_by_field_name("update")
    if init is None or cond is None or update is None:
        parts = (("start", init), ("condition", cond), ("step", update))
        missing = ", ".join(w for w, n in parts if n is None)
        return f"the loop header has no {missing}: not `for (T i = start; i < n; i += step)`"
    if init.type != "declaration":
        return (
            f"the loop variable of `{_flat(module, init)}` is declared outside the loop (its final "
            "value may be used after it)"
        )
    decls = init.children_by_field_name("declarator")
    type_node = init.child_by_field_name("type")
    if len(decls) != 1 or decls[0].type != "init_declarator" or type_node is None:
        return f"the loop header `{_flat(module, init)}` declares more than one variable"
    ident = decls[0].child_by_field_name("declarator")
    start = decls[0].child_by_field_name("value")
    if ident is None or ident.type != "identifier" or start is None:
        return f"the loop variable of `{_flat(module, init)}` has no plain initialiser"
    var = _text(module, ident)
    var_type = " ".join(
        _text(module, c) for c in init.children if c.type != "init_declarator" and c.type != ";"
    )
    if cond.type != "binary_expression":
        return f"the loop condition `{_flat(module, cond)}` is not `{var} < n`"
    op = cond.child_by_field_name("operator")
    left = cond.child_by_field_name("left")
    right = cond.child_by_field_name("right")
    if op is None or left is None or right is None:
        return f"the loop condition `{_flat(module, cond)}` is not `{var} < n`"
    if op.type == "<" and left.type == "identifier" and _text(module, left) == var:
        bound = right
    elif op.type == ">" and right.type == "identifier" and _text(module, right) == var:
        bound = left
    else:
        return f"the loop condition `{_flat(module, cond)}` is not `{var} < n`"
    step_text, step_node = _step(module, update, var)
    if step_text is None:
        return f"the loop step `{_flat(module, update)}` is not `{var} += step` or `++{var}`"
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


def _chain_leaves(root: ts.Node) -> list[int] | None:
    """The ids of the branches of ``if (a) S1 else if (b) S2 ... else Sn`` (each consequence, and
    the last ``else`` clause), or None where the chain ends without an ``else`` (then some
    element may take no branch)."""
    leaves: list[int] = []
    node = root
    while True:
        then = node.child_by_field_name("consequence")
        alt = node.child_by_field_name("alternative")
        if then is None or alt is None:
            return None
        leaves.append(then.id)
        inner = [c for c in alt.named_children if c.type != "comment"]
        if len(inner) == 1 and inner[0].type == "if_statement":
            node = inner[0]
            continue
        leaves.append(alt.id)
        return leaves


def _branch_stores(module: Module, info: LoopAccesses) -> LoopAccesses:
    """``info`` with the stores ``p[idx] = ...`` that every branch of an if/else (or an
    ``if ... else if ... else`` chain) makes, as a statement of its own, counted as unconditional.

    ``if (row == first) out[id] = a; else out[id] = b;`` (ViT's class-token concat) writes element
    ``id`` whichever branch runs, so a pack of ``out`` is written in full before its one store at
    the end of the lanes; so does CTranslate2's rotary ``if (i >= ndims) y[i] = x[i]; else if
    (interleave) y[i] = ...; else y[i] = ...;``. Only where the if (the chain's first) is itself a
    statement of the loop's body (so it runs for every element), the chain ends in an ``else``,
    and each branch holds the store directly (not under a further condition); anything else keeps
    its condition.
    """
    body = info.body

    def branch_of(a: MemRef) -> tuple[ts.Node, int] | None:
        """(the chain's first if statement, the branch) whose branch holds ``a``'s store directly."""
        assign = a.node.parent
        if a.kind != "store" or assign is None or assign.type != "assignment_expression":
            return None
        if assign.child_by_field_name("left") != a.node:
            return None
        stmt = assign.parent
        if stmt is None or stmt.type != "expression_statement" or stmt.parent is None:
            return None
        holder = stmt.parent
        if holder.type == "compound_statement":
            holder_parent = holder.parent
            if holder_parent is None:
                return None
            branch, holder = holder, holder_parent
        else:
            branch = stmt
        if holder.type == "else_clause":
            branch, holder = holder, holder.parent if holder.parent is not None else holder
            side = "else"
        else:
            side = "then"
        if holder.type != "if_statement":
            return None
        expected = holder.child_by_field_name("consequence" if side == "then" else "alternative")
        if expected is None or expected.id != branch.id:
            return None
        root = holder
        while root.parent is not None and root.parent.type == "else_clause":
            outer = root.parent.parent
            if outer is None or outer.type != "if_statement":
                break
            root = outer
        if root.parent is None or root.parent.id != body.id:
            return None
        return root, branch.id

    sides: dict[tuple[int, str, str], set[int]] = {}
    where: dict[int, tuple[int, str, str]] = {}
    leaves: dict[int, list[int] | None] = {}
    for a in info.accesses:
        if not (a.conditional and a.writes and not a.loops):
            continue
        found = branch_of(a)
        if found is None:
            continue
        root, leaf = found
        leaves.setdefault(root.id, _chain_leaves(root))
        key = (root.id, a.pointer, " ".join(index_source(a).decode("utf-8", "replace").split()))
        sides.setdefault(key, set()).add(leaf)
        where[a.node.id] = key
    every = {n for n, key in where.items() if sides[key] == set(leaves[key[0]] or [-1])}
    if not every:
        return info
    accesses = tuple(replace(a, conditional=False) if a.node.id in every else a for a in info.accesses)
    return replace(info, accesses=accesses)


def loop_plan(facts: Facts, loop: Loop, max_bytes: int) -> Plan | str:
    """What packing ``loop`` takes (a :class:`Plan`), or why it may not be packed.

    ``max_bytes`` bounds the widest access: a loop whose elements leave no width of at least
    two within it is refused.
    """
    module = facts.module
    fn = facts.fn
    known = facts.roots
    if loop.kind != "for":
        return f"a {loop.kind} loop; only `for` loops are vectorized"
    info = _branch_stores(module, facts.loop_accesses(loop))
    node, body = info.node, info.body
    if module.errors_in(loop.span):
        return "the loop contains code tree-sitter could not parse"
    header = _header(module, node)
    if isinstance(header, str):
        return header
    var, var_type, start, bound, step, step_node, update = header
    fn_body = module.node(fn.body)
    limit_stmt, limit = _break_bound(module, body, var)
    for n in syntax.walk(body):
        if n.type in _EXITS and not (limit_stmt is not None and _inside(n, limit_stmt)):
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
    if limit is not None:
        header_names |= syntax.names_in(module, limit)
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
    legacy = partitioned or _partitioned(module, fn_body, start, step, step_node, node.start_byte)
    # any other mixed-radix split of the launch's coordinates (threadIdx.y by blockDim.y, a worker
    # per warp row, blocks walking rows): across blocks no barrier orders the elements, so then
    # nothing outside the loop may touch what it writes (strict ownership below)
    exact = shape is not None and splits_exactly(shape.start, shape.step)
    offset = None if legacy or exact else _block_offset(module, shape, start, var_type)
    # a block-uniform offset moves where a block's range starts, not which block owns what
    legacy = legacy or offset is not None
    strict = not legacy and across_blocks(start_form)
    if not legacy and not exact:
        return (
            f"cannot tell that start `{_text(module, start)}` and step `{step}` split the index space "
            "between threads (expected threadIdx.x/blockDim.x, a grid stride, a lane, or 0/1)"
        )
    # a loop from 0 by 1 is one thread's own (every thread that runs it walks the whole range):
    # packs keep its order, and do not change which thread touches which element
    sequential = _canon(_text(module, start)) == "0" and _canon(step) == "1"
    if not sequential and shape is not None and shape.start is not None:
        who = thread_read(module, fn, body, var, set(info.declared), shape.start, shape.stride == "warp")
        if who is not None:
            return (
                f"the body reads `{_text(module, who)}` (line {who.start_point[0] + 1}), which differs "
                "between the threads that share the loop: packs change which thread takes each element"
            )
    problem = _carried(module, info, body, sequential)
    if problem:
        return problem
    if info.pointer_writes:
        w = info.pointer_writes[0]
        return f"the body writes through a pointer expression (`{_text(module, w)}`), which cannot be checked"
    apart: list[tuple[MemRef, MemRef]] = []
    ranged: list[ReadRange] = []
    for a, b in info.conflict_pairs():
        if _checkable_alias(module, a, b, info):
            apart.append((a, b))
            continue
        # a block-stride loop's elements are one block's: a check may read what its threads share
        shared = shape is not None and shape.stride == "block"
        span = _read_range(module, fn, a, b, info, var, body, shared) or _read_range(
            module, fn, b, a, info, var, body, shared
        )
        if span is None:
            return "aliasing: " + conflict_text(a, b)
        if span not in ranged:
            ranged.append(span)
    opened, inner_vars = _openable(module, info, body, var)
    packed: list[MemRef] = []
    for a in info.accesses:
        if not a.writes and not a.reads:
            continue
        if a.writes and not a.contiguous:
            return (
                f"the body writes {a.pointer}[{_index_text(module, a)}], which is not element {var} of a "
                "row; packs would change which thread writes it"
            )
        if a.pinned and a.intrinsic:
            return (
                f"the body stores {a.pointer}[...] through {a.via}: packs would drop the {a.via} hint "
                "(run cache-hints after vectorize instead)"
            )
        if a.pinned:
            return f"the body takes the address of {a.pointer}[...], which may be used in any order"
        if a.memory.space == "local":
            if a.writes and a.memory.name not in info.declared:
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
    problem = "" if sequential else _ownership(module, fn_body, node, info, known, strict)
    if problem:
        return problem
    sizes: list[tuple[str, int]] = []
    unsized: list[str] = []
    named: list[str] = []
    for a in packed:
        elem = a.memory.element_type
        # typedefs followed into the file's local headers too (llm.c's floatX in common.h)
        found = type_size(module, fn, facts.template_args, elem)
        size = None if found is None else found[0]
        if size is None:
            # A type the compiler knows and this file does not say (a template's `T` whose
            # launches are in another file): sizeof(T) decides the pack at compile time.
            if not _sizeof_ok(elem):
                return (
                    f"unknown size of element type {elem!r} of {a.pointer} (give the kernel's "
                    "template arguments)"
                )
            size = ASSUMED_SIZE
            if elem not in unsized:
                unsized.append(elem)
        elif elem not in unsized and _instantiated_otherwise(module, fn, elem, size):
            unsized.append(elem)
            named.append(elem)
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
        limit,
        limit_stmt,
        offset,
        tuple(ranged),
        tuple(unsized),
        tuple(named),
    )


def _block_offset(module: Module, shape: LoopShape | None, start: ts.Node, var_type: str) -> str | None:
    """``((start) - threadIdx.x)`` when the loop starts at ``threadIdx.x`` plus a value the same for
    every thread of a block and steps by ``blockDim.x``, else None.

    The block's threads then split ``[base, bound)`` as ``threadIdx.x``/``blockDim.x`` split
    ``[0, bound)``; the offset is written as the start minus ``threadIdx.x`` so that it is the
    value the original computes (the start must be free of calls and assignments to be read twice).
    """
    if shape is None or shape.stride != "block" or shape.start is None:
        return None
    tx = shape.start.coeff("threadIdx.x")
    if tx is None or not tx.equals(Affine.of(1)):
        return None
    rest = shape.start - Affine.sym("threadIdx.x")
    if not rest.terms or any(s.startswith("threadIdx.") for s in rest.free):
        return None
    effects = ("call_expression", "assignment_expression", "update_expression")
    if any(n.type in effects for n in syntax.walk(start)):
        return None
    # threadIdx.x is unsigned: subtracted as the loop's type, a negative base stays negative
    return f"(({' '.join(_text(module, start).split())}) - static_cast<{var_type}>(threadIdx.x))"


def _break_bound(module: Module, body: ts.Node, var: str) -> tuple[ts.Node | None, ts.Node | None]:
    """``(statement, N)`` when the body starts with ``if (var >= N) break;`` (or ``N <= var``).

    With a positive step the variable only grows, so the first ``var >= N`` ends the loop for
    good: the loop is ``var < min(bound, N)``. ``N`` must be a plain expression (no call, no
    memory access) the body does not change (checked with the header's names).
    """
    stmts = statements(body)
    first = stmts[0] if stmts else None
    if first is None or first.type != "if_statement" or first.child_by_field_name("alternative") is not None:
        return None, None
    cond = first.child_by_field_name("condition")
    then = first.child_by_field_name("consequence")
    inner = statements(then) if then is not None and then.type == "compound_statement" else [then]
    if cond is None or len(inner) != 1 or inner[0] is None or inner[0].type != "break_statement":
        return None, None
    c = cond.named_children[0] if cond.type == "condition_clause" and cond.named_child_count == 1 else cond
    while c.type == "parenthesized_expression" and c.named_child_count == 1:
        c = c.named_children[0]
    op, left, right = (c.child_by_field_name(f) for f in ("operator", "left", "right"))
    if c.type != "binary_expression" or op is None or left is None or right is None:
        return None, None
    if op.type == ">=" and _text(module, left).strip() == var:
        limit = right
    elif op.type == "<=" and _text(module, right).strip() == var:
        limit = left
    else:
        return None, None
    if any(n.type in ("call_expression", "subscript_expression", "assignment_expression", "update_expression")
           for n in syntax.walk(limit)):  # fmt: skip
        return None, None
    return first, limit


def _index_text(module: Module, a: MemRef) -> str:
    return _text(module, a.index_node) if a.index_node is not None else ""


def _inside(node: ts.Node, outer: ts.Node) -> bool:
    return outer.start_byte <= node.start_byte and node.end_byte <= outer.end_byte


def _evaluated_at(a: MemRef) -> int:
    """Where an access takes effect in the body's order: a store when its assignment completes
    (``out[i] = x[i]`` reads ``x[i]`` first), anything else where it stands."""
    if a.kind == "store" and a.node.parent is not None and a.node.parent.type == "assignment_expression":
        return a.node.parent.end_byte
    return a.node.start_byte


def _same_address_ok(accesses: Sequence[MemRef], p: str, q: str) -> bool:
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


def _checkable_alias(module: Module, a: MemRef, b: MemRef, info: LoopAccesses) -> bool:
    """Whether two accesses that may alias can be packed behind a run-time check: both contiguous
    subscripts written alike (``x[i]``, ``out[i]``), in no nested loop, neither an escaping
    address. Then the two pointers' ranges over the loop are ``[p + off, p + off + bound)``, and
    if those are the same elements (same address, same element size) or disjoint, packing reads
    and writes each element as the scalar loop did (llm.c's layernorm writes ``out_idx[i]`` from
    ``x[i]`` with no ``__restrict__``)."""
    return (
        not a.pinned
        and not b.pinned
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


def _read_range(
    module: Module,
    fn: Function,
    w: MemRef,
    r: MemRef,
    info: LoopAccesses,
    var: str,
    body: ts.Node,
    block_shared: bool,
) -> ReadRange | None:
    """The range ``r`` reads over the loop, where ``w`` is a contiguous write ``p[var + off]`` and
    ``r`` a read only (never written in the body) through a named pointer at

    * ``q[var + off2]`` (another offset, ``x[i + 1]``): ``[off2, off2 + bound)``;
    * ``q[c]``, a literal: ``[c, c + 1)``;
    * ``q[e % m]``, ``m`` the same for the whole loop: ``(-m, m)`` (a negative ``e`` gives a
      negative remainder in C++); also through a local of the body initialised so and never
      assigned again (``int b_idx = id % n; ... bias[b_idx]``);
    * ``q[var / m]`` (``int batch_idx = index / beam_width``): ``[0, (bound - 1) / m + 1)``
      where ``m > 0``, else an empty range (the check then keeps the scalar loop);
    * ``q[e]``, ``e`` one value for the loop and the threads sharing it (``a[i]``, ``i =
      blockIdx.x`` in a block-stride loop): ``[e, e + 1)``;
    * ``q[c ? a : b]``: the hull of both branches' ranges (:mod:`ktx.ir.facts.read_span`);

    else None. Every text is read before the loop, so it may not name what the body declares or
    assigns (the loop variable included)."""
    body_names = info.declared | info.assigned | {var}
    if w.kind not in ("store", "update") or w.pinned or w.loops:
        return None
    if r.writes or not r.reads or r.pinned or r.loops:
        return None
    if w.stride != 1 or w.offset is None or not re.fullmatch(r"[A-Za-z_]\w*", r.pointer):
        return None
    if w.pointer in body_names or r.pointer in body_names:
        return None  # a pointer the body declares is not there before the loop, where the check is
    if any(syntax.names_in(module, t.node) & body_names for t in w.offset_terms):
        return None
    if any(a.writes and a.pointer == r.pointer for a in info.accesses):
        return None
    if r.stride == 1 and r.offset is not None:
        if any(syntax.names_in(module, t.node) & body_names for t in r.offset_terms):
            return None
        off = r.offset.strip() or "0"
        return ReadRange(w, r, f"({off})", f"({off}) + ({{bound}})")
    index = r.index_node
    while index is not None and index.type == "parenthesized_expression" and index.named_child_count == 1:
        index = index.named_children[0]
    if index is not None and index.type == "identifier" and _text(module, index) in info.declared:
        name = _text(module, index)
        local = syntax.local_declarations(module, body, before=r.node.start_byte).get(name)
        if local is None or local.value is None or assign.assigned(module, body).get(name):
            return None
        index = local.value
        while index.type == "parenthesized_expression" and index.named_child_count == 1:
            index = index.named_children[0]
    if index is None:
        return None
    span = index_span(module, fn, index, var, body_names, block_shared)
    return None if span is None else ReadRange(w, r, span[0], span[1])


def _carried(module: Module, info: LoopAccesses, body: ts.Node, sequential: bool = False) -> str:
    """Why a value is carried from one iteration to the next (other than a reduction), or ''.

    Asks the one reduction recogniser (:func:`ktx.ir.facts.reductions.unreorderable`): a
    reduction's running value may be read only by its own updates, unless the loop is one
    thread's own (``sequential``: packs keep its order): threads of a strided loop take other
    elements under packs, and a running value read elsewhere (``o[i] = m;`` after
    ``if (x[i] > m) m = x[i];``) would change."""
    carried = unreorderable(module, body, set(info.declared), sequential)
    if carried is None:
        return ""
    if carried.problem == "not-a-reduction":
        return (
            f"the body assigns {carried.name}, declared outside the loop, from one iteration to the next "
            f"(line {carried.line}); only reductions (+=, fmaxf(...)) can be reordered"
        )
    return (
        f"the body reads {carried.name}, a running reduction, outside its update (line "
        f"{carried.line}): threads would see other partial values under packs"
    )


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
    a: MemRef,
    info: LoopAccesses,
    opened: set[int],
    inner_vars: dict[int, str],
    body: ts.Node,
) -> bool:
    if not a.contiguous or a.conditional or a.memory.space not in ("global", "shared") or not a.memory.name:
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
    module: Module, fn_body: ts.Node, loop: ts.Node, info: LoopAccesses, known: dict[str, Root], strict: bool
) -> str:
    """Why another part of the kernel may depend on which thread handled which element, or ''.

    ``strict``: the loop's iterations are split across blocks, which no ``__syncthreads()``
    orders: then any other access to memory the loop touches is refused.
    """
    inside_written = {a.memory.name for a in info.accesses if a.writes and a.memory.name}
    inside_all = {a.memory.name for a in info.accesses if a.memory.name}
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
            kind = access_kind(n) != "load"  # the one classifier: stores, updates, addresses
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
        if strict:
            return (
                f"{name} is also accessed at line {n.start_point[0] + 1}, and the loop's elements are split "
                "across blocks: packs change which block owns each element"
            )
        if not any(lo <= b < hi for b in barriers):
            return (
                f"{name} is also accessed at line {n.start_point[0] + 1} with no __syncthreads() in between; "
                "packs change which thread owns each element"
            )
    return ""


def _synchronizes(module: Module, call: ts.Node) -> bool:
    """A barrier between the threads that share a row: ``__syncthreads()`` and the like, or
    ``row-owner``'s ``ktx_row_reduce<T>`` (a ``__syncwarp`` among the row's lanes for a warp, two
    ``__syncthreads()`` for a block: its loops stride the row over exactly those threads)."""
    fn = call.child_by_field_name("function")
    name = "" if fn is None else _text(module, fn)
    return name in syntax.BARRIERS or name.startswith("ktx_row_reduce<")


def statements(node: ts.Node) -> list[ts.Node]:
    """The statements of a loop body: a compound statement's children, or the single statement."""
    if node.type == "compound_statement":
        return [c for c in node.named_children]
    return [node]


def _widened(module: Module, body: ts.Node, opened: set[int]) -> list[str] | str:
    """Locals declared in one run of statements and used outside it: they become arrays of VEC."""
    widened: list[str] = []

    def visit(stmts: list[ts.Node]) -> str:
        for group in groups(stmts, opened):
            if isinstance(group, ts.Node):
                inner = group.child_by_field_name("body")
                if inner is not None:
                    err = visit(statements(inner))
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

    err = visit(statements(body))
    return err if err else widened


def _used_outside(module: Module, body: ts.Node, name: str, spans: list[tuple[int, int]]) -> bool:
    for ident in syntax.identifiers(body):
        if _text(module, ident) != name:
            continue
        if not any(s <= ident.start_byte < e for s, e in spans):
            return True
    return False


def groups(stmts: list[ts.Node], opened: set[int] | frozenset[int]) -> list[ts.Node | list[ts.Node]]:
    """Split a statement list into open loops (kept as loops) and runs of other statements.

    A ``#pragma`` right before an open loop goes with it (it is emitted before its header).
    """
    out: list[ts.Node | list[ts.Node]] = []
    run: list[ts.Node] = []
    for s in stmts:
        if s.id in opened:
            if run and run[-1].type == "preproc_call" and pragma_of(run[-1], s):
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


def pragma_of(pragma: ts.Node, loop: ts.Node) -> bool:
    return pragma.end_byte <= loop.start_byte and (pragma.text or b"").lstrip().startswith(b"#pragma")


# -- row offsets as expressions of size parameters (tail=false) --------------------------------


def constants(facts: Facts) -> dict[str, str]:
    """Compile-time names and their values: template arguments, #define and constexpr integers."""
    values: dict[str, str] = {}
    fn = facts.fn
    for tp, arg in zip(fn.template_params, facts.template_args, strict=False):
        if tp.kind == "value":
            values[tp.name] = arg.strip()
    for m in facts.module.macros:
        if m.int_value is not None:
            values[m.name] = str(m.int_value)
    for c in facts.module.constants:
        if c.int_value is not None:
            values[c.name] = str(c.int_value)
    return values


def pointer_terms(module: Module, fn_body: ts.Node, pointer: str, before: int) -> list[ts.Node]:
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


def factors(node: ts.Node) -> list[ts.Node]:
    n = node
    while n.type == "parenthesized_expression" and n.named_child_count == 1:
        n = n.named_children[0]
    if n.type == "cast_expression":
        value = n.child_by_field_name("value")
        return factors(value) if value is not None else [n]
    if n.type == "binary_expression":
        op = n.child_by_field_name("operator")
        left = n.child_by_field_name("left")
        right = n.child_by_field_name("right")
        if op is not None and op.type == "*" and left is not None and right is not None:
            return factors(left) + factors(right)
    return [n]


def varies(
    module: Module, node: ts.Node, params: set[str], constants: dict[str, str], loop_vars: set[str]
) -> bool:
    """Whether a factor holds anything other than size parameters and compile-time constants."""
    names = syntax.names_in(module, node)
    known = {k for k, v in constants.items() if v.isdigit()}  # TOPK = "{topk}" is not known here
    return bool(names - params - known) or bool(names & loop_vars)


def to_expr(module: Module, node: ts.Node, params: set[str], constants: dict[str, str]) -> str | None:
    """A C integer expression of parameters and constants as ktx.ir.expr text, or None."""
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
        inner = to_expr(module, node.named_children[0], params, constants)
        return f"({inner})" if inner is not None else None
    if t == "cast_expression":
        operand = node.child_by_field_name("value")
        return to_expr(module, operand, params, constants) if operand is not None else None
    if t == "binary_expression":
        op = node.child_by_field_name("operator")
        left = node.child_by_field_name("left")
        right = node.child_by_field_name("right")
        if op is None or left is None or right is None or op.type not in ("+", "-", "*", "/", "%"):
            return None
        a = to_expr(module, left, params, constants)
        b = to_expr(module, right, params, constants)
        if a is None or b is None:
            return None
        return f"{a} {'//' if op.type == '/' else op.type} {b}"
    return None


# -- one element per thread ----------------------------------------------------------------------


@dataclass(frozen=True)
class ElementPlan:
    """A one-element-per-thread kernel whose threads may take several elements each."""

    body: ElementBody
    accesses: tuple[MemRef, ...]
    sizes: tuple[tuple[str, int], ...]
    notes: tuple[str, ...]
    span: Span
    """The index declaration: where the site is reported."""
    apart: tuple[tuple[MemRef, MemRef], ...] = ()
    """Pointers that may alias (no ``__restrict__``), whose packs are taken only where a run-time
    check finds the pack's elements of one apart from those of the other."""
    unsized: tuple[str, ...] = ()
    """Template type parameters of the kernel whose size no launch in the file gives: counted as
    :data:`ASSUMED_SIZE` bytes in the knob's domain; the rewrite packs only where ``sizeof``
    lets the knob's elements fit one access (an ``if constexpr``, so a wider type is never
    instantiated as a pack) and takes them one by one otherwise. The host needs no size: each
    thread takes the knob's element count either way, so the grid shrinks by it alone."""
    named: tuple[str, ...] = ()
    """The members of ``unsized`` whose size a template argument gives (see :attr:`Plan.named`)."""
    twin: int = 0
    """The line of another ``__global__`` definition of the kernel's name (an overload or an
    explicit specialization, FasterTransformer's ``sigmoid_kernel<half2>``), else 0. Its launches
    cannot be told apart from this one's, so the grid is kept as written (a shrunk grid would
    leave the other definition's elements unwritten): thread ``p`` takes elements ``[p * V,
    p * V + V)`` where ``p < ceil(n / V)``, and the threads past that do nothing."""


@dataclass(frozen=True)
class Refusal:
    """Why a site may not be rewritten, and where."""

    reason: str
    span: Span


def element_plan(facts: Facts, max_bytes: int, launched: bool) -> ElementPlan | Refusal | None:
    """The kernel's one-element-per-thread body as a plan, a refusal, or None (not that idiom).

    ``launched``: whether a launch of the kernel (or a launch mapping) is known; the grid is
    shrunk by the width, so without one the kernel is refused.
    """
    module, fn = facts.module, facts.fn
    eb = element_body(module, fn)
    if eb is None:
        return None
    if isinstance(eb, str):
        return Refusal(eb, fn.span)
    span = module.span(eb.decl.start_byte, eb.decl.end_byte)
    if not launched:
        return Refusal(f"no launch of {fn.name} in this file and no launch mapping given", span)
    why = body_refusal(module, eb)
    if why is not None:
        return Refusal(why, span)
    loops = [n for s in eb.stmts for n in syntax.walk(s) if n.type in _LOOP_TYPES]
    if loops:
        return Refusal(
            f"the body of element {eb.var} has a loop (line {loops[0].start_point[0] + 1}): "
            "its loops are vectorized instead",
            span,
        )
    accesses = element_accesses(module, fn, eb)
    if isinstance(accesses, str):
        return Refusal(accesses, span)
    apart: list[tuple[MemRef, MemRef]] = []
    conflict = reorder_conflict(accesses, eb.var, apart)
    if conflict is not None:
        return Refusal(conflict, span)
    # the packs' disjointness is checked before the body: offsets may not name what it declares
    inside = {n for s in eb.stmts for n in syntax.local_declarations(module, s)} if apart else set()
    for x, y in apart:
        for a in (x, y):
            if any(syntax.names_in(module, t.node) & inside for t in a.offset_terms):
                return Refusal(
                    f"{x.pointer}[{x.offset or ''}] and {y.pointer}[{y.offset or ''}] may alias, and the "
                    "offset of one names a local of the body: a check before it cannot be written",
                    span,
                )
    packed = [e for e in accesses if e.packable]
    if not packed:
        return Refusal(
            f"no unconditional access p[{eb.var} + offset] through a named pointer in the body of "
            f"element {eb.var}",
            span,
        )
    sizes: list[tuple[str, int]] = []
    notes: list[str] = []
    unsized: list[str] = []
    named: list[str] = []
    # only a type parameter of the kernel: `if constexpr` discards the pack without instantiating
    # it only where its condition depends on one (a typedef from a header not found would not be)
    tparams = {tp.name for tp in fn.template_params if tp.kind == "type"}
    for e in packed:
        elem = e.memory.element_type
        found = type_size(module, fn, facts.template_args, elem)
        if found is None and " ".join(elem.split()) in tparams:
            if elem not in unsized:
                unsized.append(elem)
            found = (ASSUMED_SIZE, "")
        elif (
            found is not None and elem not in unsized and _instantiated_otherwise(module, fn, elem, found[0])
        ):
            unsized.append(elem)  # one text for every instantiation (Plan.named)
            named.append(elem)
        if found is None:
            return Refusal(
                f"unknown size of element type {elem!r} of {e.pointer} "
                "(give the kernel's template arguments)",
                span,
            )
        size, how = found
        if how and f"{how} ({size} B)" not in notes:
            notes.append(f"{how} ({size} B)")
        if (e.pointer, size) not in sizes:
            sizes.append((e.pointer, size))
    if max(s for _, s in sizes) * 2 > max_bytes:
        return Refusal(
            f"elements of {max(s for _, s in sizes)} bytes leave no pack width within {max_bytes} bytes",
            span,
        )
    # `template<> __global__ void k(half2* ...)` beside `template <typename T> __global__ void k`:
    # a launch names k either way, so the grid may not shrink (the other definition's would too);
    # the grid stays, each thread takes its pack, and threads past the last pack do nothing
    twins = [f for f in module.functions if f.is_kernel and f.name == fn.name and f.span != fn.span]
    twin = twins[0].span.line if twins else 0
    return ElementPlan(
        eb,
        tuple(accesses),
        tuple(sizes),
        tuple(notes),
        span,
        tuple(apart),
        tuple(unsized),
        tuple(named),
        twin,
    )


_LOOP_TYPES = frozenset({"for_statement", "while_statement", "do_statement", "for_range_loop"})
