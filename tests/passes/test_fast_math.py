"""fast-math: one precision knob per kernel, variants under #if, float division only."""

from __future__ import annotations

from passtest import apply, remarks, suite_source
from semantic import APPLIES, build, load, spec_dirs

SRC = """\
__device__ float gate(float x) { return x / (1.0f + expf(-x)); }

__global__ void k(float* __restrict__ out, const float* __restrict__ in, float var, double s, int n) {
  const float inv = 1.0f / sqrtf(var);
  const int half = n / 2;
  const double r = s / 3.0;
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    out[i] = gate(in[i]) * inv + logf(in[i] + 1.f) + (float)r;
  }
}
"""


def body(text: str) -> str:
    return text[text.find("__device__ float gate") :]


def test_levels_rewrite_what_they_promise() -> None:
    t = apply(SRC, "fast-math")
    assert [(k.name, k.values, k.default) for k in t.knobs] == [("FAST_MATH", (0, 1, 2, 3), 0)]
    one = body(t.instantiate({"FAST_MATH": 1}))
    assert "return x / (1.0f + __expf(-x));" in one
    assert "const float inv = rsqrtf(var);" in one
    assert "__logf(in[i] + 1.f)" in one
    two = body(t.instantiate({"FAST_MATH": 2}))
    assert "return __fdividef(x, 1.0f + __expf(-x));" in two
    three = body(t.instantiate({"FAST_MATH": 3}))
    assert "return x * __frcp_rn(1.0f + __expf(-x));" in three
    for text in (one, two, three):
        assert "const int half = n / 2;" in text  # integer division
        assert "const double r = s / 3.0;" in text  # double division


def test_default_is_the_original_text() -> None:
    t = apply(SRC, "fast-math")
    out = t.instantiate()
    kept = "".join(line for line in out.splitlines(keepends=True) if not line.startswith("// ktx: `"))
    assert kept.replace(" {\n  return", " { return").replace(";\n}", "; }", 1).split() == SRC.split()


def test_one_liner_and_neighbours_keep_their_lines() -> None:
    src = "__device__ float f(float x) { float a = expf(x); float b = expf(-x); return a / b; }\n"
    src += "__global__ void k(float* y) { y[threadIdx.x] = f(y[threadIdx.x]); }\n"
    out = apply(src, "fast-math").instantiate({"FAST_MATH": 3})
    assert "  float a = __expf(x);\n  float b = __expf(-x);\n  return a * __frcp_rn(b);\n}" in out


def test_nothing_to_do_is_a_remark() -> None:
    src = "__global__ void k(double* y, int n) { y[threadIdx.x] = exp(y[threadIdx.x]) / (n / 2); }\n"
    t = apply(src, "fast-math")
    assert not t.knobs and t.source == src
    assert remarks(t) == [
        "k: no expf/logf/sinf/..., 1/sqrtf or float division in the kernel or the device functions it calls"
    ]


def test_levels_option() -> None:
    t = apply(SRC, "fast-math{levels=1}")
    assert t.knobs[0].values == (0, 1)


def test_suite_kernels() -> None:
    t = apply(suite_source("merge_attn_states"), "fast-math")
    out = t.instantiate({"FAST_MATH": 2})
    assert "const float p_scale = __fdividef(p_se, out_se);" in out
    assert "output_lse[lse_idx] = __logf(out_se) + max_lse;" in out
    t = apply(suite_source("fused_add_rmsnorm"), "fast-math")
    out = t.instantiate({"FAST_MATH": 3})
    assert "rsqrtf(smem[0] * __frcp_rn(static_cast<float>(d)) + eps)" in out


def test_applies_where_pinned() -> None:
    found = {p.name for p in spec_dirs() if build(load(p.name), "fast-math").knobs}
    assert found == APPLIES["fast-math"]


def test_docs_name_the_reference_in_use() -> None:
    """The error budget is against the reference in use (the original kernel by default), not
    always a float64 one: the description and both knob helps say so."""
    from ktx.passes.fast_math import FastMath

    assert 'use = "original"' in FastMath.description and "float64" in FastMath.description
    assert "verified against the spec's\nfloat64 reference" not in FastMath.description
    assert "reference in use" in FastMath.knobs[0].help
    assert "reference in use" in apply(SRC, "fast-math").knobs[0].help


QUANT = """\
struct block_q8 { float d; signed char qs[32]; };
__global__ void quant(const float* x, block_q8* y, signed char* z, const float* w, float* o, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const float xi = x[i];
  const float amax = fabsf(xi);
  const float d = amax / 127.0f;
  const signed char q = amax == 0.0f ? 0 : roundf(xi / d);
  y[i / 32].qs[i % 32] = q;
  z[i] = w[i] / d;
  const int k = static_cast<int>(w[i] / 3.0f);
  o[i] = xi / (float)k + w[i] / amax;
}
"""


def test_a_division_rounded_to_an_integer_stays_exact() -> None:
    # ggml quantize_q8_1 (session 9): d = amax / 127.0f and roundf(xi / d) with __fdividef put
    # two quants in millions one step off; a rounded quotient is left exact at every level.
    t = apply(QUANT, "fast-math")
    for level in (2, 3):
        out = t.instantiate({"FAST_MATH": level})
        assert "const float d = amax / 127.0f;" in out  # d reaches roundf through xi / d
        assert "roundf(xi / d)" in out
        assert "z[i] = w[i] / d;" in out  # stored into a signed char
        assert "static_cast<int>(w[i] / 3.0f)" in out
    assert "o[i] = __fdividef(xi, (float)k) + __fdividef(w[i], amax);" in t.instantiate({"FAST_MATH": 2})
    assert "o[i] = xi * __frcp_rn((float)k) + w[i] * __frcp_rn(amax);" in t.instantiate({"FAST_MATH": 3})
    assert any("line(s) 6, 7, 9, 10 left exact at every level" in r for r in remarks(t))


def test_only_rounded_divisions_is_a_remark_that_names_them() -> None:
    src = QUANT.replace("  o[i] = xi / (float)k + w[i] / amax;\n", "")
    t = apply(src, "fast-math")
    assert not t.knobs and t.source == src
    assert remarks(t) == [
        "quant: no expf/logf/sinf/..., 1/sqrtf or float division in the kernel or the device functions "
        "it calls (the float division(s) at line(s) 6, 7, 9, 10 are rounded to an integer, where a fast "
        "division's ulp becomes a whole step: left exact)"
    ]
