"""Witnesses: one block, one thread and one value of each loop variable whose access lands
outside its buffer.

Interval arithmetic bounds an index; it does not say that any thread reaches the bound. A
strided loop ``for (i = lane * 8; i < 128; i += 16 * 8)`` loading 8 elements at ``i`` is bounded
by ``i <= 127`` plus the 8-wide pack, element 134 of a 128-element group, yet its last load
starts at 120 (issue 21). So an out-of-bounds *error* needs a witness, found by running the
index on concrete values the kernel really takes:

* blocks and threads: a few picks per axis (the ends, the middle, warp edges), then every
  ``threadIdx.x`` with the first and last blocks;
* each loop around the access, outermost first, steps through its real values (``start``,
  ``start + step``, ... while the condition holds, from the concrete start, bound and step of
  this thread): the first two and the last two are tried;
* the access must really execute there: every ``if``/``?:``/``&&`` on the way to it evaluates
  to the branch it sits in, and no statement before it in its blocks can leave (``return``,
  ``break``, ``continue``) for these values. A loop whose body can leave early is tried at its
  first iteration only. Whatever cannot be evaluated exactly (a load, a variable written in
  ways the analysis does not follow) gives no witness: the access is then *not proven*, never
  an error.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import tree_sitter as ts
from ktx.ir.affine import KernelIndex, LoopShape, MemRef
from ktx.ir.facts.intervals import EXITS, LOOPS, Range, Unknown, shape_of, written_inside
from ktx.ir.facts.lanes import Lanes, Val

#: Lanes (thread x block x loop-iteration cases) one search may take at one shape point.
MAX_LANES = 1 << 20
_AXES = ("x", "y", "z")
_UNFOLLOWED = (
    "switch_statement",
    "case_statement",
    "for_range_loop",
    "labeled_statement",
    # Both arms of #if/#else are in the tree; only one is compiled.
    "preproc_if",
    "preproc_ifdef",
    "preproc_else",
    "preproc_elif",
    "preproc_elifdef",
)
_ITERATIONS = (0, 1, -2, -1)
"""Which iterations of a loop are tried: the first two and the last two."""


@dataclass(frozen=True)
class Witness:
    """Where an access lands outside its buffer: the block, thread and loop values, and the
    first and last root elements it touches there."""

    block: tuple[int, int, int]
    thread: tuple[int, int, int]
    loops: tuple[tuple[str, int], ...]
    first: int
    last: int

    def __str__(self) -> str:
        parts = [f"blockIdx=({', '.join(map(str, self.block))})"]
        parts.append(f"threadIdx=({', '.join(map(str, self.thread))})")
        parts += [f"{var}={value}" for var, value in self.loops]
        return " ".join(parts)


@dataclass(frozen=True)
class _Path:
    """What must hold for an access to execute: conditions with the truth they must have,
    statements before it that must not leave, and the loops around it (outermost first)."""

    conditions: tuple[tuple[ts.Node, bool], ...]
    before: tuple[ts.Node, ...]
    loops: tuple[tuple[LoopShape, bool], ...]
    """Each loop with whether its body can leave it early (then only its first iteration)."""


def find_witness(
    ix: KernelIndex,
    ref: MemRef,
    values: Mapping[str, Range],
    grid: Sequence[int],
    block: Sequence[int],
    extent: int,
) -> Witness | None:
    """A block, thread and loop values at which ``ref`` touches an element outside
    ``[0, extent)``, or None when none was found (which proves nothing)."""
    if ref.index is None or ref.width is None:
        return None
    path = _path(ix, ref.node)
    if path is None:
        return None
    shared = {
        k: r.lo for k, r in values.items() if r.lo == r.hi and not k.startswith(("threadIdx.", "blockIdx."))
    }
    try:
        ev, loops = _lanes(ix, path, shared, [*grid, 1, 1, 1][:3], [*block, 1, 1, 1][:3])
        ok = ev.valid & _executes(ev, path)
        at = np.broadcast_to(ev.affine(ref.index, ref.node), (ev.size,))
    except (Unknown, ArithmeticError, ValueError):
        # ArithmeticError, ValueError: a constant past 64 bits met a lane's int64 (numpy
        # refuses it), or shapes that do not broadcast: no witness, never a crash at load.
        return None
    ok &= ev.valid
    bad = ok & ((at < 0) | (at + (ref.width - 1) >= extent))
    if not bool(bad.any()):
        return None
    i = int(np.argmax(bad))
    pick = {name: int(np.broadcast_to(v, (ev.size,))[i]) for name, v in ev.builtins.items()}
    found = tuple(
        (s.var or "?", int(np.broadcast_to(loops[s.node.id], (ev.size,))[i])) for s, _ in path.loops
    )
    first = int(at[i])
    return Witness(
        (pick["blockIdx.x"], pick["blockIdx.y"], pick["blockIdx.z"]),
        (pick["threadIdx.x"], pick["threadIdx.y"], pick["threadIdx.z"]),
        found,
        first,
        first + ref.width - 1,
    )


# -- the cases: every thread of a few blocks, a few iterations of each loop ---------------------


def _picks(n: int) -> list[int]:
    """A few values of a grid axis of ``n`` blocks: its ends, middle and near the ends."""
    want = {0, 1, n // 2 - 1, n // 2, n - 2, n - 1}
    return sorted(v for v in want if 0 <= v < n)


def _lanes(
    ix: KernelIndex, path: _Path, shared: dict[str, int], grid: list[int], block: list[int]
) -> tuple[Lanes, dict[int, Val]]:
    """Every thread of the block on a few blocks, each loop around the access stepped to its
    first two and last two values for that thread (outermost first: inner loops' ranges may
    depend on outer values). Lanes whose iteration does not exist are marked not ``valid``."""
    threads = block[0] * block[1] * block[2]
    blocks = list(itertools.product(*(_picks(n) for n in grid)))
    per_block = threads * len(_ITERATIONS) ** len(path.loops)
    if len(blocks) * per_block > MAX_LANES:
        blocks = sorted({tuple(n - 1 for n in grid), (0, 0, 0)}, reverse=True)
    if len(blocks) * per_block > MAX_LANES:
        raise Unknown("too many cases to try")
    tid = np.arange(threads, dtype=np.int64)
    bid = np.array(blocks, dtype=np.int64)
    size = len(blocks) * threads
    builtins: dict[str, Val] = {}
    for k, axis in enumerate(_AXES):
        builtins[f"blockIdx.{axis}"] = np.repeat(bid[:, k], threads)
        t = (tid // (block[0] * (block[1] if k == 2 else 1))) % block[k] if k else tid % block[0]
        builtins[f"threadIdx.{axis}"] = np.tile(t, len(blocks))
    loops: dict[int, Val] = {}
    valid = np.ones(size, dtype=bool)
    for shape, leaves in path.loops:
        ev = Lanes(ix, size, builtins, shared, loops)
        start, step, count = _counted(ev, shape)
        valid &= ev.valid
        js = np.array(_ITERATIONS[:1] if leaves else _ITERATIONS, dtype=np.int64)
        k = len(js)
        builtins = {n: _repeat(v, k) for n, v in builtins.items()}
        loops = {n: _repeat(v, k) for n, v in loops.items()}
        start, step, count = _repeat(start, k), _repeat(step, k), _repeat(count, k)
        valid = np.repeat(valid, k)
        j = np.tile(js, size)
        j = np.where(j < 0, count + j, j)
        valid &= (j >= 0) & (j < count)
        loops[shape.node.id] = start + j * step
        size *= k
    ev = Lanes(ix, size, builtins, shared, loops)
    ev.valid &= valid
    return ev, loops


def _repeat(v: Val, k: int) -> Val:
    return v if isinstance(v, int) else np.repeat(v, k)


def _counted(ev: Lanes, shape: LoopShape) -> tuple[Val, Val, Val]:
    """A counted loop's start, step and number of iterations, per lane; lanes where it does
    not count up to its bound (or down to it) are marked not ``valid``."""
    if shape.start is None or shape.step is None or shape.var is None or shape.bound is None:
        raise Unknown(f"the loop at line {shape.line}")
    if written_inside(ev.ix, shape) or shape.var in shape.bound.symbols:
        raise Unknown(f"{shape.var} is written inside its loop")
    start = ev.affine(shape.start, shape.node)
    step = ev.affine(shape.step, shape.node)
    bound = ev.affine(shape.bound, shape.node)
    if shape.cmp in ("<", "<="):
        up = np.greater(step, 0)
        top = bound - 1 if shape.cmp == "<" else bound
        span, stride = top - start, np.where(up, step, 1)
    elif shape.cmp in (">", ">="):
        up = np.less(step, 0)
        bottom = bound + 1 if shape.cmp == ">" else bound
        span, stride = start - bottom, np.where(up, -step, 1)
    else:
        raise Unknown(f"the loop over {shape.var} at line {shape.line} (not a counted loop)")
    ev.valid &= np.broadcast_to(up, ev.valid.shape)
    count = np.where(np.less(span, 0), 0, span // stride + 1)
    if shape.node.type == "do_statement":
        count = np.maximum(count, 1)
    return start, step, np.broadcast_to(count, (ev.size,)).astype(np.int64)


# -- whether the access executes ---------------------------------------------------------------


def _path(ix: KernelIndex, at: ts.Node) -> _Path | None:
    """The conditions, earlier statements and loops between the kernel's body and ``at``;
    None when a construct on the way is one the search does not follow (``switch``)."""
    conditions: list[tuple[ts.Node, bool]] = []
    before: list[ts.Node] = []
    loops: list[tuple[LoopShape, bool]] = []
    node = at
    while node.parent is not None and node.id != ix.body.id:
        parent = node.parent
        kind = parent.type
        if kind in _UNFOLLOWED:
            return None
        if kind in ("if_statement", "conditional_expression"):
            cond = parent.child_by_field_name("condition")
            if cond is not None and node == parent.child_by_field_name("consequence"):
                conditions.append((cond, True))
            elif cond is not None and node == parent.child_by_field_name("alternative"):
                conditions.append((cond, False))
        elif kind == "else_clause" and parent.parent is not None and parent.parent.type == "if_statement":
            cond = parent.parent.child_by_field_name("condition")
            if cond is not None:
                conditions.append((cond, False))
        elif kind == "binary_expression" and node == parent.child_by_field_name("right"):
            op, left = parent.child_by_field_name("operator"), parent.child_by_field_name("left")
            if op is not None and left is not None and op.type in ("&&", "||"):
                conditions.append((left, op.type == "&&"))
        elif kind == "compound_statement":
            for stmt in parent.named_children:
                if stmt.start_byte >= node.start_byte:
                    break
                if _leaves(stmt):
                    before.append(stmt)
        elif kind in LOOPS:
            if node != parent.child_by_field_name("body"):
                return None  # in the loop's header: evaluated per iteration, not followed
            shape = shape_of(ix, parent)
            if shape is None or shape.var is None:
                return None
            loops.append((shape, _leaves(node, own_loop=True)))
        node = parent
    loops.reverse()
    return _Path(tuple(conditions), tuple(before), tuple(loops))


def _leaves(node: ts.Node, own_loop: bool = False) -> bool:
    """Whether running ``node`` can skip what follows it in its block: a ``return`` or
    ``goto`` anywhere, a ``break``/``continue`` not inside a loop or ``switch`` of its own
    (``own_loop``: ``node`` is a loop's body, where ``continue`` ends one iteration only)."""
    if node.type in ("return_statement", "goto_statement"):
        return True
    if node.type in EXITS:
        return not (own_loop and node.type == "continue_statement")
    if node.type in (*LOOPS, "switch_statement"):
        return _returns(node)
    return any(_leaves(c, own_loop) for c in node.named_children)


def _returns(node: ts.Node) -> bool:
    if node.type in ("return_statement", "goto_statement"):
        return True
    return any(_returns(c) for c in node.named_children)


def _executes(ev: Lanes, path: _Path) -> npt.NDArray[np.bool_]:
    """Per lane, whether the access runs (False also where unsure)."""
    ok = np.ones(ev.size, dtype=bool)
    for cond, want in path.conditions:
        held = ev.truth(cond)
        ok &= held if want else ~held
    for stmt in path.before:
        ok &= _stays(ev, stmt)
    return ok


def _stays(ev: Lanes, stmt: ts.Node) -> npt.NDArray[np.bool_]:
    """Per lane, whether ``stmt`` surely does not leave (its ``if``s evaluated)."""
    if not _leaves(stmt):
        return np.ones(ev.size, dtype=bool)
    if stmt.type == "if_statement":
        cond = stmt.child_by_field_name("condition")
        if cond is None:
            return np.zeros(ev.size, dtype=bool)
        taken = ev.truth(cond)
        cons = stmt.child_by_field_name("consequence")
        alt = stmt.child_by_field_name("alternative")
        stays_cons = _stays(ev, cons) if cons is not None else np.ones(ev.size, dtype=bool)
        stays_alt = _stays(ev, alt) if alt is not None else np.ones(ev.size, dtype=bool)
        return np.where(taken, stays_cons, stays_alt)
    if stmt.type in ("compound_statement", "else_clause"):
        ok = np.ones(ev.size, dtype=bool)
        for child in stmt.named_children:
            ok &= _stays(ev, child)
        return ok
    return np.zeros(ev.size, dtype=bool)
