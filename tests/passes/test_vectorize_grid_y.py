"""vectorize on one element per thread numbered along the grid's y.

FasterTransformer's residual kernels put the rows on the grid's x and a row's columns on its y:
``col_index = blockIdx.y * blockDim.x + threadIdx.x`` with ``dim3 grid(m, blocks_per_row)``.
This was refused as "leaves out blockIdx.x * blockDim.x". Packs are the same as along x, with the
grid's y divided by VEC_THREAD at the launch (and ``blockIdx.y``/``gridDim.y``, not x, are the
builtins whose meaning changes, so the body may read ``blockIdx.x``, its row).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from passtest import apply, remarks

SRC = """\
__global__ void add_res(float* __restrict__ output, const float* __restrict__ input,
                        const float* __restrict__ residual, const float* __restrict__ bias,
                        const int m, const int n) {
    const int col_index = blockIdx.y * blockDim.x + threadIdx.x;
    if (col_index < n) {
        float bias_val = (bias == nullptr) ? 0.0f : bias[col_index];
        output[blockIdx.x * n + col_index] =
            input[blockIdx.x * n + col_index] + residual[blockIdx.x * n + col_index] + bias_val;
    }
}
void run(float* o, const float* i, const float* r, const float* b, int m, int n) {
    int blocks_per_row = (n + 1023) / 1024;
    dim3 grid(m, blocks_per_row);
    dim3 block(n < 1024 ? n : 1024);
    add_res<<<grid, block>>>(o, i, r, b, m, n);
}
"""


def test_a_grid_y_index_is_packed_and_the_grid_y_shrinks() -> None:
    t = apply(SRC, "vectorize")
    assert [k.name for k in t.knobs] == ["VEC_THREAD"], remarks(t)
    assert any("grid y divided by VEC_THREAD" in r for r in remarks(t))
    out = t.instantiate({"VEC_THREAD": 4})
    assert "dim3 grid(m, (blocks_per_row + 3) / 4);" in out
    assert "ktx::store(output + blockIdx.x * n + ktx_p * 4, ktx_output);" in out
    assert "const int ktx_p = blockIdx.y * blockDim.x + threadIdx.x;" in out


def test_the_x_grid_is_left_alone_for_a_y_index() -> None:
    out = apply(SRC, "vectorize").instantiate({"VEC_THREAD": 2})
    assert "dim3 grid(m," in out and "KTX_CDIV(m" not in out and "(m + 1) / 2" not in out


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("+ bias_val;", "+ bias_val + blockIdx.y;"),  # the body reads the moved builtin
        ("+ bias_val;", "+ bias_val + gridDim.y;"),
    ],
)
def test_a_body_that_reads_the_y_builtins_is_refused(old: str, new: str) -> None:
    t = apply(SRC.replace(old, new), "vectorize")
    assert not t.knobs
    assert any("Dim.y" in r or "Idx.y" in r for r in remarks(t)), remarks(t)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("restrict", ["__restrict__", ""])
def test_every_width_builds_for_sm90(tmp_path: Path, restrict: str) -> None:
    t = apply(SRC.replace("__restrict__", restrict), "vectorize")
    for vec in t.knobs[0].values:
        cu = tmp_path / f"k{vec}.cu"
        cu.write_text(t.instantiate({"VEC_THREAD": vec}))
        r = subprocess.run(
            ["nvcc", "-std=c++17", "-arch=sm_90", "-ptx", "-o", str(cu.with_suffix(".ptx")), str(cu)],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, r.stderr[-2000:]


def test_restrict_spelled_without_underscores_is_restrict_too() -> None:
    """FasterTransformer writes ``const T* __restrict``: no run-time check is needed then."""
    t = apply(SRC.replace("__restrict__", "__restrict"), "vectorize")
    assert [k.name for k in t.knobs] == ["VEC_THREAD"], remarks(t)
    assert "ktx::disjoint" not in t.instantiate({"VEC_THREAD": 4})


def test_without_restrict_a_read_at_another_offset_is_checked_per_pack() -> None:
    """``bias[col]`` beside ``output[row * n + col]`` with no ``__restrict__``: a thread's packed
    stores could overwrite a bias element a later element of its pack reads (a dependence the
    original, one element per thread, did not order). Packs are taken where the thread's
    elements of both are disjoint; one by one (in the original order) otherwise."""
    t = apply(SRC.replace("__restrict__", ""), "vectorize")
    assert [k.name for k in t.knobs] == ["VEC_THREAD"], remarks(t)
    assert any("output and bias may alias" in r for r in remarks(t)), remarks(t)
    out = t.instantiate({"VEC_THREAD": 4})
    assert "ktx::disjoint(output + blockIdx.x * n + ktx_p * 4, bias + ktx_p * 4, 4)" in out
    # same offsets (input, residual beside output): in place is fine, no check
    assert "ktx::disjoint(output + blockIdx.x * n + ktx_p * 4, input" not in out


def test_the_same_pointer_at_another_offset_is_still_refused() -> None:
    src = SRC.replace("+ bias_val;", "+ bias_val + output[blockIdx.x * n + col_index + 1];")
    t = apply(src, "vectorize")
    assert not t.knobs
