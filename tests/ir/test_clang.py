"""ktx.ir.clang: element types and sizes, macro values, and graceful absence."""

from __future__ import annotations

from collections.abc import Iterator

import ktx.ir.clang as clang
import pytest
from ktx.ir import parse
from ktx.ir.clang import ClangFacts, facts

SRC = """\
#include <cuda_bf16.h>
#include "my_project_header.cuh"
#define BLOCK 256
#define VEC (16 / sizeof(__nv_bfloat16))
#define TWO_BLOCKS (2 * BLOCK)
#define NEG_SHIFT -(1 << 4)
#define RATIO 0.5f
#define LANE threadIdx.x
#define KTX_INLINE __device__ __forceinline__
#define SQUARE(x) ((x) * (x))
using bf16_t = __nv_bfloat16;
typedef __half fp16_t;

namespace ktx_test {
template <typename T, typename S = float, int N = 4>
__global__ void __launch_bounds__(BLOCK) typed(
    T* __restrict__ out, const S* scale, const bf16_t* __restrict__ a, const fp16_t* b,
    const float* c, float4* d, const uint4* e, const __nv_fp8_e4m3* f, double2* g,
    const float4& h, int n, size_t m) {}
}  // namespace ktx_test

extern "C" __global__ void plain(float* x, __nv_bfloat16 (*rows)[8]) {}

KTX_INLINE float twice(float x) { return 2.f * x; }
"""


@pytest.fixture(scope="module")
def src_facts() -> ClangFacts:
    result = facts(parse(SRC, "typed.cu"))
    assert result is not None
    if not result.available and "cannot be loaded" in result.reason:
        pytest.skip(result.reason)
    return result


@pytest.fixture
def fresh_cache() -> Iterator[None]:
    clang.clear_cache()
    yield
    clang.clear_cache()


def test_available_and_kernels_matched_to_module(src_facts: ClangFacts) -> None:
    assert src_facts.available, src_facts.reason
    assert [k.name for k in src_facts.kernels] == ["typed", "plain"]
    typed = src_facts.kernel("typed")
    assert typed is not None and typed.function is not None and typed.function.name == "typed"
    assert typed.line == 16


@pytest.mark.parametrize(
    ("param", "element", "size"),
    [
        ("a", "__nv_bfloat16", 2),
        ("b", "__half", 2),
        ("c", "float", 4),
        ("d", "float4", 16),
        ("e", "uint4", 16),
        ("f", "__nv_fp8_e4m3", 1),
        ("g", "double2", 16),
        ("h", "float4", 16),
        ("n", "int", 4),
        ("m", "unsigned long", 8),
    ],
)
def test_element_types_resolve_typedefs_and_have_sizes(
    src_facts: ClangFacts, param: str, element: str, size: int
) -> None:
    kernel = src_facts.kernel("typed")
    assert kernel is not None
    p = kernel.param(param)
    assert p is not None
    assert (p.element_type, p.element_size, p.dependent) == (element, size, False)


def test_pointer_depth_and_declared_type(src_facts: ClangFacts) -> None:
    kernel = src_facts.kernel("typed")
    assert kernel is not None
    a, h, n = kernel.param("a"), kernel.param("h"), kernel.param("n")
    assert a is not None and h is not None and n is not None
    assert a.pointer_depth == 1 and a.is_pointer and "__restrict" in a.type
    assert h.pointer_depth == 0  # a reference is not a pointer
    assert n.pointer_depth == 0 and not n.is_pointer
    plain = src_facts.kernel("plain")
    assert plain is not None
    rows = plain.param("rows")
    assert rows is not None and (rows.element_type, rows.element_size, rows.pointer_depth) == (
        "__nv_bfloat16",
        2,
        2,
    )


def test_template_parameter_has_no_size_but_its_default_does(src_facts: ClangFacts) -> None:
    kernel = src_facts.kernel("typed")
    assert kernel is not None
    out, scale = kernel.param("out"), kernel.param("scale")
    assert out is not None and scale is not None
    assert (out.element_type, out.element_size, out.dependent, out.default_type) == ("T", None, True, None)
    assert (scale.element_type, scale.element_size, scale.dependent) == ("S", None, True)
    assert (scale.default_type, scale.default_size) == ("float", 4)


def test_integer_macros_are_expanded(src_facts: ClangFacts) -> None:
    assert src_facts.macros == {"BLOCK": 256, "VEC": 8, "TWO_BLOCKS": 512, "NEG_SHIFT": -16}
    assert src_facts.macro("VEC") == 8
    assert src_facts.macro("RATIO") is None  # a float, not an integer
    assert src_facts.macro("LANE") is None  # not a constant
    assert src_facts.macro("SQUARE") is None  # function-like


