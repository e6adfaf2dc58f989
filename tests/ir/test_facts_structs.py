"""Struct layouts read from libclang agree with what nvcc compiles: sizeof, alignof and every
field's offset and size, for padding, doubles after chars, nested structs, arrays, enums, CUDA's
vector types (``uint3``, ``float4``, ``int2``, ``dim3``), bf16/half fields and a class template.

The nvcc check generates a host program from ktx's own answer (one ``offsetof``-style line per
leaf ktx reported) and compares the numbers nvcc's build prints; the leaf *names* each struct
must have are written here, so a leaf ktx forgot cannot pass unnoticed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from ktx.ir.facts.structs import ParamLayout, compiler_flags, kernel_layouts, path_name

STRUCTS = r"""
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
struct Padded { char c; double d; short s; };
struct Chars { char a; char b[3]; unsigned char u; };
struct Inner { char tag; double value; };
struct Nested { int n; Inner in; float tail; };
struct Vecs { char c; uint3 u3; float4 f4; int2 i2; };
struct Mixed { bool flag; __nv_bfloat16 b; __half h; long long big; float arr[3]; dim3 grid; };
enum Mode : short { kA = 1, kB = 2 };
struct WithEnum { char c; Mode m; unsigned long long u; };
struct Points { Inner pts[2]; char end; };
namespace ns { template <typename T> struct Pair { T a; char b; }; }
__global__ void k(const float* x, Padded a, Chars b, Nested c, Vecs d, Mixed e, uint3 f, float4 g,
                  int2 h, dim3 i, WithEnum j, Points l, ns::Pair<double> m, int n) {}
