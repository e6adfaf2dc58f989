"""``expose``: the compile-time performance constants a kernel already has become knobs.

Candidates come from :func:`ktx.ir.analysis.perf_constants`: integer template parameters
(SGLang's ``NUM_THREADS``, FlashInfer's ``VEC_SIZE``) set by literals at launch sites,
``#define`` and ``constexpr`` integers used in launch configurations or loop bounds, and
literal block sizes in launchers (the 256 of ``min(d / 8, 256)``). Each becomes a knob named
after it (``NUM_THREADS``; a launch literal is named after the variable it sets:
``BLOCK_MAX`` for the cap of ``dim3 block(min(..., 256))``), its value is replaced by the
placeholder, and the default is the current value.

Domains are powers of two within a factor of 4 of the current value, plus the value itself;
constants that size blocks stay within 32 .. 1024 threads. A template parameter's launch
arguments and the template's name expression follow (``kernel<T, {NUM_THREADS}>``); so does the
launch mapping (the constant's var, or its literal, becomes the knob, and the outcome says
where).

Refused, with the reason as a remark: warp-size constants (hardware), values computed from
``sizeof`` (pack widths tied to an element type), constants that map threads to work
(``threadIdx.x / THREADS_PER_GROUP``: the shuffle masks assume them), host copies of a refused
device constant, a 32 that is the warp the kernel (or a device function it calls) shuffles over,
and template parameters that take different values at different launch sites (they select
behaviour, like ``TOPK``). A template parameter that is the launch's block size, unless every
launch writes its value as the block's literal, is left to ``block-size``, which moves the
template argument and the block together (so are the launch literals beside it). Also refused,
so that every value computes the same result: a constant computed from another (``NUM_WARPS =
THREADS / 32`` follows ``THREADS``), one that lays out a buffer (``in + token * TOPK * d``), one
the spec sets from a shape variable (``template_args = [..., "{topk}"]``) or names as one,
one that sizes the problem (passed whole as an argument of the kernel's launch, or sizing a
``cudaMalloc``/``malloc``, directly or through a local: the spec's buffers would not follow),
one that sets a block a helper's hand-unrolled reduction assumes (``threadIdx.x < 64`` for 128
threads), and one fed to a ``static_assert`` ktx cannot evaluate; an assert it can evaluate
narrows the domain to the values it accepts (``VEC * sizeof(T) <= 16``). A spec grid that
rounds by an exposed launch-literal block (``(50000 + 256 - 1) // 256``) follows the knob. A
launch literal written twice in the expression it sets (``d < 1024 ? d : 1024``) changes in
both places, and in the block's mapping only, so the launcher ships what is measured.
See ``ktx/ir/facts/constants.py``.

An items count the spec computes per shape (``template_args = [..., "{(n + 2047) // 2048}"]``,
the launcher's pick: DeepSpeed's ``copy_unroll``, exllamav2's ``blocks_per_warp``) becomes a knob
whose 0 is that pick, so the original is a point of the space and the dispatch table replaces the
launcher's heuristic per shape. Its other values are those the file instantiates (its dispatch
branches, :func:`ktx.ir.facts.tuning.instantiated_values`), less what the ``static_assert``s
reject, each kept at a shape where it covers what the pick covers (a constraint): the facts show
every loop it bounds steps the block over the data with each access past the data guarded
(:func:`ktx.ir.facts.tuning.items_coverage`); without that pattern, or when the spec names a
shape variable itself (``{TOP_K}``: what is computed), it is refused with the reason. When
the loops step by the block, the relation names the launch's block as the pipeline ends
(``launch_block_x``, :data:`ktx.passbase.LAUNCH_BLOCK`): on ``expose,block-size`` it follows
``BLOCK_X`` (DeepSpeed pre_rms_norm: 512 threads with ``UNROLL=1`` cover 4096 halves).

A constant that sizes a ``__shared__`` array the threads write at their own or their warp's id
(exllamav2 head_norm's ``sums[MAX_WARPS]`` at ``threadIdx.x / WARP_SIZE``,
:func:`ktx.ir.facts.tuning.thread_indexed_shared`) is kept at least what the launch's threads
write, by a constraint over that block (``MAX_WARPS >= ceil_div(head_dim // 2, 32)``); an
extent naming what the file gives no integer is refused.

A template parameter the file's launches give no integer (the launcher picks it by a name, as
FlashInfer's ``DISPATCH_ALIGNED_VEC_SIZE`` picks ``VEC_SIZE``) takes the value the spec binds
when :mod:`ktx.ir.facts.tuning` reads it as a vector width the kernel adapts to (a loop steps
by it, or a run-time extent is divided by it): the knob replaces the launcher's pick, with
widths no wider than the spec's (a wider vector needs an alignment nothing established). One
whose coverage the launch fixes (DeepSpeed's ``granularity``: a fixed group of threads, each
owning ``granularity`` bytes) is refused, the spec's value named: the grid would have to follow.
A template block size and items per thread that the spec binds and no launch in the file sets
(bitsandbytes' ``kDequantizeBlockwise<T, 512, 64, 8, ...>``, launched from another file: the
spec's 64-thread block is ``THREADS``) become knobs together, their product held at its bound
value (``THREADS * NUM_PER_TH == 512``), and the spec's block follows ``THREADS``: a block's
work stays as bound, so the grid and the tiles derived from it stay right. Where no template
argument is the block but one equals block x items (bitsandbytes' ``kQuantizeBlockwise<T, 4096,
4>`` on 1024 threads), the items count alone is the knob and the spec's block becomes
``4096 // NUM_PER_TH``, within 1024 threads.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import tree_sitter as ts
from ktx.ir import Function, Module, Span, syntax
from ktx.ir.analysis import PerfConstant, perf_constants
from ktx.ir.consteval import int_literal
from ktx.ir.expr import Expr
from ktx.ir.facts.constants import (
    allowed_by_asserts,
    assumes_warp_x,
    derived_from,
    named_like_a_variable,
    region_literals,
    sizes_the_data,
    sizes_the_problem,
    spec_selected,
    unrolled_for_block,
    warp_sized_callees,
)
from ktx.ir.facts.tuning import (
    Coverage,
    TuningParam,
    instantiated_values,
    items_coverage,
    thread_indexed_shared,
    tuning_params,
)
from ktx.ir.index import eval_int_text
from ktx.ir.launch import LaunchMapping, launch_dims, local_value, substitute
from ktx.passes._common import around, follow_block_axis, grid_rounding, replace_literal

from ktx.passbase import LAUNCH_BLOCK, KnobSpec, Option, Pass, Phase, Refuse, Rewriter, Site, Skip, Target

#: Names of constants that size a block (not ``MAX_BLOCKS``, a number of blocks).
_BLOCKISH = re.compile(r"THREAD|BLOCK(?!S)|WARPS", re.I)


@dataclass(frozen=True)
class BlockItems:
    """A template block size and items per thread the spec binds, kept at the same product."""

    block: str | None
    """The block's template parameter; None when the spec's block is a literal that the tile
    divided by the items gives (bitsandbytes' ``kQuantizeBlockwise<T, 4096, 4>`` on 1024 threads)."""
    block_value: int
    items: str
    items_value: int

    @property
    def product(self) -> int:
        return self.block_value * self.items_value

    @property
    def constraints(self) -> tuple[str, ...]:
        items = _upper_snake(self.items)
        if self.block is None:
            return (f"{self.product} % {items} == 0", f"{self.product} // {items} <= 1024")
        return (f"{_upper_snake(self.block)} * {items} == {self.product}",)


@dataclass(frozen=True)
class PerShape:
    """An items count the spec computes per shape (the launcher's pick), which a knob replaces:
    0 keeps the pick, another value is one the file instantiates, kept where it covers what the
    pick covers (:class:`ktx.ir.facts.tuning.Coverage`)."""

    index: int
    pick: str
    """The spec's expression (``(n_channels + 2047) // 2048``)."""
    coverage: Coverage
    values: tuple[int, ...]
    """The file's instantiations the kernel's static_asserts admit (0 not included)."""
    relation: str
    """The constraint: ``K == 0 or K * step(block) >= (pick) * step(original block)``."""


@dataclass(frozen=True)
class ConstSite(Site):
    const: PerfConstant
    knob: str
    pair: BlockItems | None = None
    """The block size and items per thread this constant is one of (:func:`_block_items_pair`),
    decided on the target as given: the first of the two to be rewritten changes the mapping."""
    per_shape: PerShape | None = None


class Expose(Pass[ConstSite]):
    name = "expose"
    phase = Phase.HINTS
    summary = "lift the compile-time performance constants a kernel already has into knobs"
    description = __doc__ or ""
    knobs = (
        KnobSpec(
            "<NAME>",
            "powers of two within 4x of the current value (block sizes: 32 .. 1024)",
            "the current value",
            "the constant's value (template parameter, #define, constexpr or launch literal)",
        ),
    )
    options = (
        Option("names", "strs", (), "constants to expose (NUM_THREADS|BLOCK_MAX); default: all found"),
        Option("spread", "int", 4, "domain: powers of two within this factor of the current value"),
    )

    def sites(self, target: Target) -> Iterator[ConstSite | Skip]:
        module = target.module
        fn = target.kernel
        launchers = _launchers(module, fn)
        wanted = {n.upper() for n in self.list_option("names")}
        refused: set[str] = set()
        consts = [_spec_bound(target, c) for c in perf_constants(module) if _relevant(c, fn, launchers)]
        # Device-side constants first, so that host copies of a refused one are refused too.
        consts.sort(key=lambda c: (not fn.span.contains(c.span) and c.kind != "template-int", c.span.start))
        tied = {
            lit.start_byte
            for c in consts
            if c.kind == "template-int" and c.value is not None
            for site in target.launches
            for lit in _tied_literals(module, site.config, c.value)
        }
        # A launch literal written twice in the expression it sets (``d < 1024 ? d : 1024``) is
        # one knob; its copies follow it, or are refused with it.
        copies: dict[int, tuple[str, str | None]] = {}
        for c in consts:
            knob = _knob_name(module, c)
            if c.kind == "launch-literal" and c.span.start in tied:
                yield Skip(f"{c.value} follows the kernel's template parameter of that value", knob, c.span)
                continue
            if c.span.start in copies:
                first, why = copies[c.span.start]
                text = f"{c.value} follows {first}, the same literal in the same expression"
                yield Skip(text if why is None else f"{text}, which is refused: {why}", knob, c.span)
                continue
            if wanted and knob not in wanted and c.name.upper() not in wanted:
                continue
            per_shape = _per_shape_items(target, c, knob)
            if isinstance(per_shape, PerShape):
                yield ConstSite(knob, c.span, c, knob, None, per_shape)
                continue
            reason = self._refusal(target, c, refused) if per_shape is None else per_shape
            if c.kind == "launch-literal":
                for lit in _copies(module, c)[1:]:
                    copies[lit.start_byte] = (knob, reason)
            if reason is None:
                reason = self._domain(target, c, knob)[1]
            if reason is not None:
                refused.add(c.name)
                yield Skip(reason, c.name if c.kind != "launch-literal" else knob, c.span)
                continue
            pair = _block_items_pair(target) if _in_pair(target, c) else None
            yield ConstSite(knob, c.span, c, knob, pair)

    def _refusal(self, target: Target, c: PerfConstant, refused: set[str]) -> str | None:
        module = target.module
        body = syntax.function_node(module, target.kernel)
        template_block = _template_block(target)
        if c.kind == "template-int" and c.name == template_block and not _block_tied(target, c):
            return (
                f"{c.name} is the launch's block size (every launch passes it as the block too): "
                "block-size makes it the knob BLOCK_X, the template argument and the block in step"
            )
        if c.kind == "launch-literal" and template_block is not None:
            return (
                f"{c.value} sets the block of a launch that passes the same size as the template "
                f"parameter {template_block}: block-size moves both, a knob here would split them"
            )
        if c.value is None:
            return _unbound_refusal(target, c)
        if c.kind == "launch-literal":
            line = _grid_repeats(target, c)
            if line is not None:
                return (
                    f"the grid repeats the block's {c.value} ({line}): a knob for the block alone "
                    "would leave the grid sized for the old block (elements left unwritten); "
                    "block-size moves both"
                )
        if "WARP" in c.name.upper() and "WARPS" not in c.name.upper():
            return f"{c.name} is the warp size, fixed by the hardware"
        unfollowed = _launch_the_spec_cannot_follow(target, c)
        if unfollowed is not None:
            return unfollowed
        value_text = module.text(c.span)
        if target.placeholders_in(value_text):
            return f"{c.name} is already a knob"
        if "sizeof" in _declaration_text(module, c):
            return f"{c.name} is computed from sizeof: a pack width tied to the element type"
        if c.name in refused:
            return f"{c.name} must stay equal to the device-side {c.name}, which is not exposed"
        if c.kind in ("constexpr", "define"):
            bases = derived_from(module, c.name, c.span)
            if bases:
                return (
                    f"{c.name} is computed from {', '.join(bases)} ({value_text.strip()}): it follows "
                    f"{bases[0]}, so it is no knob of its own (expose {bases[0]} instead)"
                )
        if c.kind in ("constexpr", "define"):
            selects = self._selects_what_is_computed(target, body, c)
            if selects is not None:
                return selects
            problem = sizes_the_problem(module, target.kernel.name, c.name)
            if problem is not None:
                return (
                    f"{c.name} sizes the problem, not how it is solved: {problem}; the buffers and "
                    "arguments the spec fixes would not follow a knob (elements unwritten or read past)"
                )
        mapping = _thread_mapping_use(module, body, c.name)
        if mapping is not None:
            return (
                f"{c.name} maps threads to work ({mapping}); changing it needs matching shuffle "
                "masks and index math"
            )
        if c.value is not None and _sets_block(target, c):
            unrolled = unrolled_for_block(module, target.kernel, c.value)
            if unrolled is not None:
                return (
                    f"{unrolled} is written for a block of {c.value} threads, which {c.name} sets (a "
                    "reduction unrolled by hand): another value would drop partials or read past them"
                )
        if c.kind == "launch-literal" and c.value == 32:
            shuffle = warp_sized_callees(module, target.kernel)
            if shuffle is not None:
                return (
                    f"32 is the warp width the kernel's shuffles assume ({shuffle}: whole warps "
                    "along x, blockDim.x == warpSize)"
                )
            # FlashInfer's norms: ``constexpr uint32_t warp_size = 32`` in the kernel, the
            # shuffles in a header's ``math::shfl_xor_sync``; the launcher's 32s are lanes
            # (``dim3 nthrs(32, num_warps)``, ``num_warps = ceil_div(block_size, 32)``).
            # Session 9 measured NUM_WARPS=128 (a block x of 128): 3 wrong results.
            warp = assumes_warp_x(module, target.kernel)
            if warp is not None:
                return f"32 is the warp width the kernel assumes ({warp}): a warp's lanes, not a choice"
        if c.kind == "template-int":
            return self._template_refusal(target, c) or self._selects_what_is_computed(target, body, c)
        return None

    def _selects_what_is_computed(self, target: Target, body: ts.Node, c: PerfConstant) -> str | None:
        """Why ``c`` selects *what* the kernel computes (not how fast), or None."""
        why = "it selects what is computed, not how fast, and the spec and the reference depend on it"
        if c.kind == "template-int":
            index = next(i for i, p in enumerate(target.kernel.template_params) if p.name == c.name)
            if index < len(target.template_args) and spec_selected(target.template_args[index]):
                return f"{c.name} is set by the spec from {target.template_args[index]}: {why}"
        if target.mapping is not None and target.mapping.origin == "spec":
            # A spec's launch names its shape variables; a file's launcher also names constants.
            var = named_like_a_variable(c.name, _shape_variables(target.mapping))
            if var is not None:
                return f"{c.name} is the shape variable {var} of the launch mapping: {why}"
            if target.mapping.var(c.name) is not None and c.name not in _launch_reads(target.mapping):
                # cuda-samples saxpy: ``const size_t n = 10485760;`` in main() is the spec's
                # ``[vars] n``, read by the arguments' extents, not by the grid or the block
                what = "a spec [vars] entry the launch does not read (a size the arguments use)"
                return f"{c.name} is {what}: {why}"
        product = sizes_the_data(target.module, body, target.kernel, c.name)
        if product is not None:
            return f"{c.name} sizes the data ({product}): {why}"
        return None

    def _domain(self, target: Target, c: PerfConstant, knob: str) -> tuple[tuple[int, ...], str | None]:
        """The knob's values, less those the kernel's ``static_assert``s reject; or a refusal."""
        assert c.value is not None
        block_like = bool(_BLOCKISH.search(c.name) or _BLOCKISH.search(knob)) or c.kind == "launch-literal"
        spread = max(2, self.int_option("spread"))
        values = (
            around(c.value, 32, 1024, spread)
            if block_like and c.value >= 32
            else around(c.value, 1, max(c.value * spread, 1), spread)
        )
        if c.kind == "launch-literal":
            return tuple(values), None
        if _vector_bound(target, c):
            # The launcher derives the width (FlashInfer: gcd(16 / sizeof(T), d)) and the spec
            # binds the widest it picks: a wider vector needs an alignment and a divisibility of
            # the row that nothing established, a narrower one divides whatever the wider did.
            values = tuple(v for v in values if v <= c.value)
        scope = target.kernel.span if c.kind == "template-int" else None
        kept, refusal = allowed_by_asserts(target.module, c.name, values, _type_arguments(target), scope)
        if refusal is not None:
            return (), refusal
        if len(kept) < len(values) and c.value not in kept:
            return (), f"the kernel's static_assert rejects {c.name} = {c.value}, its own value"
        if len(kept) <= 1:
            return (), f"the kernel's static_assert allows {c.name} only its value {c.value}"
        return kept, None

    def _template_refusal(self, target: Target, c: PerfConstant) -> str | None:
        index = next(i for i, p in enumerate(target.kernel.template_params) if p.name == c.name)
        sites = target.launches
        values = {site.template_args[index] for site in sites if index < len(site.template_args)}
        if len(values) > 1:
            shown = ", ".join(sorted(values, key=lambda v: (len(v), v)))
            return (
                f"{c.name} takes different values at its {len(sites)} launch sites ({shown}): it "
                "selects behaviour, not a performance setting"
            )
        taken = _vector_bound(target, c) or _in_pair(target, c)
        if values and int_literal(next(iter(values))) is None and not taken:
            return f"{c.name} is set to {next(iter(values))!r} at its launch, not an integer literal"
        if not sites:
            arg = target.template_args[index] if index < len(target.template_args) else ""
            if int_literal(arg) is None:
                return f"{c.name} is {arg or 'not set'} in the name expression, not an integer literal"
        return None

    def rewrite(self, site: ConstSite, rw: Rewriter) -> None:
        c = site.const
        if site.per_shape is not None:
            _rewrite_per_shape(site, site.per_shape, rw)
            return
        assert c.value is not None
        values, _ = self._domain(rw.target, c, site.knob)
        macro = rw.knob(site.knob, values, c.value, f"{_kind_text(c)} {c.name} (was {c.value})")
        if c.kind != "launch-literal" and set(values) != set(_unfiltered(self, c, site.knob)):
            rw.note(f"the kernel's static_assert limits {site.knob} to {{{', '.join(map(str, values))}}}")
        if c.kind == "template-int":
            index = next(i for i, p in enumerate(rw.target.kernel.template_params) if p.name == c.name)
            tied: list[str] = []
            for launch in rw.target.launches:
                rw.replace(launch.template_arg_spans[index], macro)
                for lit in _tied_literals(rw.target.module, launch.config, c.value):
                    rw.replace_bytes(lit.start_byte, lit.end_byte, macro)
                    tied.append(f"line {lit.start_point[0] + 1}")
            rw.set_template_arg(index, "{" + site.knob + "}")
            pair = site.pair
            if pair is not None and c.name == pair.block and rw.mapping is not None:
                new_mapping, places = replace_in_block(rw.mapping, c.value, site.knob)
                if not places:
                    raise Refuse(f"the spec's block {c.value} is not written where {site.knob} could follow")
                rw.set_mapping(new_mapping)
                rw.note(f"the spec's block {c.value} follows {site.knob} ({', '.join(places)})")
            if pair is not None and pair.block is None and c.name == pair.items and rw.mapping is not None:
                derived = f"({pair.product} // {site.knob})"
                new_mapping, places = replace_in_block(rw.mapping, pair.block_value, derived)
                if not places:
                    raise Refuse(f"the spec's block {pair.block_value} is not written where it could follow")
                rw.set_mapping(new_mapping)
                rw.note(f"the spec's block {pair.block_value} is {derived} ({', '.join(places)})")
            if pair is not None and c.name in (pair.block, pair.items):
                other = pair.items if c.name == pair.block else pair.block
                if other is None or _template_index(rw.target, other) < index:
                    for text in pair.constraints:
                        rw.constraint(text)
                    rw.note(
                        f"{' and '.join(pair.constraints)}: a block's work stays as bound, so the grid "
                        "and the tiles the kernel derives from it stay right"
                    )
            if tied:
                rw.note(f"the launch's literal {c.value} ({', '.join(tied)}) follows {site.knob}")
                if rw.mapping is not None:
                    rw.set_mapping(replace_literal(rw.mapping, c.value, site.knob)[0])
        elif c.kind == "launch-literal":
            # Every copy of the literal in the expression it sets, so that the launcher ships
            # the mapping ktx measures (min(d, BLOCK), not d < BLOCK ? d : 1024).
            lits = _copies(rw.target.module, c)
            for lit in lits:
                rw.replace_bytes(lit.start_byte, lit.end_byte, macro)
            if len(lits) > 1:
                cols = ", ".join(f"col {lit.start_point[1] + 1}" for lit in lits)
                rw.note(f"all {len(lits)} copies of {c.value} in that expression ({cols}) follow {site.knob}")
        else:
            rw.replace(c.span, macro)
        for text in _shared_extent_constraints(rw.target, c, site.knob):
            rw.constraint(text)
            rw.note(
                f"{text}: the shared array it sizes takes an entry per thread or warp of the launch "
                "(launch_block_x, _y: the block as the pipeline ends)"
            )
        mapping = rw.mapping
        if mapping is None:
            return
        if c.kind in ("constexpr", "define") and mapping.var(c.name) is not None:
            renamed = mapping.with_var(c.name, c.name)
            rw.set_mapping(_rename(renamed, c.name, site.knob) if c.name != site.knob else renamed)
            return
        if c.kind == "template-int" or not _launch_use(c):
            return
        if c.kind == "launch-literal":  # the block's expressions only, as in the source
            new, places = replace_in_block(mapping, c.value, site.knob)
            new, rounded = _grid_follows(mapping, new, c.value, site.knob)
            places = rounded + places
        else:
            axes = _block_axes(mapping, c.value)
            if len(axes) == 1:  # the block's axis and the grid's rounding by it on that axis
                new, places = follow_block_axis(mapping, axes[0], c.value, site.knob)
            else:
                new, places = replace_literal(mapping, c.value, site.knob)
        if places:
            rw.set_mapping(new)
            rw.note(f"launch mapping: {c.value} -> {site.knob} in {', '.join(places)}")
        else:
            rw.note(
                f"the launch mapping has no literal {c.value}: {site.knob} changes the file's launcher "
                "only (give the mapping its vars, ktx.pipeline.mapping_from_spec)"
            )


def _spec_bound(target: Target, c: PerfConstant) -> PerfConstant:
    """``c`` with the value the target binds (the spec's ``template_args``) when it is the
    kernel's vector width (:func:`ktx.ir.facts.tuning.tuning_params`, role ``vector``) and the
    file's launches pass it no integer: the launcher picks it by a name (FlashInfer's
    ``DISPATCH_ALIGNED_VEC_SIZE(vec_size, VEC_SIZE, {...})``), which the knob replaces, as the
    dispatch table replaces the launcher's pick per shape."""
    if c.kind != "template-int" or c.kernel != target.kernel.name or c.value is not None:
        return c
    pair = _block_items_pair(target)
    if pair is not None and c.name in (pair.block, pair.items):
        value = pair.block_value if c.name == pair.block else pair.items_value
        return dataclasses.replace(c, value=value)
    tp = _tuning(target).get(c.name)
    if tp is None or tp.role != "vector" or tp.spec_selected or tp.value is None or tp.value < 2:
        return c
    if not tp.adapts:
        return c  # DeepSpeed's granularity: the launch fixes what it covers, and would have to follow
    return dataclasses.replace(c, value=tp.value)


def _block_items_pair(target: Target) -> BlockItems | None:
    """The kernel's block-size and items-per-thread template parameters, when the file's launches
    give them no integer and the spec binds both (bitsandbytes' ``kDequantizeBlockwise<T, 512,
    64, 8, ...>``, DeepSpeed's ``dequantize_kernel<..., unroll, threads>``).

    The block one is the spec's launch block: its value is the block the spec launches (1-D, a
    literal), and no other template argument has that value. Exactly one other is items per
    thread (:mod:`ktx.ir.facts.tuning`). Their product, the work of one block, stays as bound
    (a constraint): the grid, and every tile the kernel derives from that product (``TILE_SIZE``),
    stay right, while the block trades threads for items per thread."""
    mapping = target.mapping
    if mapping is None or mapping.origin != "spec":
        return None
    params = [t for t in _tuning(target).values() if not t.spec_selected and t.value is not None]
    block = [int_literal(b.strip()) for b in mapping.resolved().block]
    if not block or block[0] is None or any(b != 1 for b in block[1:]):
        return None
    threads = block[0]
    ints = [int_literal(a) for a in target.template_args]
    blocks = [t for t in params if t.value == threads and ints.count(threads) == 1]
    items = [t for t in params if t.role == "items"]
    if len(items) != 1 or any(b.name == items[0].name for b in blocks) or len(blocks) > 1:
        return None
    i = items[0]
    assert i.value is not None
    if _launched_with_value(target, i.index):
        return None  # the file's launches give it a value: the usual rules apply
    if not blocks:
        # No template argument is the block: the spec's literal block is then a tile the items
        # divide, when exactly one template argument has the value block x items.
        tiles = [k for k, v in enumerate(ints) if v == threads * i.value and k != i.index]
        if len(tiles) != 1 or target.kernel.template_params[tiles[0]].kind != "value":
            return None
        return BlockItems(None, threads, i.name, i.value)
    b = blocks[0]
    assert b.value is not None
    if _launched_with_value(target, b.index):
        return None
    return BlockItems(b.name, b.value, i.name, i.value)


def _launched_with_value(target: Target, index: int | None) -> bool:
    """Whether a launch in the file writes an integer for template parameter ``index``."""
    return index is not None and any(
        index < len(site.template_args) and int_literal(site.template_args[index]) is not None
        for site in target.launches
    )


def _in_pair(target: Target, c: PerfConstant) -> bool:
    pair = _block_items_pair(target) if c.kind == "template-int" else None
    return pair is not None and c.name in (pair.block, pair.items)


def _unbound_refusal(target: Target, c: PerfConstant) -> str:
    """Why a constant without a value in the file stays as it is, saying what the spec binds."""
    tp = _tuning(target).get(c.name) if c.kind == "template-int" else None
    if tp is not None and tp.spec_selected:
        return f"{c.name} is computed per shape by the spec: the launcher's pick, which the spec makes"
    if tp is None or tp.value is None:
        return f"{c.name} has no integer value ktx can compute"
    mapping = target.mapping
    spec_var = mapping is not None and mapping.origin == "spec" and mapping.var(c.name) is not None
    if spec_var and mapping is not None and c.name not in _launch_reads(mapping):
        # DeepSpeed moe_gather's N_TOP_K: scores and mapped_slots are [tokens, N_TOP_K]
        return (
            f"{c.name} (= {tp.value}) is a spec [vars] entry the launch does not read: a size the "
            "arguments' extents use, so another value lays the data out differently (what is "
            "computed, not how fast)"
        )
    if tp.role == "vector":
        return (
            f"{c.name} (= {tp.value}, the spec's) sets a vector width whose coverage the launch fixes "
            "(no loop steps by it, no run-time extent is divided by it): the grid would have to follow"
        )
    return (
        f"{c.name} (= {tp.value}, the spec's) sets the {_ROLE_WORDS[tp.role]}, and the file's launches give "
        "it no value: what each value covers and the launch that goes with it are the launcher's, which ktx "
        "cannot read"
    )


_ROLE_WORDS = {
    "block": "block size",
    "items": "items per thread",
    "rows": "rows per block",
    "vector": "vector width",
}


def _vector_bound(target: Target, c: PerfConstant) -> bool:
    """Whether ``c`` is a vector width whose value is the target's binding (see :func:`_spec_bound`)."""
    if c.kind != "template-int" or c.kernel != target.kernel.name:
        return False
    pair = _block_items_pair(target)
    if pair is not None and c.name in (pair.block, pair.items):
        return False
    tp = _tuning(target).get(c.name)
    if tp is None or tp.role != "vector" or tp.spec_selected or tp.value != c.value or not tp.adapts:
        return False
    index = next(i for i, p in enumerate(target.kernel.template_params) if p.name == c.name)
    return all(
        index < len(site.template_args) and int_literal(site.template_args[index]) is None
        for site in target.launches
    )


def _template_index(target: Target, name: str) -> int:
    return next(i for i, p in enumerate(target.kernel.template_params) if p.name == name)


def _tuning(target: Target) -> dict[str, TuningParam]:
    params = tuning_params(target.module, target.kernel, target.template_args)
    return {t.name: t for t in params if t.kind == "template-int"}


def _template_block(target: Target) -> str | None:
    """The template parameter that is the kernel's ``blockDim.x`` at every launch, or None."""
    aliases = target.module.facts(target.kernel, target.template_args).launch.block_aliases
    return next((a.name for a in aliases if a.kind == "template"), None)


def _block_tied(target: Target, c: PerfConstant) -> bool:
    """Whether every launch writes ``c``'s one value as its block's literal too
    (``k<256><<<g, 256>>>``), so that expose moves the block with the template argument; not
    when the launcher picks among values or the block is a ``dim3`` local (block-size's case)."""
    if c.value is None or not target.launches:
        return False
    index = next(i for i, p in enumerate(target.kernel.template_params) if p.name == c.name)
    env = {m.name: m.int_value for m in target.module.macros if m.int_value is not None}
    return all(
        index < len(site.template_args)
        and eval_int_text(site.template_args[index], dict(env)) == c.value
        and int_literal(target.module.text(site.block).strip()) == c.value
        for site in target.launches
    )


def _copies(module: Module, c: PerfConstant) -> list[ts.Node]:
    """A launch literal and its copies in the expression it sets (the literal first)."""
    assert c.value is not None
    return region_literals(module, c.span, c.uses[0].span, c.value)


def _unfiltered(p: Expose, c: PerfConstant, knob: str) -> tuple[int, ...]:
    """The domain before the static_asserts (for the note saying they narrowed it)."""
    assert c.value is not None
    block_like = bool(_BLOCKISH.search(c.name) or _BLOCKISH.search(knob))
    spread = max(2, p.int_option("spread"))
    if block_like and c.value >= 32:
        return tuple(around(c.value, 32, 1024, spread))
    return tuple(around(c.value, 1, max(c.value * spread, 1), spread))


def _type_arguments(target: Target) -> Mapping[str, str]:
    """Template type parameters and the types they are instantiated with (for ``sizeof(T)``)."""
    params = target.kernel.template_params
    return {
        p.name: arg
        for p, arg in zip(params, target.template_args, strict=False)
        if p.kind == "type" and "{" not in arg
    }


def _shape_variables(mapping: LaunchMapping) -> set[str]:
    """The free names of a launch mapping: its shape variables (not its vars, not functions)."""
    names: set[str] = set()
    for text in (*mapping.grid, *mapping.block, mapping.shared, *(e for _, e in mapping.vars)):
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError:
            continue
        calls = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        names |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in calls}
    return names - {name for name, _ in mapping.vars}


