"""``ktx.ir.facts``: the one place a pass asks what a kernel *is*, computed once per module.

A pass reads like its rewrite rule: ``sites()`` asks facts, ``rewrite()`` edits. The facts of a
kernel are a :class:`~ktx.ir.facts.kernel.Facts`, got from :func:`facts_of` (or
``module.facts(kernel)``, the same call) and kept on the :class:`~ktx.ir.module.Module`: a
module never changes, and edits give a module of the new bytes (equal bytes share one module,
facts included: ``ktx.ir.module``'s parse cache), so there is nothing to invalidate (MLIR's
``AnalysisManager``, libcst's metadata providers and Triton's ``AxisInfoAnalysis`` work the same way).

What it answers, and the module that computes it:

* loops: shape, bounds, stride and which threads own which iterations
  (:class:`~ktx.ir.facts.kernel.LoopFact`, over :class:`ktx.ir.affine.LoopShape`); one element
  per thread behind an ``if``/``return`` guard (:attr:`Facts.element`);
* memory references in one model, :class:`ktx.ir.memref.MemRef` (:attr:`Facts.refs`): root
  through locals, casts, vector casts and the ``__ldg``/``__stcs`` family, the affine subscript,
  element type and size (template parameters bound from the launch or the spec), read/write,
  conditional, may-alias class; the loop and element readers that ``vectorize`` packs through
  return the same records; what each access *does* is decided by the one classifier in
  :mod:`ktx.ir.facts.kinds`;
* reductions: :meth:`Facts.reductions` (the recogniser is :mod:`ktx.ir.facts.reductions`);
* the launch mapping: block-size aliases and template values (:class:`LaunchFacts`);
* vectorize's legality (which loops pack, which per-thread bodies widen):
  :mod:`ktx.ir.facts.packing`.
* extents: which elements each access reaches at one launch, against its buffer's size, and a
  witness (a block, thread and loop values) for an access that lands outside
  (:mod:`ktx.ir.facts.extents`, over :mod:`~ktx.ir.facts.intervals`,
  :mod:`~ktx.ir.facts.witness` and :mod:`~ktx.ir.facts.lanes`); ``ktx.bounds`` asks it per
  shape point of a spec.
* by-value struct and vector parameters (``uint3``, ``Params``): their byte layout as libclang
  lays it out, one leaf per scalar field (:mod:`ktx.ir.facts.structs`); the spec's ``fields``
  are packed into it for the launch.

``ktx inspect --facts FILE`` prints them (:func:`ktx.ir.facts.text.render`).

>>> from ktx.ir import parse
>>> from ktx.ir.facts import facts_of
>>> m = parse('''__global__ void k(float* __restrict__ y, const float* __restrict__ x, int n) {
...   for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = 2.f * x[i]; }''')
>>> f = m.facts()
>>> f is facts_of(m, m.kernel()), [(lp.label, lp.owner) for lp in f.loops]
(True, [('L0', 'block')])
>>> [(r.kind, r.root, str(r.index), r.alias) for r in f.refs]
[('store', 'y', 'i', 'restrict:y'), ('load', 'x', 'i', 'restrict:x')]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ktx.ir.facts.kinds import LOAD_INTRINSICS, STORE_INTRINSICS, AccessKind, access_kind, intrinsic_kind

if TYPE_CHECKING:
    from ktx.ir.facts.kernel import Facts, LaunchFacts, LoopFact, facts_of
else:

    def __getattr__(name: str) -> object:
        # The kernel facts import ktx.ir.affine, which imports the classifier above: loaded on
        # first use so that either module may be imported first.
        if name in ("Facts", "LaunchFacts", "LoopFact", "facts_of"):
            from ktx.ir.facts import kernel

            return getattr(kernel, name)
        raise AttributeError(name)


__all__ = [
    "LOAD_INTRINSICS",
    "STORE_INTRINSICS",
    "AccessKind",
    "Facts",
    "LaunchFacts",
    "LoopFact",
    "access_kind",
    "facts_of",
    "intrinsic_kind",
]
