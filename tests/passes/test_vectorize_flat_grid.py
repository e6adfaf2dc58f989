"""vectorize on a one-element-per-thread kernel whose index flattens a 2-D grid row by row,
``(blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x`` (FasterTransformer's
``sigmoid_kernel``), refused before as "not one element per thread".

The grid's x shrinks to ``ceil(gx / VEC_THREAD)``: the ``gy * ceil(gx / V) * blockDim.x`` threads
then take ``V`` elements each, at least as many as the launch covered, and the index reads
``gridDim.x`` as launched. Other mixes of the grid's axes stay refused.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from passtest import apply, remarks

SRC = """\
__global__ void sigmoid(float* data, const int size, const float scale) {
  const int index = (blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x;
  if (index < size) {
    float val = data[index];
    data[index] = 1.0f / (1.0f + expf(-val)) * scale;
  }
}

void run(float* data, int size, float scale, cudaStream_t s) {
  dim3 block(128);
  dim3 grid((size + 127) / 128, 2);
  sigmoid<<<grid, block, 0, s>>>(data, size, scale);
}
"""


def test_a_flattened_2d_grid_is_packed_on_its_x() -> None:
    t = apply(SRC, "vectorize")
    assert [(k.name, k.values) for k in t.knobs] == [("VEC_THREAD", (1, 2, 4))]
    code = t.instantiate({"VEC_THREAD": 4})
    assert "const int ktx_p = (blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x;" in code
    assert "ktx::load<4>(data + ktx_p * 4)" in code
    # x shrinks, y (the rows of the flattened grid) stays
    assert "dim3 grid(((size + 127) / 128 + 3) / 4, 2);" in code
    assert t.instantiate({"VEC_THREAD": 1}).count("dim3 grid((size + 127) / 128, 2);") == 1


@pytest.mark.parametrize(
    "index",
    [
        "(blockIdx.y * gridDim.y + blockIdx.x) * blockDim.x + threadIdx.x",  # not the row length
        "(blockIdx.x * gridDim.y + blockIdx.y) * blockDim.x + threadIdx.x",  # x is the slow axis
    ],
)
def test_other_mixes_of_the_axes_are_refused(index: str) -> None:
    t = apply(
        SRC.replace("(blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x", index), "vectorize"
    )
    assert not t.knobs
    assert any("is not one element per thread" in r for r in remarks(t))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_it_builds_for_sm_90_with_16_byte_accesses(tmp_path: Path) -> None:
    cu = tmp_path / "k.cu"
    cu.write_text(apply(SRC, "vectorize").instantiate({"VEC_THREAD": 4}))
    ptx = tmp_path / "k.ptx"
    r = subprocess.run(
        ["nvcc", "-std=c++17", "-arch=sm_90", "-ptx", "-o", str(ptx), str(cu)], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr[-2000:]
    text = ptx.read_text()
    assert "ld.global.v4.f32" in text or "ld.global.v4.u32" in text
    assert "st.global.v4.f32" in text or "st.global.v4.u32" in text


TWINS = """\
template <typename T>
__global__ void sig(T* data, const int size) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index < size) data[index] = data[index] * 2.f;
}

template <>
__global__ void sig(double* data, const int size) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index < size / 2) data[index] = data[index] * 3.0;
}

template <typename T>
void run(T* data, int size) {
  sig<<<(size + 127) / 128, 128>>>(data, size);
  sig<<<(size + 255) / 256, 128>>>((double*)data, size);
}
"""


def test_a_kernel_with_a_specialization_keeps_its_grid() -> None:
    # FasterTransformer's sigmoid_kernel has a half2 specialization: both launches name `sig`, so
    # dividing the grid for the template would divide the specialization's too. The grid stays;
    # each thread takes its pack, and the threads past the last pack do nothing.
    t = apply(TWINS, "vectorize", kernel="sig")
    assert [k.name for k in t.knobs] == ["VEC_THREAD"], remarks(t)
    assert any("grid kept as written: another definition of the kernel (line 7)" in r for r in remarks(t))
    code = t.instantiate({"VEC_THREAD": 4})
    assert "if (ktx_p < size / 4 + (size % 4 != 0)) {" in code
    assert "sig<<<(size + 127) / 128, 128>>>(data, size);" in code
    assert "sig<<<(size + 255) / 256, 128>>>((double*)data, size);" in code
    assert "KTX_CDIV" not in code
    # the specialization is the original, byte for byte
    twin = TWINS[TWINS.index("template <>") : TWINS.index("template <typename T>\nvoid run")]
    assert twin in code


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_kept_grid_rewrite_builds_for_sm_90_beside_its_specialization(tmp_path: Path) -> None:
    t = apply(TWINS, "vectorize", kernel="sig")
    (k,) = t.knobs
    for vec in k.values:
        cu = tmp_path / f"k{vec}.cu"
        cu.write_text(t.instantiate({k.name: vec}) + "template void run<float>(float*, int);\n")
        ptx = cu.with_suffix(".ptx")
        r = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", "-ptx", "-o", str(ptx), str(cu)],
                           capture_output=True, text=True)  # fmt: skip
        assert r.returncode == 0, r.stderr[-2000:]
        if vec == 4:
            assert "ld.global.v4.f32" in ptx.read_text() or "ld.global.v4.u32" in ptx.read_text()
