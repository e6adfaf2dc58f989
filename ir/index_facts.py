"""The facts the affine reader returns: block aliases, guards, the thread index, loop shapes.

Frozen records with no tree reading of their own (:mod:`ktx.ir.kernel_index` builds them), so
that callers may keep and compare them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import tree_sitter as ts
from ktx.ir.affine_form import BDIM_X, BID_X, THREAD_VARYING, TID_X, ZERO, Affine
from ktx.ir.affine_tree import is_wide as _is_wide
from ktx.ir.nodes import Loop


@dataclass(frozen=True)
class BlockAlias:
    """A name the kernel reads that every launch passes as its block size: it *is* blockDim."""

    name: str
    axis: str
    """``x``, ``y`` or ``z``."""
    value: int | None
    kind: Literal["define", "constexpr", "template", "param", "value", "cub", "header"]
    """How the launch names it: the ``#define``/``constexpr``/template parameter/parameter
    itself, or ``value``: a constant the kernel reads that equals the block every launch passes
    (``<<<g, 256>>>`` and ``#define TPB 256``); ``cub``: the kernel hands it to a CUB block
    collective as ``BLOCK_DIM_X`` (``cub::BlockReduce<T, THREADS>``), its own contract; ``header``: a
    name of an included header (its value unknown here) that every launch passes."""


@dataclass(frozen=True)
class Guard:
    """The bound of a thread's index: ``if (i < N) {...}`` or ``if (i >= N) return;``."""

    kind: Literal["if", "return"]
    var: str
    bound: Affine | None
    bound_text: str
    inclusive: bool
    """``i <= N``: the last valid index is N (rare; callers usually refuse)."""
    node: ts.Node
    """The ``if`` statement."""
    body: ts.Node | None
    """The guarded statement (``if``); None for a ``return`` guard (the rest of the kernel)."""
    line: int


@dataclass(frozen=True)
class ThreadIndex:
    """The variable that holds a thread's global index along an axis, and its guard."""

    var: str
    axis: str
    form: Affine
    type: str
    """The declared type (``int``, ``const unsigned``, ``size_t``...)."""
    decl: ts.Node
    """The ``declaration`` statement that defines ``var``."""
    guard: Guard | None
    line: int

    @property
    def wide(self) -> bool:
        """Whether the index is 64-bit (``size_t``, ``int64_t``, ``long``...)."""
        return _is_wide(self.type)

    def overflow_note(self, factor: str) -> str | None:
        """Why multiplying this index by ``factor`` may overflow, or None when it is 64-bit."""
        if self.wide:
            return None
        return (
            f"{self.var} is {self.type.strip() or 'int'} (line {self.line}): {self.var} * {factor} "
            f"overflows 32 bits when N * {factor} >= 2^31; compute it in 64 bits"
        )


StrideKind = Literal["block", "grid", "grid-blocks", "warp", "unit", "constant", "other"]


@dataclass(frozen=True)
class LoopShape:
    """A ``for``/``while``/``do`` loop as ``for (v = start; v < bound; v += step)``.

    ``stride`` classifies the step: ``block`` (``blockDim.x``: the threads of a block walk
    the range together), ``grid`` (``blockDim.x * gridDim.x``), ``grid-blocks``
    (``gridDim.x``: blocks walk rows), ``warp`` (32), ``unit`` (1: one thread walks it all),
    ``constant`` (another literal), ``other``. ``step_node`` is the statement or expression
    that advances ``var`` (the header's update, or the ``row += gridDim.x;`` of a while body).
    """

    loop: Loop
    node: ts.Node
    var: str | None
    start: Affine | None
    step: Affine | None
    bound: Affine | None
    cmp: str
    stride: StrideKind
    step_node: ts.Node | None
    line: int

    @property
    def partitions(self) -> bool:
        """Whether start and step split the range among threads with no overlap.

        True for ``threadIdx.x + c`` stepping ``blockDim.x``, ``blockIdx.x*blockDim.x +
        threadIdx.x + c`` stepping ``blockDim.x*gridDim.x``, and ``blockIdx.x + c`` stepping
        ``gridDim.x`` (with ``c`` free of the thread's builtins).
        """
        if self.start is None or self.step is None:
            return False
        rest = self.start.without(TID_X, BID_X)
        if rest.depends_on(THREAD_VARYING):
            return False
        tid = self.start.coeff(TID_X)
        bid = self.start.coeff(BID_X)
        if tid is None or bid is None:
            return False
        if self.stride == "block":
            return tid.equals(Affine.of(1)) and bid.equals(ZERO)
        if self.stride == "grid":
            return tid.equals(Affine.of(1)) and bid.equals(Affine.sym(BDIM_X))
        if self.stride == "grid-blocks":
            return tid.equals(ZERO) and bid.equals(Affine.of(1))
        return False


@dataclass(frozen=True)
class PointerDef:
    """A local pointer: the root it reaches and its offset in root elements."""

    name: str
    root: str
    offset: Affine | None
    element_type: str
    line: int
