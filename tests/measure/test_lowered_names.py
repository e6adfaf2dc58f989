"""Kernels found by the compiler's lowered name (issue 22): a namespace, the launcher's
``int32_t`` for ``int``, an enum constant, a ``static`` function's address (with and without
``&``) and an ``enable_if`` return type, none of which a demangler's spelling matches."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ktx.measure import compile as compiler
from ktx.measure.compile import (
    CompileRequest,
    compile_kernel,
    failure_log,
    find_nvcc,
    instantiation_stub,
    kernel_symbols,
    mangled_name,
    not_found_message,
    probed_name,
)

SOURCE = r"""
#include <cstdint>
#include <type_traits>
namespace vllm {
enum class Act { kSilu = 0, kGelu = 1 };
static __device__ __forceinline__ float op_silu(const float& x) { return x / (1.f + __expf(-x)); }
static __device__ __forceinline__ float op_gelu(const float& x) { return x * 0.5f; }
template <float (*F)(const float&), typename T>
__global__ void op_kernel(T* out, const T* in, int n) { int i = threadIdx.x; if (i < n) out[i] = F(in[i]); }
template <typename T, int32_t N, Act A>
__global__ void act_kernel(T* out, int64_t n) { if (threadIdx.x < n) out[threadIdx.x] = T(N + int(A)); }
template <typename T>
__global__ typename std::enable_if<std::is_same<T, float>::value, void>::type
fill_kernel(T* out) { out[0] = 1; }
struct SiluOp { __device__ float operator()(float x) const { return x / (1.f + __expf(-x)); } };
template <typename Op, typename T>
__global__ void functor_kernel(T* out) { out[0] = Op()(out[0]); }
__global__ void plain_kernel(float* out) { out[0] = 2; }
namespace detail { __global__ void inner(float* out) { out[0] = 3; } }
namespace { __global__ void hidden(float* out) { out[0] = 4; } }
}
"""

#: expression -> the symbol the compiler gives it (Itanium ABI, checked against nvcc 13.0)
EXPECTED = {
    "vllm::op_kernel<vllm::op_silu, float>": "_ZN4vllm9op_kernelIXadL_ZNS_7op_siluERKfEEfEEvPT0_PKS3_i",
    "vllm::op_kernel<&vllm::op_gelu, float>": "_ZN4vllm9op_kernelIXadL_ZNS_7op_geluERKfEEfEEvPT0_PKS3_i",
    "vllm::act_kernel<float, int32_t(4), vllm::Act::kGelu>": "_ZN4vllm10act_kernelIfLi4ELNS_3ActE1EEEvPT_l",
    "vllm::act_kernel<float, 4, vllm::Act::kSilu>": "_ZN4vllm10act_kernelIfLi4ELNS_3ActE0EEEvPT_l",
    "vllm::functor_kernel<vllm::SiluOp, float>": "_ZN4vllm14functor_kernelINS_6SiluOpEfEEvPT0_",
    "vllm::fill_kernel<float>": (
        "_ZN4vllm11fill_kernelIfEENSt9enable_ifIXsr3std7is_sameIT_fEE5valueEvE4typeEPS2_"
    ),
}


@pytest.fixture(scope="module")
def cubin(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """One nvcc run with every expression's stub (one compile for the whole module)."""
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("no nvcc")
    folder = tmp_path_factory.mktemp("lowered")
    src = folder / "k.cu"
    src.write_text(SOURCE + "".join(instantiation_stub(e) for e in EXPECTED))
    out = folder / "k.cubin"
    subprocess.run([nvcc, "-cubin", "-arch=sm_90", "-o", str(out), str(src)], check=True, timeout=600)
    return out.read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("expression", list(EXPECTED))
def test_each_template_kernel_is_found_by_its_lowered_name(
    cubin: bytes, expression: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(compiler, "_demangle", lambda names: pytest.fail("the lookup ran a demangler"))
    assert probed_name(cubin, expression) == EXPECTED[expression]
    assert mangled_name(cubin, expression) == EXPECTED[expression]
    assert EXPECTED[expression] in kernel_symbols(cubin)


@pytest.mark.slow
def test_plain_kernels_are_found_with_or_without_their_namespace(cubin: bytes) -> None:
    assert mangled_name(cubin, "vllm::plain_kernel") == "_ZN4vllm12plain_kernelEPf"
    assert mangled_name(cubin, "plain_kernel") == "_ZN4vllm12plain_kernelEPf"  # `using namespace vllm`
    assert mangled_name(cubin, "vllm::detail::inner") == "_ZN4vllm6detail5innerEPf"
    hidden = mangled_name(cubin, "vllm::hidden")  # nvcc names the anonymous namespace per file
    assert hidden.startswith("_ZN4vllm") and "_GLOBAL__N_" in hidden and hidden.endswith("6hiddenEPf")
    with pytest.raises(RuntimeError, match="not found"):
        mangled_name(cubin, "other::plain_kernel")


@pytest.mark.slow
def test_an_expression_without_a_stub_is_not_found_and_the_error_names_a_few(cubin: bytes) -> None:
    """A cubin answers only for the expressions it was built for; the error lists the closest
    few kernels, not every symbol."""
    with pytest.raises(RuntimeError) as err:
        mangled_name(cubin, "vllm::act_kernel<float, 5, vllm::Act::kGelu>")
    message = str(err.value)
    assert "closest" in message and "act_kernel" in message.split("closest", 1)[1]
    assert message.count("(_Z") <= 5


def test_the_error_lists_at_most_five_of_hundreds() -> None:
    funcs = [f"_Z{len(f'k{i}')}k{i}Pf" for i in range(300)] + ["_ZN4vllm12rms_norm_fwdEPf"]
    message = not_found_message("vllm::rms_norm_fw", funcs)
    listed = message.split("closest", 1)[1]
    assert listed.count("(_Z") == 5
    assert "vllm::rms_norm_fwd (_ZN4vllm12rms_norm_fwdEPf)" in listed.split(";")[0]
    assert "of 301 functions" in message


def test_the_last_attempt_is_reported_first() -> None:
    log = failure_log(["NVRTC: catastrophic error: cannot open source file \"torch/all.h\"",
                       "nvcc: kernel.cu(3): error: identifier \"x\" is undefined"])  # fmt: skip
    assert log.splitlines()[0].startswith("nvcc: kernel.cu(3): error")
    assert "earlier attempts:" in log and "cannot open source file" in log
    assert failure_log(["nvcc: boom"]) == "nvcc: boom"


@pytest.mark.slow
@pytest.mark.skipif(not find_nvcc(), reason="no nvcc")
def test_compile_kernel_with_nvcc_gives_the_lowered_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path))
    expression = "vllm::act_kernel<float, int32_t(4), vllm::Act::kGelu>"
    result = compile_kernel(CompileRequest(SOURCE, expression, (), "90", (), "nvcc"))
    assert result.ok, result.log
    assert result.lowered_name == EXPECTED[expression]
