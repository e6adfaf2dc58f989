"""On a GPU: every VEC_THREAD config of the per-thread vectorize site verifies against the original.

* llm.c's ``gelu_forward_kernel1`` and ``residual_forward_kernel1`` (bf16) under ``vectorize``,
  ``coarsen`` and ``vectorize,block-size``, staged unmodified in
  a temporary kernel folder with ``common.h``, two headers that declare the cuBLAS names its host
  code uses, and a spec written here; the template is built the way ``ktx optimize`` builds it
  (:func:`ktx.pipeline.template_for_spec`) and each config is verified by the measurement
  harness against the original kernel: fresh seeded inputs, outputs poisoned, sizes that are
  not multiples of any VEC (the spec's odd variants ``N + 1``, ``N - 3``), no timing.
* The run-time fallback: a float kernel launched on pointers one element past an aligned
  allocation (no 16-byte pack is aligned), at odd sizes, against NumPy.
* The float goldens ``tests/golden/vectorize/thread_*.cu`` (64-bit index with an early return,
  2-D guards, a macro block size with ``__ldg`` and row offsets): every config against the
  original kernel (``VEC_THREAD=1``) on seeded inputs, outputs poisoned with NaN.

Skipped without CuPy and a device, and (the first) without llm.c (``../shared/llmc`` or
``shared/llmc``). About a minute.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from passtest import apply
from test_vectorize_thread import CUBLAS_STUB, LLMC

from ktx.measure.gpu import Options
from ktx.pipeline import candidate_from_template, template_for_spec
from ktx.specload import load_spec

pytestmark = pytest.mark.gpu

SPEC = """\
# {stem}_kernel1 from llm.c (unmodified), staged by tests/passes/test_vectorize_thread_gpu.py
kernel = "{stem}_kernel1"

[[args]]
name = "out"
dtype = "bf16"
shape = "[N]"
role = "out"
{inputs}
[[args]]
name = "N"
dtype = "int32"
value = "N"

[shapes]
default = [{{ N = 4099 }}, {{ N = 786432 }}]

[launch]
grid = ["cdiv(N, 256)"]
block = ["256"]

[compile]
flags = ["-O3", "-std=c++17"]

[constraints]
odd = {{ N = [1, -3] }}
"""

INPUT = """
[[args]]
name = "{name}"
dtype = "bf16"
shape = "[N]"
role = "in"
"""


def stage(folder: Path, stem: str, inputs: tuple[str, ...]) -> Path:
    folder.mkdir()
    shutil.copy(LLMC / f"{stem}.cu", folder / "kernel.cu")
    shutil.copy(LLMC / "common.h", folder / "common.h")
    (folder / "cublas_v2.h").write_text(CUBLAS_STUB)
    (folder / "cublasLt.h").write_text("#pragma once\n#include <cublas_v2.h>\n")
    args = "".join(INPUT.format(name=n) for n in inputs)
    (folder / "ktx.toml").write_text(SPEC.format(stem=stem, inputs=args))
    return folder


@pytest.mark.skipif(not (LLMC / "common.h").is_file(), reason="llm.c is not at ../shared/llmc")
@pytest.mark.parametrize("passes", ["vectorize", "coarsen", "coarsen{spacing=grid}", "vectorize,block-size"])
@pytest.mark.parametrize(
    ("stem", "inputs"),
    [("gelu_forward", ("inp",)), ("residual_forward", ("inp1", "inp2"))],
    ids=["gelu", "residual"],
)
def test_llmc_kernel1_every_config_verifies(
    tmp_path: Path, stem: str, inputs: tuple[str, ...], passes: str
) -> None:
    from ktx.measure.harness import Harness

    spec = load_spec(stage(tmp_path / stem, stem, inputs))
    t = template_for_spec(spec, passes)
    knob = "VEC_THREAD" if passes.startswith("vectorize") else "COARSEN"
    assert t.knobs[0].name == knob
    configs = [{knob: v} for v in t.knobs[0].values]
    if passes == "vectorize,block-size":  # the packs under other block sizes (the grid follows)
        configs = [{knob: v, "BLOCK_X": b} for v in (2, 8) for b in (64, 1024)]
    jobs = [(candidate_from_template(spec, t, c), p) for c in configs for p in spec.shape_set().points]
    failures: list[str] = []
    with Harness(spec, options=Options(rounds=3, time=False, odd=True)) as harness:
        for (cand, point), m in zip(jobs, harness.measure_many(jobs), strict=True):
            if not m.ok:
                failures.append(f"{dict(cand.config)} @ {point.name}: {m.status.value}: {m.message[:400]}")
    assert not failures, "\n".join(failures)


SCALE = """\
__global__ void axpb(float* out, const float* x, const float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = 2.f * x[i] + y[i];
  }
}

