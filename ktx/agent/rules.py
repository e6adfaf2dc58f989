"""The rules planner: deterministic choices from the analysis, no network.

Each round it keeps the best pipeline so far and adds **one** pass: the first rule, in a fixed
priority order, that fires on the analysis, names a registered pass that is not in the pipeline,
was not tried on this pipeline before, does not conflict with the pipeline, and (when the loop
probed it) really has a site to rewrite in this kernel. One pass per round keeps every gain
attributable to one decision, and a fixed order makes two runs on the same numbers choose the
same passes.

The rules, highest priority first (each says why in the plan's rationale):

0. ``row-owner`` (a warp or a block of warps takes over each row): a thread walks a whole row
   in unit-step loops with no thread index (neighbouring threads read a row apart), no warp
   cooperation yet, and the shapes are under 50% of speed-of-light;
0b. ``row-registers`` before ``online`` when the online pair is a mean and its squared
    deviations and the later loops can take the row from registers (llm.c's layernorm): one read
    of the row, where the fused pass still makes two;
1. ``online``: a row max, then a sum of ``exp(x - max)`` over the same row, or a sum then the
   squared deviations from its mean (the facts' online pairs), and a shape not compute-bound:
   one pass keeps the running pair, or Welford's (after row-owner, reduced across lanes as one);
   a dependent pair the facts refuse is listed with the reason in the analysis (``dependent
   pairs not fusable``), and the pass's probe quotes it when the planner stops;
2. ``warp-reduce``: a shared-memory tree reduction (a halving loop with ``__syncthreads``);
2b. ``row-registers``: a block's second row loop reloads packs the first loaded (or
    ``const __restrict__`` packs such as the weight), or later scalar loops over a row read the
    elements an earlier one read (llm.c's layernorm), any shape not compute-bound: the row
    stays in registers (knob PACKS) and the weight loads before the reduction. Before
    ``cluster-rows`` and ``split``: it helps every shape (issue 23's hand variant: 1.27x at
    tokens 1024-4096), and ``cluster-rows`` still finds its site on top of it, where after
    ``cluster-rows`` the interleaved loops are no longer row-registers' pair;
3. ``split``: latency-bound shapes that launch fewer blocks than SMs: more blocks per row;
4. ``cluster-rows``: a block reduction through shared memory, and latency-bound shapes under 30%
   of speed-of-light that launch fewer blocks than SMs: the row over a thread-block cluster;
5. ``early-loads``: a reduction (barrier or shuffles) and latency-bound shapes under 30% of
   speed-of-light: the loads of the loop after it are issued before it;
6. ``loads-first``: packed loads, math between them, no reduction, and calls under 20 µs
   under 50% of speed-of-light: every load in flight before the math;
7. ``vectorize`` for one element per thread: no loops, element-by-element accesses: each thread
   takes VEC contiguous elements and the grid shrinks (before coarsen and rows-per-block, which
   would otherwise take the same kernels first);
8. ``rows-per-block``: latency-bound with small one-row blocks or many short blocks: stack rows;
9. ``coarsen``: latency-bound with many short blocks: more items per thread, fewer blocks;
10. ``vectorize``: memory- or latency-bound with element-by-element accesses and no vector types;
11. ``hoist``: expensive loop-invariant math inside a loop;
12. ``block-size``: any shape not compute-bound: threads per block set occupancy and bytes in flight;
13. ``unroll``: latency-bound shapes with loops: more independent loads in flight;
14. ``tile``: the same, by strip-mining the loops into unrolled tiles;
15. ``launch-bounds``: occupancy limited by registers: a minimum of resident blocks caps them;
16. ``expose``: hand-tuned constants (block sizes, pack widths) become knobs;
17. ``cache-hints``: memory-bound with read-only inputs;
18. ``fast-math``: transcendental math, the build is not fast-math already, and the spec's
    error budget leaves room (the candidates are still verified against the original).

Companions (:func:`companions`): a few passes come with the pass a rule chose, in the same round,
where the companion's knob has an "off" value (0: the code as the chosen pass alone writes it), so
the round's space holds the chosen pass alone and the combination, and a run with time for one
round (llm.c's ladder: softmax's budget fitted round 1 only, and online was never tried) still
reaches the combination:

- ``row-owner`` + ``online`` (knob ONLINE) where the online rule fires: the dependent pair is
  fused inside the round that gives the row its owner. For a mean/variance pair only where
  vectorize comes too, and then at ONLINE 0|2 (the Σx, Σx² pair vectorize packs; Welford's
  running shift it refuses); without vectorize that pair waits for row-registers (rule 0b);
- ``row-owner`` + ``vectorize`` (VEC_LOOPS, 1: scalar) where the row loops one thread walks read
  element by element with no vector types (:func:`packable_rows`): once a warp or a block owns
  the row its lanes read contiguous elements. llm.c (session 10): the owned-and-packed configs
  were faster than the hand kernels (softmax 0.77x of online8, 0.93x of v7; layernorm 0.89-0.90x)
  and sat in round 2's space, which softmax's budget never reached. Its probe is not asked: it
  probed the thread-per-row loops, not the owned ones it will pack. Such a round's first configs
  are the companions on (:func:`ktx.agent.search.bundle_steps`) and its budget share counts the
  passes it adds (:func:`ktx.agent.loop.round_share`);
- ``block-size`` + ``row-registers`` on a block per row: a row fits in registers only with 2-4
  packs a thread (issue 23's hand variant at d=4096: 128-256 threads, not the launcher's 512),
  so the thread count becomes a knob of the same round (BLOCK_*=0: the launch as written).

Not companions, on purpose: companions multiply the round's space, and a round gets about a
dozen trials a shape (row-owner's bundle is 84-168 configs; its first steps are what it
measures). ``row-registers`` after ``row-owner`` (7 x 7 configs) and ``cluster-rows`` with
``block-size,row-registers`` (7 x 4 x 4) come in the next round instead; ``cluster-rows`` added
on top of ``row-registers`` builds the wide-row hand variant's ``block-size,cluster-rows,
row-registers`` (the passes' ordering edges run cluster-rows first).

When no rule proposes a pass, the planner still tries every pass whose probe found a site in the
kernel, in the order that composes (:func:`phases`: who owns a row, then vector width, then
block size, then unrolling, then the rest), before it stops. "Tried" is relative to the current
pipeline: a pass that gained nothing on the original is tried again once another pass (say the
row ownership change) has landed, since it then rewrites different code. The stop message lists
every pass that had no site, with the pass's own remark (its Skip reason), and, for a kernel
that reduces rows, why each row pass's rule stayed silent (:func:`row_silence`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ktx.agent.analysis import Analysis
from ktx.agent.catalog import Catalog
from ktx.agent.plan import PassChoice, Plan
from ktx.agent.planner import PlanContext, PlanOutcome, Probe, _names
from ktx.passbase import OptionValue, Phase
from ktx.registry import Registry


def phases(registry: Registry | None = None) -> tuple[tuple[str, ...], ...]:
    """The order in which passes with a site are tried once no rule fires: the registered passes
    grouped by their :attr:`~ktx.passbase.Pass.phase` (ownership, then vector width, then block
    size, then unrolling, then hints), names sorted within a phase. A new pass is placed here by
    that one attribute.

    >>> phases()[0]
    ('cluster-rows', 'row-owner', 'rows-per-block', 'split', 'warp-reduce')
    """
    from ktx.registry import default_registry

    reg = registry if registry is not None else default_registry()
    planned = [c for c in reg if not c.automatic]  # (inline: the pipeline adds it itself)
    return tuple(tuple(sorted(c.name for c in planned if c.phase == phase)) for phase in Phase)


#: Options the planner gives a pass it adds. ``vectorize{tie=true}``: one width for every loop of
#: the kernel. After ``row-owner`` a row kernel holds 3-9 loops (one copy per ownership branch),
#: and one knob per loop multiplied the space past what a round samples: on an H100 (llm.c
#: ladder, 2026-11-25) layernorm's ``row-owner,vectorize`` round got 3-4 trials per shape over
#: seven knobs, and every trial kept the widths at 1. ``peel=true``: rows of odd length (llm.c's
#: softmax at C = 50257) start off a pack boundary in three rows of four, which ran scalar.
OPTIONS: dict[str, tuple[tuple[str, OptionValue], ...]] = {"vectorize": (("tie", True), ("peel", True))}


@dataclass(frozen=True)
class Rule:
    """A pass and the condition under which the rules planner proposes it."""

    pass_name: str
    fires: Callable[[Analysis], str | None]  # the reason, or None when the rule does not fire


def _shapes(names: list[str], limit: int = 3) -> str:
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


_UNIT_STEP = re.compile(r"^\s*(?:\+\+\s*\w+|\w+\s*\+\+|\w+\s*\+=\s*1)\s*$")
_THREAD = re.compile(r"\b(?:threadIdx|blockDim|gridDim|lane|warp)\w*")


def row_loops(a: Analysis) -> list[str]:
    """Loops one thread walks alone: top level, unit step, no thread index in the header.

    These are the loops of a thread-per-row kernel (llm.c's layernorm and softmax v1): each thread
    reads a whole row in sequence, so neighbouring threads read addresses a row apart.
    """
    out = []
    for lp in a.facts.loops:
        parts = lp.header.split("; ")
        step = parts[2] if len(parts) == 3 else ""
        if lp.depth == 0 and not lp.grid_stride and _UNIT_STEP.match(step) and not _THREAD.search(lp.header):
            out.append(lp.label)
    return out


def _row_owner(a: Analysis) -> str | None:
    """A thread per row, sequential row loops, no warp cooperation yet, and too few threads in
    flight for the bytes: a warp (or a block) per row reads each row coalesced."""
    if a.facts.shuffles or a.facts.tree_reductions:
        return None
    loops = row_loops(a)
    if not loops:
        return None
    slow = [s.shape for s in a.shapes if s.bound in ("memory", "latency") and (s.sol_fraction or 0.0) < 0.5]
    if not slow:
        return None
    return (
        f"each thread walks a whole row in {', '.join(loops[:4])} (unit step, no thread index), "
        f"under 50% of speed-of-light at {_shapes(slow)}: a warp or a block per row reads it "
        "coalesced and reduces with shuffles"
    )


def _online(a: Analysis) -> str | None:
    """A row max and then the sum of exp(x - max), or a sum and then the squared deviations from
    its mean, read the row twice: one pass keeps the running (max, rescaled sum) pair or Welford's
    (count, mean, M2). Any shape that is not compute-bound gains the saved read."""
    if not a.facts.online_pairs:
        return None
    hit = [s.shape for s in a.shapes if s.bound in ("memory", "latency")]
    if not hit:
        return None
    welford = all("squared deviations" in p for p in a.facts.online_pairs)
    what = (
        "a row sum and then the squared deviations from its mean"
        if welford
        else "a row max and then a sum of exp(x - max)"
    )
    how = "Welford's running (count, mean, M2)" if welford else "the running (max, rescaled sum) pair"
    return (
        f"{what} ({'; '.join(a.facts.online_pairs[:2])}), "
        f"{a.bound}-bound at {_shapes(hit)}: one pass keeps {how} and reads the row once less"
    )


def _row_registers(a: Analysis) -> str | None:
    """A block reads its row twice around a reduction: keep the first pass's packs in registers
    and issue the second pass's weight loads before the barrier. Fires for any shape that is not
    compute-bound (the held-out RMSNorm was latency-bound with no rule left to propose)."""
    if not a.facts.row_keep:
        return None
    hit = [s.shape for s in a.shapes if s.bound in ("memory", "latency")]
    if not hit:
        return None
    return (
        f"the second row loop reloads what registers can hold ({', '.join(a.facts.row_keep)}), "
        f"{a.bound}-bound at {_shapes(hit)}: keep PACKS packs per thread from the first loop and "
        "load the weight before the reduction"
    )


def row_silence(a: Analysis) -> list[str]:
    """For a kernel that reduces rows, why each row pass's rule stays silent (``pass: reason``).

    A stop message that only says "no rule proposes a new pass" left the held-out RMSNorm's
    reader guessing; these are the facts each rule looked at."""
    if not (a.facts.reductions or a.facts.tree_reductions):
        return []
    out: list[str] = []
    hit = [s for s in a.shapes if s.bound in ("memory", "latency")]
    if _online(a) is None:
        if a.facts.online_pairs:
            out.append("online: every shape is compute-bound")
        else:
            refused = "; ".join(a.facts.online_refusals[:2])
            out.append(
                "online: "
                + (
                    refused
                    or "no dependent pair (a max then a sum of exp(x - max), or a sum then the "
                    "squared deviations from its mean)"
                )
            )
    if _row_registers(a) is None:
        out.append(
            "row-registers: "
            + (
                "every shape is compute-bound"
                if a.facts.row_keep and not hit
                else "no later loop over the row reads what an earlier one read (or a const row)"
            )
        )
    if _cluster_rows(a) is None:
        if not (a.facts.syncthreads and a.facts.shared_arrays):
            why = "no block-wide reduction through shared memory (a block per row)"
        elif not a.underfilled:
            why = "every shape launches at least as many blocks as SMs"
        else:
            why = "the shapes with fewer blocks than SMs are at 30% of speed-of-light or more"
        out.append(f"cluster-rows: {why}")
    return out


def _rows_in_registers_first(a: Analysis) -> str | None:
    """A mean/variance pair whose row the later loops could read from registers: keeping the row
    reads it once, where online's fused pass still reads it twice (sum and squares, then the
    write), so row-registers goes first; online is tried on top in a later round."""
    if not a.facts.online_pairs or not all("squared deviations" in p for p in a.facts.online_pairs):
        return None
    if not any(k.endswith("(kept)") for k in a.facts.row_keep):
        return None
    reason = _row_registers(a)
    return None if reason is None else f"{reason}; before online: the row is then read once, not twice"


def packable_rows(a: Analysis) -> str | None:
    """Row loops one thread walks alone (:func:`row_loops`), reading element by element with no
    vector types, at a shape that is not compute-bound: once a warp or a block owns the row,
    its lanes read contiguous elements, which vectorize packs (the reductions in them, sums and
    maxima, reorder across packs). The reason, or None.

    Why it matters: llm.c's softmax at the ladder's budget had time for one round, and the
    owned-and-packed configs (0.77x of online8, 0.93x of v7, session 10) were in round 2's space."""
    loops = row_loops(a)
    if not loops or _vectorize(a) is None:
        return None
    folds = [*a.facts.online_pairs[:1], *a.facts.reductions[:2]]
    what = f" folding {'; '.join(folds)}" if folds else ""
    reads = ", ".join(a.facts.scalar_accesses[:3])
    return f"row loops {', '.join(loops[:4])}{what} read {reads} element by element"


