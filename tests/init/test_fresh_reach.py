"""Reach failures a first run of ``ktx init`` on a project ktx never saw (lmdeploy's turbomind
kernels, issue 22) showed, each as the smallest source that has it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from ktx.ir.facts.structs import kernel_layouts
from ktx.ir.module import parse

from ktx.check import todo_blockers
from ktx.specload import load_spec

#: A tag parameter (``constant<B>``) and a functor (``Silu``), both empty structs passed by
#: value: their type picks the code, they carry no data.
TAGGED = r"""
template <bool B> struct constant { static constexpr bool value = B; };
struct Silu { __device__ float operator()(float x) const { return x / (1.f + __expf(-x)); } };
template <class Act, bool Z>
__global__ void act(float* x, int n, Act op, constant<Z>) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = Z ? op(x[i]) : x[i];
}
"""


def test_stacked_todo_comments_over_a_finished_line_do_not_block() -> None:
    text = (
        "[compile]\n"
        "# TODO: compile flags: a plain build includes <cublas_v2.h>\n"
        "# TODO: compile flags (check): the files test FOO\n"
        'flags = ["-Istubs"]\n'
    )
    assert todo_blockers(text) == []
    left = text.replace('["-Istubs"]', '["TODO"]')
    # both comments stand over the one placeholder, which is line 4
    assert [b.line for b in todo_blockers(left)] == [4, 4]


def test_a_template_parameter_is_no_file_level_type() -> None:
    from ktx.ir.facts.launcher import _file_level_type

    src = (
        "template <class T, class Acc> __global__ void k(T* x) {}\n"
        "struct Params { int n; };\n"
        "void launch() { auto f = [&](auto t) { using T = decltype(t); k<T, float><<<1, 1>>>(0); }; }\n"
    )
    module = parse(src, "k.cu")
    assert not _file_level_type(module, "T")  # `class T` of a template, `using T` in a lambda
    assert _file_level_type(module, "Params")


def test_lambda_dispatched_type_is_a_todo_not_the_alias(tmp_path: Path) -> None:
    """``using T = decltype(t)`` in a dispatch lambda: the draft wrote ``"T"`` with no TODO and
    ``--check`` then refused every real type (``no launch instantiates T with __half``)."""
    from ktx.draft import draft

    src = tmp_path / "k.cu"
    src.write_text(
        "template <class T, int V> __global__ void scale(T* x, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = x[i] * 2; }\n"
        "template <class F> void dispatch(int dt, F f) { if (dt) f(float{}); }\n"
        "void launch(void* x, int n, int dt) {\n"
        "  auto invoke = [&](auto t) { using T = decltype(t);\n"
        "    scale<T, 4><<<(n + 255) / 256, 256>>>((T*)x, n); };\n"
        "  dispatch(dt, invoke); }\n"
    )
    result = draft(src, "scale", tmp_path / "out")
    line = next(ln for ln in result.text.splitlines() if ln.startswith("template_args"))
    assert line == 'template_args = ["TODO", "4"]'


def test_empty_struct_by_value_takes_empty_fields(tmp_path: Path) -> None:
    if not kernel_layouts(TAGGED, "act", template_args=("Silu", "true")):
        pytest.skip("libclang is not available")
    from ktx.measure.argpack import pack, struct_layouts

    (tmp_path / "kernel.cu").write_text(TAGGED)
    (tmp_path / "ktx.toml").write_text(
        'kernel = "act"\ntemplate_args = ["Silu", "true"]\n'
        '[[args]]\nname = "x"\ndtype = "fp32"\nshape = "[n]"\nrole = "inout"\n'
        '[[args]]\nname = "n"\ndtype = "int32"\nvalue = "n"\n'
        '[[args]]\nname = "op"\nfields = {}\n'
        '[[args]]\nname = "z"\nfields = {}\n'
        '[shapes]\ndefault = [{ n = 1024 }]\n[launch]\ngrid = ["n // 256"]\nblock = ["256"]\n'
    )
    spec = load_spec(tmp_path / "ktx.toml")
    op = spec.args[2]
    assert op.is_struct and op.fields == ()
    layouts = struct_layouts(spec)
    env = spec.env(spec.shape_set().points[0])
    for arg in spec.args[2:]:
        packed = pack(arg, layouts[arg.name], env)
        assert packed.dtype.itemsize == 1 and bytes(packed) == b"\0"


def test_empty_fields_on_a_struct_with_fields_is_refused(tmp_path: Path) -> None:
    from ktx.ir.errors import KtxError

    src = "struct P { int n; };\n__global__ void k(float* x, P p) { x[0] = p.n; }\n"
    if not kernel_layouts(src, "k"):
        pytest.skip("libclang is not available")
    (tmp_path / "kernel.cu").write_text(src)
    (tmp_path / "ktx.toml").write_text(
        'kernel = "k"\n[[args]]\nname = "x"\ndtype = "fp32"\nshape = "[1]"\nrole = "out"\n'
        '[[args]]\nname = "p"\nfields = {}\n[shapes]\ndefault = [{}]\n[launch]\ngrid = ["1"]\nblock = ["1"]\n'
    )
    with pytest.raises(KtxError, match="n"):
        load_spec(tmp_path / "ktx.toml")


def test_unnamed_parameter_without_extent_file_is_skipped() -> None:
    """clang gives an unnamed tag parameter of lmdeploy's ``QkRMSNorm`` no file in its extent;
    ``ktx init`` crashed reading it (AttributeError on None)."""
    from ktx.ir.facts import structs

    class Kind:
        PARM_DECL = "parm"

    ci = SimpleNamespace(CursorKind=Kind)
    nowhere = SimpleNamespace(start=SimpleNamespace(file=None, line=0, column=0), end=None)
    parm = SimpleNamespace(kind="parm", extent=nowhere, spelling="")
    decl = SimpleNamespace(get_children=lambda: [parm])
    err = SimpleNamespace(
        severity=3,
        spelling="unknown type",
        location=SimpleNamespace(file=SimpleNamespace(name="k.cu"), line=1, column=1),
    )
    tu = SimpleNamespace(diagnostics=[err])
    assert structs._broken_params(ci, tu, decl) == {}


def test_unnamed_parameter_is_drafted_by_its_position(tmp_path: Path) -> None:
    from ktx.draft import draft

    src = tmp_path / "k.cu"
    src.write_text(
        TAGGED
        + "void launch(float* x, int n) {\n"
        + "  act<Silu, true><<<n / 256, 256>>>(x, n, Silu{}, constant<true>{});\n}\n"
    )
    result = draft(src, "act", tmp_path / "out")
    names = [ln for ln in result.text.splitlines() if ln.startswith("name = ")]
    assert names == ['name = "x"', 'name = "n"', 'name = "op"', 'name = "arg3"']


#: lmdeploy's ``quant_symm_row``: the whole body under a header's architecture macro, with a
#: ``PRAGMA_UNROLL`` (also a header's) that tree-sitter cannot parse.
ARCH_GUARDED = """#include "common.h"
__global__ void k(float* out, const float* x, int n)
{
#if ARCH_SM90
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        PRAGMA_UNROLL
        for (int c = 0; c < 4; ++c) {
            out[i * 4 + c] = x[i * 4 + c];
        }
    }
