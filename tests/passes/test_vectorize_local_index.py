"""vectorize where the index goes through a body local, and reads at ``var / m``.

Held-out kernels (CTranslate2's layer norm, FasterTransformer's ``length_criterion``) write
``Y[index]`` with ``const SizeT index = i * N + j;`` declared in the loop body, and read
``limit[batch_idx]`` with ``const int batch_idx = index / beam_width;``. Before, the first was
not seen as element ``j`` of a row and the second not bounded, so both loops were refused as
aliasing. The local is now followed where it is declared once and never assigned again (the
index as written decides otherwise), and ``q[var / m]`` is bounded by ``[0, (bound - 1) / m + 1)``
in the run-time range check. These tests pin both, their refusals, and build the rewrites for
sm_90.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from passtest import apply, remarks

LN = """\
__global__ void ln(float* Y, const float* X, const float* gamma, int N, int M) {
  for (int i = blockIdx.x; i < M; i += gridDim.x) {
    for (int j = threadIdx.x; j < N; j += blockDim.x) {
      const int index = i * N + j;
      const float g = gamma == nullptr ? 1.f : gamma[j];
      Y[index] = X[index] * g;
    }
  }
}
void run(float* y, const float* x, const float* g, int n, int m) { ln<<<m, 256>>>(y, x, g, n, m); }
"""

LC = """\
__global__ void lc(bool* finished, const unsigned* limit, int b, int w, int step) {
  for (int index = threadIdx.x; index < b * w; index += blockDim.x) {
    const int batch_idx = index / w;
    finished[index] |= step >= limit[batch_idx];
  }
}
void run(bool* f, const unsigned* l, int b, int w, int s) { lc<<<1, 256>>>(f, l, b, w, s); }
"""


def test_an_index_through_a_body_local_is_a_row_element() -> None:
    t = apply(LN, "vectorize")
    assert [k.name for k in t.knobs] == ["VEC_L1"], remarks(t)
    out = t.instantiate({"VEC_L1": 4})
    assert "ktx::store(Y + i * N + ktx_p * 4, ktx_Y);" in out
    assert "ktx::load<4>(X + i * N + ktx_p * 4)" in out
    # gamma has no __restrict__: packed only where its range is apart from the row written
    assert "reinterpret_cast<unsigned long long>(gamma + ((0) + (N)))" in out


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("const int index = i * N + j;", "int index = i * N + j;\n      index += 1;"),  # assigned again
        ("const int index = i * N + j;", "int k = i;\n      const int index = k * N + j;"),  # a body name
        ("const int index = i * N + j;", "const int index = i * N + 2 * j;"),  # not element j
    ],
)
def test_other_locals_keep_the_refusal(old: str, new: str) -> None:
    t = apply(LN.replace(old, new), "vectorize")
    assert not t.knobs, remarks(t)


def test_a_read_at_the_variable_over_m_is_range_checked() -> None:
    t = apply(LC, "vectorize")
    assert [k.name for k in t.knobs] == ["VEC_L0"], remarks(t)
    out = t.instantiate({"VEC_L0": 4})
    assert "limit + (((w) > 0 ? ((b * w) - 1) / (w) + 1 : 0))" in out


@pytest.mark.parametrize("index", ["(index + 1) / w", "index / w + 1", "(2 * index) / w"])
def test_other_quotients_keep_the_refusal(index: str) -> None:
    t = apply(LC.replace("index / w;", f"{index};"), "vectorize")
    assert not t.knobs
    assert any("aliasing" in r for r in remarks(t)), remarks(t)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize(("source", "knob"), [(LN, "VEC_L1"), (LC, "VEC_L0")])
def test_every_width_builds_for_sm90(source: str, knob: str, tmp_path: Path) -> None:
    t = apply(source, "vectorize")
    (k,) = t.knobs
    assert k.name == knob
    for vec in k.values:
        cu = tmp_path / f"k{vec}.cu"
        cu.write_text(t.instantiate({knob: vec}))
        r = subprocess.run(
            ["nvcc", "-std=c++17", "-arch=sm_90", "-ptx", "-o", str(cu.with_suffix(".ptx")), str(cu)],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, r.stderr[-2000:]