def _vectorize_per_thread(a: Analysis) -> str | None:
    """One element per thread (no loops), element by element: VEC contiguous elements a thread."""
    if a.facts.loops or not a.facts.scalar_only:
        return None
    hit = [s.shape for s in a.shapes if s.bound in ("memory", "latency")]
    if not hit:
        return None
    return (
        f"one element per thread, accesses to {', '.join(a.facts.scalar_accesses)} element by element, "
        f"{a.bound}-bound at {_shapes(hit)}: VEC contiguous elements per thread in one wide access, "
        "the grid shrinks to match"
    )


def _warp_reduce(a: Analysis) -> str | None:
    if not a.facts.tree_reductions:
        return None
    return (
        f"shared-memory tree reduction in {', '.join(a.facts.tree_reductions)}: warp shuffles "
        "finish the last steps without shared memory or __syncthreads"
    )


def _underfilled(a: Analysis) -> str | None:
    shapes = a.underfilled
    if not shapes:
        return None
    s = shapes[0]
    return (
        f"{len(shapes)} latency-bound shape(s) launch fewer blocks than SMs "
        f"({s.shape}: {s.blocks} blocks for {s.sms} SMs)"
    )


def _cluster_rows(a: Analysis) -> str | None:
    """Fewer rows than SMs and far from speed-of-light: each row's block waits on DRAM alone.

    ``split`` cannot share a reduced row between blocks; a cluster can (the pass refuses kernels
    that are not one-block-per-row reductions, and the probe drops it there).
    """
    if not (a.facts.syncthreads and a.facts.shared_arrays):
        return None  # no block-wide reduction through shared memory
    slow = [s for s in a.underfilled if s.sol_fraction is not None and s.sol_fraction < 0.3]
    if not slow:
        return None
    s = slow[0]
    return (
        f"{len(slow)} latency-bound shape(s) under 30% of speed-of-light launch fewer blocks than SMs "
        f"({s.shape}: {s.blocks} blocks for {s.sms} SMs, {s.sol_fraction:.0%}): a cluster of blocks per "
        "row shares each row's reduction"
    )


