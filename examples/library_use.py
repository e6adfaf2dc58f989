"""ktx as a library: draft a spec, template a kernel, tune it, all from Python.

Runs anywhere: the search answers from the committed recording of an exhaustive search of
silu_and_mul on an NVIDIA H200 (``kernels/silu_and_mul/recorded/``), the replay backend; on a GPU
host pass ``backend="cupy"`` to measure instead. The objects returned are the ones the commands
print from (``docs/api.md``).

    python examples/library_use.py [OUT_DIR]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import ktx

ROOT = Path(__file__).resolve().parents[1]
KERNEL = ROOT / "kernels" / "silu_and_mul"
RECORDING = KERNEL / "recorded" / "exhaustive_h200_2026-11-21.json"
PIPELINE = "block-size,split{max=16},unroll{max=4,loops=L0}"
OPTIMIZE_RECORDING = KERNEL / "recorded" / "optimize" / "quick_h200_2026-11-21.json"


def main(out: Path) -> None:
    # 1. What ktx init would write for this kernel (nothing left to fill in for this one).
    draft = ktx.init(KERNEL / "kernel.cu", out=out / "draft")
    print(f"init: {draft.kernel}, {len(draft.todos)} TODO(s)")

    # 2. The template and its knob space, then one config as plain CUDA.
    template = ktx.apply(KERNEL / "kernel.cu", PIPELINE)
    print("knobs:", ", ".join(f"{k.name}{list(k.values)}" for k in template.space.knobs))
    cuda = template.instantiate({"SPLIT": 4})
    print("SPLIT=4 launches:", next(line.strip() for line in cuda.splitlines() if "dim3 grid" in line))

    # 3. The search, replayed from the H200 recording (every number says where it came from).
    summary = ktx.tune(
        KERNEL,
        PIPELINE,
        backend=f"replay:{RECORDING}",
        shapes="tokens=1,d=4096;tokens=64,d=14336",
        trials=30,
        seed=1,
        holdout="none",
        quiet=True,
        out=out / "tune",
    )
    for row in summary.results:
        speedup = "-" if row.speedup is None else f"{row.speedup:.2f}x"
        print(f"tune: {row.point.name}: best {dict(row.best_config or {})} {speedup} ({summary.device})")

    # 4. The agent loop, replayed from the recording of a real ktx optimize run on an H200.
    result = ktx.optimize(
        KERNEL,
        backend=f"replay:{OPTIMIZE_RECORDING}",
        shapes="quick",
        rounds=4,
        trials_per_round=16,
        seed=0,
        ncu="off",
        out=out / "optimize",
    )
    speedup = "-" if result.geomean_speedup is None else f"{result.geomean_speedup:.3f}x"
    print(f"optimize: best `{result.pipeline}` at round {result.best_round}, geomean {speedup}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp))
