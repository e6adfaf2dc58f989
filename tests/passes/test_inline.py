"""inline: a kernel that only calls a __device__ function of its file takes that body in.

Session 9: apex's cuApplyLayerNorm / cuApplyRMSNorm (one call to cuApplyLayerNorm_) and
exllamav2's rope_cuda_kernel (neox or gptj helper) ended at 1.000x with every pass saying there
was nothing in the kernel to rewrite. The pipeline now runs ``inline`` first on such kernels.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from passtest import apply, remarks

WRAPPER = """\
template <typename T, typename U>
__device__ void apply_(T* __restrict__ out, U* __restrict__ stat, const T* __restrict__ in, const int n,
                       bool squared) {
  const int row = blockIdx.x;
  U acc = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const U v = static_cast<U>(in[row * n + i]);
    acc += squared ? v * v : v;
    out[row * n + i] = in[row * n + i];
  }
  if (threadIdx.x == 0 && stat != nullptr) {
    stat[row] = acc;
  }
}

template <typename T, typename U>
__global__ void plain(T* __restrict__ out, U* __restrict__ stat, const T* __restrict__ in, const int n) {
  apply_<T, U>(out, stat, in, n, false);
}

template <typename T, typename U>
__global__ void squares(T* __restrict__ out, const T* __restrict__ in, const int n) {
  apply_<T, U>(out, nullptr, in, n, true);
}
"""

EXPECTED = """\
template <typename T, typename U>
__global__ void squares(T* __restrict__ out, const T* __restrict__ in, const int n) {
  {  // ktx inline: apply_, line 1
    U* __restrict__ stat = nullptr;
    bool squared = true;
    const int row = blockIdx.x;
    U acc = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      const U v = static_cast<U>(in[row * n + i]);
      acc += squared ? v * v : v;
      out[row * n + i] = in[row * n + i];
    }
    if (threadIdx.x == 0 && stat != nullptr) {
      stat[row] = acc;
    }
  }
}
"""

DISPATCH = """\
__device__ void neox(float* x, int n, int half) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= half) return;
  x[i] = -x[i + half];
}
__device__ void gptj(float* x, int n, int half) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (2 * i + 1 >= n) return;
  x[2 * i] = -x[2 * i + 1];
}
__global__ void rope(float* x, int n, bool neox_style) {
  if (neox_style)
    neox(x, n, n / 2);
  else
    gptj(x, n, n / 2);
}
"""


def test_a_wrapper_takes_the_body_with_its_parameters_bound() -> None:
    t = apply(WRAPPER, "inline", kernel="squares", template_args=["float", "float"])
    assert EXPECTED in t.source
    assert remarks(t) == [
        "squares: rewritten; inlined apply_: the passes after it see the body in the kernel"
    ]
    # the kernel's own variables of the same name and type are used as they are
    plain = apply(WRAPPER, "inline", kernel="plain", template_args=["float", "float"]).source
    assert "bool squared = false;" in plain and "const int n =" not in plain and "stat =" not in plain


def test_each_branch_of_a_dispatch_is_inlined() -> None:
    t = apply(DISPATCH, "inline", kernel="rope")
    body = t.source[t.source.index("__global__ void rope") :]
    assert "if (i >= half) return;" in body and "if (2 * i + 1 >= n) return;" in body
    assert body.count("int half = n / 2;") == 2


def test_an_argument_that_names_a_shadowed_parameter_is_read_first() -> None:
    src = "__device__ void f(int* p, int a, int b) { p[threadIdx.x] = a - b; }\n"
    src += "__global__ void k(int* p, int a, int b) { f(p, b, a); }\n"
    out = apply(src, "inline", kernel="k").source
    # a = b reads the kernel's b (not shadowed yet); b = a needs the kernel's a, taken first
    block = "{  // ktx inline: f, line 1\n  auto&& ktx_arg2 = a;\n  int a = b;\n  int b = ktx_arg2;\n"
    assert block + "  p[threadIdx.x] = a - b;\n}" in out


@pytest.mark.parametrize(
    ("kernel_body", "why"),
    [
        ("int j = 0; f(p, j);", "the kernel's body is 2 statements"),
        ("g(p, 1);", "g (line 4) returns int: only void device functions are inlined"),
        ("p[0] = 1;", "`p[0] = 1;` (line 4) is not a call of a device function"),
        ("f(p);", "f (line 4): 1 argument(s) for 2 parameter(s)"),
    ],
)
def test_refusals(kernel_body: str, why: str) -> None:
    src = "__device__ void f(int* p, int v) { p[threadIdx.x] = v; }\n"
    src += "__device__ int g(int* p, int v) { return p[v]; }\n"
    src += "__global__ void k(int* p) {\n"
    src += f"  {kernel_body}\n}}\n"
    t = apply(src, "inline", kernel="k")
    assert t.source == src
    assert len(remarks(t)) == 1 and why in remarks(t)[0]


def test_a_template_called_with_other_names_is_refused() -> None:
    src = WRAPPER.replace("apply_<T, U>(out, nullptr", "apply_<T, float>(out, nullptr")
    t = apply(src, "inline", kernel="squares", template_args=["float", "float"])
    assert "is called as <T, float>, not with the kernel's own template parameters" in remarks(t)[0]


def test_the_pipeline_runs_inline_first_on_a_wrapper_only() -> None:
    t = apply(WRAPPER, "cache-hints", kernel="squares", template_args=["float", "float"])
    assert [s.pass_name for s in t.trace.steps][:2] == ["inline", "cache-hints"]
    assert t.trace.steps[0].reason == "added: the kernel only calls a device function of the file"
    assert {k.name for k in t.knobs} == {"CACHE_LD_IN", "CACHE_ST_OUT"}  # nothing to hint before
    plain = "__global__ void k(float* __restrict__ y, const float* __restrict__ x) {\n"
    plain += "  y[threadIdx.x] = x[threadIdx.x];\n}\n"
    assert "inline" not in [s.pass_name for s in apply(plain, "cache-hints").trace.steps]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_inlined_kernels_build_for_sm90(tmp_path: Path) -> None:
    text = apply(WRAPPER, "inline", kernel="squares", template_args=["float", "float"]).source
    text = apply(text, "inline", kernel="plain", template_args=["float", "float"]).source
    text += "template __global__ void squares<float, float>(float*, const float*, const int);\n"
    text += "template __global__ void plain<float, double>(float*, double*, const float*, const int);\n"
    text += apply(DISPATCH, "inline", kernel="rope").source
    cu = tmp_path / "k.cu"
    cu.write_text(text)
    r = subprocess.run(
        ["nvcc", "-std=c++17", "-arch=sm_90", "-cubin", "-o", str(tmp_path / "k.cubin"), str(cu)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr[-2000:]
