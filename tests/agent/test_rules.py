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
    # one width for all the kernel's loops: a round's few trials cover it (rules.OPTIONS)
    assert plan.pipeline == "vectorize{tie=true,peel=true}"


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
    from ktx.specload import load_spec

    spec = load_spec(Path(__file__).resolve().parents[2] / "kernels" / "act_and_mul_scalar")
    t = template_for_spec(spec, "split,vectorize")
    rewritten = {o.pass_name for o in t.outcomes if o.status == "rewritten"}
    assert {"split", "vectorize"} <= rewritten
    assert {k.name for k in t.knobs} >= {"SPLIT", "VEC_L0"}


# -- issue 11: row ownership, one element per thread, sites before stopping, keep going -------


def _with(catalog: Catalog, *names: str) -> Catalog:
    from ktx.agent.catalog import PassInfo

    return Catalog.of([*catalog.passes, *(PassInfo(n, f"{n} (test)") for n in names)])


def thread_per_row() -> KernelFacts:
    """layernorm v1's shape: each thread walks its row in three unit-step loops."""
    loops = tuple(LoopFact(f"L{i}", 10 + i, "int i = 0; i < C; i++", 0, False, False) for i in range(3))
    return KernelFacts("layernorm_forward_kernel1", loops=loops, scalar_accesses=("x", "out_idx"))


def test_thread_per_row_gets_a_new_row_owner(catalog: Catalog) -> None:
    ms = [measurement("B=8,T=1024,C=768", 300.0, nbytes=8192 * 768 * 8, blocks=32)]
    analysis = make_analysis(thread_per_row(), ms)
    plan = choose(context(analysis, _with(catalog, "row-owner")))
    # the row loops read element by element: vectorize comes along (VEC 1 is row-owner alone)
    assert plan.names == ("row-owner", "vectorize")
    assert "each thread walks a whole row in L0, L1, L2" in plan.rationale
    # a build without the pass: passed over, said so
    plan = choose(context(analysis, catalog))
    assert plan.names[0] != "row-owner" and "row-owner: not registered" in plan.rationale
    # at speed-of-light already: no ownership change
    fast = [measurement("B=8,T=1024,C=768", 2.0, nbytes=8192 * 768 * 8, blocks=32)]
    plan = choose(context(make_analysis(thread_per_row(), fast), _with(catalog, "row-owner")))
    assert "row-owner" not in plan.names


def test_a_row_max_then_a_sum_of_exp_gets_online_after_row_owner(catalog: Catalog) -> None:
    """softmax v1's facts: the pair fuses into one pass, proposed once row-owner has landed (or
    at once, by priority, when row-owner is in the pipeline or does not fire)."""
    facts = KernelFacts(
        "softmax_forward_kernel1",
        loops=thread_per_row().loops,
        scalar_accesses=("inp_row", "out_row"),
        online_pairs=("L0, L1: max maxval, sum sum",),
    )
    ms = [measurement("B=8,T=1024,C=768", 300.0, nbytes=8192 * 768 * 8, blocks=32)]
    cat = _with(catalog, "row-owner", "online")
    # round 1: row-owner, and online with it (ONLINE=0 is row-owner alone), so a run with time
    # for one round (llm.c's ladder) still tries the fused pair
    first = choose(context(make_analysis(facts, ms), cat))
    assert first.names == ("row-owner", "online", "vectorize"), first.rationale
    assert "with online in the same round (ONLINE=0 is row-owner alone" in first.rationale
    # that round searched both: the next one on the original proposes neither again
    tried = RoundSummary(1, first.pipeline, "rules", first.rationale, "no-gain", 1.0)
    again = choose(context(make_analysis(facts, ms), cat, history=[tried]))
    assert not {"row-owner", "online", "vectorize"} & set(again.names), again.rationale
    # a bundle that failed to build: row-owner comes back alone, without its companion
    failed = RoundSummary(1, first.pipeline, "rules", first.rationale, "template-failed", None)
    again = choose(context(make_analysis(facts, ms), cat, history=[failed]))
    assert again.names == ("row-owner",), again.rationale
    current = Plan((PassChoice("row-owner"),), "r1")
    plan = choose(context(make_analysis(facts, ms), cat, current=current))
    assert plan.names == ("row-owner", "online")  # companions come with row-owner only
    assert "a row max and then a sum of exp(x - max) (L0, L1: max maxval, sum sum)" in plan.rationale
    # no pair in the facts: the rule does not fire (a refused pair is the probe's remark)
    plain = KernelFacts("k", loops=facts.loops, scalar_accesses=facts.scalar_accesses)
    plan = choose(context(make_analysis(plain, ms), cat, current=current))
    assert "online" not in plan.names