def _early_loads(a: Analysis) -> str | None:
    """A reduction between two loops, and shapes that wait on memory latency far from speed-of-light:
    the second loop's loads (weights, the row again) need not wait for the reduction."""
    if not (a.facts.syncthreads or a.facts.shuffles):
        return None
    slow = [
        s.shape
        for s in a.shapes
        if s.bound == "latency" and s.sol_fraction is not None and s.sol_fraction < 0.3
    ]
    if not slow:
        return None
    return (
        f"a reduction between loops, latency-bound under 30% of speed-of-light at {_shapes(slow)}: "
        "loads that do not depend on it can be in flight during it"
    )


def _loads_first(a: Analysis) -> str | None:
    """Straight-line pack loads with math between them (merge_attn_states: LSE loads, expf, then the
    value packs), short calls far from speed-of-light: each call waits on DRAM more than once."""
    if a.facts.syncthreads or a.facts.shuffles or not a.facts.vector_types or not a.facts.math_calls:
        return None
    slow = [
        s.shape
        for s in a.shapes
        if s.bound == "latency"
        and (s.time_us or 0.0) < 20
        and s.sol_fraction is not None
        and s.sol_fraction < 0.5
    ]
    if not slow:
        return None
    return (
        f"packed loads with math ({', '.join(a.facts.math_calls[:3])}) between them, under 50% of "
        f"speed-of-light at {_shapes(slow)}: loads whose addresses are known can all be in flight first"
    )