def _grid_follows(
    before: LaunchMapping, after: LaunchMapping, value: int, name: str
) -> tuple[LaunchMapping, list[str]]:
    """``after`` (the block's ``value`` replaced by ``name``) with each grid axis whose block
    changed following it where that axis rounds by ``value`` (``(50000 + 256 - 1) // 256``).

    Why: :func:`_grid_repeats` has refused a grid that writes the block's value as a literal of
    its own, so a grid that rounds by it here is the file's grid computed from the block's
    variable (cuda-samples vectorAdd: ``blocksPerGrid = (n + threadsPerBlock - 1) /
    threadsPerBlock``), which the spec wrote out: it must follow the block, or a smaller block
    leaves elements unwritten (session 9: THREADS_PER_BLOCK=64/128 failed verification)."""
    grid = list(after.grid)
    places = []
    for axis, (old, new) in enumerate(zip(before.block, after.block, strict=False)):
        if old == new or axis >= len(grid):
            continue
        rounded = grid_rounding(grid[axis], value, name)
        if rounded is not None and rounded != grid[axis]:
            grid[axis] = rounded
            places.append(f"grid[{axis}]")
    return dataclasses.replace(after, grid=tuple(grid)), places


def replace_in_block(mapping: LaunchMapping, value: int, name: str) -> tuple[LaunchMapping, list[str]]:
    """Replace the literal ``value`` by ``name`` in the block's expressions and the vars they
    read, not in the grid or the shared bytes: a launch literal of the source sets the block,
    and the source's grid keeps its own literals, so the mapping must too."""
    reads: set[str] = set()
    todo = list(mapping.block)
    defs = dict(mapping.vars)
    while todo:
        for node in ast.walk(ast.parse(todo.pop().strip(), mode="eval")):
            if isinstance(node, ast.Name) and node.id in defs and node.id not in reads:
                reads.add(node.id)
                todo.append(defs[node.id])
    block_only = LaunchMapping(
        ("1",), mapping.block, "0", tuple((n, e) for n, e in mapping.vars if n in reads), mapping.origin
    )
    new, places = replace_literal(block_only, value, name)
    changed = dict(new.vars)
    result = LaunchMapping(
        mapping.grid,
        new.block,
        mapping.shared,
        tuple((n, changed.get(n, e)) for n, e in mapping.vars),
        mapping.origin,
        mapping.notes,
    )
    return result, places


