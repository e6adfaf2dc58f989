"""Default shapes for a draft: a small set of points whose buffers fit the device.

Where ``main`` names no sizes, each shape variable takes round defaults (:data:`DEFAULT_SIZES`,
block sizes :data:`DEFAULT_BLOCK`), and :func:`size_shapes` trims the product so that the
largest point's buffers stay under :data:`SHAPE_BUDGET` and every launch is valid.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from ktx.ir.errors import KtxError
from ktx.ir.expr import Expr, Value
from ktx.ir.facts.launcher import LaunchDraft
from ktx.ir.facts.params import extent_dims

#: The most bytes of buffers a default shape point may need (the largest point of the product).
SHAPE_BUDGET = 2 << 30
#: Values a shape variable takes when the file gives none (a size; a block size).
DEFAULT_SIZES = (4096, 1048576)
DEFAULT_SIZES_2D = (64, 4096)
DEFAULT_BLOCK = 256


def shape_values(var: str, found: Mapping[str, list[int]], count: int) -> tuple[list[int], str]:
    if var in found:
        return found[var][:1], "main"
    if "block" in var.lower():
        arrays = [v for k, v in found.items() if "block" in k.lower() and len(v) > 1]
        if arrays:
            return ([DEFAULT_BLOCK] if DEFAULT_BLOCK in arrays[0] else arrays[0][:1]), "main"
        return [DEFAULT_BLOCK], "default"
    return list(DEFAULT_SIZES if count == 1 else DEFAULT_SIZES_2D), "default"


@dataclass(frozen=True)
class Sizing:
    """Default shape values: ``values`` per variable (a product), or, when the launch is invalid
    at some points of that product, ``points``: the valid ones listed (empty: none is)."""

    values: Mapping[str, list[int]]
    points: list[dict[str, int]] | None
    notes: tuple[str, ...]


#: The most default points a draft's product lists (see :func:`size_shapes`).
MAX_POINTS = 256


def size_shapes(
    values: Mapping[str, list[int]],
    free: Sequence[str],
    arrays: Sequence[tuple[str, int]],
    derived: Sequence[tuple[str, str | None]],
    launch: LaunchDraft,
    budget: int = SHAPE_BUDGET,
    unknown: int = 0,
    sizes: Sequence[tuple[str, str]] = (),
    relations: Sequence[tuple[str, int]] = (),
) -> Sizing:
    """Shrink the default values of ``free`` variables until the largest point's buffers fit
    ``budget`` bytes (a four-variable kernel at 4096 each needs terabytes), then keep only the
    points where the launch is valid (grid > 0, 1 to 1024 threads a block).

    ``arrays`` are (extent text, bytes per element); ``derived`` the ``[vars]`` in order;
    ``unknown`` the arrays whose extent is a TODO, each counted as 4-byte elements over the
    three largest free variables (rope's ``[tokens, heads, head_size]``), so that filling the
    TODOs in does not turn the defaults into hundreds of gigabytes. ``sizes`` are the integer
    scalars (name, value) the kernel uses as sizes: a point where one is 0 or less (a group size
    ``total_count // group_num`` with more groups than elements) runs no work, so it is dropped.
    ``relations`` are the launcher's assertions (expression, line): a point that breaks one
    would stop the program, so it is dropped too.
    """
    current = {n: list(v) for n, v in values.items()}
    notes: list[str] = []
    # ``n % 96 == 0`` on a free variable: its defaults become multiples (round, not sweep past)
    for text, line in relations:
        m = re.fullmatch(r"\(?\s*(\w+)\s*\)?\s*%\s*(\d+)\s*==\s*0", text.strip())
        if m is None or m.group(1) not in free or int(m.group(2)) <= 1:
            continue
        name, step = m.group(1), int(m.group(2))
        moved = sorted({max(step, v - v % step) for v in current[name]})
        if moved != current[name]:
            current[name] = moved
            asserted = f"the launcher asserts {text}, line {line}"
            notes.append(f"{name}: default sizes made multiples of {step} ({asserted})")

    # Many free variables (ggml's copy with its 15 sizes and strides): a product of two values
    # each is tens of thousands of points, each evaluated at every shrinking step. The last
    # variables keep one value each until the product is at most MAX_POINTS.
    single: list[str] = []
    for name in reversed(list(free)):
        if math.prod(len(v) for v in current.values()) <= MAX_POINTS:
            break
        if len(current.get(name, ())) > 1:
            current[name] = current[name][:1]
            single.append(name)
    if single:
        notes.append(
            f"{', '.join(reversed(single))}: one default size each (the product of {len(free)} variables' "
            f"sizes would be over {MAX_POINTS} points)"
        )

    def total(point: Mapping[str, int]) -> int | None:
        env = _env(point, derived)
        size = 0
        if unknown and free:
            largest = sorted((point[n] for n in free), reverse=True)[:3]
            size += unknown * 4 * math.prod(largest)
        for shape, width in arrays:
            try:
                dims = [Expr.parse(d).evaluate_int(env) for d in extent_dims(shape)]
            except (KtxError, SyntaxError):
                continue
            count = 1
            for d in dims:
                count *= max(d, 0)
            size += count * width
        return size

    shrunk: list[str] = []
    for _ in range(256):
        largest = max((total(p) or 0) for p in _product_points(current))
        if largest <= budget:
            break
        movable = [n for n in free if max(current[n]) > 1]
        if not movable:
            break
        name = max(movable, key=lambda n: max(current[n]))
        top = max(current[name]) // 2
        current[name] = sorted({min(v, top) for v in current[name]})
        if name not in shrunk:
            shrunk.append(name)
    if shrunk:
        notes.append(
            f"{', '.join(shrunk)}: default sizes reduced so that the largest point's buffers stay "
            f"under {budget >> 30} GiB"
        )
    # A variable the block size grows with (``block = n``): smaller until every point launches.
    in_block = {n for b in launch.block or () for n in Expr.parse(b).names} & set(free)
    capped: list[str] = []
    for _ in range(64):
        if all(launch_problem(p, derived, launch) is None for p in _product_points(current)):
            break
        movable = [n for n in in_block if max(current[n]) > 1]
        if not movable:
            break
        name = max(movable, key=lambda n: max(current[n]))
        top = max(current[name]) // 2
        current[name] = sorted({min(v, top) for v in current[name]})
        if name not in capped:
            capped.append(name)
    if capped:
        notes.append(f"{', '.join(capped)}: default sizes reduced so that the block has at most 1024 threads")
    points = list(_product_points(current))
    valid: list[dict[str, int]] = []
    bad: list[str] = []
    for point in points:
        why = (
            launch_problem(point, derived, launch)
            or _empty_size(point, derived, sizes)
            or _broken(point, derived, relations)
        )
        if why is None:
            valid.append(point)
        elif len(bad) < 3:
            bad.append(f"{_point_name(point)}: {why}")
    if len(valid) == len(points):
        return Sizing(current, None, tuple(notes))
    notes.append(f"{len(points) - len(valid)} of {len(points)} default points dropped: " + "; ".join(bad))
    return Sizing(current, valid, tuple(notes))


def _product_points(values: Mapping[str, list[int]]) -> Iterator[dict[str, int]]:
    names = list(values)
    for combo in itertools.product(*(values[n] for n in names)):
        yield dict(zip(names, combo, strict=True))


def _point_name(point: Mapping[str, int]) -> str:
    return ",".join(f"{n}={v}" for n, v in point.items())


def _env(point: Mapping[str, int], derived: Sequence[tuple[str, str | None]]) -> dict[str, Value]:
    env: dict[str, Value] = dict(point)
    for name, text in derived:
        if text is None:
            continue
        with contextlib.suppress(KtxError):
            env[name] = Expr.parse(text).evaluate(env)
    return env


def _empty_size(
    point: Mapping[str, int], derived: Sequence[tuple[str, str | None]], sizes: Sequence[tuple[str, str]]
) -> str | None:
    """Which size scalar is 0 or less at ``point`` (the kernel would do no work), or None."""
    env = _env(point, derived)
    for name, text in sizes:
        try:
            value = Expr.parse(text).evaluate_int(env)
        except KtxError:
            continue
        if value <= 0:
            return f"{name} = {text} is {value}"
    return None


def _broken(
    point: Mapping[str, int], derived: Sequence[tuple[str, str | None]], relations: Sequence[tuple[str, int]]
) -> str | None:
    """The first launcher assertion ``point`` breaks (``ncols % 32 == 0`` at ncols = 100), or
    None; one that names a value the point does not give is not judged."""
    env = _env(point, derived)
    for text, line in relations:
        try:
            holds = Expr.parse(text).evaluate(env)
        except (KtxError, SyntaxError, ZeroDivisionError, TypeError):
            continue
        if not holds:
            return f"the launcher asserts {text} (line {line})"
    return None


def launch_problem(
    point: Mapping[str, int], derived: Sequence[tuple[str, str | None]], launch: LaunchDraft
) -> str | None:
    """Why the launch is invalid at ``point`` (a grid of 0 blocks, over 1024 threads), or None
    (also when a part cannot be evaluated: the TODO on it says so)."""
    env = _env(point, derived)
    try:
        grid = [Expr.parse(g).evaluate_int(env) for g in launch.grid or ()]
        block = [Expr.parse(b).evaluate_int(env) for b in launch.block or ()]
    except KtxError:
        return None
    if any(g <= 0 for g in grid):
        return f"grid {tuple(grid)} has no blocks"
    if any(b <= 0 for b in block):
        return f"block {tuple(block)} has no threads"
    threads = 1
    for b in block:
        threads *= b
    if threads > 1024:
        return f"block {tuple(block)} is {threads} threads (at most 1024)"
    return None