def _rows_per_block(a: Analysis) -> str | None:
    """Small blocks (a short row per block): stacking rows fills blocks and halves the block count.

    Not for under-filled launches: fewer, fuller blocks help only when there are blocks to spare.
    """
    small = [
        s.shape
        for s in a.shapes
        if s.bound == "latency"
        and s.threads_per_block is not None
        and s.threads_per_block <= 128
        and s.blocks is not None
        and s.blocks >= 2 * s.sms
    ]
    if small:
        return f"latency-bound with small blocks of one row each ({_shapes(small)}): stack rows per block"
    short = _many_short_blocks(a)
    return None if short is None else short.replace("more work per thread", "more rows per block")


def _many_short_blocks(a: Analysis) -> str | None:
    short = [
        s.shape
        for s in a.shapes
        if s.bound == "latency" and s.waves is not None and s.waves >= 4 and (s.time_us or 0) < 20
    ]
    if not short:
        return None
    return f"latency-bound with many short blocks ({_shapes(short)}): more work per thread amortises them"


def _vectorize(a: Analysis) -> str | None:
    if not a.facts.scalar_only:
        return None
    hit = [s.shape for s in a.shapes if s.bound in ("memory", "latency")]
    if not hit:
        return None
    return (
        f"element-by-element accesses to {', '.join(a.facts.scalar_accesses)} with no vector types, "
        f"{a.bound}-bound at {_shapes(hit)}: wider loads move the same bytes in fewer instructions"
    )