def _rename(mapping: LaunchMapping, old: str, new: str) -> LaunchMapping:
    """The mapping with the name ``old`` (a var just turned into a knob) spelled ``new``."""
    env = {old: new}
    return LaunchMapping(
        tuple(substitute(g, env) for g in mapping.grid),
        tuple(substitute(b, env) for b in mapping.block),
        substitute(mapping.shared, env),
        tuple((n, substitute(e, env)) for n, e in mapping.vars),
        mapping.origin,
        mapping.notes,
    )


def _tied_literals(module: Module, config: Span, value: int) -> list[ts.Node]:
    """Integer literals equal to ``value`` in a launch's ``<<<...>>>``: the same quantity as a
    template parameter of that value (``k<T, 256><<<n / 256, 256>>>``), so they change with it."""
    node = module.node(config)
    return [
        n
        for n in syntax.walk(node)
        if n.type == "number_literal"
        and config.start <= n.start_byte < config.end
        and int_literal(syntax.text(module, n)) == value
    ]


def _sets_block(target: Target, c: PerfConstant) -> bool:
    """Whether ``c`` is the block size of a launch of the kernel: a launch literal, or a name
    written in a launch's block (``<<<NUM_OF_BLOCKS, NUM_OF_THREADS>>>``)."""
    if c.kind == "launch-literal":
        return True
    module = target.module
    return any(c.name in re.findall(r"\w+", module.text(site.block)) for site in target.launches)


