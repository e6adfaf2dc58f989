"""vectorize where the spec names a template type and the file's own launches compile others.

Session 9: llm-awq's ``quant_kernel<T, ...>`` ran with the spec's ``T = half``, but the file's
launcher instantiates it under a float/half/bf16 dispatch (``quant_kernel<scalar_t, ...>``), and
every instantiation compiles the rewritten text: ``VEC_LOOPS = 8`` made a 32-byte ``float`` pack,
``ktx::word<32>`` does not exist, and the candidate was a compile error. The width of such a
pack is now ``sizeof``'s at compile time, as for a type no launch names.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from passtest import apply, remarks

SRC = """\
#include <cuda_fp16.h>
template <typename T>
__global__ void absmax(const T* __restrict__ in, float* __restrict__ out, int d) {
  float m = 0.0f;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    float v = (float)in[blockIdx.x * d + i];
    if (v > m) m = v;
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = m;
}

#define DISPATCH(FLOAT, ...) if (FLOAT) { using scalar_t = float; __VA_ARGS__(); } \\
  else { using scalar_t = __half; __VA_ARGS__(); }

void launch(const void* in, float* out, int d, int rows, bool is_float) {
  DISPATCH(is_float, [&] {
    absmax<scalar_t><<<rows, 256>>>((const scalar_t*)in, out, d);
  });
}
"""


def test_the_spec_type_with_other_instantiations_in_the_file_is_sized_by_sizeof() -> None:
    t = apply(SRC, "vectorize", kernel="absmax", template_args=["__half"])
    assert [(k.name, k.values) for k in t.knobs] == [("VEC_L0", (1, 2, 4, 8))]  # half: 2 B
    assert "constexpr int ktx_bytes_L0 = int(sizeof(T));" in t.source
    eight = t.instantiate({"VEC_L0": 8})
    assert "ktx::load<8>" not in eight and "ktx::load<ktx_vec_L0>" in eight
    assert any("the file's own launches compile this text with other T too" in r for r in remarks(t))


def test_launches_of_the_spec_type_only_keep_the_given_size() -> None:
    src = SRC.replace(
        "absmax<scalar_t><<<rows, 256>>>((const scalar_t*)in", "absmax<float><<<rows, 256>>>((const float*)in"
    )
    t = apply(src, "vectorize", kernel="absmax", template_args=["float"])
    assert [(k.name, k.values) for k in t.knobs] == [("VEC_L0", (1, 2, 4))]
    assert "ktx_bytes_L0" not in t.source
    assert "ktx::load<4>" in t.instantiate({"VEC_L0": 4})


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_widest_width_builds_with_the_files_float_instantiation(tmp_path: Path) -> None:
    t = apply(SRC, "vectorize", kernel="absmax", template_args=["__half"])
    cu = tmp_path / "k.cu"
    cu.write_text(t.instantiate({"VEC_L0": 8}))
    r = subprocess.run(
        ["nvcc", "-std=c++17", "-arch=sm_90", "-cubin", "-o", str(tmp_path / "k.cubin"), str(cu)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr[-2000:]