def _hoist(a: Analysis) -> str | None:
    if not a.facts.invariant_math:
        return None
    return f"loop-invariant expensive math ({'; '.join(a.facts.invariant_math[:3])}): compute it once"


def _block_size(a: Analysis) -> str | None:
    hit = [s for s in a.shapes if s.bound in ("latency", "memory")]
    if not hit:
        return None
    low = [s.shape for s in hit if s.occupancy is not None and s.occupancy < 0.5]
    if low:
        return f"occupancy below 50% at {_shapes(low)}: threads per block set how many warps are resident"
    return f"{a.bound}-bound: threads per block set occupancy and bytes in flight per SM"


def _unroll(a: Analysis) -> str | None:
    latency = [s.shape for s in a.shapes if s.bound == "latency"]
    loops = [lp.label for lp in a.facts.loops if lp.grid_stride or lp.depth > 0]
    if not latency or not loops:
        return None
    where = f"latency-bound at {_shapes(latency)}, loops {', '.join(loops[:4])}"
    return f"{where}: unrolling puts more loads in flight"


def _tile(a: Analysis) -> str | None:
    reason = _unroll(a)
    return None if reason is None else reason.replace("unrolling puts", "unrolled tiles put")


def _launch_bounds(a: Analysis) -> str | None:
    limited = [s.shape for s in a.shapes if s.limiter == "registers" and (s.occupancy or 1.0) < 1.0]
    if not limited:
        return None
    return f"occupancy limited by registers at {_shapes(limited)}: a minimum of resident blocks caps them"