def _launch_use(c: PerfConstant) -> bool:
    return any(u.kind == "launch" for u in c.uses)


def _kind_text(c: PerfConstant) -> str:
    return {
        "template-int": "template parameter",
        "define": "#define",
        "constexpr": "constexpr",
        "launch-literal": "launch literal for",
    }[c.kind]


def _grid_repeats(target: Target, c: PerfConstant) -> str | None:
    """Where the grid of the launch whose block ``c`` (a launch literal) sets repeats its value,
    ``line N``, or None. DeepSpeed's ``dim3 block_dims(1024); dim3 grid_dims((n - 1) / 1024 + 1)``:
    exposing the block's 1024 alone gave BLOCK_DIMS=256 a grid of n / 1024 blocks (session 8:
    every such candidate failed verification)."""
    module = target.module
    for site in target.launches:
        for comp in launch_dims(module, site, "grid").components:
            if comp.start_byte <= c.span.start < comp.end_byte:
                return None  # the literal is the grid's own
            local = local_value(module, site, comp)
            node = local.value if local is not None and local.value is not None else comp
            if node.start_byte <= c.span.start < node.end_byte:
                return None
            if str(c.value) in re.split(r"[^\w]+", syntax.text(module, node)):
                return f"line {site.span.line}"
    return None