def test_a_block_norm_that_reloads_its_row_gets_row_registers(catalog: Catalog) -> None:
    """The held-out RMSNorm's shape: latency-bound, a block per row, the second loop reloading
    the row and the weight. It used to stop at 'no rule proposes a new pass'."""
    loops = tuple(
        LoopFact(f"L{i}", 10 + i, "int i = thread_id; i < num_packs; i += num_threads", 0, True, False)
        for i in range(2)
    )
    facts = KernelFacts(
        "rmsnorm_kernel", loops=loops, vector_types=("uint4",), row_keep=("in (kept)", "w (early)")
    )
    ms = [measurement("tokens=1024,d=4096", 30.0, nbytes=1024 * 4096 * 4, blocks=1024)]
    cat = _with(catalog, "row-registers")
    plan = choose(context(make_analysis(facts, ms), cat))
    assert "row-registers" in plan.names
    assert "reloads what registers can hold (in (kept), w (early))" in plan.rationale
    plain = KernelFacts("rmsnorm_kernel", loops=loops, vector_types=("uint4",))
    assert "row-registers" not in choose(context(make_analysis(plain, ms), cat)).names


def test_a_block_stride_loop_is_not_a_row_per_thread(catalog: Catalog) -> None:
    loops = (LoopFact("L0", 5, "int i = threadIdx.x; i < C; i += blockDim.x", 0, True, False),)
    facts = KernelFacts("k", loops=loops, scalar_accesses=("x",))
    ms = [measurement("n=1", 300.0, nbytes=8192 * 768 * 8, blocks=8192)]
    plan = choose(context(make_analysis(facts, ms), _with(catalog, "row-owner")))
    assert plan.names[0] != "row-owner"


def test_one_element_per_thread_vectorizes_before_coarsen(catalog: Catalog) -> None:
    facts = KernelFacts("gelu_forward_kernel1", scalar_accesses=("inp", "out"), math_calls=("tanhf",))
    ms = [measurement("n=786432", 4.6, nbytes=786432 * 4, blocks=3072)]  # latency-bound, many short blocks
    plan = choose(context(make_analysis(facts, ms), _with(catalog, "coarsen", "rows-per-block")))
    assert plan.names == ("vectorize",)
    assert "one element per thread" in plan.rationale and "grid shrinks" in plan.rationale


def test_a_pass_with_a_site_is_tried_before_stopping(catalog: Catalog) -> None:
    facts = KernelFacts("k", vector_types=("uint4",), loops=(LoopFact("L0", 3, "", 0, True, False),))
    history = (RoundSummary(1, "block-size", "rules", "", "no-gain", 1.0),)
    probes = (
        Probe("unroll", 1, (("UNROLL_L0", (1, 2, 4)),)),
        Probe("split", 0, skipped=("no row loop over blockIdx.x (line 3)",)),
        Probe("hoist", 2),
    )
    ctx = context(make_analysis(facts, [memory_bound()]), catalog, history=history, probes=probes)
    plan = choose(ctx)
    assert plan.names == ("unroll",) and not plan.stop  # PHASES: unroll before hoist
    assert "its probe finds a site (unroll: rewrites 1 site(s)" in plan.rationale


def test_stop_names_the_passes_with_no_site_and_why(catalog: Catalog) -> None:
    facts = KernelFacts("k", vector_types=("uint4",), loops=(LoopFact("L0", 3, "", 0, True, False),))
    history = (RoundSummary(1, "block-size", "rules", "", "no-gain", 1.0),)
    probes = (
        Probe("split", 0, skipped=("no row loop over blockIdx.x (line 3)",)),
        Probe("vectorize", 0, skipped=("L0: only `for` loops are vectorized (line 7)",)),
        Probe("block-size", 1),
    )
    plan = choose(context(make_analysis(facts, [memory_bound()]), catalog, history=history, probes=probes))
    assert plan.stop
    want = "passes with no site: split: no site to rewrite (no row loop over blockIdx.x (line 3))"
    assert want in plan.rationale
    assert "vectorize: no site to rewrite (L0: only `for` loops are vectorized (line 7))" in plan.rationale
    assert "tried on this pipeline without a gain: block-size" in plan.rationale


