"""ir/facts/rowkeep.py: which loops keep a row in registers, and a refusal that names the
construct and its line (the real-code row kernels of benchmarks/realcode, session 9)."""

from __future__ import annotations

from ktx.ir import parse
from ktx.ir.facts.rowkeep import ScalarKeep, row_keeps

NORM = """
__global__ void norm(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ w, int n) {
  __shared__ float part[32];
  float2 acc = make_float2(0.f, 0.f);
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = x[i];
    acc.x += v;
    acc.y += v * v;
  }
  for (int o = 16; o > 0; o /= 2) acc.y += __shfl_xor_sync(0xffffffffu, acc.y, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = acc.y;
  __syncthreads();
  const float r = rsqrtf(part[0] / float(n));
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    y[i] = x[i] * r * w[i];
  }
}
"""


def _keeps(src: str) -> tuple[ScalarKeep, ...] | str:
    m = parse(src)
    got = row_keeps(m, m.kernel("norm"))
    assert isinstance(got, str) or all(isinstance(k, ScalarKeep) for k in got)
    return got  # type: ignore[return-value]


def test_locals_shared_stores_shuffles_and_casts_do_not_stop_a_scalar_row() -> None:
    """A float2 accumulator's fields, a __shared__ partial, warp shuffles, a barrier and float(n)
    between the loops touch no global row: x is kept, w loads early."""
    got = _keeps(NORM)
    assert not isinstance(got, str), got
    assert sorted((ld.element, ld.kind) for ld in got[0].loads) == [("w[i]", "early"), ("x[i]", "kept")]


def test_each_refusal_names_the_construct_and_its_line() -> None:
    # a device function between the loops (ggml's block_reduce): its effects are not known
    called = NORM.replace("  __syncthreads();\n", "  __syncthreads();\n  reduce_block(part);\n")
    got = _keeps(called)
    assert isinstance(got, str)
    assert "loops at line 5 and line 15: a call between the loops that is not math (line 13: " in got
    assert "reduce_block(part);" in got
    # a global store between the loops
    stored = NORM.replace("  __syncthreads();\n", "  __syncthreads();\n  y[0] = 1.f;\n")
    got = _keeps(stored)
    assert isinstance(got, str) and "a store between the loops (line 13)" in got
    # an early exit from the first loop
    broken = NORM.replace("    acc.x += v;\n", "    if (v > 1e30f) break;\n    acc.x += v;\n")
    got = _keeps(broken)
    assert isinstance(got, str) and "the first loop leaves early (break at line 7)" in got
    # the row written in place by the later loop: nothing to keep
    inplace = NORM.replace("y[i] = x[i] * r * w[i];", "y[i] = x[i] * r * w[i];\n    x[i] = 0.f;").replace(
        "const float* __restrict__ x", "float* __restrict__ x"
    )
    got = _keeps(inplace)
    assert isinstance(got, str) and "no element the later loops read is one the first loop read" in got
