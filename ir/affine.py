"""The index analysis every pass consults: what each index *is*, not how it is written.

Real code states one fact many ways: ``i = blockIdx.x * blockDim.x + threadIdx.x`` or
``idx = threadIdx.x + blockDim.x * blockIdx.x``; a block size read from ``blockDim.x`` or
written as ``#define BLOCK_SIZE 128`` that the launch also uses; ``x[i]`` or ``__ldg(&x[i])``
or ``reinterpret_cast<const float4*>(x)[i]`` or, through a row pointer, ``row[i]`` with
``const float* row = x + r * C``. Passes that matched text each learned a few of these ways.
This module reads them all once, into facts:

* :class:`Affine`: an index as a sum of integer-weighted products of *symbols*
  (``threadIdx.x``, ``blockIdx.x``, ``blockDim.x``, ``gridDim.x``, parameters, loop variables,
  template parameters) plus a constant. ``#define``/``constexpr`` integers are folded, locals
  defined once are substituted, ``warpSize`` is 32, and a macro, ``constexpr`` or template
  parameter that every launch of the kernel passes as its block size *is* ``blockDim.x``
  (:attr:`KernelIndex.block_aliases`). What is not a polynomial (``i / C``, ``min(a, b)``,
  ``x[j]``) becomes an opaque *atom*, which remembers the symbols it depends on, so that
  ``coeff`` can say "not linear" rather than guess.
* :class:`ThreadIndex`: the variable holding the global thread index and its declared type
  (``int``, ``unsigned``, 64-bit), with the :class:`Guard` that bounds it (``if (i < N) {...}``
  or ``if (i >= N) return;``).
* :class:`LoopShape`: ``for`` and ``while`` loops as start, step and bound, classified as
  block-stride, grid-stride, grid-of-blocks (``row += gridDim.x``), warp-stride or sequential.
* :class:`MemRef`: every load and store, whatever its spelling: subscripts, ``*p``,
  ``__ldg/__ldcs/__ldcg/__ldca/__ldlu/__ldcv`` and ``__stcs/__stcg/__stwb/__stwt`` (the address
  they take is a load or a store, not an escape), vector casts (``float4`` over a ``float``
  root is 4 root elements per access), and local pointers, each resolved to the root it
  reaches with the index as an :class:`Affine` in root elements.

Entry point: :func:`kernel_index` (cached per module and kernel), a :class:`KernelIndex` with

* ``affine(node)``: any integer expression as an :class:`Affine` (None if unreadable);
* ``thread_index(axis="x")``: the :class:`ThreadIndex` (variable, form, type, :class:`Guard`);
* ``guard_of(var)``: the top-level ``if (var < N) {...}`` / ``if (var >= N) return;``;
* ``loop_shape(loop)``: the :class:`LoopShape` of a ``for``/``while``/``do`` loop;
* ``accesses(node=None)`` / ``loop_accesses(loop)``: the :class:`MemRef` s under a node, the
  kernel body by default, or under a loop's body;
* ``pointer(name)``: what a local pointer reaches (:class:`PointerDef`);
* ``block_aliases``: the names that are ``blockDim.x`` (:class:`BlockAlias`), and
  ``template_values``: template parameters folded to integers.

The module-level :func:`thread_index`, :func:`guard_of`, :func:`loop_shape`, :func:`accesses`
and :func:`affine_of` are shortcuts; :func:`intrinsic_kind` tells whether ``&p[i]`` is the
address a load or store intrinsic accesses. Everything is syntactic and conservative: unknown
is ``None`` and callers refuse.

This module is the front door; the work is split by what it is about: the form algebra
(:mod:`ktx.ir.affine_form`), the records (:mod:`ktx.ir.index_facts`, :mod:`ktx.ir.memref`), the
reader (:mod:`ktx.ir.kernel_index`, with tree helpers in :mod:`ktx.ir.affine_tree`) and the
launch's block-size aliases (:mod:`ktx.ir.block_alias`).

>>> from ktx.ir import parse
>>> m = parse('''#define BLOCK 128
... __global__ void k(float* out, const float* __restrict__ in, int n) {
...   int i = blockIdx.x * BLOCK + threadIdx.x;
...   if (i < n) out[i] = 2.f * __ldg(&in[i]);
... }
... void go(float* o, const float* x, int n) { k<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(o, x, n); }''')
>>> ix = kernel_index(m, m.kernel())
>>> t = ix.thread_index()
>>> (t.var, str(t.form), t.guard.kind, t.guard.bound_text)
('i', 'blockDim.x*blockIdx.x + threadIdx.x', 'if', 'n')
>>> [(r.kind, r.via, r.root, str(r.index)) for r in ix.accesses()]  # doctest: +NORMALIZE_WHITESPACE
[('store', 'subscript', 'out', 'blockDim.x*blockIdx.x + threadIdx.x'),
 ('load', '__ldg', 'in', 'blockDim.x*blockIdx.x + threadIdx.x')]
"""

from __future__ import annotations

from ktx.ir.affine_form import (
    BDIM_X,
    BDIM_Y,
    BDIM_Z,
    BID_X,
    BID_Y,
    BID_Z,
    BUILTINS,
    GDIM_X,
    GDIM_Y,
    GDIM_Z,
    THREAD_VARYING,
    TID_X,
    TID_Y,
    TID_Z,
    ZERO,
    Affine,
    Monomial,
)
from ktx.ir.affine_tree import index_node as _index_node
from ktx.ir.facts.kinds import LOAD_INTRINSICS, STORE_INTRINSICS, intrinsic_kind
from ktx.ir.index_facts import BlockAlias, Guard, LoopShape, PointerDef, StrideKind, ThreadIndex
from ktx.ir.kernel_index import (
    KernelIndex,
    accesses,
    affine_of,
    guard_of,
    kernel_index,
    loop_shape,
    thread_index,
)
from ktx.ir.memref import MemRef

__all__ = [
    "BDIM_X",
    "BDIM_Y",
    "BDIM_Z",
    "BID_X",
    "BID_Y",
    "BID_Z",
    "BUILTINS",
    "GDIM_X",
    "GDIM_Y",
    "GDIM_Z",
    "LOAD_INTRINSICS",
    "STORE_INTRINSICS",
    "THREAD_VARYING",
    "TID_X",
    "TID_Y",
    "TID_Z",
    "ZERO",
    "Affine",
    "BlockAlias",
    "Guard",
    "KernelIndex",
    "LoopShape",
    "MemRef",
    "Monomial",
    "PointerDef",
    "StrideKind",
    "ThreadIndex",
    "_index_node",
    "accesses",
    "affine_of",
    "guard_of",
    "intrinsic_kind",
    "kernel_index",
    "loop_shape",
    "thread_index",
]
