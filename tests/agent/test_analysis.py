"""Analysis: facts from the IR, the bound from measurements."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktx.agent.analysis import (
    Analysis,
    Device,
    NcuMetrics,
    ShapeAnalysis,
    analyze_measurement,
    classify,
    facts_of_source,
)
from ktx.measure.types import Status

from .helpers import H200, latency_bound, make_analysis, measurement, memory_bound, scalar_facts

ROOT = Path(__file__).resolve().parents[2]

TREE = """
__global__ void block_sum(const float* __restrict__ x, float* __restrict__ out, int n) {
  __shared__ float buf[256];
  float acc = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) acc += x[blockIdx.x * n + i];
  buf[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = buf[0];
}
"""

INVARIANT = """
__global__ void scale(float* y, const float* x, float t, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = x[i];
    y[i] = v * expf(t) + sqrtf(v);
  }
}
"""

VECTOR = """
__global__ void copy4(float4* y, const float4* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { float4 v = x[i]; y[i] = v; }
}
"""


def test_tree_reduction_and_grid_stride_loop() -> None:
    f = facts_of_source(TREE)
    assert f.kernel == "block_sum"
    assert f.tree_reductions == ("L1",)
    assert [(lp.label, lp.grid_stride, lp.tree_reduction) for lp in f.loops] == [
        ("L0", True, False),
        ("L1", False, True),
    ]
    assert f.shared_arrays == ("buf",) and f.syncthreads == 2 and not f.shuffles
    assert f.scalar_accesses == ("out", "x") and f.scalar_only
    assert "shared-memory tree reductions: L1" in f.text()


def test_invariant_math_is_found_and_variant_math_is_not() -> None:
    f = facts_of_source(INVARIANT)
    assert f.invariant_math == ("L0: expf(t)",)
    assert f.math_calls == ("expf", "sqrtf")


def test_vector_types_mean_not_scalar_only() -> None:
    f = facts_of_source(VECTOR)
    assert f.vector_types == ("float4",) and not f.scalar_only


@pytest.mark.parametrize(
    ("folder", "expect"),
    [
        ("rmsnorm", {"shuffles": True, "tree": (), "scalar_only": False}),
        ("silu_and_mul", {"shuffles": False, "tree": (), "scalar_only": False}),
        ("act_and_mul_scalar", {"shuffles": False, "tree": (), "scalar_only": True}),
    ],
)
def test_suite_kernels(folder: str, expect: dict[str, object]) -> None:
    from ktx.specload import load_spec

    path = ROOT / "kernels" / folder
    if not (path / "ktx.toml").exists():
        pytest.skip(f"kernels/{folder} is not in this checkout")
    spec = load_spec(path)
    f = facts_of_source(spec.source_text(), spec.kernel)
    assert f.shuffles == expect["shuffles"]
    assert f.tree_reductions == expect["tree"]
    assert f.scalar_only == expect["scalar_only"]


def test_classify_rules() -> None:
    assert classify(0.85, 4096, 132, 1.0, 30.0, None)[0] == "memory"
    bound, why = classify(0.05, 1, 132, 1.0, 3.0, None)
    assert bound == "latency" and "1 blocks for 132 SMs" in why and "3.0 µs call" in why
    assert classify(0.3, 4096, 132, 0.1, 50.0, None) == (
        "latency",
        "occupancy 10%, only 30% of the copy bandwidth",
    )
    assert classify(0.2, 4096, 132, 1.0, 50.0, 40.0)[0] == "compute"
    ncu = NcuMetrics(dram_throughput_pct=85.0)
    assert classify(0.3, 4096, 132, 1.0, 50.0, None, ncu) == (
        "memory",
        "DRAM throughput 85% of peak (Nsight Compute)",
    )
    assert classify(0.3, 4096, 132, 1.0, 50.0, None, NcuMetrics(sm_throughput_pct=80.0))[0] == "compute"
    assert classify(None, None, 132, None, None, None)[0] == "unknown"


def test_analyze_measurement_numbers() -> None:
    s = analyze_measurement(memory_bound(), "graph", H200)
    assert s.bound == "memory" and s.status == "ok"
    assert s.time_us == 30.0 and s.blocks == 4096 and s.threads_per_block == 256
    assert s.bandwidth_gbs == pytest.approx(4096 * 4096 * 6 / 30.0 / 1e3)
    assert s.bandwidth_fraction == pytest.approx(s.bandwidth_gbs / 4000.0)
    assert s.waves == pytest.approx(4096 / (132 * 8))
    assert "memory-bound" in s.text()
    # The single-launch metric reads the other timing.
    assert analyze_measurement(memory_bound(), "single", H200).time_us == 32.0
    # Without a copy bandwidth (replay), the fraction of speed-of-light stands in.
    s = analyze_measurement(memory_bound(), "graph", Device("replay", 132, 0.0))
    assert s.bandwidth_fraction == pytest.approx(s.sol_fraction)


def test_failed_measurement() -> None:
    m = measurement("t=1", 5.0, nbytes=10, blocks=1, status=Status.CRASH)
    s = analyze_measurement(m, "graph", H200)
    assert s.bound == "unknown" and s.status == "crash"


def test_overall_bound_and_json_round_trip() -> None:
    a = make_analysis(scalar_facts(), [memory_bound(), latency_bound(), latency_bound("tokens=2,d=4096")])
    assert a.bound == "latency"
    assert [s.shape for s in a.underfilled] == ["tokens=1,d=4096", "tokens=2,d=4096"]
    assert isinstance(a, Analysis)
    for s in a.shapes:
        assert ShapeAnalysis.from_json(s.to_json()) == s
    assert "overall: latency-bound" in a.text()
    tie = make_analysis(scalar_facts(), [memory_bound(), latency_bound()])
    assert tie.bound == "memory"
    assert make_analysis(scalar_facts(), [], flags=("-use_fast_math",)).fast_math_flags


def test_reductions_come_from_the_facts_layer() -> None:
    """The loops folding a variable, as ktx.ir.facts.reductions names them (a sum and a max here);
    ``s >>= 1`` halving a counter in a loop with no shared array is no tree reduction."""
    f = facts_of_source(
        """
__global__ void k(const float* x, float* out, int n) {
  float acc = 0.f, mx = -1e30f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) { acc += x[i]; mx = fmaxf(mx, x[i]); }
  for (int s = 16; s > 0; s >>= 1) { acc += __shfl_down_sync(0xffffffff, acc, s); __syncthreads(); }
  out[0] = acc + mx;
}
"""
    )
    assert f.reductions[0] == "L0: sum acc" and "L0: max mx" in f.reductions
    assert f.tree_reductions == () and f.shuffles and f.syncthreads == 1
    assert "reductions: L0: sum acc" in f.text()


def test_a_template_setting_the_file_gives_no_value_is_a_performance_constant_for_the_planner() -> None:
    # FlashInfer's RMSNormKernel<VEC_SIZE, T>, launched through a dispatch macro: no value in the
    # file, the spec binds it; listed so that the rules planner's expose rule sees it.
    src = """
template <typename T, unsigned N> struct vec_t { T v[N]; };
template <uint32_t VEC_SIZE, typename T>
__global__ void norm(T* out, const T* in, uint32_t d) {
  vec_t<T, VEC_SIZE> x;
  for (uint32_t i = threadIdx.x * VEC_SIZE; i < d; i += blockDim.x * VEC_SIZE) out[i] = in[i];
}
"""
    assert facts_of_source(src).perf_constants == ("VEC_SIZE=(the spec's)",)
