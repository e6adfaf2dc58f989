"""On a GPU: each of issue 22's name expressions compiles under NVRTC and under nvcc, the two
compilers report the same lowered name, and the function that name loads computes what that
instantiation computes (so the right one of several was found)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from ktx.measure.compile import CompileRequest, compile_kernel, find_nvcc

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(importlib.util.find_spec("cupy") is None, reason="no CuPy"),
]

SOURCE = r"""
#ifdef __CUDACC_RTC__
typedef int int32_t;
typedef long long int64_t;
#else
#include <cstdint>
#endif
#include <cuda/std/type_traits>
namespace vllm {
enum class Act { kSilu = 0, kGelu = 1 };
static __device__ __forceinline__ float op_silu(const float& x) { return x / (1.f + __expf(-x)); }
static __device__ __forceinline__ float op_twice(const float& x) { return 2.f * x; }
template <float (*F)(const float&), typename T>
__global__ void op_kernel(T* out, const T* in) { out[threadIdx.x] = F(in[threadIdx.x]); }
template <typename T, int32_t N, Act A>
__global__ void act_kernel(T* out, const T* in) { out[threadIdx.x] = T(N * 10 + int(A)); }
template <typename T>
__global__ typename cuda::std::enable_if<cuda::std::is_same<T, float>::value, void>::type
fill_kernel(T* out, const T* in) { out[threadIdx.x] = in[threadIdx.x] + 1.f; }
__global__ void plain_kernel(float* out, const float* in) { out[threadIdx.x] = -in[threadIdx.x]; }
}
"""

X = np.linspace(-2.0, 2.0, 32, dtype=np.float32)
CASES = {
    "vllm::op_kernel<vllm::op_silu, float>": X / (1 + np.exp(-X)),
    "vllm::op_kernel<&vllm::op_twice, float>": 2 * X,
    "vllm::act_kernel<float, int32_t(4), vllm::Act::kGelu>": np.full(32, 41.0),
    "vllm::act_kernel<float, 3, vllm::Act::kSilu>": np.full(32, 30.0),
    "vllm::fill_kernel<float>": X + 1,
    "vllm::plain_kernel": -X,
}


@pytest.mark.parametrize("expression", list(CASES))
def test_nvrtc_and_nvcc_agree_and_the_kernel_runs(
    expression: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cupy as cp

    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path))
    arch = "".join(str(v) for v in cp.cuda.Device().compute_capability)
    lowered: dict[str, str] = {}
    for backend in ("nvrtc", "nvcc") if find_nvcc() else ("nvrtc",):
        result = compile_kernel(CompileRequest(SOURCE, expression, ("-std=c++17",), arch, (), backend))
        assert result.ok, result.log
        lowered[backend] = result.lowered_name
        fn = cp.RawModule(path=result.cubin_path).get_function(result.lowered_name)
        inp = cp.asarray(X)
        out = cp.zeros(32, dtype=cp.float32)
        fn((1,), (32,), (out, inp))
        np.testing.assert_allclose(cp.asnumpy(out), CASES[expression], rtol=1e-5, atol=1e-6)
    assert len(set(lowered.values())) == 1, lowered
