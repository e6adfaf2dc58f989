"""Who owns which iteration: when a loop's start and step split its index space exactly.

A loop ``for (i = start; i < n; i += step)`` run by many threads takes every element once
(and packs of it, once each, the same way) when the values of ``start`` over the threads that
run it are exactly ``0 .. step - 1``. That holds when ``start`` is a mixed-radix number of
thread and block coordinates whose ranges multiply to ``step``::

    threadIdx.x                               step blockDim.x               (block stride)
    blockIdx.x * blockDim.x + threadIdx.x     step blockDim.x * gridDim.x   (grid stride)
    threadIdx.y                               step blockDim.y
    blockIdx.y * blockDim.y + threadIdx.y     step blockDim.y * gridDim.y
    blockIdx.x * blockDim.y + threadIdx.y     step blockDim.y * gridDim.x   (a worker per warp row)
    blockIdx.x                                step gridDim.x                (blocks walk rows)

Each coordinate ``c`` ranges over its extent ``R(c)`` (``threadIdx.y`` over ``blockDim.y``,
``blockIdx.x`` over ``gridDim.x``): ``start = c + R(c) * rest`` with ``rest`` again such a number
and ``step = R(c) * step'``. The forms come from :mod:`ktx.ir.affine`, so ``#define`` block
sizes the launch passes are already ``blockDim``.

>>> from ktx.ir.affine import Affine
>>> s = Affine.sym
>>> splits_exactly(s("blockIdx.x") * s("blockDim.y") + s("threadIdx.y"), s("blockDim.y") * s("gridDim.x"))
True
>>> off_by_one = s("threadIdx.x") + Affine.of(1)
>>> splits_exactly(off_by_one, s("blockDim.x")), splits_exactly(s("threadIdx.y"), s("blockDim.x"))
(False, False)
"""

from __future__ import annotations

from ktx.ir.affine import Affine

#: Each coordinate and its extent.
EXTENT = {
    **{f"threadIdx.{a}": f"blockDim.{a}" for a in "xyz"},
    **{f"blockIdx.{a}": f"gridDim.{a}" for a in "xyz"},
}


def splits_exactly(start: Affine | None, step: Affine | None) -> bool:
    """Whether ``start`` takes each value of ``0 .. step - 1`` over the launch's threads."""
    if start is None or step is None or start.atoms or step.atoms or not start.terms:
        return False
    return _radix(start, step, frozenset())


def across_blocks(start: Affine | None) -> bool:
    """Whether the iterations a thread takes depend on its block (a barrier cannot order them)."""
    return start is None or any(s.startswith("blockIdx.") for s in start.free)


def _radix(start: Affine, step: Affine, used: frozenset[str]) -> bool:
    if not start.terms:
        return step.terms == (((), 1),)
    for coord, extent in EXTENT.items():
        if coord in used or dict(start.terms).get((coord,), 0) != 1:
            continue
        rest = _divide(start - Affine.sym(coord), extent)
        per = _divide(step, extent)
        if rest is not None and per is not None and _radix(rest, per, used | {coord}):
            return True
    return False


def _divide(a: Affine, symbol: str) -> Affine | None:
    """``a / symbol`` when every term of ``a`` is a multiple of ``symbol``, else None."""
    terms: list[tuple[tuple[str, ...], int]] = []
    for monomial, coef in a.terms:
        if symbol not in monomial:
            return None
        rest = list(monomial)
        rest.remove(symbol)
        terms.append((tuple(rest), coef))
    return Affine(tuple(sorted(terms)))
