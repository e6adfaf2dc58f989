"""The facts of one kernel (:class:`Facts`), computed on first use and kept per module.

Each question is answered by the analysis that owns it and cached here, so that passes stop
handing partial results to each other (the ``known`` roots dict, re-run loop analyses):

* :mod:`ktx.ir.affine` reads indices as affine forms, loops as start/step/bound, and every
  memory reference as a :class:`~ktx.ir.memref.MemRef`;
* :mod:`ktx.ir.access` reads a loop's subscripts relative to its induction variable (what
  ``vectorize`` packs) into the same records, over the same roots;
* :mod:`ktx.ir.facts.types` sizes element types;
* :mod:`ktx.ir.facts.reductions` recognises reductions.

A :class:`Facts` is bound to one module: a pass that edits gets a fresh module, hence fresh
facts (nothing to invalidate).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Literal

import tree_sitter as ts
from ktx.ir.access import LoopAccesses, analyze_loop, roots
from ktx.ir.affine import BlockAlias, KernelIndex, LoopShape, ThreadIndex, kernel_index
from ktx.ir.facts.owners import splits_exactly
from ktx.ir.facts.reductions import Reduction, TreeReduction, reductions, tree_reductions
from ktx.ir.facts.types import type_size
from ktx.ir.facts.writes import written_roots
from ktx.ir.memref import UNKNOWN, MemRef, Root
from ktx.ir.nodes import Function, LaunchSite, Loop

if TYPE_CHECKING:
    from ktx.ir.facts.signature import ParamFact
    from ktx.ir.module import Module  # a type only: Module.facts() imports the facts

Owner = Literal["thread", "warp", "block", "grid", "blocks", "unknown"]
"""Who takes the iterations of a loop: each thread all of them (``thread``), the lanes of a warp
(``warp``), the threads of a block (``block``), every thread of the grid (``grid``), the blocks
of the grid (``blocks``: ``row += gridDim.x``), or not known."""

_OWNERS: dict[str, Owner] = {
    "block": "block",
    "grid": "grid",
    "grid-blocks": "blocks",
    "warp": "warp",
    "unit": "thread",
    "constant": "thread",
}
_CONDITIONAL = frozenset(
    {"if_statement", "conditional_expression", "switch_statement", "case_statement", "lambda_expression"}
)
_LOOP_TYPES = frozenset({"for_statement", "while_statement", "do_statement", "for_range_loop"})


@dataclass(frozen=True)
class LoopFact:
    """One loop of the kernel: its shape and who owns its iterations."""

    label: str
    """``L<id>``, as ``ktx inspect`` and the passes' ``loops=`` options name it."""
    loop: Loop
    shape: LoopShape | None
    owner: Owner
    partitions: bool
    """Start and step split the index space among threads with no overlap."""
    depth: int
    """How many loops of the kernel enclose it."""


@dataclass(frozen=True)
class LaunchFacts:
    """What the kernel's launches fix: block-size aliases, template values and arguments."""

    launches: tuple[LaunchSite, ...]
    block_aliases: tuple[BlockAlias, ...]
    template_values: tuple[tuple[str, int], ...]
    template_args: tuple[str, ...]
    """The type and value arguments bound to the kernel's template parameters (spec first,
    else the first launch that names them)."""
    block_x_equal: tuple[BlockAlias, ...] = ()
    """Names equal to ``blockDim.x`` at every launch where the block has several dimensions
    (``dim3(WARP_SIZE, nwarps)``, ``k<BS><<<g, dim3(BS, 4)>>>``): the index analysis reads them
    as ``blockDim.x``, so ``col += WARP_SIZE`` from ``threadIdx.x`` is a block-stride loop to
    vectorize and split; unlike :attr:`block_aliases` they are not the block size a knob sets."""


