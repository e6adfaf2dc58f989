"""On a GPU: session 9's two vectorize extensions against the original kernel.

* Reads at other indices than the write behind a run-time range check (FasterTransformer's
  add-bias kernels, no ``__restrict__``): every width, with the pointers apart (the packs run,
  many blocks) and with a read inside the written range (one thread, so that the original's
  order is defined: the check must send the candidate down the scalar path, else a pack reads
  an element before the thread's own earlier store).
* A template element type no launch names (``sizeof`` picks the pack at compile time): every
  width for float, half and double against the original, odd sizes, rows off a pack boundary.

Compiled with NVRTC through CuPy; skipped without CuPy and a device. Seconds.
"""

from __future__ import annotations

import numpy as np
import pytest
from passtest import apply
from test_vectorize_host import BIAS_MOD
from test_vectorize_unsized import SRC as SCALE_ROWS

pytestmark = pytest.mark.gpu


def _cupy():  # type: ignore[no-untyped-def]
    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except Exception as exc:  # no driver
        pytest.skip(f"no GPU ({type(exc).__name__})")
    return cp


def _bias_mod(cp, source: str):  # type: ignore[no-untyped-def]
    return cp.RawModule(code=source, options=("-std=c++17",), name_expressions=("bias_mod",)).get_function(
        "bias_mod"
    )


@pytest.mark.parametrize("n", [5, 4099, 100_003])
def test_reads_apart_from_the_writes_are_packed_and_agree(n: int) -> None:
    cp = _cupy()
    t = apply(BIAS_MOD, "vectorize")
    (knob,) = t.knobs
    rng = np.random.default_rng(n)
    h = 96
    base = rng.standard_normal(3 * n + 8192).astype(np.float32)
    at = 4 * ((n + 1024) // 4) + 4096  # out after in, bias and scale, on a pack boundary
    orig = _bias_mod(cp, BIAS_MOD)
    for vec in knob.values:
        cand = _bias_mod(cp, t.instantiate({knob.name: vec}))
        outs = []
        for kernel in (orig, cand):
            mem = cp.asarray(base)
            out, inp = mem[at : at + n], mem[7 : 8 + n]  # in + 1 on a pack boundary, like out
            bias, scale = mem[n + 64 : n + 64 + h], mem[n + 512 : n + 513]
            kernel((64,), (128,), (out, inp, bias, scale, np.int32(n), np.int32(h)))
            outs.append(cp.asnumpy(mem))
        np.testing.assert_array_equal(outs[1], outs[0], err_msg=f"VEC={vec}")


@pytest.mark.parametrize("where", ["in ahead", "bias inside", "scale inside"])
def test_a_read_inside_the_written_range_keeps_the_original_order(where: str) -> None:
    cp = _cupy()
    t = apply(BIAS_MOD, "vectorize")
    (knob,) = t.knobs
    n, h = 67, 8
    base = np.random.default_rng(1).standard_normal(4096).astype(np.float32)
    orig = _bias_mod(cp, BIAS_MOD)
    for vec in knob.values:
        cand = _bias_mod(cp, t.instantiate({knob.name: vec}))
        outs = []
        for kernel in (orig, cand):
            mem = cp.asarray(base)
            out = mem[1024 : 1024 + n]
            inp = mem[1027 : 1028 + n] if where == "in ahead" else mem[7 : 8 + n]
            bias = mem[1024 + n // 2 : 1024 + n // 2 + h] if where == "bias inside" else mem[512 : 512 + h]
            scale = mem[1024 + n // 3 :] if where == "scale inside" else mem[600:]
            kernel((1,), (1,), (out, inp, bias, scale, np.int32(n), np.int32(h)))  # one thread: defined order
            outs.append(cp.asnumpy(mem))
        np.testing.assert_array_equal(outs[1], outs[0], err_msg=f"{where}, VEC={vec}")


TYPES = {"float": np.float32, "__half": np.float16, "double": np.float64}


@pytest.mark.parametrize("ctype", sorted(TYPES))
def test_unsized_template_type_every_width_agrees(ctype: str) -> None:
    cp = _cupy()
    source = "#include <cuda_fp16.h>\n" + SCALE_ROWS
    t = apply(source, "vectorize")
    (knob,) = t.knobs
    rows, d = 7, 1001  # odd rows: every row but the first starts off a pack boundary
    rng = np.random.default_rng(7)
    dtype = TYPES[ctype]
    x = rng.standard_normal(rows * d).astype(dtype)
    g = rng.standard_normal(d).astype(dtype)
    name = f"scale_rows<{ctype}>"

    def run(code: str):  # type: ignore[no-untyped-def]
        kernel = cp.RawModule(code=code, options=("-std=c++17",), name_expressions=(name,)).get_function(name)
        out = cp.full(rows * d, np.nan, dtype=dtype)
        kernel((rows,), (128,), (out, cp.asarray(x), cp.asarray(g), np.int32(d)))
        return cp.asnumpy(out)

    want = run(source)
    for vec in knob.values:
        np.testing.assert_array_equal(
            run(t.instantiate({knob.name: vec})), want, err_msg=f"{ctype} VEC={vec}"
        )
