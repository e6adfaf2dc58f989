"""Functions in the index: kernels, device functions, template and call parameters, bounds."""

from __future__ import annotations

import pytest
from ktx.ir import Function, Module, parse

SRC = """\
#define BLOCK 256
namespace outer {
template <typename T, int VEC = 4, bool kFlag = true>
__global__ void __launch_bounds__(BLOCK, 2) scale(
    T* __restrict__ out, const T* __restrict__ in, const float alpha, int n, float* const* rows,
    const float4& bias, float (*act)(float)) {
  out[0] = in[0];
}
}  // namespace outer

template <typename T, float (*Act)(const float&), template <typename, int> class Vec,
          typename... Ts, int... Ns, typename S = float>
__global__ __launch_bounds__(128) void weird(T* x, Ts... rest) {}

__device__ __forceinline__ float twice(float x) { return 2.f * x; }
__host__ __device__ int both(int x) { return x; }
static inline int host_only(int x) { return x; }
extern "C" __global__ void c_kernel() {}
__global__ void prototype_only(float* x);
"""


@pytest.fixture(scope="module")
def mod() -> Module:
    return parse(SRC, "functions.cu")


def fn(m: Module, name: str) -> Function:
    return next(f for f in m.functions if f.name == name)


def test_kernels_device_functions_and_host(mod: Module) -> None:
    assert [k.name for k in mod.kernels] == ["scale", "weird", "c_kernel"]
    assert [f.name for f in mod.device_functions] == ["twice", "both"]
    host = fn(mod, "host_only")
    assert not host.is_kernel and not host.is_device
    assert "prototype_only" not in [f.name for f in mod.functions]  # declarations are not indexed
    assert fn(mod, "twice").qualifiers == ("__device__", "__forceinline__")
    assert set(fn(mod, "both").qualifiers) == {"__host__", "__device__"}
    assert mod.kernel("c_kernel").params == ()


def test_template_params_with_kinds_types_defaults(mod: Module) -> None:
    k = mod.kernel("scale")
    assert k.is_template
    got = [(t.name, t.kind, t.type, t.default) for t in k.template_params]
    assert got == [
        ("T", "type", None, None),
        ("VEC", "value", "int", "4"),
        ("kFlag", "value", "bool", "true"),
    ]


def test_unusual_template_params(mod: Module) -> None:
    got = [(t.name, t.kind, t.type, t.default, t.variadic) for t in mod.kernel("weird").template_params]
    assert got == [
        ("T", "type", None, None, False),
        ("Act", "value", "float (*)(const float&)", None, False),
        ("Vec", "template", None, None, False),
        ("Ts", "type", None, None, True),
        ("Ns", "value", "int", None, True),
        ("S", "type", None, "float", False),
    ]


def test_params_type_pointer_const_restrict(mod: Module) -> None:
    k = mod.kernel("scale")
    got = [(p.name, p.type, p.base_type, p.pointer_depth, p.const, p.restrict) for p in k.params]
    assert got == [
        ("out", "T* __restrict__", "T", 1, False, True),
        ("in", "const T* __restrict__", "T", 1, True, True),
        ("alpha", "const float", "float", 0, True, False),
        ("n", "int", "int", 0, False, False),
        ("rows", "float* const*", "float", 2, False, False),
        ("bias", "const float4&", "float4", 0, True, False),
        ("act", "float (*)(float)", "float", 1, False, False),
    ]
    out = k.param("out")
    assert out is not None and out.is_pointer
    assert k.param("missing") is None
    weird = mod.kernel("weird")
    assert [(p.name, p.type) for p in weird.params] == [("x", "T*"), ("rest", "Ts...")]


def test_param_spans_cover_their_text(mod: Module) -> None:
    for k in mod.kernels:
        for p in k.params:
            text = mod.text(p.span)
            assert p.name in text and text.strip() == text


def test_launch_bounds_one_and_two_args(mod: Module) -> None:
    lb = mod.kernel("scale").launch_bounds
    assert lb is not None and (lb.max_threads, lb.min_blocks) == ("BLOCK", "2")
    assert mod.text(lb.span) == "__launch_bounds__(BLOCK, 2)"
    assert [mod.text(a) for a in lb.args] == ["BLOCK", "2"]
    lb2 = mod.kernel("weird").launch_bounds  # written before the return type
    assert lb2 is not None and (lb2.max_threads, lb2.min_blocks) == ("128", None)
    assert mod.kernel("c_kernel").launch_bounds is None


def test_spans_signature_and_body(mod: Module) -> None:
    k = mod.kernel("scale")
    assert mod.text(k.span).startswith("template <typename T, int VEC = 4")
    assert mod.text(k.span).endswith("}")
    assert mod.text(k.body).startswith("{") and mod.text(k.body).endswith("}")
    assert mod.text(k.signature).rstrip().endswith("float (*act)(float))")
    assert k.signature.end == k.body.start and k.span.end == k.body.end
    assert (k.span.line, k.span.col) == (3, 1)
    assert k.return_type == "void" and not k.has_error


def test_kernel_lookup_errors(mod: Module) -> None:
    from ktx.ir.errors import KtxError

    with pytest.raises(KtxError, match="3 kernels in this file: scale, weird, c_kernel"):
        mod.kernel()
    with pytest.raises(KtxError, match="no kernel named 'nope'"):
        mod.kernel("nope")
    with pytest.raises(KtxError, match="no __global__ kernel"):
        parse("int main() { return 0; }").kernel()
    assert parse("__global__ void only() {}").kernel().name == "only"


def test_attribute_macro_qualifiers_are_restored() -> None:
    m = parse(
        "#define KTX_INLINE __device__ __forceinline__\n"
        "#define KTX_GLOBAL __global__\n"
        "template <typename T> KTX_INLINE T f(T x) { return x; }\n"
        "KTX_GLOBAL void k(float* x) { x[0] = f(1.f); }\n"
    )
    assert [f.name for f in m.device_functions] == ["f"]
    assert [k.name for k in m.kernels] == ["k"]
    assert m.diagnostics == ()
