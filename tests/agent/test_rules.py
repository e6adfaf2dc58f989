"""The rules planner: deterministic choices from synthetic analyses."""

from __future__ import annotations

from ktx.agent.analysis import KernelFacts, LoopFact
from ktx.agent.catalog import Catalog
from ktx.agent.plan import PassChoice, Plan
from ktx.agent.planner import PassFailure, Probe, RoundSummary
from ktx.agent.rules import RulesPlanner

from .helpers import context, latency_bound, make_analysis, measurement, memory_bound, scalar_facts


def choose(ctx_: object) -> Plan:
    return RulesPlanner().plan(ctx_).plan  # type: ignore[arg-type]


def test_memory_bound_scalar_kernel_vectorizes(catalog: Catalog) -> None:
    plan = choose(context(make_analysis(scalar_facts(), [memory_bound()]), catalog))
    assert plan.names == ("vectorize",) and not plan.stop and plan.planner == "rules"
    assert "memory-bound overall" in plan.rationale and "x_row" in plan.rationale


def test_latency_bound_with_few_blocks_splits(catalog: Catalog) -> None:
    plan = choose(context(make_analysis(scalar_facts(), [latency_bound()]), catalog))
    assert plan.names == ("split",)
    assert "fewer blocks than SMs (tokens=1,d=4096: 1 blocks for 132 SMs)" in plan.rationale


def test_tree_reduction_first(catalog: Catalog) -> None:
    facts = KernelFacts("k", tree_reductions=("L3",), scalar_accesses=("x",))
    plan = choose(context(make_analysis(facts, [latency_bound()]), catalog))
    assert plan.names == ("warp-reduce",)


def test_hoist_for_invariant_math(catalog: Catalog) -> None:
    facts = KernelFacts("k", invariant_math=("L0: expf(t)",), vector_types=("uint4",))
    plan = choose(context(make_analysis(facts, [memory_bound()]), catalog))
    assert plan.names == ("hoist",)


def test_keeps_the_pipeline_and_skips_tried_and_unprobed(catalog: Catalog) -> None:
    analysis = make_analysis(scalar_facts(), [memory_bound(), latency_bound()])
    current = Plan((PassChoice("vectorize"),), "r1")
    history = (
        RoundSummary(1, "vectorize", "rules", "", "improved", 1.4),
        RoundSummary(2, "vectorize,split", "rules", "", "no-gain", 1.39),
    )
    probes = (Probe("block-size", 1, (("BLOCK_X", (32, 64)),)),)
    plan = choose(context(analysis, catalog, current=current, history=history, probes=probes))
    assert plan.names == ("vectorize", "block-size")
    assert "split: tried before without a gain" in plan.rationale
    probes = (Probe("block-size", 0, skipped=("the kernel never reads blockDim",)),)
    plan = choose(context(analysis, catalog, current=current, history=history, probes=probes))
    assert "block-size: no site" in plan.rationale and "never reads blockDim" in plan.rationale
    assert plan.names[-1] != "block-size"


def test_unregistered_passes_are_passed_over(catalog: Catalog) -> None:
    small = Catalog.of([p for p in catalog.passes if p.name != "split"])
    plan = choose(context(make_analysis(scalar_facts(), [latency_bound()]), small))
    assert plan.names[0] != "split"
    assert "split: not registered" in plan.rationale


def test_fast_math_only_within_the_error_budget(catalog: Catalog) -> None:
    facts = KernelFacts("k", math_calls=("expf",), vector_types=("uint4",))
    done = tuple(PassChoice(n) for n in ("block-size",))
    ms = [measurement("t=4096", 30.0, nbytes=4096 * 4096 * 2, blocks=4096)]  # latency-bound, many blocks
    tight = make_analysis(facts, ms, fast_math_budget=False)
    assert choose(context(tight, catalog, current=Plan(done, "r"))).stop
    loose = make_analysis(facts, ms, fast_math_budget=True)
    assert choose(context(loose, catalog, current=Plan(done, "r"))).names == ("block-size", "fast-math")
    already = make_analysis(facts, ms, fast_math_budget=True, flags=("-use_fast_math",))
    assert choose(context(already, catalog, current=Plan(done, "r"))).stop


def test_conflicting_pass_is_not_proposed(catalog: Catalog) -> None:
    facts = KernelFacts("k", math_calls=("expf",), invariant_math=("L0: expf(t)",), vector_types=("uint4",))
    ms = [measurement("t=4096", 30.0, nbytes=4096 * 4096 * 2, blocks=4096)]
    current = Plan((PassChoice("fast-math"), PassChoice("block-size")), "r")
    plan = choose(context(make_analysis(facts, ms, fast_math_budget=True), catalog, current=current))
    assert "hoist: conflicts with the pipeline" in plan.rationale


def test_stop_when_nothing_is_left(catalog: Catalog) -> None:
    facts = KernelFacts("k", vector_types=("uint4",), loops=(LoopFact("L0", 3, "", 0, True, False),))
    ms = [memory_bound()]
    history = (RoundSummary(1, "block-size", "rules", "", "no-gain", 1.0, failures=(PassFailure("x", ()),)),)
    history += (RoundSummary(2, "cache-hints", "rules", "", "no-gain", 1.0),)
    plan = choose(context(make_analysis(facts, ms), catalog, history=history))
    assert plan.stop and plan.passes == ()
    assert "no rule proposes a new pass" in plan.rationale


def test_same_context_same_plan(catalog: Catalog) -> None:
    ctx = context(make_analysis(scalar_facts(), [memory_bound(), latency_bound()]), catalog)
    assert choose(ctx) == choose(ctx)


def test_vectorize_still_applies_after_the_planner_chose_split_first() -> None:
    """Found on an H200: the rules planner added split in round 1 on act_and_mul_scalar, and
    vectorize then had no site, since split had turned the loop into a grid stride it cannot
    prove contiguous. Pipelines are ordered so that vectorize runs first."""
    from pathlib import Path

    from ktx.pipeline import template_for_spec
    from ktx.spec import load_spec

    spec = load_spec(Path(__file__).resolve().parents[2] / "kernels" / "act_and_mul_scalar")
    t = template_for_spec(spec, "split,vectorize")
    rewritten = {o.pass_name for o in t.outcomes if o.status == "rewritten"}
    assert {"split", "vectorize"} <= rewritten
    assert {k.name for k in t.knobs} >= {"SPLIT", "VEC_L0"}