class Facts:
    """Everything ktx knows about one kernel, computed on first use (see :func:`facts_of`)."""

    def __init__(self, module: Module, fn: Function, template_args: Sequence[str] | None = None) -> None:
        self.module = module
        self.fn = fn
        launches = module.launches_of(fn.name)
        if template_args is None:
            template_args = next((s.template_args for s in launches if s.template_args), ())
        self.template_args: tuple[str, ...] = tuple(template_args)
        self.fn = with_bound_pointers(fn, self.template_args)
        self._loop_accesses: dict[int, LoopAccesses] = {}
        self._labels = {lp.id: f"L{lp.id}" for lp in module.loops}

    # -- the underlying analyses ---------------------------------------------------------------

    @cached_property
    def index(self) -> KernelIndex:
        """The affine index analysis (:class:`ktx.ir.affine.KernelIndex`)."""
        return kernel_index(self.module, self.fn)

    @cached_property
    def body(self) -> ts.Node:
        return self.index.body

    @cached_property
    def roots(self) -> dict[str, Root]:
        """Every pointer-like name and the memory it reaches (:func:`ktx.ir.access.roots`)."""
        return roots(self.module, self.fn)

    # -- loops -------------------------------------------------------------------------------

    @cached_property
    def loops(self) -> tuple[LoopFact, ...]:
        found = []
        mine = self.module.loops_in(self.fn)
        for lp in mine:
            shape = self.index.loop_shape(lp)
            owner: Owner = _OWNERS.get(shape.stride, "unknown") if shape is not None else "unknown"
            found.append(
                LoopFact(self.label(lp), lp, shape, owner, _splits(shape), lp.depth)
            )
        return tuple(found)

    def label(self, loop: Loop) -> str:
        return self._labels.get(loop.id, f"L{loop.id}")

    def loop(self, loop: Loop) -> LoopFact | None:
        return next((f for f in self.loops if f.loop.id == loop.id), None)

    def loop_accesses(self, loop: Loop) -> LoopAccesses:
        """The subscripts of ``loop`` relative to its variable (:func:`ktx.ir.access.analyze_loop`)."""
        got = self._loop_accesses.get(loop.id)
        if got is None:
            got = analyze_loop(self.module, self.fn, loop, self.roots)
            self._loop_accesses[loop.id] = got
        return got

    @cached_property
    def element(self) -> ThreadIndex | None:
        """One element per thread: the global index along x and the guard that bounds it."""
        return self.index.thread_index()

    # -- memory --------------------------------------------------------------------------------

    @cached_property
    def refs(self) -> tuple[MemRef, ...]:
        """Every memory reference of the kernel body, in source order, with its memory, element
        type and size (template parameters bound), whether it is conditional in the kernel body
        and its innermost loop."""
        return tuple(self._fact(r) for r in self.index.accesses())

    def refs_under(self, node: ts.Node) -> tuple[MemRef, ...]:
        return tuple(r for r in self.refs if node.start_byte <= r.node.start_byte < node.end_byte)

    @cached_property
    def written_roots(self) -> frozenset[str]:
        """Roots the kernel may write: stores, updates, and pointers passed to functions or
        locals that may write through them (:func:`ktx.ir.facts.writes.written_roots`; an address
        kept in a pointer to const, ``const float* p = &in[i]``, is no write)."""
        refs = {r.root for r in self.refs if r.kind in ("store", "update") and r.root}
        return frozenset(refs | written_roots(self.module, self.fn, self.roots))

    @cached_property
    def params(self) -> tuple[ParamFact, ...]:
        """What the source says of each parameter: stored to, may be written, element type
        (:func:`ktx.ir.facts.signature.param_facts`; what ``ktx init --check`` compares a spec
        with)."""
        from ktx.ir.facts.signature import params_of  # it asks these facts in turn

        return params_of(self)

    def element_size(self, type_text: str) -> int | None:
        """``sizeof(type_text)``, template parameters bound (:func:`ktx.ir.facts.types.type_size`)."""
        got = type_size(self.module, self.fn, self.template_args, type_text) if type_text else None
        return got[0] if got is not None else None

    def alias_class(self, root: str) -> str:
        """The may-alias class of ``root`` (:attr:`ktx.ir.memref.Root.alias_class`)."""
        return self.roots.get(root, UNKNOWN).alias_class

    def may_alias(self, a: str, b: str) -> bool:
        """Whether two roots may reach the same bytes (:meth:`ktx.ir.access.Root.may_alias`)."""
        ra, rb = self.roots.get(a), self.roots.get(b)
        if ra is None or rb is None:
            return True
        return ra.may_alias(rb)

    def _fact(self, ref: MemRef) -> MemRef:
        etype = self.index.root_type(ref.root) if ref.root else ""
        bound = _bind(etype, self.fn, self.template_args)
        loop = next(
            (
                f.label
                for f in sorted(self.loops, key=lambda f: -f.depth)
                if f.loop.span.start <= ref.node.start_byte < f.loop.span.end
            ),
            "",
        )
        return replace(
            ref,
            memory=self.roots.get(ref.root, UNKNOWN),
            element_type=bound,
            element_size=self.element_size(bound),
            conditional=_conditional(ref.node, self.body),
            loop_label=loop,
        )

    # -- reductions ----------------------------------------------------------------------------

    def reductions(self, scope: ts.Node | None = None) -> tuple[Reduction, ...]:
        """The reductions under ``scope`` (the kernel body by default; a loop's body stands for
        its loop), from the one recogniser, :func:`ktx.ir.facts.reductions.reductions`."""
        return reductions(self.module, self.fn, scope)

    @cached_property
    def tree_reductions(self) -> tuple[TreeReduction, ...]:
        """The loops that reduce a ``__shared__`` array in place, synchronising every step
        (:func:`ktx.ir.facts.reductions.tree_reductions`)."""
        return tree_reductions(self.module, self.fn)

    def loop_at(self, node: ts.Node) -> LoopFact | None:
        """The loop fact of the loop statement ``node`` (a reduction's ``loop``), or None."""
        return next((lp for lp in self.loops if lp.loop.span.start == node.start_byte), None)

    # -- launch --------------------------------------------------------------------------------

    @cached_property
    def launch(self) -> LaunchFacts:
        return LaunchFacts(
            self.module.launches_of(self.fn.name),
            tuple(self.index.block_aliases.values()),
            tuple(sorted(self.index.template_values.items())),
            self.template_args,
            tuple(self.index.block_x_equal.values()),
        )