#endif
}
"""


def test_body_under_a_header_macro_is_read() -> None:
    """Read as cpp's undefined 0, ``#if ARCH_SM90`` blanked the whole body: ``out`` was never
    written and the spec loader refused ``role = "out"``."""
    from ktx.ir.facts.params import read_kernel, role_of
    from ktx.ir.module import parse

    module = parse(ARCH_GUARDED, "k.cu")
    fn = next(k for k in module.kernels if k.name == "k")
    body = read_kernel(module, fn)
    assert role_of(body, fn.params[0])[0] == "out"
    # a group with an #else still keeps the #else where the name is not defined, as cpp does
    module = parse(ARCH_GUARDED.replace("#endif", "#else\n    out[0] = 0.f;\n#endif"), "k.cu")
    fn = next(k for k in module.kernels if k.name == "k")
    assert role_of(read_kernel(module, fn), fn.params[0])[0] == "out"


def test_auto_pointer_from_a_cast_is_its_roots_alias() -> None:
    """``auto dst_ptr = (Vec*)dst + dims * bi; Store(dst_ptr[i].data(), v);`` (lmdeploy's
    MoeGatherKernel): ``dst`` is written; an ``auto`` local was no alias (only ``T* p = ...``
    was), so the spec loader refused ``dst`` as an output never written."""
    from ktx.ir.module import parse

    for init in ("(/* */ Vec*)dst + n * bi", "reinterpret_cast<Vec*>(dst) + n * bi"):
        src = (
            "struct Vec { float x[4]; __device__ float* data() { return x; } };\n"
            "__device__ void Store(float* p, float v);\n"
            "__global__ void k(float* dst, const float* src, int n) {\n"
            "  int bi = blockIdx.x;\n"
            f"  auto dst_ptr = {init};\n"
            "  auto v = src[bi];\n"
            "  Store(dst_ptr[threadIdx.x].data(), v);\n}\n"
        )
        module = parse(src, "k.cu")
        facts = module.facts(module.kernels[0], ())
        assert facts.roots["dst_ptr"].name == "dst"
        assert "v" not in facts.roots or not facts.roots["v"].name  # auto without a pointer cast
        assert facts.written_roots == frozenset({"dst"})


def test_half_scalars_by_value(tmp_path: Path) -> None:
    """``T bscale`` with ``T = __half`` (lmdeploy's MoeReduceKernel): a 2-byte scalar; fp16
    and bf16 were refused as by-value dtypes."""
    import numpy as np

    from ktx.dtypes import bf16_decode
    from ktx.measure.gpu import _args

    (tmp_path / "kernel.cu").write_text(
        "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
        "__global__ void k(__half* x, __half a, __nv_bfloat16 b, int n) {\n"
        "  int i = threadIdx.x; if (i < n) x[i] = __hmul(x[i], a); }\n"
    )
    (tmp_path / "ktx.toml").write_text(
        'kernel = "k"\n[[args]]\nname = "x"\ndtype = "fp16"\nshape = "[n]"\nrole = "inout"\n'
        '[[args]]\nname = "a"\ndtype = "fp16"\nvalue = "0.5"\n'
        '[[args]]\nname = "b"\ndtype = "bf16"\nvalue = "1.0 / n"\n'
        '[[args]]\nname = "n"\ndtype = "int32"\nvalue = "n"\n'
        '[shapes]\ndefault = [{ n = 4 }]\n[launch]\ngrid = ["1"]\nblock = ["32"]\n'
    )
    spec = load_spec(tmp_path / "ktx.toml")
    env = spec.env(spec.shape_set().points[0])
    _, a, b, n = _args(spec, env, {"x": np.zeros(4, np.float16)})
    assert isinstance(a, np.float16) and a == 0.5 and a.nbytes == 2
    assert b.dtype == np.uint16 and float(bf16_decode(np.asarray([b]))[0]) == 0.25
    assert isinstance(n, np.int32) and n == 4


def test_a_pointer_tested_first_in_a_condition_may_be_null() -> None:
    """``if (num_valid_tokens && blockIdx.x >= __ldg(num_valid_tokens))`` (lmdeploy's
    MoeGatherKernel): drafted ``role = "in"`` with no TODO, and the caller passes null. The
    TODO quotes the test as written (it said ``(bias) {)`` for ``if (bias) {``)."""
    from ktx.draft.doubt import nullable

    body = "if (num_valid_tokens && blockIdx.x >= __ldg(num_valid_tokens)) { return; }"
    assert nullable(body, "num_valid_tokens") == "if (num_valid_tokens && ...)"
    assert nullable("if (!p || i >= n) return;", "p") == "if (!p || ...)"
    assert nullable("if (bias) {\n  v += bias[i];\n}", "bias") == "if (bias)"
    assert nullable("if (x[i] && y) {}", "x") is None  # an element, not the pointer