def _launch_reads(mapping: LaunchMapping) -> set[str]:
    """The names the grid, the block and the shared bytes read, through the vars they read."""
    defs = dict(mapping.vars)
    todo = [*mapping.grid, *mapping.block, mapping.shared]
    seen: set[str] = set()
    while todo:
        for node in ast.walk(ast.parse(todo.pop().strip(), mode="eval")):
            if isinstance(node, ast.Name) and node.id not in seen:
                seen.add(node.id)
                if node.id in defs:
                    todo.append(defs[node.id])
    return seen


def _block_axes(mapping: LaunchMapping, value: int) -> list[int]:
    """The axes of the mapping's block whose expression holds the integer literal ``value``."""
    found = []
    for axis, text in enumerate(mapping.block):
        tree = ast.parse(text.strip(), mode="eval")
        if any(
            isinstance(n, ast.Constant) and type(n.value) is int and n.value == value for n in ast.walk(tree)
        ):
            found.append(axis)
    return found


def _feeds(module: Module, name: str) -> set[str]:
    """``name`` and the ``#define``s and constants computed from it, transitively
    (``NUM_THREADS`` for ``#define NUM_THREADS (NUM_WARPS * WARP_SIZE)`` and ``NUM_WARPS``)."""
    values = [(m.name, m.value) for m in module.macros] + [(k.name, k.value) for k in module.constants]
    found = {name}
    grew = True
    while grew:
        grew = False
        for other, text in values:
            if other not in found and found & set(re.findall(r"\w+", text)):
                found.add(other)
                grew = True
    return found


