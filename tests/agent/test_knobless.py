"""A pipeline whose passes expose no knob (``hoist``) is still measured: the REWRITTEN knob."""

from __future__ import annotations

from pathlib import Path

from ktx.agent.loop import OptimizeRequest, load_records, optimize
from ktx.agent.plan import PassChoice, Plan
from ktx.agent.planner import PlanContext, PlanOutcome
from ktx.agent.search import REWRITTEN
from ktx.specload import load_spec

from .model_backend import GenericBackend

KERNEL = """#include <cuda_fp16.h>
__global__ void scale_kernel(float* __restrict__ y, const float* __restrict__ x, const float t, const int n) {
  const long long row = blockIdx.x;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    y[row * n + i] = x[row * n + i] * expf(t) / sqrtf(t + 1.0f);
  }
}
"""

SPEC = """kernel = "scale_kernel"
source = "kernel.cu"
description = "y = x * exp(t) / sqrt(t + 1), row by row"

[[args]]
name = "y"
dtype = "fp32"
shape = "[rows, n]"
role = "out"

[[args]]
name = "x"
dtype = "fp32"
shape = "[rows, n]"
role = "in"

[[args]]
name = "t"
dtype = "fp32"
value = "0.5"

[[args]]
name = "n"
dtype = "int32"
value = "n"

[shapes]
default = [{ rows = 256, n = 4096 }, { rows = 1024, n = 4096 }]

[launch]
grid = ["rows"]
block = ["256"]
shared = "0"
"""


class HoistOnce:
    name = "rules"

    def plan(self, context: PlanContext) -> PlanOutcome:
        if context.round == 1:
            return PlanOutcome(Plan((PassChoice("hoist"),), "invariant expf and sqrtf in the row loop"))
        return PlanOutcome(Plan(context.current.passes, "done", stop=True))


def test_knobless_pipeline_is_searched(tmp_path: Path) -> None:
    folder = tmp_path / "scale"
    folder.mkdir()
    (folder / "kernel.cu").write_text(KERNEL)
    (folder / "ktx.toml").write_text(SPEC)
    spec = load_spec(folder)
    req = OptimizeRequest(folder, rounds=2, trials_per_round=4, out=tmp_path / "run", ncu="off")
    optimize(req, backend=GenericBackend(spec), planner=HoistOnce())
    first = load_records(tmp_path / "run")[0]
    assert first["pipeline"] == "hoist" and first["status"] in ("improved", "no-gain")
    assert first["knobs"] == {}  # the pass declares none; the search adds REWRITTEN
    assert first["result"]["evaluations"] == 2 * len(spec.shape_set().points)  # original and rewrite
    assert all(set(s["best_config"] or {REWRITTEN: 1}) == {REWRITTEN} for s in first["result"]["shapes"])
    template = (tmp_path / "run" / "round-01" / "template.cu").read_text()
    assert "ktx_h" in template and "expf(t)" not in template.split("for (")[1]
