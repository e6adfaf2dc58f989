"""vectorize where a read's index is a conditional (``a[t ? j : i]``) or one value for the loop.

CTranslate2's ``dequantize_gemm_output_kernel`` writes ``y[i * depth + j]`` in a block-stride
loop (``i = blockIdx.x``) and reads ``a_scales[transpose_a ? j : i]``, no ``__restrict__``. The
read lands in ``[0, depth)`` or at ``i``: the run-time range check now tests the hull of both
(:mod:`ktx.ir.facts.read_span`), packs where it is apart from the row written, the scalar loop
otherwise. The single value ``i`` may be read by the check only because every thread that shares
the loop's elements (one block's) sees the same ``i``: a value that differs between them
(``threadIdx``, ``blockIdx`` in a grid-stride loop, a load, a call, a local set in branches)
keeps the aliasing refusal. ``test_vectorize_host.py::cond_index`` runs every width on the host
with the reads inside and outside the written row.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from passtest import apply, remarks

DQ = """\
__global__ void dq(const int* c, const float* a_scales, const float* b_scales, bool ta, bool tb,
                   const float* bias, float* y, long depth) {
  const long i = blockIdx.x;
  for (long j = threadIdx.x; j < depth; j += blockDim.x) {
    const long index = i * depth + j;
    const float scale = a_scales[ta ? j : i] * b_scales[tb ? j : i];
    float v = c[index] * scale;
    if (bias)
      v = v + bias[j];
    y[index] = v;
  }
}
void run(const int* c, const float* a, const float* b, bool ta, bool tb, const float* bias, float* y, long n,
         long d) {
  dq<<<n, 256>>>(c, a, b, ta, tb, bias, y, d);
}
"""

HULL = (
    "(static_cast<long long>(0) < static_cast<long long>((i)) ? static_cast<long long>(0) : "
    "static_cast<long long>((i)))"
)


def test_a_conditional_index_is_range_checked_over_both_branches() -> None:
    t = apply(DQ, "vectorize")
    assert [k.name for k in t.knobs] == ["VEC_L0"], remarks(t)
    out = t.instantiate({"VEC_L0": 4})
    assert "ktx::store(y + i * depth + ktx_p * 4, ktx_y);" in out
    # both scales are checked from the lower end of the hull of [0, depth) and [i, i + 1)
    assert f"a_scales + ({HULL})" in out
    assert f"b_scales + ({HULL})" in out
    assert "static_cast<long long>((depth)) > static_cast<long long>((i) + 1)" in out


def test_a_read_at_a_block_uniform_value_alone_is_range_checked() -> None:
    source = DQ.replace("a_scales[ta ? j : i]", "a_scales[i]")
    source = source.replace("b_scales[tb ? j : i]", "b_scales[i + 2]")
    t = apply(source, "vectorize")
    assert [k.name for k in t.knobs] == ["VEC_L0"], remarks(t)
    out = t.instantiate({"VEC_L0": 4})
    assert "reinterpret_cast<unsigned long long>(a_scales + ((i) + 1))" in out
    assert "reinterpret_cast<unsigned long long>(b_scales + ((i + 2) + 1))" in out


GRID = """\
__global__ void dq(const float* c, const float* a_scales, bool ta, float* y, long n) {
  for (long j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += blockDim.x * gridDim.x) {
    y[j] = c[j] * a_scales[ta ? j : blockIdx.x];
  }
}
void run(const float* c, const float* a, bool ta, float* y, long n) { dq<<<n / 256, 256>>>(c, a, ta, y, n); }
"""


@pytest.mark.parametrize(
    ("source", "old", "new"),
    [
        # differs between the threads of a block: some would take packs, some the scalar loop
        (DQ, "a_scales[ta ? j : i]", "a_scales[ta ? j : threadIdx.x]"),
        (DQ, "const long i = blockIdx.x;", "const long i = blockIdx.x + threadIdx.x;"),
        # a load, a call: not a value the check may read as the threads' common one
        (DQ, "const long i = blockIdx.x;", "const long i = c[blockIdx.x];"),
        (DQ, "a_scales[ta ? j : i]", "a_scales[ta ? j : c[0]]"),
        (DQ, "a_scales[ta ? j : i]", "a_scales[ta ? j : min(i, depth)]"),
        # a local set in branches, a parameter assigned per thread
        (DQ, "const long i = blockIdx.x;", "long i = 0;\n  if (threadIdx.x > 3) i = blockIdx.x;"),
        (DQ.replace("a_scales[ta ? j : i]", "a_scales[ta ? j : tb]"), "const long i = blockIdx.x;",
         "const long i = blockIdx.x;\n  if (threadIdx.x) tb = 1;"),
        # a body name, a branch that is not bounded
        (DQ, "a_scales[ta ? j : i]", "a_scales[ta ? j : index]"),
        (DQ, "a_scales[ta ? j : i]", "a_scales[ta ? j : 2 * j]"),
        # a grid-stride loop: blocks share its elements, so blockIdx differs between them
        (GRID, "", ""),
    ],
)
def test_values_the_sharing_threads_may_not_agree_on_keep_the_refusal(source: str, old: str, new: str) -> None:  # noqa: E501
    t = apply(source.replace(old, new) if old else source, "vectorize")
    assert not t.knobs, remarks(t)
    # the aliasing refusal, or before it the read of a thread-dependent value in the body
    said = (("aliasing:" in r and "a_scales[" in r) or "differs between the threads" in r for r in remarks(t))
    assert any(said), remarks(t)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_every_width_builds_for_sm90(tmp_path: Path) -> None:
    t = apply(DQ, "vectorize")
    (k,) = t.knobs
    for vec in k.values:
        cu = tmp_path / f"k{vec}.cu"
        cu.write_text(t.instantiate({k.name: vec}))
        r = subprocess.run(
            ["nvcc", "-std=c++17", "-arch=sm_90", "-ptx", "-o", str(cu.with_suffix(".ptx")), str(cu)],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, r.stderr[-2000:]