def _launch_the_spec_cannot_follow(target: Target, c: PerfConstant) -> str | None:
    """Why a ``#define``/``constexpr`` that sets the launch cannot be a knob under a spec's
    ``[launch]``, or None.

    The spec's launch is what ktx runs, not the file's launcher. A constant the launcher reads,
    directly or through another (exllamav2 rms_norm's ``NUM_WARPS`` through ``NUM_THREADS``, the
    block), changes the kernel but not the launch unless the spec names it (a ``[vars]`` entry)
    or writes its value where the pass can replace it: session 8's run measured such candidates
    (rms_norm NUM_WARPS=64 with a block of 1024; DeepSpeed logits_gather's GRANULARITY, which the
    spec's grid writes as ``512 * 4``), and they failed to build or to verify."""
    mapping = target.mapping
    if mapping is None or mapping.origin != "spec" or c.kind not in ("constexpr", "define"):
        return None
    if c.value is None or mapping.var(c.name) is not None:
        return None
    module = target.module
    names = _feeds(module, c.name)
    launchers = _launchers(module, target.kernel)
    read = {n for f in launchers for n in re.findall(r"\w+", module.text(f.span))} & names
    direct = _launch_use(c)
    if not read and not direct:
        return None
    through = sorted(read - {c.name})
    axes = _block_axes(mapping, c.value)
    if direct and not through and len(axes) > 1:
        return (
            f"{c.name} sets the launch, and the spec's block writes its value {c.value} on "
            f"{len(axes)} axes: which one is {c.name} is not written (exllamav2 quantize_kernel's "
            f"BLOCKSIZE_X and BLOCKSIZE_Y, both 32); name it in the spec's [vars] and use it in [launch]"
        )
    if direct and not through and replace_literal(mapping, c.value, c.name)[1]:
        return None  # the spec writes its value: the mapping follows the knob
    via = f" (through {', '.join(through)})" if through else ""
    return (
        f"{c.name} sets the launch{via}, and the spec's [launch] has no {c.name} to follow it"
        f"{'' if through else f' and no literal {c.value}'}: a candidate would change the kernel, not "
        f'its launch; name it in the spec\'s [vars] ({c.name} = "{c.value}") and use it in [launch]'
    )


