"""On a GPU: session 9's third round of vectorize extensions verified against the originals.

Each kernel is the shape of a held-out kernel that vectorize now packs (README of
``benchmarks/vheld``); every width is run on seeded inputs, outputs poisoned with NaN where the
kernel writes them only, sizes that no width divides, and compared with the original (the ``1``
config, the source as written). No timing.

* one element per thread of a template type ``T`` no launch names (``T5addResidual``): float
  and double, where double's 8-element width takes its elements one by one (``if constexpr``);
* a 2-D grid flattened row by row (``sigmoid_kernel``), launched with a grid y above 1;
* a store in both branches of an if/else (``add_bias_concat_clstoken_add_posembed``).

Skipped without CuPy and a device. Well under a minute.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from passtest import apply
from test_vectorize_flat_grid import SRC as FLAT
from test_vectorize_host import CONCAT
from test_vectorize_thread_unsized import SRC as UNSIZED
from test_vectorize_vheld2_gpu import _cupy

pytestmark = pytest.mark.gpu


def _run_all(src: str, kernel: str, sizes: dict[str, int], make: Any, dtype: Any = np.float32) -> int:
    """Every config of the one knob, compared with the ``1`` config; the number of configs run."""
    cp = _cupy()
    t = apply(src, "vectorize")
    (knob,) = t.knobs
    launch = t.launch()
    assert launch is not None
    want = None
    for vec in knob.values:
        source = t.instantiate({knob.name: vec})
        cut = source.index("void run(")
        head = source.rfind("template <typename T>", 0, cut)
        source = source[: head if head >= 0 and source[head:cut].strip() == "template <typename T>" else cut]
        module = cp.RawModule(code=source, options=("-std=c++17",), name_expressions=(kernel,))
        fn = module.get_function(kernel)
        args, out = make(cp, dtype)
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


def _data(cp: Any, seed: int, n: int, dtype: Any, nan: bool = False) -> Any:
    if nan:
        return cp.full(n, np.nan, dtype=dtype)
    return cp.asarray(np.random.default_rng(seed).standard_normal(n).astype(dtype))


@pytest.mark.parametrize(("ctype", "dtype"), [("float", np.float32), ("double", np.float64)])
@pytest.mark.parametrize("n", [1003, 4096])
def test_unlaunched_template_type_per_thread(ctype: str, dtype: Any, n: int) -> None:
    def make(cp: Any, dt: Any) -> tuple[tuple[Any, ...], Any]:
        out = _data(cp, 0, n, dt)
        return (out, _data(cp, 1, n, dt), _data(cp, 2, n, dt), np.int32(n)), out

    assert _run_all(UNSIZED, f"add_residual<{ctype}>", {"n": n, "s": 0}, make, dtype) > 1


@pytest.mark.parametrize("size", [1001, 4096])
def test_flattened_2d_grid(size: int) -> None:
    # the launch's grid is ((size + 127) / 128, 2): half its threads are past size
    def make(cp: Any, dt: Any) -> tuple[tuple[Any, ...], Any]:
        data = _data(cp, 0, size, dt)
        return (data, np.int32(size), np.float32(0.5)), data

    assert _run_all(FLAT, "sigmoid", {"size": size, "scale": 0, "s": 0}, make) > 1


@pytest.mark.parametrize(("m", "n"), [(3, 1003), (5, 256)])
def test_store_in_both_branches(m: int, n: int) -> None:
    def make(cp: Any, dt: Any) -> tuple[tuple[Any, ...], Any]:
        out = _data(cp, 0, m * n, dt, nan=True)
        return (_data(cp, 1, m * n, dt), out, _data(cp, 2, n, dt), np.int32(m), np.int32(n)), out

    src = CONCAT + "void run(const float* i, float* o, const float* c, int m, int n) {\n"
    src += "  concat<<<(m * n + 255) / 256, 256>>>(i, o, c, m, n);\n}\n"
    assert _run_all(src, "concat", {"m": m, "n": n}, make) > 1