def _expose(a: Analysis) -> str | None:
    if not a.facts.perf_constants:
        return None
    return f"hand-tuned constants ({', '.join(a.facts.perf_constants[:4])}) can be searched instead of fixed"


def _cache_hints(a: Analysis) -> str | None:
    memory = [s.shape for s in a.shapes if s.bound == "memory"]
    if not memory:
        return None
    return f"memory-bound at {_shapes(memory)}: streaming loads and stores keep L2 for data that is reused"


def _fast_math(a: Analysis) -> str | None:
    calls = [c for c in a.facts.math_calls if c != "division"] or list(a.facts.math_calls)
    if not calls or a.fast_math_flags or not a.fast_math_budget:
        return None
    budget = f"an error budget of {a.tolerance}"
    return f"transcendental math ({', '.join(calls)}) and {budget}: intrinsics are cheaper"


#: The rules in priority order.
RULES: tuple[Rule, ...] = (
    Rule("row-owner", _row_owner),
    Rule("row-registers", _rows_in_registers_first),
    Rule("online", _online),
    Rule("warp-reduce", _warp_reduce),
    Rule("row-registers", _row_registers),
    Rule("split", _underfilled),
    Rule("cluster-rows", _cluster_rows),
    Rule("early-loads", _early_loads),
    Rule("loads-first", _loads_first),
    Rule("vectorize", _vectorize_per_thread),
    Rule("rows-per-block", _rows_per_block),
    Rule("coarsen", _many_short_blocks),
    Rule("vectorize", _vectorize),
    Rule("hoist", _hoist),
    Rule("block-size", _block_size),
    Rule("unroll", _unroll),
    Rule("tile", _tile),
    Rule("launch-bounds", _launch_bounds),
    Rule("expose", _expose),
    Rule("cache-hints", _cache_hints),
    Rule("fast-math", _fast_math),
)


def tried_on(context: PlanContext) -> frozenset[str]:
    """Passes an earlier round added to exactly the current pipeline (and found no gain there).

    A pass tried on another pipeline may be tried again: on top of a new row ownership or a
    vector width it rewrites different code, which is how the combinations get tried.
    """
    current = set(context.current.names)
    out = set()
    for r in context.history:
        names = set(_names(r.pipeline))
        extra = names - current
        # one extra pass, or a pass and its companions (:func:`companions`), planned together on
        # this pipeline: every one of them was searched here (a companion's off value included).
        # A bundle that failed to build or search marks only the companions, so that the chosen
        # pass is proposed again alone.
        if current <= names and 1 <= len(extra) <= 3:
            chosen = re.search(r"; add ([\w-]+):", r.rationale)
            if len(extra) > 1 and r.status.endswith("-failed") and chosen is not None:
                extra = extra - {chosen.group(1)}
            out |= extra
    return frozenset(out)


def _phase(catalog: Catalog, name: str) -> int:
    """``name``'s phase: from the catalog (built from the registry), else from the registered
    class (a hand-made catalog), else after every phase."""
    info = catalog.get(name)
    if info is not None and info.phase is not None:
        return int(info.phase)
    from ktx.registry import default_registry

    reg = default_registry()
    return int(reg.get(name).phase) if name in reg else len(Phase)