def _launchers(module: Module, fn: Function) -> list[Function]:
    names = {s.function for s in module.launches_of(fn.name)}
    return [f for f in module.functions if f.name in names]


def _relevant(c: PerfConstant, fn: Function, launchers: list[Function]) -> bool:
    if c.kind in ("template-int", "launch-literal"):
        return c.kernel == fn.name
    scopes = [fn.span, *(f.span for f in launchers)]
    return any(s.contains(u.span) for u in c.uses for s in scopes)


def _declaration_text(module: Module, c: PerfConstant) -> str:
    """The text that defines ``c``'s value (the whole declaration for constexpr and #define)."""
    if c.kind == "constexpr":
        for k in module.constants:
            if k.value_span == c.span or k.value_span.start == c.span.start:
                return module.text(k.span)
    if c.kind == "define":
        for m in module.macros:
            if m.value_span is not None and m.value_span.start == c.span.start:
                return m.value
    return module.text(c.span)


def _thread_mapping_use(module: Module, body: ts.Node, name: str) -> str | None:
    """``threadIdx.x / NAME``-like uses of ``name`` in the kernel, as text, or None."""
    for n in syntax.walk(body):
        if n.type != "binary_expression":
            continue
        op = n.child_by_field_name("operator")
        left = n.child_by_field_name("left")
        right = n.child_by_field_name("right")
        if op is None or left is None or right is None:
            continue
        if syntax.text(module, op) not in ("/", "%"):
            continue
        if syntax.text(module, right).strip() == name and syntax.uses_builtin(module, left, "threadIdx"):
            return f"{syntax.text(module, n)} at line {n.start_point[0] + 1}"
    return None


def _knob_name(module: Module, c: PerfConstant) -> str:
    if c.kind != "launch-literal":
        return _upper_snake(c.name)
    node = module.node(c.span)
    var = _enclosing_variable(module, node)
    base = _upper_snake(var) if var else "BLOCK"
    call = node.parent.parent if node.parent is not None and node.parent.type == "argument_list" else None
    if call is not None and call.type == "call_expression":
        callee = call.child_by_field_name("function")
        name = syntax.text(module, callee) if callee is not None else ""
        if name.endswith("min"):
            return f"{base}_MAX"
        if name.endswith("max"):
            return f"{base}_MIN"
    return base


def _upper_snake(name: str) -> str:
    """``kMaxBlocks`` -> ``MAX_BLOCKS``, ``num_threads`` -> ``NUM_THREADS``, ``VEC`` -> ``VEC``."""
    if re.match(r"k[A-Z]", name):
        name = name[1:]
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return re.sub(r"[^A-Z0-9_]", "_", name.upper())


def _enclosing_variable(module: Module, node: ts.Node) -> str | None:
    current: ts.Node | None = node
    while current is not None and current.type not in ("init_declarator", "function_declarator"):
        if current.type in ("expression_statement", "compound_statement"):
            return None
        current = current.parent
    if current is None:
        return None
    name = current.child_by_field_name("declarator")
    return syntax.text(module, name) if name is not None and name.type == "identifier" else None