"""

#: The leaves each by-value parameter must have, in order.
NAMES = {
    "a": ["c", "d", "s"],
    "b": ["a", "b[0]", "b[1]", "b[2]", "u"],
    "c": ["n", "in.tag", "in.value", "tail"],
    "d": ["c", "u3.x", "u3.y", "u3.z", "f4.x", "f4.y", "f4.z", "f4.w", "i2.x", "i2.y"],
    "e": ["flag", "b", "h", "big", "arr[0]", "arr[1]", "arr[2]", "grid.x", "grid.y", "grid.z"],
    "f": ["x", "y", "z"],
    "g": ["x", "y", "z", "w"],
    "h": ["x", "y"],
    "i": ["x", "y", "z"],
    "j": ["c", "m", "u"],
    "l": ["pts[0].tag", "pts[0].value", "pts[1].tag", "pts[1].value", "end"],
    "m": ["a", "b"],
}


@pytest.fixture(scope="module")
def params() -> tuple[ParamLayout, ...]:
    found = kernel_layouts(STRUCTS, "k")
    if not found:
        pytest.skip("libclang is not available")
    return found


def test_records_and_plain_params_told_apart(params: tuple[ParamLayout, ...]) -> None:
    records = {p.name for p in params if p.record}
    assert records == set(NAMES)
    for p in params:
        assert (p.layout is not None) == p.record, (p.name, p.reason)
    assert params[0].name == "x" and not params[0].record
    assert params[-1].name == "n" and params[-1].type == "int"


def test_leaf_names_and_kinds(params: tuple[ParamLayout, ...]) -> None:
    by_name = {p.name: p for p in params}
    for name, leaves in NAMES.items():
        layout = by_name[name].layout
        assert layout is not None
        assert [leaf.name for leaf in layout.leaves] == leaves, name
    mixed = by_name["e"].layout
    assert mixed is not None
    kinds = {leaf.name: leaf.kind for leaf in mixed.leaves}
    assert kinds["flag"] == "bool" and kinds["b"] == "bf16" and kinds["h"] == "fp16"
    assert kinds["big"] == "int" and kinds["arr[1]"] == "float" and kinds["grid.y"] == "uint"


@pytest.mark.slow
def test_layout_matches_nvcc(params: tuple[ParamLayout, ...], tmp_path: Path) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc")
    lines = ["#include <cstdio>", "#include <cstring>", STRUCTS, "int main() {"]
    for p in params:
        if p.layout is None:
            continue
        t = p.layout.type
        lines.append(
            f"  {{ {t} v; std::memset((void*)&v, 0, sizeof v);"
            f' std::printf("{p.name} %zu %zu", sizeof v, alignof({t}));'
        )
        for leaf in p.layout.leaves:
            ref = "v." + path_name(leaf.path)
            lines.append(f'    std::printf(" %zu:%zu", (size_t)((char*)&{ref} - (char*)&v), sizeof({ref}));')
        lines.append('    std::printf("\\n"); }')
    lines.append("  return 0;\n}")
    src = tmp_path / "layout.cu"
    src.write_text("\n".join(lines))
    exe = tmp_path / "layout"
    build = subprocess.run([nvcc, "-std=c++17", "-o", str(exe), str(src)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    printed = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
    got = {}
    for line in printed:
        name, size, align, *leaves = line.split()
        got[name] = (int(size), int(align), [tuple(map(int, x.split(":"))) for x in leaves])
    for p in params:
        if p.layout is None:
            continue
        ours = (p.layout.size, p.layout.align, [(leaf.offset, leaf.size) for leaf in p.layout.leaves])
        assert ours == got[p.name], p.name
    # The cases the layout exists for: padding before a double, a vector's 16-byte alignment.
    assert got["a"][0] == 24 and got["a"][2][1] == (8, 8)
    assert got["d"][1] == 16 and got["d"][2][4] == (16, 4)


def test_template_kernel_is_instantiated() -> None:
    src = (
        "template <typename T> struct P { T a; char b; };\n"
        "template <typename T> __global__ void k(P<T> p, T* y) {}\n"
    )
    found = kernel_layouts(src, "k")
    if not found:
        pytest.skip("libclang is not available")
    assert not found[0].record and "template" in found[0].reason
    (p, y) = kernel_layouts(src, "k", template_args=["double"])
    assert p.name == "p" and p.layout is not None and y.layout is None
    assert (p.layout.size, [(leaf.name, leaf.offset) for leaf in p.layout.leaves]) == (
        16,
        [("a", 0), ("b", 8)],
    )
    (p, _) = kernel_layouts(src, "k", template_args=["short"])
    assert p.layout is not None and p.layout.size == 4


def test_header_on_the_include_path_and_defines(tmp_path: Path) -> None:
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "params.h").write_text(
        "#pragma once\n#include <stdint.h>\n"
        "struct Params {\n  int64_t rows;\n#ifdef WITH_SCALE\n  float scale;\n#endif\n  char tag;\n};\n"
    )
    src = '#include "params.h"\n__global__ void k(Params p, float* y) {}\n'
    found = kernel_layouts(src, "k", include_dirs=[str(inc)])
    if not found:
        pytest.skip("libclang is not available")
    assert found[0].layout is not None
    assert [leaf.name for leaf in found[0].layout.leaves] == ["rows", "tag"]
    (p, _) = kernel_layouts(src, "k", flags=["-use_fast_math", f"-I{inc}", "-DWITH_SCALE"])
    assert p.layout is not None
    assert [(leaf.name, leaf.offset) for leaf in p.layout.leaves] == [("rows", 0), ("scale", 8), ("tag", 12)]


def test_what_ktx_cannot_fill_is_refused_with_a_reason() -> None:
    src = (
        "union U { int a; float b; };\n"
        "struct Ptr { float* data; int n; };\n"
        "struct Bits { int a : 3; int b : 5; };\n"
        "struct Base { int a; }; struct Derived : Base { int b; };\n"
        "__global__ void k(U u, Ptr p, Bits b, Derived d) {}\n"
    )
    found = kernel_layouts(src, "k")
    if not found:
        pytest.skip("libclang is not available")
    reasons = {p.name: p.reason for p in found}
    refused = [p for p in found if p.name != "p"]
    assert all(p.record and p.layout is None for p in refused)
    assert "union" in reasons["u"]
    assert "bit-field" in reasons["b"]
    assert "base class" in reasons["d"]


def test_compiler_flags_keeps_only_what_changes_a_declaration() -> None:
    flags = ["-O3", "-DA=1", "-D", "B", "--define-macro=C", "-I", "/x", "-I/y", "-UZ", "--use_fast_math"]
    assert compiler_flags(flags) == ("-DA=1", "-DB", "-DC", "-I/x", "-I/y", "-UZ")


def test_unknown_kernel_gives_nothing() -> None:
    assert kernel_layouts("__global__ void k(int n) {}\n", "nope") == ()


def test_kernel_defined_in_a_local_header(tmp_path: Path) -> None:
    (tmp_path / "k.cuh").write_text("struct P { short a; float b; };\n__global__ void k(P p, float* y) {}\n")
    found = kernel_layouts('#include "k.cuh"\n', "k", path=str(tmp_path / "kernel.cu"))
    if not found:
        pytest.skip("libclang is not available")
    assert found[0].layout is not None and [(x.name, x.offset) for x in found[0].layout.leaves] == [
        ("a", 0),
        ("b", 4),
    ]


def test_unknown_struct_type_is_not_taken_for_int() -> None:
    found = kernel_layouts('#include "missing.h"\n__global__ void k(Params p, float* y) {}\n', "k")
    if not found:
        pytest.skip("libclang is not available")
    assert not found[0].record and found[0].layout is None
    assert "unknown type name 'Params'" in found[0].reason
    assert found[1].reason == ""


def test_namespaced_template_kernel_by_its_qualified_name() -> None:
    src = (
        "namespace ns { template <typename T> struct P { T a; char b; };\n"
        "template <typename T> __global__ void k(P<T> p, T* y) {} }\n"
    )
    found = kernel_layouts(src, "ns::k", template_args=["double"])
    if not found:
        pytest.skip("libclang is not available")
    assert found[0].name == "p" and found[0].layout is not None and found[0].layout.size == 16
    (plain, _) = kernel_layouts(
        src.replace("template <typename T> __global__", "__global__")
        .replace("P<T>", "P<int>")
        .replace("T* y", "int* y"),
        "ns::k",
    )
    assert plain.layout is not None and plain.layout.size == 8


def test_a_pointer_to_a_struct_is_laid_out_as_its_pointee() -> None:
    """``const RaggedBatchDescriptor* meta`` (DeepSpeed, a typedef of an unnamed struct): the
    pointee's layout, marked ``pointee``; a pointer to a scalar has none."""
    src = (
        "struct { int n_tokens; int n_sequences; } typedef Desc;\n"
        "__global__ void k(const Desc* meta, float* y, Desc by_value) {}\n"
    )
    meta, y, by_value = kernel_layouts(src, "k")
    assert meta.pointee and not meta.record and meta.layout is not None
    assert meta.layout.type == "Desc" and meta.layout.size == 8
    assert [leaf.name for leaf in meta.layout.leaves] == ["n_tokens", "n_sequences"]
    assert not y.pointee and y.layout is None
    assert by_value.record and not by_value.pointee and by_value.layout is not None


def test_a_pointer_field_is_a_pointer_leaf_at_the_compilers_offset() -> None:
    """causal-conv1d's ``ConvParamsBase`` holds its buffers as ``void*`` fields among the sizes:
    each is a ``pointer`` leaf (8 bytes, aligned to 8 after a ``bool``), filled by the harness
    with a spec buffer's device address."""
    src = (
        "struct Ptr { float* data; int n; bool flag; void* __restrict__ out; int32_t* idx[2]; };\n"
        "__global__ void k(Ptr p) {}\n"
    )
    found = kernel_layouts("#include <stdint.h>\n" + src, "k")
    if not found:
        pytest.skip("libclang is not available")
    (p,) = found
    assert p.layout is not None, p.reason
    assert [(leaf.name, leaf.offset, leaf.size, leaf.kind) for leaf in p.layout.leaves] == [
        ("data", 0, 8, "pointer"),
        ("n", 8, 4, "int"),
        ("flag", 12, 1, "bool"),
        ("out", 16, 8, "pointer"),
        ("idx[0]", 24, 8, "pointer"),
        ("idx[1]", 32, 8, "pointer"),
    ]
    assert p.layout.size == 40
