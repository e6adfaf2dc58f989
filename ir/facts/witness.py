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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import tree_sitter as ts
from ktx.ir.affine import KernelIndex, LoopShape, MemRef
from ktx.ir.facts.intervals import EXITS, LOOPS, Intervals, Range, Unknown, shape_of, writes

#: Index evaluations one access may take at one shape point before the search gives up.
BUDGET = 6000
#: Iterations a loop with a condition other than ``var < bound`` is stepped through, at most.
STEP_CAP = 4096
_AXES = ("x", "y", "z")
_UNFOLLOWED = ("switch_statement", "case_statement", "for_range_loop", "labeled_statement")


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
    budget: int = BUDGET,
) -> Witness | None:
    """A block, thread and loop values at which ``ref`` touches an element outside
    ``[0, extent)``, or None when none was found (which proves nothing)."""
    if ref.index is None or ref.width is None:
        return None
    path = _path(ix, ref.node)
    if path is None:
        return None
    base = dict(values)
    left = budget
    for bid, tid in _launch_points(grid, block):
        for axis, b, t in zip(_AXES, bid, tid, strict=True):
            base[f"blockIdx.{axis}"] = Range.point(b)
            base[f"threadIdx.{axis}"] = Range.point(t)
        ev = Intervals(ix, base, loops={})
        for assignment in _iterations(ev, path.loops, 0, {}):
            left -= 1
            if left < 0:
                return None
            ev.loops = assignment
            ev.memo = {}
            try:
                if not _executes(ev, path):
                    continue
                at = ev.affine(ref.index, ref.node)
            except Unknown:
                continue
            if at.lo != at.hi:
                continue
            first, last = at.lo, at.lo + ref.width - 1
            if first < 0 or last >= extent:
                loops = tuple((s.var or "?", assignment[s.node.id]) for s, _ in path.loops)
                return Witness(_three(bid), _three(tid), loops, first, last)
    return None


def _three(v: Sequence[int]) -> tuple[int, int, int]:
    return (v[0], v[1], v[2])


# -- the launch: which blocks and threads are tried --------------------------------------------


