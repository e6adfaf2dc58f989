"""hoist: invariant, pure, expensive expressions move before the outermost loop they allow."""

from __future__ import annotations

from passtest import apply, remarks
from semantic import APPLIES, build, load, spec_dirs

SRC = """\
__global__ void k(float* __restrict__ y, const float* __restrict__ x, int n, float eps, float t) {
  for (int r = 0; r < 4; ++r) {
    const float scale = 1.0f / (r + 1);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      y[r * n + i] = x[r * n + i] * expf(-1.0f / t) * scale / sqrtf(n + eps);
    }
  }
}
"""


def test_outermost_placement_and_types() -> None:
    t = apply(SRC, "hoist")
    assert not t.knobs
    out = t.source
    head = out[: out.index("for (int r = 0;")]
    assert "  const float ktx_h0 = expf(-1.0f / t);  // hoist: invariant in L1\n" in head
    assert "  const float ktx_h1 = sqrtf(n + eps);  // hoist: invariant in L1\n" in head
    assert "x[r * n + i] * ktx_h0 * scale / ktx_h1;" in out
    assert "const float scale = 1.0f / (r + 1);" in out  # depends on r: stays


def test_identical_expressions_share_one_value() -> None:
    src = SRC.replace("* scale /", "* expf(-1.0f / t) /")
    out = apply(src, "hoist").source
    assert out.count("expf(-1.0f / t)") == 1 and out.count("ktx_h0") == 3


def test_options() -> None:
    out = apply(SRC, "hoist{max=1}").source
    assert "ktx_h0 = expf" in out and "sqrtf(n + eps)" in out.split("ktx_h0", 2)[2]
    cheap = apply(SRC.replace("expf(-1.0f / t)", "(t * eps + 1.f)"), "hoist{cheap=true}").source
    assert "const float ktx_h0 = (t * eps + 1.f);" in cheap or "ktx_h0 = t * eps" in cheap


def test_what_stays() -> None:
    varying = SRC.replace("expf(-1.0f / t)", "expf(x[i])").replace("sqrtf(n + eps)", "sqrtf(i + eps)")
    t = apply(varying, "hoist")
    assert t.source == varying
    assert remarks(t) == ["k: no loop-invariant division, square root or transcendental in any loop"]
    impure = SRC.replace("expf(-1.0f / t)", "expf(x[0])").replace("sqrtf(n + eps)", "my_sqrt(n)")
    assert apply(impure, "hoist").source == impure
    constant = SRC.replace("expf(-1.0f / t)", "(1.0f / 3.0f)").replace("sqrtf(n + eps)", "2.f")
    assert apply(constant, "hoist").source == constant


def test_applies_where_pinned() -> None:
    found = {p.name for p in spec_dirs() if build(load(p.name), "hoist").source != load(p.name).source_text()}
    assert found == APPLIES["hoist"]