def _per_shape_expr(arg: str) -> str | None:
    """The inside of a spec's ``{expr}`` template argument, or None."""
    text = arg.strip()
    inner = text[1:-1].strip()
    if not (text.startswith("{") and text.endswith("}")) or not inner or "{" in inner or "}" in inner:
        return None
    return inner


def _per_shape_items(target: Target, c: PerfConstant, knob: str) -> PerShape | str | None:
    """The launcher's per-shape items count as a knob (:class:`PerShape`), the reason it cannot
    be one (str), or None when ``c`` is no items count the spec picks per shape.

    Why this is sound: the fact :func:`ktx.ir.facts.tuning.items_coverage` shows every loop the
    count bounds steps the block over the data and skips what lies past it, so a count covers
    the data when it covers what the spec's pick covers; the values are those the file compiles
    (its dispatch branches), less what the kernel's ``static_assert``s reject."""
    fn = target.kernel
    if c.kind != "template-int" or c.kernel != fn.name or c.value is not None:
        return None
    tp = _tuning(target).get(c.name)
    if tp is None or not tp.spec_selected or tp.index is None or tp.index >= len(target.template_args):
        return None
    pick = _per_shape_expr(target.template_args[tp.index])
    if pick is None:
        return None
    if re.fullmatch(r"[A-Za-z_]\w*", pick):
        return (
            f"{c.name} is the spec's shape variable {pick} ({{{pick}}} in template_args): it selects "
            "what is computed (the shapes name it), not a launcher's pick among equivalent instantiations"
        )
    if tp.role != "items":
        return None
    module = target.module
    cov = items_coverage(module, fn, c.name, target.template_args)
    if cov is None:
        return (
            f"{c.name} is computed per shape by the spec ({pick}), and a loop it bounds is not the "
            "block-strided, guarded pattern (each iteration a step of the block, accesses past the data "
            "skipped): only the spec's pick is known to cover the data"
        )
    found = instantiated_values(module, fn, c.name, target.template_args)
    if not found:
        return f"{c.name} is computed per shape by the spec ({pick}); the file instantiates no integer for it"
    values, why = allowed_by_asserts(module, c.name, found, _type_arguments(target), fn.span)
    if why is not None:
        return why
    if not values:
        return f"the kernel's static_assert rejects every value the file instantiates for {c.name}"
    relation = f"{knob} == 0 or {knob} >= ({pick})"
    if cov.step_threads and target.mapping is not None:
        # The pick covers the row for the block the spec launches now; the knob's count steps by
        # the block the pipeline ends with (launch_block_x: block-size's BLOCK_X when it follows).
        block = target.mapping.resolved().block[0].strip()
        original = substitute(block, {k.name: str(k.default) for k in target.knobs.values()})
        step = cov.step(LAUNCH_BLOCK[0])
        # 0 is the pick, which covers the row at the spec's block only: a smaller block with the
        # pick is excluded here, so block-size may offer it with a larger count.
        relation = f"({knob} if {knob} else ({pick})) * {step} >= ({pick}) * {cov.step(original)}"
    elif cov.step_threads:
        return f"{c.name} steps by the block, and the target has no launch mapping to follow it"
    Expr.parse(relation)
    return PerShape(tp.index, pick, cov, tuple(values), relation)


def _rewrite_per_shape(site: ConstSite, per: PerShape, rw: Rewriter) -> None:
    """The template argument becomes ``{K if K else (pick)}``; the file's launches take
    ``KTX_PICK(K, (their argument))``, so the shipped launcher keeps its pick where K is 0."""
    c = site.const
    name = site.knob
    macro = rw.knob(
        name,
        (0, *per.values),
        0,
        f"template parameter {c.name} per shape (0: the spec's pick {per.pick}, the launcher's)",
    )
    for launch in rw.target.launches:
        if per.index < len(launch.template_arg_spans):
            span = launch.template_arg_spans[per.index]
            rw.replace(span, f"KTX_PICK({macro}, ({rw.target.module.text(span)}))")
    rw.set_template_arg(per.index, "{" + f"{name} if {name} else ({per.pick})" + "}")
    rw.constraint(per.relation)
    cov = per.coverage
    lines = ", ".join(f"line {n}" for n in cov.lines)
    rw.note(
        f"{c.name} counts block-strided steps over {cov.extent}, past it skipped ({lines}): a value "
        f"covers the data where it covers what the spec's pick does ({per.relation}); the values are "
        f"the file's instantiations {{{', '.join(map(str, per.values))}}}"
    )


def _shared_extent_constraints(target: Target, c: PerfConstant, knob: str) -> list[str]:
    """Constraints that keep each ``__shared__`` extent ``c`` sizes at least the entries the
    launch's threads write at their own (or their warp's) id
    (:func:`ktx.ir.facts.tuning.thread_indexed_shared`): ``MAX_WARPS >= ceil_div(launch_block_x,
    32)`` for exllamav2 head_norm's ``sums[MAX_WARPS]`` at ``sums[threadIdx.x / WARP_SIZE]``. The
    block is the launch's as the pipeline ends (:data:`ktx.passbase.LAUNCH_BLOCK`), so the
    constraint follows a block-size knob and the shape the spec's block is computed from. Refuses
    when the extent names what the file gives no integer."""
    module = target.module
    found = thread_indexed_shared(module, target.kernel, c.name)
    if not found:
        return []
    env = {m.name: m.int_value for m in module.macros if m.int_value is not None}
    env.update({k.name: k.int_value for k in module.constants if k.int_value is not None})
    out: list[str] = []
    for ti in found:
        words = dict.fromkeys(re.findall(r"[A-Za-z_]\w*", ti.extent))
        unknown = [w for w in words if w != c.name and w not in env]
        if unknown:
            raise Refuse(
                f"{c.name} sizes __shared__ {ti.array}[{ti.extent}] (line {ti.line}), indexed by the "
                f"thread's id, and {unknown[0]} in that extent has no integer value ktx can compute: no "
                "constraint keeps it large enough for the launch"
            )
        given = {w: knob if w == c.name else str(env[w]) for w in words}
        size = substitute(ti.extent.replace("/", "//"), given)  # C's integer division
        text = f"{size} >= {ti.needed(LAUNCH_BLOCK[ti.axis])}"
        if text not in out:
            out.append(text)
    return out
