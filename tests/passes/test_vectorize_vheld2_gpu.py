"""On a GPU: session 9's second round of vectorize extensions verified against the originals.

Each kernel below is the shape of a held-out kernel that vectorize now packs (README of
``benchmarks/vheld``); every width is run on seeded inputs, outputs poisoned with NaN, sizes that
no width divides, and compared with the original (the ``1`` config, which is the source as
written). No timing.

* grid y: ``col = blockIdx.y * blockDim.x + threadIdx.x``, no ``__restrict__``: the per-pack
  disjoint check (bias apart from the output: packs run);
* a body-local index ``const int index = i * N + j;`` (CTranslate2's layer norm);
* ``limit[index / w]`` beside ``finished[index]`` (FasterTransformer's ``length_criterion``);
* ``if (idx > m * n) return;``: element ``m * n`` runs too (``slice_copy``);
* ``ldg(&bias[id % n])`` through a read-only load helper.

Skipped without CuPy and a device. Well under a minute.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from passtest import apply

pytestmark = pytest.mark.gpu

GRID_Y = """\
__global__ void add_res(float* output, const float* input, const float* residual, const float* bias,
                        const int m, const int n) {
    const int col_index = blockIdx.y * blockDim.x + threadIdx.x;
    if (col_index < n) {
        float bias_val = (bias == nullptr) ? 0.0f : bias[col_index];
        output[blockIdx.x * n + col_index] =
            input[blockIdx.x * n + col_index] + residual[blockIdx.x * n + col_index] + bias_val;
    }
}
void run(float* o, const float* i, const float* r, const float* b, int m, int n) {
    int blocks_per_row = (n + 255) / 256;
    dim3 grid(m, blocks_per_row);
    add_res<<<grid, 256>>>(o, i, r, b, m, n);
}
"""

LOCAL = """\
__global__ void ln(float* Y, const float* X, const float* gamma, int N, int M) {
  for (int i = blockIdx.x; i < M; i += gridDim.x) {
    for (int j = threadIdx.x; j < N; j += blockDim.x) {
      const int index = i * N + j;
      const float g = gamma == nullptr ? 1.f : gamma[j];
      Y[index] = X[index] * g;
    }
  }
}
void run(float* y, const float* x, const float* g, int n, int m) { ln<<<m, 256>>>(y, x, g, n, m); }
"""

QUOTIENT = """\
__global__ void lc(float* finished, const float* limit, int b, int w, float step) {
  for (int index = threadIdx.x; index < b * w; index += blockDim.x) {
    const int batch_idx = index / w;
    finished[index] = finished[index] + (step >= limit[batch_idx] ? 1.f : 0.f);
  }
}
void run(float* f, const float* l, int b, int w, float s) { lc<<<1, 256>>>(f, l, b, w, s); }
"""

INCLUSIVE = """\
__global__ void copy2(const float* __restrict__ in, float* __restrict__ out, const int m, const int n) {
    int idx = blockDim.x * blockIdx.x + threadIdx.x;
    if (idx > m * n) {
        return;
    }
    out[idx] = in[idx] * 2.f;
}
void run(const float* i, float* o, int m, int n) { copy2<<<(m * n + 256) / 256, 256>>>(i, o, m, n); }
"""

LDG = """\
template <typename T>
inline __device__ T ldg(const T* val) {
    return __ldg(val);
}
__global__ void add_bias_tanh(float* out, const float* bias, int m, int n) {
  for (int id = blockIdx.x * blockDim.x + threadIdx.x; id < m * n; id += blockDim.x * gridDim.x) {
    float val = out[id];
    val = val + ldg(&bias[id % n]);
    out[id] = tanhf(val);
  }
}
void run(float* o, const float* b, int m, int n) { add_bias_tanh<<<m, 256>>>(o, b, m, n); }
"""


def _cupy() -> Any:
    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except Exception as exc:  # no driver
        pytest.skip(f"no GPU ({type(exc).__name__})")
    return cp


def _every_config(
    src: str, kernel: str, sizes: dict[str, int], make: Callable[[Any], tuple[tuple[Any, ...], Any]]
) -> int:
    """Run every config of the one knob with arguments from ``make(cp)`` (fresh each run: args,
    the output array) and compare the output with the ``1`` config; the number of configs run."""
    cp = _cupy()
    t = apply(src, "vectorize")
    (knob,) = t.knobs
    launch = t.launch()
    assert launch is not None
    want = None
    for vec in knob.values:
        source = t.instantiate({knob.name: vec})
        source = source[: source.index("void run(")]  # NVRTC compiles device code only
        fn = cp.RawModule(code=source, options=("-std=c++17",), name_expressions=(kernel,)).get_function(
            kernel
        )
        args, out = make(cp)
        grid, block, _ = launch.evaluate({**sizes, knob.name: vec})
        fn(grid, block, args)
        got = cp.asnumpy(out)
        if want is None:
            assert vec == 1
            want = got
        else:
            np.testing.assert_allclose(
                got, want, rtol=1e-6, atol=1e-6, equal_nan=True, err_msg=f"{knob.name}={vec}"
            )
    return len(knob.values)


def _data(cp: Any, seed: int, n: int, nan: bool = False) -> Any:
    if nan:
        return cp.full(n, np.nan, dtype=cp.float32)
    return cp.asarray(np.random.default_rng(seed).standard_normal(n).astype(np.float32))


@pytest.mark.parametrize(("m", "n"), [(3, 1003), (5, 4096)])
def test_grid_y_without_restrict(m: int, n: int) -> None:
    def make(cp: Any) -> tuple[tuple[Any, ...], Any]:
        out = _data(cp, 0, m * n, nan=True)
        return (out, _data(cp, 1, m * n), _data(cp, 2, m * n), _data(cp, 3, n), np.int32(m), np.int32(n)), out

    assert _every_config(GRID_Y, "add_res", {"m": m, "n": n}, make) > 1


@pytest.mark.parametrize(("m", "n"), [(3, 1003), (4, 1024)])
def test_local_index(m: int, n: int) -> None:
    def make(cp: Any) -> tuple[tuple[Any, ...], Any]:
        out = _data(cp, 0, m * n, nan=True)
        return (out, _data(cp, 1, m * n), _data(cp, 2, n), np.int32(n), np.int32(m)), out

    assert _every_config(LOCAL, "ln", {"n": n, "m": m}, make) > 1


@pytest.mark.parametrize(("b", "w"), [(7, 5), (64, 4)])
def test_quotient_read(b: int, w: int) -> None:
    def make(cp: Any) -> tuple[tuple[Any, ...], Any]:
        fin = _data(cp, 0, b * w)
        return (fin, _data(cp, 1, b), np.int32(b), np.int32(w), np.float32(0.1)), fin

    assert _every_config(QUOTIENT, "lc", {"b": b, "w": w, "s": 0}, make) > 1


@pytest.mark.parametrize(("m", "n"), [(3, 1001), (8, 512)])
def test_inclusive_guard_runs_element_mn(m: int, n: int) -> None:
    def make(cp: Any) -> tuple[tuple[Any, ...], Any]:
        out = _data(cp, 0, m * n + 8, nan=True)
        return (_data(cp, 1, m * n + 8), out, np.int32(m), np.int32(n)), out

    assert _every_config(INCLUSIVE, "copy2", {"m": m, "n": n}, make) > 1


@pytest.mark.parametrize(("m", "n"), [(3, 1001), (8, 512)])
def test_ldg_helper(m: int, n: int) -> None:
    def make(cp: Any) -> tuple[tuple[Any, ...], Any]:
        out = _data(cp, 0, m * n)
        return (out, _data(cp, 1, n), np.int32(m), np.int32(n)), out

    assert _every_config(LDG, "add_bias_tanh", {"m": m, "n": n}, make) > 1
