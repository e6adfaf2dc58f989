"""Helpers for the agent tests: a toy catalog, synthetic measurements and plan contexts."""

from __future__ import annotations

from collections.abc import Sequence

from ktx.agent.analysis import Analysis, Device, KernelFacts, ShapeAnalysis, analyze
from ktx.agent.catalog import Catalog, KnobInfo, OptionInfo, PassInfo
from ktx.agent.plan import Plan
from ktx.agent.planner import PlanContext, Probe, RoundSummary
from ktx.measure.types import Measurement, Resources, Status, Timing

H200 = Device("NVIDIA H200", 132, 4000.0)


def toy_catalog() -> Catalog:
    """Passes with the names, options and knobs the planners reason about."""
    return Catalog.of(
        [
            PassInfo(
                "vectorize",
                "scalar loads and stores become vector ones",
                (OptionInfo("widths", "ints", (1, 2, 4, 8), "vector widths offered"),),
                (KnobInfo("VEC", "1, 2, 4, 8", "1", "elements per access"),),
            ),
            PassInfo(
                "block-size",
                "block dimensions become knobs",
                (OptionInfo("min", "int", 32, "smallest"), OptionInfo("max", "int", 1024, "largest")),
                (KnobInfo("BLOCK_X", "32..1024", "current", "threads along x"),),
                after=("expose",),
            ),
            PassInfo(
                "unroll",
                "loops get an unroll knob",
                (OptionInfo("loops", "strs", ("all",), "loops to unroll"),),
                (KnobInfo("UNROLL_<loop>", "0, 1, 2, 4, 8", "0", "unroll factor"),),
            ),
            PassInfo(
                "split",
                "rows split over several blocks",
                (),
                (KnobInfo("SPLIT", "1..16", "1", "blocks per row"),),
            ),
            PassInfo("warp-reduce", "shared tree reduction becomes warp shuffles"),
            PassInfo("hoist", "loop-invariant math moves out of loops"),
            PassInfo(
                "fast-math",
                "fast intrinsics",
                (OptionInfo("flag", "bool", False, "use -use_fast_math"),),
                (KnobInfo("FAST_MATH", "0, 1", "0", "intrinsics on"),),
                conflicts=("hoist",),
            ),
        ]
    )


def measurement(
    shape: str,
    graph_us: float,
    *,
    nbytes: int,
    blocks: int,
    threads: int = 256,
    occupancy: float = 1.0,
    copy_gbs: float = 4000.0,
    config: dict[str, int] | None = None,
    status: Status = Status.OK,
) -> Measurement:
    """A plausible measurement: SOL from ``nbytes`` at ``copy_gbs``."""
    t = Timing(graph_us, graph_us * 0.99, graph_us * 1.01, graph_us * 0.98, graph_us * 1.05, graph_us, 100)
    sol_us = nbytes / copy_gbs / 1e3
    return Measurement(
        kernel="k",
        shape=shape,
        config=config or {},
        status=status,
        single=Timing(graph_us + 2, graph_us + 2, graph_us + 2, graph_us + 2, graph_us + 2, graph_us + 2, 10),
        graph=t,
        resources=Resources(32, 0, 0, 0, 1024, threads, 8, occupancy, "warps"),
        grid=(blocks,),
        block=(threads,),
        bytes=nbytes,
        bandwidth_gbs=nbytes / graph_us / 1e3,
        sol_us=sol_us,
        sol_fraction=sol_us / graph_us,
    )


def make_analysis(
    facts: KernelFacts,
    ms: Sequence[Measurement],
    *,
    flags: tuple[str, ...] = (),
    fast_math_budget: bool = False,
    pipeline: str = "",
) -> Analysis:
    return analyze(
        facts.kernel,
        pipeline,
        facts,
        [(m, "graph") for m in ms],
        H200,
        flags=flags,
        tolerance="bf16 rtol 1.6e-02",
        fast_math_budget=fast_math_budget,
    )


def context(
    analysis: Analysis,
    catalog: Catalog,
    *,
    current: Plan | None = None,
    history: Sequence[RoundSummary] = (),
    probes: Sequence[Probe] = (),
    round: int = 1,
) -> PlanContext:
    return PlanContext(
        analysis.kernel,
        round,
        3,
        analysis,
        catalog,
        current or Plan((), "original"),
        tuple(history),
        tuple(probes),
    )


def scalar_facts() -> KernelFacts:
    """A memory-bound element-wise kernel read element by element."""
    return KernelFacts(
        "act_kernel",
        scalar_accesses=("x_row", "out_row"),
        math_calls=("expf",),
    )


def memory_bound(shape: str = "tokens=4096,d=4096") -> Measurement:
    return measurement(shape, 30.0, nbytes=4096 * 4096 * 6, blocks=4096)  # ~3350 GB/s of 4000


def latency_bound(shape: str = "tokens=1,d=4096") -> Measurement:
    return measurement(shape, 4.0, nbytes=4096 * 6, blocks=1)


def shape_analysis(**kw: object) -> ShapeAnalysis:
    return ShapeAnalysis(**kw)  # type: ignore[arg-type]