def test_includes_are_blanked_and_probes_leave_no_diagnostics(src_facts: ClangFacts) -> None:
    assert src_facts.diagnostics == ()


def test_diagnostics_point_into_the_file() -> None:
    src = "__global__ void k(float* x) {}\nvoid host(undeclared_t y) {}\n"
    result = facts(parse(src, "diag.cu"))
    assert result is not None and result.available
    assert "1 clang error" in result.reason
    (diag,) = result.errors
    assert (diag.span.line, diag.span.col, diag.path) == (2, 11, "diag.cu")
    assert "undeclared_t" in diag.message


@pytest.mark.parametrize(
    "src",
    ["__global__ void k(float* x {\n", "#if\n__global__ void k(float* x) {}\n#endif\n"],
)
def test_unparseable_file_is_unavailable_with_a_reason(src: str) -> None:
    result = facts(parse(src))
    assert result is not None
    assert not result.available
    assert result.reason.startswith("libclang could not parse the file")
    assert result.kernels == ()


def test_kernel_clang_misses_is_named_in_reason() -> None:
    src = "struct S { __global__ void member(float* y) {} };\n__global__ void k(float* x) {}\n"
    result = facts(parse(src))
    assert result is not None and result.available
    assert "did not recognise: member" in result.reason


def test_missing_libclang_gives_unavailable_not_an_exception(
    monkeypatch: pytest.MonkeyPatch, fresh_cache: None
) -> None:
    def broken() -> None:
        raise OSError("libclang.so: cannot open shared object file")

    monkeypatch.setattr(clang, "_load", broken)
    result = facts(parse("__global__ void k(float* x) {}"))
    assert result is not None
    assert not result.available
    assert "cannot be loaded" in result.reason and "libclang.so" in result.reason


def test_unexpected_failure_is_caught(monkeypatch: pytest.MonkeyPatch, fresh_cache: None) -> None:
    def boom(module: object) -> ClangFacts:
        raise RuntimeError("boom")

    monkeypatch.setattr(clang, "_compute", boom)
    result = facts(parse("__global__ void k(float* x) {}"))
    assert result is not None and not result.available and "boom" in result.reason


def test_empty_module_has_no_facts() -> None:
    assert facts(parse("")) is None
    assert facts(parse("   \n")) is None


def test_cached_by_source_hash_and_on_the_module() -> None:
    m1 = parse("__global__ void cached(float* x) {}", "c.cu")
    m2 = parse("__global__ void cached(float* x) {}", "c.cu")
    assert facts(m1) is facts(m2)
    assert m1.clang is m1.clang
    other = parse("__global__ void cached(double* x) {}", "c.cu")
    assert facts(other) is not facts(m1)


def test_module_clang_property() -> None:
    m = parse("__global__ void k(const __half* x, float4* y) {}")
    f = m.clang
    assert f is not None and f.available
    k = f.kernel("k")
    assert k is not None
    assert [(p.element_type, p.element_size) for p in k.params] == [("__half", 2), ("float4", 16)]


def test_shim_ships_as_package_data() -> None:
    from pathlib import Path

    assert Path(clang.shim_path()).is_file()


def test_sizes_of_launch_type_arguments_and_common_types() -> None:
    src = """\
namespace app {
using pack_t = uint4;
template <typename T, int N> __global__ void k(T* x) {}
void launch(float* x, cudaStream_t s) {
  k<__nv_bfloat16, 8><<<1, 32, 0, s>>>(nullptr);
  k<pack_t, 2><<<1, 32>>>(nullptr);
  auto go = [&]() { using local_t = double; k<local_t, 1><<<1, 1>>>(nullptr); };
}
}  // namespace app
"""
    f = facts(parse(src))
    assert f is not None and f.available, f and f.reason
    assert f.sizeof("__nv_bfloat16") == 2
    assert f.sizeof("pack_t") == 16  # resolved in the launcher's namespace
    assert ("pack_t", "uint4", 16) in f.type_sizes
    assert f.sizeof("local_t") is None  # a lambda-local alias cannot be probed from outside
    assert f.sizeof("8") is None
    assert (f.sizeof("half"), f.sizeof("float4"), f.sizeof("__nv_fp8_e4m3"), f.sizeof("int64_t")) == (
        2,
        16,
        1,
        8,
    )
    assert f.diagnostics == ()
