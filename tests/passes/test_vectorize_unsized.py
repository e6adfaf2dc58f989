"""vectorize on a loop whose element type is a template parameter no launch in the file names.

Such kernels are common in real code (CTranslate2, FasterTransformer: the kernel is launched
from a host template the project instantiates elsewhere, or through a cast helper), and were
refused with "unknown size of element type 'T'". The pass now lets ``sizeof`` decide at compile
time: the width knob counts the element as 2 bytes, and ``sizeof`` narrows a pack to 16 bytes
for a wider ``T``. These tests pin the rewrite, and build it for sm_90 for three element types
with ``static_assert``s on the width the kernel picks.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from passtest import apply, remarks

SRC = """\
template <typename T>
__global__ void scale_rows(T* out, const T* in, const T* gamma, int d) {
  out += blockIdx.x * d;
  in += blockIdx.x * d;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    out[i] = in[i] * gamma[i];
  }
}
"""

MIXED = """\
template <typename T>
__global__ void add_bias(T* __restrict__ out, const float* __restrict__ bias, int d) {
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    out[i] = out[i] + T(bias[i]);
  }
}
"""


def test_unlaunched_template_type_is_packed_with_a_compile_time_width() -> None:
    t = apply(SRC, "vectorize")
    assert [(k.name, k.values) for k in t.knobs] == [("VEC_L0", (1, 2, 4, 8))]
    assert "#if KTX_VEC_L0 > 1" in t.source
    assert "constexpr int ktx_bytes_L0 = int(sizeof(T));" in t.source
    assert "ktx::load<ktx_vec_L0>(in + ktx_p * ktx_vec_L0)" in t.source
    assert any("the size of T is not in this file" in r for r in remarks(t, "rewritten"))


def test_a_known_size_beside_the_unknown_type_bounds_the_pack() -> None:
    t = apply(MIXED, "vectorize")
    # float bias: 4 B, so at most 4 elements; T is narrowed further by sizeof at compile time
    assert [(k.name, k.values) for k in t.knobs] == [("VEC_L0", (1, 2, 4))]
    assert "constexpr int ktx_bytes_L0 = (int(sizeof(T)) > 4 ? int(sizeof(T)) : 4);" in t.source


def test_a_launch_that_names_the_type_still_gives_its_size() -> None:
    launched = SRC + "void run(float* o, const float* i, const float* g, int d, int r) {\n"
    launched += "  scale_rows<float><<<r, 256>>>(o, i, g, d);\n}\n"
    t = apply(launched, "vectorize")
    assert [(k.name, k.values) for k in t.knobs] == [("VEC_L0", (1, 2, 4))]
    assert "ktx_bytes_L0" not in t.source


def test_void_elements_are_still_refused() -> None:
    src = (
        SRC.replace("template <typename T>\n", "")
        .replace("T*", "void*")
        .replace("const void*", "const void*")
    )
    t = apply(src, "vectorize")
    assert not t.knobs


TYPES = {"__half": 2, "float": 4, "double": 8}


def with_width_checks(instance: str, vec: int) -> str:
    """The instance with, after the width's declaration, a ``static_assert`` that it equals the
    width this test expects for the element type (``min(vec, 16 / sizeof)``, as numbers written
    here per type), and the kernel instantiated for each type."""
    decl = "constexpr int ktx_vec_L0 ="
    at = instance.index("\n", instance.index(decl)) + 1
    expect = "template <typename T> struct expect;\n" + "".join(
        f"template <> struct expect<{t}> {{ static constexpr int value = {min(vec, 16 // n)}; }};\n"
        for t, n in TYPES.items()
    )
    check = '      static_assert(ktx_vec_L0 == expect<T>::value, "pack width for T");\n'
    first = instance.index("template <typename T>")
    text = instance[:first] + expect + instance[first:at] + check + instance[at:]
    for t in TYPES:
        text += f"template __global__ void scale_rows<{t}>({t}*, const {t}*, const {t}*, int);\n"
    return text


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("vec", [2, 8])
def test_every_width_builds_for_three_element_types(vec: int, tmp_path: Path) -> None:
    t = apply("#include <cuda_fp16.h>\n" + SRC, "vectorize")
    cu = tmp_path / "k.cu"
    cu.write_text(with_width_checks(t.instantiate({"VEC_L0": vec}), vec))
    r = subprocess.run(
        ["nvcc", "-std=c++17", "-arch=sm_90", "-cubin", "-o", str(tmp_path / "k.cubin"), str(cu)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr[-2000:]
