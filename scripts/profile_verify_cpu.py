"""CPU profile of one verification round of llm.c layernorm v1 at B=32,T=1024,C=768 (25M floats),
through the worker's own functions with numpy as the array module (issue 23 item 6).

Why: the GPU worker runs the same drawing, guard and comparison code under CuPy; on a CPU the
shares show which steps scale with the buffer size (the Python reference's float64 passes,
the comparison's float64 temporaries, the guarded copies) without a device.

    .venv/bin/python scripts/profile_verify_cpu.py [--rounds N] [--top K]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
from pathlib import Path

import numpy as np

from ktx.measure.guards import run_guarded
from ktx.measure.verify import compare, load_python_reference, python_reference, round_seed, seeded_inputs
from ktx.spec import ShapePoint
from ktx.specload import load_spec

BENCH = Path(__file__).resolve().parents[1] / "benchmarks/llmc/layernorm_forward"
#: llm.c's source is fetched, not kept: a stand-in of the same signature lets the spec load.
KERNEL = """__global__ void layernorm_forward_kernel1(float* out, float* mean, float* rstd,
    const float* inp, const float* weight, const float* bias, int N, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) { mean[i] = 0.0f; rstd[i] = 1.0f; }
    for (int c = 0; i < N && c < C; c++) out[i * C + c] = inp[i * C + c];
}
"""


def staged_spec(folder: Path) -> Path:
    """The v1 spec and reference in ``folder`` beside a stand-in source."""
    (folder / "ktx.toml").write_text((BENCH / "v1/ktx.toml").read_text())
    (folder / "reference.py").write_text((BENCH / "reference.py").read_text())
    (folder / "layernorm_forward.cu").write_text(KERNEL)
    return folder / "ktx.toml"


def naive_layernorm(arrays: dict[str, np.ndarray]) -> None:
    """The kernel's work in float32 (a stand-in launch, so that outputs pass the check)."""
    c = arrays["weight"].size
    x = arrays["inp"].reshape(-1, c)
    mean = x.mean(axis=1, dtype=np.float32)
    var = ((x - mean[:, None]) ** 2).mean(axis=1, dtype=np.float32)
    rstd = np.float32(1.0) / np.sqrt(var + np.float32(1e-5))
    arrays["out"][...] = ((x - mean[:, None]) * rstd[:, None] * arrays["weight"] + arrays["bias"]).reshape(
        arrays["out"].shape
    )
    arrays["mean"][...] = mean
    arrays["rstd"][...] = rstd


def one_round(spec_path: Path, shape: str, r: int, stored: bool) -> dict[str, float]:
    spec = load_spec(spec_path)
    point = ShapePoint.from_name(shape)
    steps: dict[str, float] = {}
    clock = time.perf_counter()
    pristine = seeded_inputs(spec, point, round_seed(spec, point, r), r, np)
    steps["draw"] = time.perf_counter() - clock
    clock = time.perf_counter()
    if stored:  # against the original kernel's stored outputs
        want = run_guarded(spec, point, pristine, naive_layernorm, np, original=True)
    else:
        host = {a.name: pristine[a.name] for a in spec.args if a.is_array and a.role != "out"}
        want = python_reference(spec, point, host, load_python_reference(spec))
    steps["reference"] = time.perf_counter() - clock
    clock = time.perf_counter()
    got = run_guarded(spec, point, pristine, naive_layernorm, np, original=not stored)
    steps["guarded run"] = time.perf_counter() - clock
    clock = time.perf_counter()
    for arg in spec.args:
        if arg.is_output:
            result = compare(arg, got[arg.name], want[arg.name], spec.tolerance_for(arg.dtype), stored, np)
            assert result.ok, result.message
    steps["compare"] = time.perf_counter() - clock
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="B=32,T=1024,C=768")
    parser.add_argument("--stored", action="store_true", help="against the original kernel's outputs")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        spec = staged_spec(Path(tmp))
        prof = cProfile.Profile()
        prof.enable()
        steps = one_round(spec, args.shape, 0, args.stored)
        prof.disable()
    print("  ".join(f"{k} {v:.3f} s" for k, v in steps.items()), f"total {sum(steps.values()):.3f} s")
    pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
