"""``ir/facts/signature.py``: what the source says of each parameter and template parameter, the
side of ``ktx init --check``'s comparison that reads CUDA (issue 21)."""

from __future__ import annotations

from pathlib import Path

from ktx.ir import parse, parse_file
from ktx.ir.facts.signature import element_types, launched_template_args, param_facts


def test_stores_helpers_and_const_pointers() -> None:
    m = parse(
        "__device__ void put(float* p, float v) { *p = v; }\n"
        "__device__ float get(const float* p) { return *p; }\n"
        "__global__ void k(float* a, float* b, const float* c, float* d, int n) {\n"
        "  int i = threadIdx.x;\n"
        "  float* row = a + i * n;\n"
        "  row[0] = c[i];\n"
        "  put(b + i, 1.f);\n"
        "  d[i] += get(c + i);\n"
        "}\n"
    )
    got = {p.name: (p.stored, p.may_write, p.const) for p in m.facts().params}
    assert got == {
        "a": (True, True, False),  # through the local row pointer
        "b": (False, True, False),  # handed to a helper that takes a non-const pointer
        "c": (False, False, True),  # a pointer to const, also handed to get(const float*)
        "d": (True, True, False),  # an update
        "n": (False, False, False),
    }
    a = next(p for p in param_facts(m, m.kernel()) if p.name == "a")
    assert a.store_at == (6, 3) and a.at[0] == 3


def test_element_types_follow_template_arguments_and_aliases(tmp_path: Path) -> None:
    (tmp_path / "common.h").write_text(
        "#if defined(ENABLE_BF16)\ntypedef __nv_bfloat16 floatX;\n#else\ntypedef float floatX;\n#endif\n"
    )
    (tmp_path / "k.cu").write_text(
        '#define ENABLE_BF16\n#include "common.h"\nusing acc_t = float;\n#define IDX_T int\n'
        "template <typename T> __global__ void k(floatX* x, const T* y, acc_t* z, IDX_T* w, float4* v) {}\n"
    )
    m = parse_file(tmp_path / "k.cu")
    fn = m.kernel()
    assert element_types(m, fn, ("__half",), "floatX*") == ("__nv_bfloat16",)
    assert element_types(m, fn, ("__half",), "const T* __restrict__") == ("__half",)
    assert element_types(m, fn, (), "const T*") == ()  # unbound: no answer
    assert element_types(m, fn, ("{dtype}",), "T*") == ()  # a spec placeholder: no answer
    assert element_types(m, fn, (), "acc_t*") == ("float",)
    assert element_types(m, fn, (), "IDX_T*") == ("int",)
    assert element_types(m, fn, (), "float4*") == ("float4",)  # no dtype: the caller's to judge


def test_launched_template_arguments() -> None:
    m = parse(
        "template <typename T, int V, bool B> __global__ void k(T* x) {}\n"
        "template <typename T> void launch(T* x, int v) {\n"
        "  if (v == 4) k<T, 4, true><<<1, 1>>>(x); else k<T, 8, false><<<1, 1>>>(x);\n}\n"
        "template void launch<float>(float*, int);\n"
        "template void launch<__half>(__half*, int);\n"
    )
    assert launched_template_args(m, m.kernel()) == (
        frozenset({"float", "__half"}),
        frozenset({"4", "8"}),
        frozenset({"true", "false"}),
    )
    runtime = parse(
        "template <int V> __global__ void k(float* x) {}\n"
        "constexpr int W = 4;\n"
        "void go(float* x) { k<W><<<1, 1>>>(x); }\n"
    )
    assert launched_template_args(runtime, runtime.kernel()) == (None,)  # a name, not a value
    deduced = parse(
        "template <typename T> __global__ void k(T* x) {}\nvoid go(float* x) { k<<<1, 1>>>(x); }\n"
    )
    assert launched_template_args(deduced, deduced.kernel()) == (None,)
    unlaunched = parse("template <typename T> __global__ void k(T* x) {}\n")
    assert launched_template_args(unlaunched, unlaunched.kernel()) == (None,)


def test_a_dispatch_name_the_file_does_not_define_tells_nothing() -> None:
    """``scalar_t`` bound by a dispatch macro from a header not read (llm-awq's
    ``VLLM_DISPATCH_FLOATING_TYPES`` over torch's ``AT_DISPATCH_SWITCH``): no verdict, where a
    type the file declares, or a CUDA type, is still the launch's one instantiation."""
    m = parse(
        "#define DISPATCH(TYPE, NAME, ...) AT_DISPATCH_SWITCH(TYPE, NAME, __VA_ARGS__)\n"
        "template <typename T, typename S> __global__ void k(T* x, S s) {}\n"
        "void go(Tensor t, float* y) {\n"
        "  DISPATCH(t.scalar_type(), \"k\", [&] {\n"
        "    k<scalar_t, float><<<1, 1>>>(t.data_ptr<scalar_t>(), 1.f);\n"
        "  });\n"
        "}\n"
    )
    assert launched_template_args(m, m.kernel()) == (None, frozenset({"float"}))
    declared = parse(
        "struct Pair { float a, b; };\n"
        "template <typename T> __global__ void k(T* x) {}\n"
        "void go(Pair* p) { k<Pair><<<1, 1>>>(p); }\n"
    )
    assert launched_template_args(declared, declared.kernel()) == (frozenset({"Pair"}),)


def test_a_launcher_template_that_passes_its_own_parameter_on_names_no_instantiation() -> None:
    """ggml's ``rope_norm_cuda<forward, float, float>`` is called from a function template whose
    own ``forward`` is the argument: the file instantiates ``rope_norm<forward, ...>`` with no
    literal, so no value is the launch's, and a spec's ``true`` is no contradiction."""
    m = parse(
        "template <bool F, typename T> __global__ void k(T* x) {}\n"
        "template <bool F, typename T> void run(T* x) { k<F, T><<<1, 1>>>(x); }\n"
        "template <bool F> void op(float* x) { run<F, float>(x); }\n"
    )
    assert launched_template_args(m, m.kernel()) == (None, frozenset({"float"}))
    plain = parse(
        "template <bool F, typename T> __global__ void k(T* x) {}\n"
        "template <bool F, typename T> void run(T* x) { k<F, T><<<1, 1>>>(x); }\n"
        "void op(float* x) { run<true, float>(x); run<false, float>(x); }\n"
    )
    got = launched_template_args(plain, plain.kernel())
    assert got == (frozenset({"true", "false"}), frozenset({"float"}))