def _picks(n: int) -> list[int]:
    """A few values of an axis of ``n``: its ends, middle and warp edges."""
    want = {0, 1, n // 2 - 1, n // 2, n - 2, n - 1, 31, 32}
    return sorted(v for v in want if 0 <= v < n)


def _launch_points(
    grid: Sequence[int], block: Sequence[int]
) -> Iterator[tuple[tuple[int, ...], tuple[int, ...]]]:
    g = [*grid, 1, 1, 1][:3]
    b = [*block, 1, 1, 1][:3]
    seen: set[tuple[tuple[int, ...], tuple[int, ...]]] = set()
    picks_g = [_picks(n) for n in g]
    picks_b = [_picks(n) for n in b]
    extremes_g = [sorted({n - 1, 0}) for n in g]
    stages = (
        itertools.product(itertools.product(*picks_g), itertools.product(*picks_b)),
        itertools.product(
            itertools.product(*[sorted(e, reverse=True) for e in extremes_g]),
            itertools.product(range(b[0]), *picks_b[1:]),
        ),
    )
    for stage in stages:
        for point in stage:
            if point not in seen:
                seen.add(point)
                yield point


# -- loops: the values their variable really takes --------------------------------------------


def _iterations(
    ev: Intervals, loops: Sequence[tuple[LoopShape, bool]], k: int, done: dict[int, int]
) -> Iterator[dict[int, int]]:
    """Assignments of the loops from ``k`` on (inner loops' ranges depend on outer values)."""
    if k == len(loops):
        yield dict(done)
        return
    shape, leaves = loops[k]
    ev.loops = done
    try:
        values = _loop_values(ev, shape)
    except Unknown:
        return
    if leaves:
        values = values[:1]
    for v in values:
        done[shape.node.id] = v
        yield from _iterations(ev, loops, k + 1, done)
        del done[shape.node.id]
    ev.loops = done


def _loop_values(ev: Intervals, shape: LoopShape) -> list[int]:
    """The first two and last two values the loop's variable takes for this thread."""
    if shape.start is None or shape.step is None or shape.var is None:
        raise Unknown(f"the loop at line {shape.line}")
    body = shape.node.child_by_field_name("body")
    step_id = shape.step_node.id if shape.step_node is not None else -1
    if body is not None and any(w.id != step_id for w in writes(ev.ix, body, shape.var)):
        raise Unknown(f"{shape.var} is written inside its loop")
    start = _point(ev.affine(shape.start, shape.node))
    step = _point(ev.affine(shape.step, shape.node))
    is_do = shape.node.type == "do_statement"
    bound = None
    if shape.bound is not None and shape.var not in shape.bound.symbols:
        bound = _point(ev.affine(shape.bound, shape.node))
    count = _count(start, step, shape.cmp, bound)
    if count is None:
        return _stepped(ev, shape, start, step, is_do)
    if is_do:
        count = max(count, 1)
    seq = [start + j * step for j in sorted({0, 1, count - 2, count - 1}) if 0 <= j < count]
    return seq


def _count(start: int, step: int, cmp: str, bound: int | None) -> int | None:
    """How many values ``start, start + step, ...`` satisfy ``v CMP bound`` before the first
    that does not (None: not a counted loop)."""
    if bound is None or step == 0:
        return None
    if cmp in ("<", "<=") and step > 0:
        top = bound - 1 if cmp == "<" else bound
        return 0 if start > top else (top - start) // step + 1
    if cmp in (">", ">=") and step < 0:
        bottom = bound + 1 if cmp == ">" else bound
        return 0 if start < bottom else (start - bottom) // -step + 1
    return None


def _stepped(ev: Intervals, shape: LoopShape, start: int, step: int, is_do: bool) -> list[int]:
    """The loop's values found by evaluating its condition at each step (capped)."""
    cond = shape.node.child_by_field_name("condition")
    if cond is None or step == 0:
        raise Unknown(f"the loop at line {shape.line} (no condition to step)")
    assert ev.loops is not None
    seen: list[int] = []
    v = start
    for j in range(STEP_CAP):
        ev.loops[shape.node.id] = v
        ev.memo = {}
        # The condition is read at the loop, where its own variable is a plain local: bind it.
        held = _truth(ev, cond, inside=shape)
        del ev.loops[shape.node.id]
        if held is None:
            raise Unknown(f"the condition of the loop at line {shape.line}")
        if not held and not (is_do and j == 0):
            break
        seen.append(v)
        v += step
    else:
        raise Unknown(f"the loop at line {shape.line} (over {STEP_CAP} steps)")
    return sorted(set(seen[:2] + seen[-2:]))


def _point(r: Range) -> int:
    if r.lo != r.hi:
        raise Unknown("a value that is not one number")
    return r.lo


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


def _executes(ev: Intervals, path: _Path) -> bool:
    """The access runs for this thread and these loop values (False also when unsure)."""
    for cond, want in path.conditions:
        if _truth(ev, cond) is not want:
            return False
    return all(_stays(ev, stmt) for stmt in path.before)


def _stays(ev: Intervals, stmt: ts.Node) -> bool:
    """``stmt`` surely does not leave for these values (its ``if``s evaluated)."""
    if not _leaves(stmt):
        return True
    if stmt.type == "if_statement":
        cond = stmt.child_by_field_name("condition")
        taken = _truth(ev, cond) if cond is not None else None
        if taken is None:
            return False
        branch = stmt.child_by_field_name("consequence" if taken else "alternative")
        return branch is None or _stays(ev, branch)
    if stmt.type in ("compound_statement", "else_clause"):
        return all(_stays(ev, c) for c in stmt.named_children)
    return False


def _truth(ev: Intervals, cond: ts.Node, inside: LoopShape | None = None) -> bool | None:
    """A condition's truth for these values, or None when it is not decided."""
    n = cond
    while n.type in ("condition_clause", "parenthesized_expression") and n.named_child_count == 1:
        n = n.named_children[0]
    at = n
    if inside is not None:
        body = inside.node.child_by_field_name("body")
        at = body if body is not None else n  # read the loop variable as the body sees it
    try:
        r = ev.node(n, at)
    except Unknown:
        return None
    if r.lo == r.hi:
        return r.lo != 0
    if r.lo > 0 or r.hi < 0:
        return True
    return None