def placed(catalog: Catalog, current: Sequence[str], name: str) -> int:
    """Where the planner writes ``name`` into the pipeline ``current`` (an index into it).

    At the end, except for a pass of the ownership phase (row-owner, online, warp-reduce, split,
    rows-per-block, cluster-rows), which goes before the first pass of a later phase. An
    ownership pass reads the row loops as the kernel states them; written after ``vectorize``,
    it met the packed, peeled loops instead, and refused them (llm.c fused_residual, session 9:
    ``row-owner,vectorize,online`` had "no site: the two loops are not for loops over the same
    range", so the two-pass form ``row-owner,online,vectorize`` was never proposed once
    vectorize had landed; likewise ``row-owner,row-registers,online``). It never goes before a
    pass it declares to run after (``cluster-rows`` stays after ``block-size``): the written
    order then matches the run order the passes' edges give (:mod:`ktx.pipeline`), and only
    where they are silent does this choose it.

    >>> from ktx.registry import default_registry
    >>> cat = Catalog.from_registry(default_registry())
    >>> placed(cat, ["row-owner", "vectorize"], "online"), placed(cat, ["row-owner", "vectorize"], "tile")
    (1, 2)
    """
    phase = _phase(catalog, name)
    if phase != Phase.OWNERSHIP:
        return len(current)
    must_follow = _runs_after(catalog, name)
    for i, other in enumerate(current):
        if _phase(catalog, other) > phase and not must_follow & set(current[i:]):
            return i
    return len(current)


def _runs_after(catalog: Catalog, name: str) -> set[str]:
    """The passes ``name`` declares it runs after (``requires`` and ``after``): the registered
    class's declaration, else the catalog's."""
    from ktx.registry import default_registry

    reg = default_registry()
    if name in reg:
        cls = reg.get(name)
        return {*cls.requires, *cls.after}
    info = catalog.get(name)
    return set(info.after) if info is not None else set()


@dataclass(frozen=True)
class Companion:
    """A pass added with the chosen one in the same round (:func:`companions`)."""

    name: str
    why: str
    before: bool = False  # written before the chosen pass (else after it)
    knobs: tuple[tuple[str, tuple[int, ...]], ...] = ()  # knob ranges (the off value stays in)


def companions(context: PlanContext, name: str, tried: frozenset[str]) -> list[Companion]:
    """Passes added with ``name`` in the same round. Each one's knob has an "off" value, so the
    round still searches ``name`` alone (see the module docstring)."""
    a = context.analysis
    current = set(context.current.names)

    def free(other: str, probed: bool = True) -> bool:
        """``other`` may join: registered, new here, no conflict, and (``probed``) its probe on
        the current pipeline finds a site. vectorize joins unprobed: its probe added it to the
        current pipeline, whose thread-per-row loops are not the owned ones it packs."""
        if other in current or other in tried or context.catalog.get(other) is None:
            return False
        info = context.catalog.get(other)
        if info is not None and (name in info.conflicts or any(c in current for c in info.conflicts)):
            return False
        probe = context.probe(other)
        return not probed or probe is None or probe.applies

    out: list[Companion] = []
    if name == "row-owner":
        # not row-registers (llm.c layernorm): its 7 PACKS values times 7 THREADS_PER_ROW would
        # leave a short round's dozen trials per shape thin over 49 configs; it comes next round
        packs = packable_rows(a) is not None and free("vectorize", probed=False)
        welford = _rows_in_registers_first(a) is not None
        if _online(a) is not None and (not welford or packs) and free("online"):
            why = "ONLINE=0 is row-owner alone; the dependent pair in one pass"
            if welford:
                # the mean/variance pair: Welford's running shift (ONLINE=1) is what vectorize
                # refuses; the Σx, Σx² pair is a plain reduction it packs (session 10: 1.3-1.95x
                # faster than Welford on fused_residual, 0.94-0.98x of it on layernorm)
                why += "; ONLINE=2 only: the Σx, Σx² pair, which vectorize packs (Welford's shift it refuses)"
            out.append(Companion("online", why, knobs=(("ONLINE", (2,)),) if welford else ()))
        if packs:
            out.append(
                Companion("vectorize", "VEC_LOOPS=1 is the owned rows scalar; "
                          f"{packable_rows(a)}: once owned, lanes read contiguous packs")
            )  # fmt: skip
    elif name == "row-registers" and "row-owner" not in current:
        probe = context.probe("block-size")
        if free("block-size") and probe is not None and probe.applies:
            out.append(
                Companion("block-size", "fewer threads give 2-4 packs a thread, the row in registers; "
                          "0 is the launch as written", before=True)
            )  # fmt: skip
    return out