void launch(float* out, const float* x, const float* y, int n) {
  axpb<<<(n + 127) / 128, 128>>>(out, x, y, n);
}
"""


@pytest.mark.parametrize("shift", [0, 1, 2])
@pytest.mark.parametrize("n", [1, 5, 4099, 100_003])
def test_unaligned_pointers_and_odd_sizes_take_the_scalar_path(shift: int, n: int) -> None:
    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except Exception as exc:  # no driver
        pytest.skip(f"no GPU ({type(exc).__name__})")
    t = apply(SCALE, "vectorize")
    launch = t.launch()
    assert launch is not None
    rng = np.random.default_rng(n + shift)
    x = rng.standard_normal(n + 8).astype(np.float32)
    y = rng.standard_normal(n + 8).astype(np.float32)
    want = 2.0 * x[shift : shift + n] + y[shift : shift + n]
    for vec in t.knobs[0].values:
        source = t.instantiate({"VEC_THREAD": vec})
        source = source[: source.index("void launch(")]  # NVRTC compiles device code only
        module = cp.RawModule(code=source, options=("-std=c++17",), name_expressions=("axpb",))
        kernel = module.get_function("axpb")
        dx, dy = cp.asarray(x), cp.asarray(y)
        out = cp.full(n + 8, np.nan, dtype=cp.float32)
        (grid,), (block,), _ = launch.evaluate({"n": n, "VEC_THREAD": vec})
        # one element past the start: out, x and y are 4 bytes off every 16-byte boundary
        view = (out[shift:], dx[shift:], dy[shift:])
        kernel((grid,), (block,), (*view, np.int32(n)))
        got = cp.asnumpy(out)
        np.testing.assert_allclose(got[shift : shift + n], want, rtol=1e-6, atol=1e-6, err_msg=f"VEC={vec}")
        assert np.isnan(got[shift + n :]).all() and np.isnan(got[:shift]).all(), f"VEC={vec} wrote past n"


#: The float goldens: (file, kernel, args as (name, role, size or value, dtype), shapes).
GOLDENS = (
    (
        "thread_residual.cu",
        "residual_add",
        (
            ("out", "out", "n", "f4"),
            ("inp1", "in", "n", "f4"),
            ("inp2", "in", "n", "f4"),
            ("n", "int", "n", "u8"),
        ),
        ({"n": 4099}, {"n": 100_003}),
    ),
    (
        "thread_2d.cu",
        "matadd",
        (
            ("C", "out", "M * N", "f4"),
            ("A", "in", "M * N", "f4"),
            ("B", "in", "M * N", "f4"),
            ("M", "int", "M", "i4"),
            ("N", "int", "N", "i4"),
        ),
        ({"M": 37, "N": 1003}, {"M": 16, "N": 1024}),
    ),
    (
        "thread_2d.cu",
        "matscale",
        (
            ("C", "out", "M * N", "f4"),
            ("A", "in", "M * N", "f4"),
            ("M", "int", "M", "i4"),
            ("N", "int", "N", "i4"),
        ),
        ({"M": 37, "N": 1003}, {"M": 16, "N": 1024}),
    ),
    (
        "thread_ldg.cu",
        "scale_rows",
        (
            ("out", "out", "rows * C", "f4"),
            ("in", "in", "rows * C", "f4"),
            ("scale", "in", "rows", "f4"),
            ("C", "int", "C", "u4"),
        ),
        ({"rows": 37, "C": 1003}, {"rows": 8, "C": 4096}),
    ),
)


@pytest.mark.parametrize(("golden", "kernel", "args", "envs"), GOLDENS, ids=[g[1] for g in GOLDENS])
def test_float_goldens_every_config_matches_the_original(
    golden: str, kernel: str, args: tuple[tuple[str, str, str, str], ...], envs: tuple[dict[str, int], ...]
) -> None:
    cp = pytest.importorskip("cupy")
    path = Path(__file__).resolve().parents[1] / "golden" / "vectorize" / golden
    t = apply(path.read_text(), "vectorize", kernel=kernel)
    launch = t.launch()
    assert launch is not None and [k.name for k in t.knobs] == ["VEC_THREAD"]

    def run(vec: int, env: dict[str, int], inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        source = t.instantiate({"VEC_THREAD": vec})
        source = source[: source.index("void launch")]  # NVRTC compiles device code only
        fn = cp.RawModule(code=source, options=("-std=c++17",), name_expressions=(kernel,)).get_function(
            kernel
        )
        values: list[object] = []
        outs: dict[str, object] = {}
        for name, role, size, dtype in args:
            if role == "int":
                values.append(np.dtype(dtype).type(eval(size, {}, dict(env))))
            elif role == "out":
                outs[name] = cp.full(eval(size, {}, dict(env)), np.nan, dtype=cp.float32)
                values.append(outs[name])
            else:
                values.append(cp.asarray(inputs[name]))
        grid, block, _ = launch.evaluate({**env, "VEC_THREAD": vec})
        fn(tuple(grid), tuple(block), tuple(values))
        return {n: cp.asnumpy(v) for n, v in outs.items()}

    for env in envs:
        rng = np.random.default_rng(sum(env.values()))
        inputs = {
            name: rng.standard_normal(eval(size, {}, dict(env))).astype(np.float32)
            for name, role, size, _ in args
            if role == "in"
        }
        want = run(1, env, inputs)
        for vec in t.knobs[0].values[1:]:
            got = run(vec, env, inputs)
            for name, ref in want.items():
                assert not np.isnan(ref).any(), f"{kernel} {env}: the original left {name} unwritten"
                np.testing.assert_allclose(
                    got[name], ref, rtol=1e-6, atol=1e-6, err_msg=f"{kernel} VEC={vec} {env}"
                )
