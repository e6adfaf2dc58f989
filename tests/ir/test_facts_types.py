"""ir/facts/types.py: a template element type sized from the instantiations the file shows."""

from __future__ import annotations

from pathlib import Path

from ktx.ir import parse, parse_file
from ktx.ir.facts.types import type_size

KERNEL = """
template <typename T>
__global__ void k(T* out, const T* in, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = in[i];
}
"""
LAUNCHER = """
template <typename T>
void launch_k(T* out, const T* in, int n) { k<T><<<1, 128>>>(out, in, n); }
"""


def _size(source: str) -> tuple[int, str] | None:
    m = parse(source)
    return type_size(m, m.kernel("k"), ("T",) if "k<" in source else (), "T")


def test_widest_of_every_explicit_instantiation_and_direct_launch() -> None:
    got = _size(KERNEL + LAUNCHER + "template void launch_k<__half>(__half*, const __half*, int);\n"
                "template void launch_k<float>(float*, const float*, int);\n")  # fmt: skip
    assert got is not None and got[0] == 4 and "__half or float" in got[1]
    direct = KERNEL + "void go(double* o, const double* i) { k<double><<<1, 32>>>(o, i, 4); }\n"
    m = parse(direct)
    assert type_size(m, m.kernel("k"), (), "T") == (8, "T is double at the launches")


def test_unknown_where_one_instantiation_cannot_be_read() -> None:
    # a call that deduces T names no type: T stays unknown
    deduced = (
        KERNEL
        + LAUNCHER
        + "template void launch_k<float>(float*, const float*, int);\n"
        + ("void go(__half* o, const __half* i) { launch_k(o, i, 4); }\n")
    )
    assert _size(deduced) is None
    # a type whose size is not known, or no instantiation at all
    assert _size(KERNEL + LAUNCHER + "template void launch_k<my_t>(my_t*, const my_t*, int);\n") is None
    assert _size(KERNEL + LAUNCHER) is None
    # a launch without template arguments, or no launch
    m = parse(KERNEL + "void go(float* o, const float* i) { k<<<1, 32>>>(o, i, 4); }\n")
    assert type_size(m, m.kernel("k"), (), "T") is None
    m = parse(KERNEL)
    assert type_size(m, m.kernel("k"), (), "T") is None
    # T bound to a different name by the caller (a spec): not guessed
    m = parse(KERNEL + LAUNCHER + "template void launch_k<float>(float*, const float*, int);\n")
    assert type_size(m, m.kernel("k"), ("U",), "T") is None


DISPATCH = r"""
#define DISPATCH_FLOAT_AND_HALF(TYPE, LEVEL, NAME, ...) \
  switch (TYPE) {                                      \
    case 0: { using scalar_t_##LEVEL = float; __VA_ARGS__; break; } \
    case 1: { using scalar_t_##LEVEL = at::Half; __VA_ARGS__; break; } \
  }
template <typename T>
__global__ void k(T* out, const T* in, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = in[i];
}
void go(int t, void* o, const void* i) {
  DISPATCH_FLOAT_AND_HALF(t, 0, "go",
      k<scalar_t_0><<<1, 32>>>((scalar_t_0*)o, (const scalar_t_0*)i, 4););
}
"""


def test_a_dispatch_macro_of_the_file_names_the_types() -> None:
    m = parse(DISPATCH)
    assert type_size(m, m.kernel("k"), ("scalar_t_0",), "T") == (4, "T is at::Half or float at the launches")
    # the alias of another level is not the one the macro declares here
    other = parse(DISPATCH.replace("k<scalar_t_0>", "k<scalar_t_1>"))
    assert type_size(other, other.kernel("k"), ("scalar_t_1",), "T") is None
    # a launch outside the macro's parentheses names an alias nothing declares
    outside = parse(DISPATCH.replace('"go",\n      k<', '"go", ;);\n      k<').replace("4););", "4);"))
    assert type_size(outside, outside.kernel("k"), ("scalar_t_0",), "T") is None


def test_a_header_template_stays_unknown(tmp_path: Path) -> None:
    """Other files that include a header may instantiate its kernel with wider types."""
    source = KERNEL + LAUNCHER + "template void launch_k<float>(float*, const float*, int);\n"
    header, unit = tmp_path / "k.cuh", tmp_path / "k.cu"
    header.write_text(source)
    unit.write_text(source)
    m = parse_file(str(header))
    assert type_size(m, m.kernel("k"), ("T",), "T") is None
    m = parse_file(str(unit))
    assert type_size(m, m.kernel("k"), ("T",), "T") == (4, "T is float at the launches")