def test_a_pass_is_tried_again_on_a_new_row_owner(catalog: Catalog) -> None:
    """vectorize gained nothing on the thread-per-row original; once a warp owns each row it
    rewrites other loops, so it is proposed again (the combination ownership, then vectorize)."""
    cat = _with(catalog, "row-owner")
    ms = [measurement("B=8,T=1024,C=768", 40.0, nbytes=8192 * 768 * 8, blocks=8192)]
    facts = KernelFacts("k", scalar_accesses=("x",), loops=(LoopFact("L0", 3, "", 0, True, False),))
    history = (
        RoundSummary(1, "vectorize", "rules", "", "no-gain", 1.0),
        RoundSummary(2, "row-owner", "rules", "", "improved", 8.0),
    )
    current = Plan((PassChoice("row-owner"),), "r2")
    probes = (Probe("vectorize", 2, (("VEC_L0", (1, 2, 4)),)),)
    plan = choose(context(make_analysis(facts, ms), cat, current=current, history=history, probes=probes))
    assert plan.names == ("row-owner", "vectorize")
    assert plan.pipeline == "row-owner,vectorize{tie=true,peel=true}"
    # on the original it stays tried
    plan = choose(context(make_analysis(facts, ms), cat, history=history[:1], probes=probes))
    assert "vectorize" not in plan.names


# -- issue 17: the planner's order comes from each pass's declared phase ------------------------


def test_phases_group_the_registered_passes_by_their_attribute() -> None:
    from ktx.agent.rules import phases
    from ktx.passbase import Phase
    from ktx.registry import default_registry

    groups = phases()
    assert len(groups) == len(Phase)
    assert groups[Phase.OWNERSHIP] == (
        "cluster-rows",
        "online",
        "row-owner",
        "rows-per-block",
        "split",
        "warp-reduce",
    )
    assert groups[Phase.VECTORIZE] == ("coarsen", "vectorize")
    assert groups[Phase.BLOCK] == ("block-size",)
    assert groups[Phase.UNROLL] == ("early-loads", "loads-first", "row-registers", "tile", "unroll")
    assert groups[Phase.HINTS] == ("cache-hints", "expose", "fast-math", "hoist", "launch-bounds")
    # every built-in pass states its phase itself (none falls back to the base class's default)
    assert [cls.name for cls in default_registry() if "phase" not in vars(cls)] == []


def test_a_new_pass_is_placed_by_its_phase_alone() -> None:
    from typing import Any, ClassVar

    from ktx.agent.rules import phases
    from ktx.passbase import Pass, Phase, Site
    from ktx.registry import Registry, default_registry

    class Widen(Pass[Any]):
        name = "widen"
        phase: ClassVar[Phase] = Phase.VECTORIZE
        summary = "a pass placed by one attribute"

        def sites(self, target: Any) -> Any:
            return iter(())

        def rewrite(self, site: Site, rw: Any) -> None:
            raise AssertionError

    reg = Registry()
    for cls in (*default_registry(), Widen):
        reg.register(cls)
    assert phases(reg)[Phase.VECTORIZE] == ("coarsen", "vectorize", "widen")


def test_a_pass_without_a_phase_is_rejected_at_registration() -> None:
    import pytest

    from ktx.passbase import Pass, Site
    from ktx.registry import PassDefinitionError, Registry

    class Loose(Pass[Site]):
        name = "loose"
        phase = "early"  # type: ignore[assignment]
        summary = "names no Phase"

        def sites(self, target: object) -> object:  # type: ignore[override]
            return iter(())

        def rewrite(self, site: Site, rw: object) -> None:  # type: ignore[override]
            raise AssertionError

    with pytest.raises(PassDefinitionError, match=r"phase must be one of Phase\.OWNERSHIP"):
        Registry().register(Loose)


