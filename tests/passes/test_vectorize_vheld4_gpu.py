"""On a GPU: session 10's vectorize extensions (s10-vheld4) verified against the originals.

Each kernel is the shape of a held-out kernel that vectorize now packs (README of
``benchmarks/vheld``); every width is run on seeded inputs, outputs poisoned with NaN, sizes
that no width divides, and compared with the original (the ``1`` config, the source as written).
No timing.

* a read at a conditional index ``a[t ? j : i]`` (CTranslate2's ``dequantize_gemm_output_kernel``),
  each of the four ``(ta, tb)``;
* one element per thread with a specialization sharing its launches (FasterTransformer's
  ``sigmoid_kernel<half2>``): the grid kept as written, the template packed;
* a store in every branch of an ``if / else if / else`` chain (CTranslate2's ``rotary_kernel``),
  both ``interleave`` instantiations.

Skipped without CuPy and a device. Well under a minute.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from passtest import apply
from test_vectorize_branch_store import ROTARY
from test_vectorize_cond_index import DQ
from test_vectorize_flat_grid import TWINS
from test_vectorize_vheld2_gpu import _cupy

pytestmark = pytest.mark.gpu


def _run_all(src: str, name: str, sizes: dict[str, int], make: Any, **options: object) -> int:
    """Every config of the one knob, compared with the ``1`` config; the number of configs run."""
    cp = _cupy()
    t = apply(src, "vectorize", **options)
    (knob,) = t.knobs
    launch = t.launch()
    assert launch is not None
    want = None
    for vec in knob.values:
        source = t.instantiate({knob.name: vec})
        cut = source.index("void run(")
        head = source.rfind("template <typename T>", 0, cut)
        source = source[: head if head >= 0 and source[head:cut].strip() == "template <typename T>" else cut]
        module = cp.RawModule(code=source, options=("-std=c++17",), name_expressions=(name,))
        fn = module.get_function(name)
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


def _data(cp: Any, seed: int, n: int, dtype: Any = np.float32, nan: bool = False) -> Any:
    if nan:
        return cp.full(n, np.nan, dtype=dtype)
    return cp.asarray(np.random.default_rng(seed).standard_normal(n).astype(dtype))


@pytest.mark.parametrize(("ta", "tb"), [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize(("rows", "depth"), [(7, 1003), (3, 4096)])
def test_conditional_index(ta: bool, tb: bool, rows: int, depth: int) -> None:
    def make(cp: Any) -> tuple[tuple[Any, ...], Any]:
        c = cp.asarray(np.random.default_rng(0).integers(-1000, 1000, rows * depth).astype(np.int32))
        y = _data(cp, 0, rows * depth, nan=True)
        scales = max(rows, depth)
        a, b, bias = _data(cp, 1, scales), _data(cp, 2, scales), _data(cp, 3, depth)
        return (c, a, b, np.bool_(ta), np.bool_(tb), bias, y, np.int64(depth)), y

    assert _run_all(DQ, "dq", {"n": rows, "d": depth}, make) > 1


@pytest.mark.parametrize("size", [1001, 4096, 70001])
def test_specialization_keeps_the_grid(size: int) -> None:
    def make(cp: Any) -> tuple[tuple[Any, ...], Any]:
        data = _data(cp, 0, size)
        return (data, np.int32(size)), data

    assert _run_all(TWINS, "sig<float>", {"size": size}, make, kernel="sig") > 1


@pytest.mark.parametrize("interleave", ["true", "false"])
@pytest.mark.parametrize(("rows", "ndims", "depth"), [(5, 64, 1003), (3, 1002, 1002), (4, 0, 256)])
def test_store_in_every_branch_of_a_chain(interleave: str, rows: int, ndims: int, depth: int) -> None:
    def make(cp: Any) -> tuple[tuple[Any, ...], Any]:
        y = _data(cp, 0, rows * depth, nan=True)
        args = (_data(cp, 1, rows * depth), _data(cp, 2, depth), _data(cp, 3, depth), y)
        return (*args, np.int64(ndims), np.int64(depth)), y

    assert _run_all(ROTARY, f"rotary<{interleave}>", {"rows": rows}, make, kernel="rotary") > 1