def facts_of(
    module: Module, fn: Function | str | None = None, template_args: Sequence[str] | None = None
) -> Facts:
    """The facts of kernel ``fn`` (a name, or the only kernel), computed once per module.

    ``template_args`` binds the kernel's template parameters (the spec's, when a pass runs on
    one); by default, those of the first launch that names them.
    """
    kernel = fn if isinstance(fn, Function) else module.kernel(fn)
    cache: dict[tuple[str, int, tuple[str, ...] | None], Facts] = module.__dict__.setdefault("_ktx_facts", {})
    key = (kernel.name, kernel.span.start, tuple(template_args) if template_args is not None else None)
    got = cache.get(key)
    if got is None:
        got = cache[key] = Facts(module, kernel, template_args)
    return got


def _splits(shape: LoopShape | None) -> bool:
    if shape is None:
        return False
    return shape.partitions or splits_exactly(shape.start, shape.step)


def with_bound_pointers(fn: Function, template_args: Sequence[str]) -> Function:
    """``fn`` with each parameter whose type is a template parameter bound to a pointer type
    counted as that pointer (llm-awq's ``quant_kernel<T, scale_type>`` launched with
    ``scale_type = at::Half *``: ``scale_type scale`` is a buffer the kernel stores to); ``fn``
    itself where none is."""
    params = []
    for p in fn.params:
        extra = 0
        for tp, arg in zip(fn.template_params, template_args, strict=False):
            if tp.kind == "type" and tp.name == p.base_type and "{" not in arg and "<" not in arg:
                extra = arg.count("*")
                base = " ".join(re.sub(r"\b(?:const|volatile)\b|\*", " ", arg).split())
                break
        params.append(replace(p, pointer_depth=p.pointer_depth + extra, base_type=base) if extra else p)
    if all(a is b for a, b in zip(params, fn.params, strict=True)):
        return fn
    return replace(fn, params=tuple(params))


def _bind(type_text: str, fn: Function, args: Sequence[str]) -> str:
    for tp, arg in zip(fn.template_params, args, strict=False):
        if tp.kind == "type" and type_text == tp.name:
            return " ".join(arg.split())
    return type_text


def _conditional(node: ts.Node, stop: ts.Node) -> bool:
    child, n = node, node.parent
    while n is not None and n.id != stop.id:
        if n.type in _CONDITIONAL or n.type in ("while_statement", "do_statement"):
            cond = n.child_by_field_name("condition")
            if cond is None or cond.id != child.id:
                return True
        elif n.type == "binary_expression":
            op = n.child_by_field_name("operator")
            right = n.child_by_field_name("right")
            if op is not None and op.type in ("&&", "||") and right is not None and right.id == child.id:
                return True
        child, n = n, n.parent
    return False