def test_a_sum_then_squared_deviations_gets_online_and_its_row_registers(catalog: Catalog) -> None:
    """llm.c layernorm v1's facts after row-owner: the Welford pair is proposed as online (said
    as such), and the scalar rows the later loops read again as row-registers."""
    facts = KernelFacts(
        "layernorm_forward_kernel1",
        loops=thread_per_row().loops,
        scalar_accesses=("x", "out_idx"),
        reductions=("L0: sum m", "L1: sum v"),
        online_pairs=("L0, L1: sum m, squared deviations v",),
        row_keep=("x[i] (kept)", "weight[i] (early)"),
    )
    ms = [measurement("B=8,T=1024,C=768", 300.0, nbytes=8192 * 768 * 8, blocks=32)]
    cat = _with(catalog, "row-owner", "online", "row-registers")
    current = Plan((PassChoice("row-owner"),), "r1")
    plan = choose(context(make_analysis(facts, ms), cat, current=current))
    # the row in registers first: one read of the row, where the fused pass makes two
    assert plan.names == ("row-owner", "row-registers"), plan.rationale
    assert "(x[i] (kept), weight[i] (early))" in plan.rationale
    assert "before online: the row is then read once, not twice" in plan.rationale
    current = Plan((PassChoice("row-owner"), PassChoice("row-registers")), "r2")
    plan = choose(context(make_analysis(facts, ms), cat, current=current))
    # written before row-registers (an ownership pass before a later phase): after it, online
    # meets the unrolled kept-row loops and has no site (ktx apply on llm.c layernorm v1)
    assert plan.names == ("row-owner", "online", "row-registers"), plan.rationale
    assert "a row sum and then the squared deviations from its mean" in plan.rationale
    assert "Welford's running (count, mean, M2)" in plan.rationale
    # from the original: row-owner with online at ONLINE=2 (the Σx, Σx² pair) and vectorize,
    # which packs that pair; row-registers (49 configs on its own) comes in a later round
    plan = choose(context(make_analysis(facts, ms), cat))
    assert plan.names == ("row-owner", "online", "vectorize"), plan.rationale
    assert plan.passes[1].knobs == (("ONLINE", (2,)),)
    assert "ONLINE=2 only: the Σx, Σx² pair, which vectorize packs" in plan.rationale
    # without vectorize in the build the packed pair has no use: row-owner alone, as before
    bare = _with(Catalog.of([i for i in catalog.passes if i.name != "vectorize"]), "row-owner", "online",
                 "row-registers")  # fmt: skip
    plan = choose(context(make_analysis(facts, ms), bare))
    assert plan.names == ("row-owner",), plan.rationale
    # without a row to keep, online comes first
    nokeep = KernelFacts(**{**facts.__dict__, "row_keep": ()})
    plan = choose(context(make_analysis(nokeep, ms), cat, current=Plan((PassChoice("row-owner"),), "r1")))
    assert plan.names == ("row-owner", "online")


def test_a_stop_on_a_row_reduction_says_why_no_row_pass_fires(catalog: Catalog) -> None:
    """The held-out RMSNorm stopped at 'latency-bound overall; no rule proposes a new pass'. A
    kernel that reduces rows now hears, per row pass, what its rule looked at."""
    facts = KernelFacts(
        "rms",
        vector_types=("uint4",),
        loops=(LoopFact("L0", 3, "", 0, True, False),),
        reductions=("L0: sum s",),
    )
    history = (RoundSummary(1, "block-size", "rules", "", "no-gain", 1.0, failures=(PassFailure("x", ()),)),)
    history += (RoundSummary(2, "cache-hints", "rules", "", "no-gain", 1.0),)
    plan = choose(context(make_analysis(facts, [memory_bound()]), catalog, history=history))
    assert plan.stop
    assert "row reductions, why no row pass fires: online: no dependent pair" in plan.rationale
    assert "row-registers: no later loop over the row reads what an earlier one read" in plan.rationale
    assert "cluster-rows: no block-wide reduction through shared memory" in plan.rationale
    # no reduction: nothing to say about row passes
    plain = KernelFacts("k", vector_types=("uint4",), loops=facts.loops)
    plan = choose(context(make_analysis(plain, [memory_bound()]), catalog, history=history))
    assert plan.stop and "row reductions" not in plan.rationale


def _block_norm_facts() -> KernelFacts:
    loops = tuple(
        LoopFact(f"L{i}", 10 + i, "int i = thread_id; i < num_packs; i += num_threads", 0, True, False)
        for i in range(2)
    )
    return KernelFacts(
        "rmsnorm_kernel",
        loops=loops,
        vector_types=("uint4",),
        shuffles=("__shfl_xor_sync",),
        syncthreads=("__syncthreads",),
        shared_arrays=("smem",),
        reductions=("L0: sum sum_sq",),
        row_keep=("in (kept)", "w (early)"),
    )


