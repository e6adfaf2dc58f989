"""early-loads: the loop after a reduction gets its loads issued before it; 0 is the original.

Every PREFETCH of the three suite kernels it applies to (and of ``cluster-rows,early-loads`` on
the norms) compiles for sm_90 with the spec's flags, checked through ``ptxas -v``: no spills.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from passtest import ROOT, apply, remarks

from ktx.pipeline import mapping_from_spec, run
from ktx.specload import load_spec
from ktx.template import Template

NVCC = shutil.which("nvcc")

LOOP = """\
struct alignas(16) F4 {
  float v[4];
  __device__ void load(const float* p) {
    *reinterpret_cast<float4*>(v) = *reinterpret_cast<const float4*>(p);
  }
};
__global__ void k(float* __restrict__ y, const float* __restrict__ x, const float* __restrict__ w, int n) {
  __shared__ float part[1];
  float s = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
  if (threadIdx.x == 0) part[0] = 0.f;
  __syncthreads();
  atomicAdd(&part[0], s);
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    F4 b;
    b.load(w + i * 4);
    y[i] = b.v[0] * part[0];
  }
}
"""


def suite(name: str, pipeline: str = "early-loads") -> Template:
    path = ROOT / "kernels" / name
    spec = load_spec(path)
    return run(
        (path / "kernel.cu").read_text(),
        pipeline,
        mapping=mapping_from_spec(spec),
        template_args=spec.template_args,
        path=str(path / "kernel.cu"),
    )


EXPECTED = {
    # (the remark, loads issued early, packs kept from the first loop)
    "rmsnorm": (
        "loads of weight in loop L5 can go before the reduction; "
        "loop L5 takes the packs of input_row that loop L0 loaded (registers)",
        1,
        1,
    ),
    "fused_add_rmsnorm": ("loads of weight in loop L6 can go before the reduction", 1, 0),
    "per_token_group_quant_fp8": (
        "loop L2 takes the packs of group_input that loop L0 loaded (registers)",
        0,
        1,
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_suite_kernels_and_the_default_is_the_original(name: str) -> None:
    t = suite(name)
    remark, early, kept = EXPECTED[name]
    assert [(k.name, k.values, k.default) for k in t.knobs] == [("PREFETCH", (0, 1, 2, 4), 0)]
    assert remarks(t)[0].endswith(remark)
    original = [
        line for line in t.instantiate().splitlines(keepends=True) if not line.startswith("// ktx: `")
    ]
    assert "".join(original) == t.original
    two = t.instantiate({"PREFETCH": 2})
    assert "for (int ktx_k = 0; ktx_k < 2; ++ktx_k) {" in two
    assert two.count("[ktx_k].load(") == early
    assert len(re.findall(r" ktx_pf_\w+\[ktx_k\] = \w+;", two)) == kept


def test_rmsnorm_keeps_the_row_and_loads_the_weight_first() -> None:
    two = suite("rmsnorm").instantiate({"PREFETCH": 2})
    body = two.split("__global__ void rmsnorm_kernel", 1)[1]
    weight = body.index("ktx_pf_w[ktx_k].load(weight + i * VEC);")
    first = body.index("in.load(input_row + i * VEC); ktx_pf_in[ktx_k] = in;")
    shuffle = body.index("sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, offset);")
    second = body.index("in = ktx_pf_in[ktx_k];")
    assert body.index("const int num_packs =") < weight < first < shuffle < second
    assert "w = ktx_pf_w[ktx_k];" in body
    # both loops go on from the third pack of the thread
    assert body.count("for (int i = thread_id + 2 * num_threads; i < num_packs; i += num_threads) {") == 2


def test_refusals_name_the_construct() -> None:
    assert "loads of w in loop L1 can go before the reduction" in remarks(apply(LOOP, "early-loads"))[0]
    alias = LOOP.replace("const float* __restrict__ w", "const float* w")
    assert remarks(apply(alias, "early-loads")) == [
        "k: L1: loop L1 has no load to issue early (w (line 17) is not a const __restrict__ pointer)"
    ]
    brk = LOOP.replace("    y[i] = b.v[0] * part[0];", "    if (b.v[0] < 0.f) break;\n    y[i] = b.v[0];")
    assert "leaves early (break; at line" in remarks(apply(brk, "early-loads"))[0]
    nacc = LOOP.replace("for (int i = threadIdx.x; i < n; i += blockDim.x) s += x[i];", "s = x[threadIdx.x];")
    assert "no loop of the kernel's body accumulates a value" in remarks(apply(nacc, "early-loads"))[0]
    moved = LOOP.replace("  __syncthreads();\n  atomicAdd", "  __syncthreads();\n  n = n - 1;\n  atomicAdd")
    assert "uses n, which changes before the loop" in remarks(apply(moved, "early-loads"))[0]
    neq = LOOP.replace(
        "for (int i = threadIdx.x; i < n; i += blockDim.x) {", "for (int i = threadIdx.x; i != n; i += 1) {"
    )
    assert "condition is not i < n" in remarks(apply(neq, "early-loads"))[0]


def _ptxas(source: str, name_expression: str, tmp: Path) -> str:
    assert NVCC is not None
    src = tmp / "k.cu"
    src.write_text(
        source + f"\n[[maybe_unused]] static void* ktx_use() {{ return (void*)&{name_expression}; }}\n"
    )
    flags = ["-std=c++17", "-use_fast_math", "--expt-relaxed-constexpr", "-arch=sm_90", "-Xptxas", "-v"]
    proc = subprocess.run(
        [NVCC, *flags, "-cubin", "-o", str(tmp / "k.cubin"), str(src)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


@pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize(
    ("name", "pipeline"),
    [
        ("rmsnorm", "early-loads"),
        ("fused_add_rmsnorm", "early-loads"),
        ("per_token_group_quant_fp8", "early-loads"),
        ("rmsnorm", "cluster-rows,early-loads"),
        ("fused_add_rmsnorm", "cluster-rows,early-loads"),
    ],
)
@pytest.mark.slow
def test_every_prefetch_compiles_for_sm90_without_spills(name: str, pipeline: str, tmp_path: Path) -> None:
    t = suite(name, pipeline)
    configs = [{"PREFETCH": p} for p in (1, 2, 4)]
    if "cluster-rows" in pipeline:
        configs = [{"PREFETCH": p, "CLUSTER": c} for p, c in ((1, 2), (2, 4), (4, 8))]
    for config in configs:
        log = _ptxas(t.instantiate(config), t.name_expression(), tmp_path)
        assert re.search(r"0 bytes spill stores, 0 bytes spill loads", log), (config, log)


def test_rules_planner_tries_early_loads_for_reductions_far_from_speed_of_light() -> None:
    from ktx.agent.analysis import Analysis, Device, KernelFacts, ShapeAnalysis
    from ktx.agent.rules import RULES

    names = [r.pass_name for r in RULES]
    assert names.index("early-loads") == names.index("cluster-rows") + 1
    rule = RULES[names.index("early-loads")]
    facts = KernelFacts("per_token_group_quant_8bit_kernel", shuffles=True)
    slow = ShapeAnalysis(
        "tokens=1,hidden=7168", "ok", "graph", time_us=2.5, sol_fraction=0.05, bound="latency"
    )
    reason = rule.fires(Analysis("k", "", Device(), facts, (slow,)))
    assert reason is not None and "tokens=1,hidden=7168" in reason
    assert rule.fires(Analysis("k", "", Device(), KernelFacts("k"), (slow,))) is None
    busy = ShapeAnalysis(
        "tokens=8192,hidden=7168", "ok", "graph", time_us=50.0, sol_fraction=0.8, bound="memory"
    )
    assert rule.fires(Analysis("k", "", Device(), facts, (busy,))) is None


@pytest.mark.gpu
def test_every_prefetch_of_the_quantizer_verifies_on_the_gpu() -> None:
    from ktx.measure.gpu import Options
    from ktx.measure.harness import Harness
    from ktx.pipeline import candidate_from_template, template_for_spec

    spec = load_spec(ROOT / "kernels" / "per_token_group_quant_fp8")
    t = template_for_spec(spec, "unroll,early-loads")
    configs = [{"PREFETCH": p} for p in (0, 1, 2, 4)]
    jobs = [(candidate_from_template(spec, t, c), p) for c in configs for p in spec.shape_set("quick").points]
    options = Options(rounds=max(3, spec.verify.rounds), time=False, odd=True)
    failures: list[str] = []
    with Harness(spec, options=options) as harness:
        for (cand, point), m in zip(jobs, harness.measure_many(jobs), strict=True):
            if not m.ok:
                failures.append(f"{dict(cand.config)} @ {point.name}: {m.status.value}: {m.message[:300]}")
    assert not failures, "\n".join(failures)