class RulesPlanner:
    """Deterministic planning from :data:`RULES`, then from the probes' sites (:func:`phases`)."""

    def __init__(self, rules: tuple[Rule, ...] = RULES) -> None:
        self.rules = rules

    @property
    def name(self) -> str:
        return "rules"

    def _verdict(self, context: PlanContext, name: str, tried: frozenset[str]) -> str:
        """``propose``, or why ``name`` cannot be added to the current pipeline now."""
        current = set(context.current.names)
        info = context.catalog.get(name)
        probe = context.probe(name)
        if info is None:
            return "not registered"
        if name in current:
            return "already in the pipeline"
        if name in tried:
            return "tried before without a gain"
        if any(c in current for c in info.conflicts) or any(
            name in (other.conflicts if other else ()) for other in map(context.catalog.get, current)
        ):
            return "conflicts with the pipeline"
        if probe is not None and not probe.applies:
            return f"no site ({probe.text()})"
        return "propose"

    def candidates(self, context: PlanContext) -> list[tuple[str, str, str]]:
        """(pass, verdict, reason) for every rule: verdict ``propose`` or why it was passed over."""
        tried = tried_on(context)
        out: list[tuple[str, str, str]] = []
        seen: set[str] = set()
        for rule in self.rules:
            name = rule.pass_name
            reason = rule.fires(context.analysis)
            if reason is None:
                if name not in seen:
                    out.append((name, "does not fire", ""))
                continue
            if name in seen and any(n == name and r for n, _, r in out):
                continue  # a second rule for a pass already judged on a firing rule
            seen.add(name)
            out = [c for c in out if not (c[0] == name and not c[2])]
            out.append((name, self._verdict(context, name, tried), reason))
        return out

    def sites(self, context: PlanContext) -> list[Probe]:
        """Passes whose probe rewrites a site and that may be added now, in :func:`phases` order."""
        tried = tried_on(context)
        ok = [p for p in context.probes if p.applies and self._verdict(context, p.name, tried) == "propose"]
        return sorted(ok, key=lambda p: (_phase(context.catalog, p.name), p.name))

    def plan(self, context: PlanContext) -> PlanOutcome:
        cands = self.candidates(context)
        chosen = next(((n, r) for n, v, r in cands if v == "propose"), None)
        passed = [f"{n}: {v}" for n, v, r in cands if r and v != "propose"]
        overview = f"{context.analysis.bound}-bound overall"
        if chosen is None:
            site = next(iter(self.sites(context)), None)
            if site is not None:
                chosen = (
                    site.name,
                    f"no rule fires for it, but its probe finds a site ({site.text()}) it was not "
                    "tried on with this pipeline",
                )
        if chosen is None:
            why = f"{overview}; no rule proposes a new pass" + (f" ({'; '.join(passed)})" if passed else "")
            silent = row_silence(context.analysis)
            if silent:
                why += "; row reductions, why no row pass fires: " + "; ".join(silent)
            nosite = [p.text() for p in context.probes if not p.applies]
            if nosite:
                why += "; passes with no site: " + "; ".join(nosite)
            tried = sorted(tried_on(context))
            if tried:
                why += f"; tried on this pipeline without a gain: {', '.join(tried)}"
            return PlanOutcome(Plan(context.current.passes, why, stop=True, planner=self.name))
        name, reason = chosen
        choice = PassChoice(name, options=OPTIONS.get(name, ()), why=reason)
        text = f"{overview}; add {name}: {reason}"
        before: list[PassChoice] = []
        after: list[PassChoice] = []
        for c in companions(context, name, tried_on(context)):
            choice_ = PassChoice(c.name, options=OPTIONS.get(c.name, ()), knobs=c.knobs, why=c.why)
            (before if c.before else after).append(choice_)
            text += f"; with {c.name} in the same round ({c.why})"
        if passed:
            text += f" (passed over: {'; '.join(passed)})"
        at = placed(context.catalog, context.current.names, name)
        current = context.current.passes
        passes = (*current[:at], *before, choice, *after, *current[at:])
        return PlanOutcome(Plan(passes, text, planner=self.name))
