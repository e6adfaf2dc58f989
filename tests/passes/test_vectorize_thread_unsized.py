"""vectorize on a one-element-per-thread kernel whose element type is a template parameter that
no launch in the file names (FasterTransformer's ``addBiasResidual<T>`` launched from a host
template instantiated in another file).

It was refused with "unknown size of element type 'T'": the grid shrinks on the host by the
knob, where ``sizeof(T)`` is not known. Each thread now takes ``VEC_THREAD`` elements whatever
``T`` is (so the host divides by the knob alone), and ``if constexpr`` keeps the pack only where
``VEC_THREAD * sizeof(T)`` fits one access: a wider type takes its elements one by one, and its
pack is never instantiated. The build test compiles every width for half, float and double for
sm_90 and checks the PTX: 16-byte accesses where the type allows, none where it does not fit.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from passtest import apply, remarks

SRC = """\
template <typename T>
__global__ void add_residual(T* out, const T* __restrict__ res, const T* __restrict__ bias, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = out[i] + res[i] + bias[i];
  }
}

template <typename T>
void run(T* out, const T* res, const T* bias, int n, cudaStream_t s) {
  add_residual<<<(n + 255) / 256, 256, 0, s>>>(out, res, bias, n);
}
"""

TYPES = {"__half": 2, "float": 4, "double": 8}


def test_an_unlaunched_template_type_is_packed_under_if_constexpr() -> None:
    t = apply(SRC, "vectorize")
    # T counted as 2 bytes: the domain reaches 8 elements (16 B of half)
    assert [(k.name, k.values) for k in t.knobs] == [("VEC_THREAD", (1, 2, 4, 8))]
    assert "if constexpr (KTX_VEC_THREAD * int(sizeof(T)) > 16) {" in t.source
    assert "} else if (ktx::aligned<KTX_VEC_THREAD>(out)" in t.source
    assert any("the size of T is not in this file" in r for r in remarks(t, "rewritten"))


def test_a_type_that_is_not_a_template_parameter_is_still_refused() -> None:
    src = "#include <foreign.h>\n" + SRC.replace("template <typename T>\n__global__", "__global__")
    src = src.replace("add_residual(T*", "add_residual(elem_t*").replace("const T* __", "const elem_t* __")
    t = apply(src, "vectorize")
    assert not t.knobs
    assert any("unknown size of element type 'elem_t'" in r for r in remarks(t))


def _ptx(source: str, tmp_path: Path) -> str:
    cu = tmp_path / "k.cu"
    text = "#include <cuda_fp16.h>\n" + source
    for t in TYPES:
        text += f"template void run<{t}>({t}*, const {t}*, const {t}*, int, cudaStream_t);\n"
    cu.write_text(text)
    ptx = tmp_path / "k.ptx"
    r = subprocess.run(
        ["nvcc", "-std=c++17", "-arch=sm_90", "-ptx", "-o", str(ptx), str(cu)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return ptx.read_text()


def _functions(ptx: str) -> dict[str, str]:
    """Each kernel's PTX (up to the next entry) by the element type in its mangled name."""
    key = {"I6__half": "__half", "IfE": "float", "IdE": "double"}
    out: dict[str, str] = {}
    for piece in ptx.split(".entry ")[1:]:
        for mark, t in key.items():
            if mark in piece.split("(", 1)[0]:
                out[t] = piece
    return out


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("vec", [2, 4, 8])
def test_every_width_builds_for_three_element_types(vec: int, tmp_path: Path) -> None:
    t = apply(SRC, "vectorize")
    bodies = _functions(_ptx(t.instantiate({"VEC_THREAD": vec}), tmp_path))
    assert set(bodies) == set(TYPES)
    for name, size in TYPES.items():
        widest = _widest_load(bodies[name])
        if vec * size <= 16:
            # the pack's word (uint, uint2, uint4) is one access
            assert widest == vec * size, (name, vec, widest)
        else:
            # never instantiated: the elements one by one
            assert widest == size, (name, vec, widest)


def _widest_load(body: str) -> int:
    """The widest global load in a PTX body, in bytes (``ld.global.nc.v4.u32``: 16)."""
    widest = 0
    for m in re.finditer(r"ld\.global(?:\.\w+)*?(?:\.v(\d))?\.[bufs](\d+)\s", body):
        widest = max(widest, int(m.group(1) or 1) * int(m.group(2)) // 8)
    return widest


ADAM = """\
template <typename T, typename GRAD_T>
__global__ void adam(T* __restrict__ p, T* __restrict__ m, const GRAD_T* __restrict__ g, float b1, size_t n) {
  int global_id = blockIdx.x * blockDim.x + threadIdx.x;
  if (global_id >= n) return;
  T scaled = T(g[global_id]) * T(0.5f);
  m[global_id] = b1 * m[global_id] + (1 - b1) * scaled;
  p[global_id] = p[global_id] - m[global_id];
}

template <typename T, typename GRAD_T>
void run(T* p, T* m, const GRAD_T* g, float b1, size_t n, cudaStream_t stream) {
  dim3 block, grid;
  if (n <= 1024) {
    block.x = n;
    grid.x = 1;
  } else {
    block.x = 1024;
    grid.x = (n + 1023) / 1024;
  }
  adam<<<grid, block, 0, stream>>>(p, m, g, b1, n);
}
"""


def test_a_pointer_named_p_does_not_shadow_the_pack_index() -> None:
    # LightSeq's Adam: `T* p` packed as `ktx_p` would hide the pack index `ktx_p`
    code = apply(ADAM, "vectorize").instantiate({"VEC_THREAD": 4})
    assert "const int ktx_p = blockIdx.x * blockDim.x + threadIdx.x;" in code
    assert "auto ktx_p = " not in code
    assert "ktx::store(p + ktx_p * 4, ktx_p_" in code


def test_a_dim3_set_in_branches_is_divided_whole() -> None:
    # FasterTransformer's slice_copy: `dim3 block, grid;` with grid.x set in each branch
    code = apply(ADAM, "vectorize").instantiate({"VEC_THREAD": 4})
    assert "adam<<<dim3((grid.x + 3) / 4, grid.y, grid.z), block, 0, stream>>>" in code


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_adam_shape_builds_for_two_element_types(tmp_path: Path) -> None:
    cu = tmp_path / "k.cu"
    text = "#include <cuda_fp16.h>\n" + apply(ADAM, "vectorize").instantiate({"VEC_THREAD": 8})
    text += "template void run<float, __half>(float*, float*, const __half*, float, size_t, cudaStream_t);\n"
    text += "template void run<float, float>(float*, float*, const float*, float, size_t, cudaStream_t);\n"
    cu.write_text(text)
    r = subprocess.run(
        ["nvcc", "-std=c++17", "-arch=sm_90", "-ptx", "-o", str(tmp_path / "k.ptx"), str(cu)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr[-2000:]
