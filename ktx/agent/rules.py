"""The rules planner: deterministic choices from the analysis, no network.

Each round it keeps the best pipeline so far and adds **one** pass: the first rule, in a fixed
priority order, that fires on the analysis, names a registered pass that is not in the pipeline,
was not tried before, does not conflict with the pipeline, and (when the loop probed it) really
has a site to rewrite in this kernel. One pass per round keeps every gain attributable to one
decision, and a fixed order makes two runs on the same numbers choose the same passes.

The rules, highest priority first (each says why in the plan's rationale):

1. ``warp-reduce``: a shared-memory tree reduction (a halving loop with ``__syncthreads``);
2. ``split``: latency-bound shapes that launch fewer blocks than SMs: more blocks per row;
3. ``cluster-rows``: a block reduction through shared memory, and latency-bound shapes under 30%
   of speed-of-light that launch fewer blocks than SMs: the row over a thread-block cluster;
4. ``early-loads``: a reduction (barrier or shuffles) and latency-bound shapes under 30% of
   speed-of-light: the loads of the loop after it are issued before it;
5. ``rows-per-block``: latency-bound with small one-row blocks or many short blocks: stack rows;
6. ``coarsen``: latency-bound with many short blocks: more items per thread, fewer blocks;
7. ``vectorize``: memory- or latency-bound with element-by-element accesses and no vector types;
8. ``hoist``: expensive loop-invariant math inside a loop;
9. ``block-size``: any shape not compute-bound: threads per block set occupancy and bytes in flight;
10. ``unroll``: latency-bound shapes with loops: more independent loads in flight;
11. ``tile``: the same, by strip-mining the loops into unrolled tiles;
12. ``launch-bounds``: occupancy limited by registers: a minimum of resident blocks caps them;
13. ``expose``: hand-tuned constants (block sizes, pack widths) become knobs;
14. ``cache-hints``: memory-bound with read-only inputs;
15. ``fast-math``: transcendental math, the build is not fast-math already, and the spec's
    error budget leaves room (the candidates are still verified against the original).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ktx.agent.analysis import Analysis
from ktx.agent.plan import PassChoice, Plan
from ktx.agent.planner import PlanContext, PlanOutcome


@dataclass(frozen=True)
class Rule:
    """A pass and the condition under which the rules planner proposes it."""

    pass_name: str
    fires: Callable[[Analysis], str | None]  # the reason, or None when the rule does not fire


def _shapes(names: list[str], limit: int = 3) -> str:
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


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
    Rule("warp-reduce", _warp_reduce),
    Rule("split", _underfilled),
    Rule("cluster-rows", _cluster_rows),
    Rule("early-loads", _early_loads),
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


class RulesPlanner:
    """Deterministic planning from :data:`RULES`."""

    def __init__(self, rules: tuple[Rule, ...] = RULES) -> None:
        self.rules = rules

    @property
    def name(self) -> str:
        return "rules"

    def candidates(self, context: PlanContext) -> list[tuple[str, str, str]]:
        """(pass, verdict, reason) for every rule: verdict ``propose`` or why it was passed over."""
        current = set(context.current.names)
        tried = context.tried() - current
        out: list[tuple[str, str, str]] = []
        for rule in self.rules:
            reason = rule.fires(context.analysis)
            name = rule.pass_name
            if reason is None:
                out.append((name, "does not fire", ""))
                continue
            info = context.catalog.get(name)
            probe = context.probe(name)
            if info is None:
                verdict = "not registered"
            elif name in current:
                verdict = "already in the pipeline"
            elif name in tried:
                verdict = "tried before without a gain"
            elif any(c in current for c in info.conflicts) or any(
                name in (other.conflicts if other else ()) for other in map(context.catalog.get, current)
            ):
                verdict = "conflicts with the pipeline"
            elif probe is not None and not probe.applies:
                verdict = f"no site ({probe.text()})"
            else:
                verdict = "propose"
            out.append((name, verdict, reason))
        return out

    def plan(self, context: PlanContext) -> PlanOutcome:
        cands = self.candidates(context)
        chosen = next(((n, r) for n, v, r in cands if v == "propose"), None)
        passed = [f"{n}: {v}" for n, v, r in cands if r and v != "propose"]
        overview = f"{context.analysis.bound}-bound overall"
        if chosen is None:
            why = f"{overview}; no rule proposes a new pass" + (f" ({'; '.join(passed)})" if passed else "")
            return PlanOutcome(Plan(context.current.passes, why, stop=True, planner=self.name))
        name, reason = chosen
        choice = PassChoice(name, why=reason)
        text = f"{overview}; add {name}: {reason}"
        if passed:
            text += f" (passed over: {'; '.join(passed)})"
        return PlanOutcome(Plan((*context.current.passes, choice), text, planner=self.name))