def test_a_block_norm_gets_row_registers_with_block_size_before_cluster_rows(catalog: Catalog) -> None:
    """kernels/rmsnorm at decode and at 4096 tokens: row-registers comes first (every shape gains
    the single read; cluster-rows still has its site on top of it, not the reverse), and it brings
    block-size into its round: at d=4096 the launcher's 512 threads hold one pack each, and 2-4
    packs a thread (issue 23's hand variant) need 128-256 threads."""
    facts = _block_norm_facts()
    ms = [
        measurement("tokens=1,d=8192", 4.0, nbytes=8192 * 4, blocks=1, threads=1024),
        measurement("tokens=4096,d=4096", 30.0, nbytes=4096 * 4096 * 4, blocks=4096, threads=512),
    ]
    cat = _with(catalog, "row-registers", "cluster-rows", "early-loads")
    probes = [Probe("block-size", 1, (("BLOCK_Y", (0, 4, 8)),)), Probe("row-registers", 1)]
    plan = choose(context(make_analysis(facts, ms), cat, probes=probes))
    assert plan.names == ("block-size", "row-registers"), plan.rationale
    assert "with block-size in the same round (fewer threads give 2-4 packs a thread" in plan.rationale
    # cluster-rows with a site is not brought along (the round's space would be 7 x 4 x 4)
    clustered = [*probes, Probe("cluster-rows", 1, (("CLUSTER", (1, 2, 4, 8)),))]
    plan = choose(context(make_analysis(facts, ms), cat, probes=clustered))
    assert plan.names == ("block-size", "row-registers"), plan.rationale
    # no block-size site: row-registers alone
    alone = [Probe("block-size", 0, (), ("no site",)), Probe("row-registers", 1)]
    assert choose(context(make_analysis(facts, ms), cat, probes=alone)).names == ("row-registers",)
    # on top of it, the wide row at decode gets its cluster
    # (split has no site: each block would reduce only part of the row, as on the real kernel)
    current = Plan((PassChoice("block-size"), PassChoice("row-registers")), "r1")
    nosplit = [
        *probes,
        Probe("split", 0, (), ("split over blocks, each block would reduce only part of the row",)),
    ]
    plan = choose(context(make_analysis(facts, ms), cat, current=current, probes=nosplit))
    # written where it runs: after block-size (its declared edge), before row-registers
    assert plan.names == ("block-size", "cluster-rows", "row-registers"), plan.rationale


def test_an_ownership_pass_is_written_before_a_later_phase(catalog: Catalog) -> None:
    """llm.c fused_residual, session 9: online gained nothing on row-owner alone, vectorize then
    won; on row-owner,vectorize online is a new try, and it is written before vectorize (after
    it, online met the packed, peeled loops and had no site). A pass of a later phase still goes
    at the end."""
    from ktx.agent.rules import placed

    facts = KernelFacts(
        "fused_residual_forward2",
        loops=thread_per_row().loops,
        scalar_accesses=("residual", "normed"),
        reductions=("L0: sum m", "L1: sum v"),
        online_pairs=("L0, L1: sum m, squared deviations v",),
    )
    ms = [measurement("B=8,T=1024,C=768", 300.0, nbytes=8192 * 768 * 8, blocks=32)]
    cat = _with(catalog, "row-owner", "online")
    vec = PassChoice("vectorize", options=(("tie", True), ("peel", True)))
    current = Plan((PassChoice("row-owner"), vec), "r4")
    history = (
        RoundSummary(1, "row-owner", "rules", "", "improved", 35.0),
        RoundSummary(2, "row-owner,online", "rules", "", "no-gain", 35.0),
        RoundSummary(3, "row-owner,vectorize{tie=true,peel=true}", "rules", "", "improved", 47.0),
    )
    plan = choose(context(make_analysis(facts, ms), cat, current=current, history=history))
    assert plan.names == ("row-owner", "online", "vectorize"), plan.rationale
    assert plan.pipeline == "row-owner,online,vectorize{tie=true,peel=true}"
    assert placed(cat, ("row-owner", "vectorize"), "cache-hints") == 2
    assert placed(cat, ("row-owner", "vectorize"), "warp-reduce") == 1
    assert placed(cat, ("row-owner",), "online") == 1
