"""loads-first: straight-line pack loads issued where their addresses are known; 0 is the original."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from passtest import ROOT, apply, remarks

from ktx.pipeline import mapping_from_spec, run
from ktx.specload import load_spec
from ktx.template import Template

NVCC = shutil.which("nvcc")

KERNEL = """\
struct alignas(16) F4 {
  float v[4];
  __device__ void load(const float* p) {
    *reinterpret_cast<float4*>(v) = *reinterpret_cast<const float4*>(p);
  }
};
__global__ void k(float* __restrict__ out, const float* __restrict__ a, const float* __restrict__ w, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const bool valid = i < n;
  if (!valid) return;
  const float s = expf(w[i / 32]);
  if (s == 0.f) return;
  F4 x;
  x.load(a + i * 4);
  out[i] = x.v[0] * s;
}
"""


def merge() -> Template:
    path = ROOT / "kernels" / "merge_attn_states"
    spec = load_spec(path)
    return run(
        (path / "kernel.cu").read_text(),
        "loads-first",
        mapping=mapping_from_spec(spec),
        template_args=spec.template_args,
        path=str(path / "kernel.cu"),
    )


def test_merge_attn_states_value_loads_go_before_the_lse_math() -> None:
    t = merge()
    assert [(k.name, k.values, k.default) for k in t.knobs] == [("LOADS_FIRST", (0, 1), 0)]
    kept = [line for line in t.instantiate().splitlines(keepends=True) if not line.startswith("// ktx: `")]
    assert "".join(kept) == t.original
    one = t.instantiate({"LOADS_FIRST": 1})
    body = one.split("__global__ void merge_attn_states_kernel", 1)[1]
    offset = body.index("const long long elem_offset =")
    early = body.index("ktx_early_p_out.load(prefix_output + elem_offset);")
    lse = body.index("float p_lse = prefix_lse[lse_idx];")
    assert offset < early < body.index("ktx_early_s_out.load(suffix_output + elem_offset);") < lse
    assert "  p_out = ktx_early_p_out;\n  s_out = ktx_early_s_out;\n" in body
    # the copy in the both-empty branch is in a branch: it stays as written
    assert "    p_out.load(prefix_output + elem_offset);\n    p_out.store(output + elem_offset);" in body


def test_a_bounds_guard_stays_above_and_data_tests_are_crossed() -> None:
    one = apply(KERNEL, "loads-first").instantiate({"LOADS_FIRST": 1})
    guard = one.index("if (!valid) return;")
    early = one.index("ktx_early_x.load(a + i * 4);")
    assert guard < early < one.index("const float s = expf(w[i / 32]);")
    assert "  x = ktx_early_x;" in one


def test_refusals_name_the_construct() -> None:
    alias = KERNEL.replace("const float* __restrict__ a", "const float* a")
    assert remarks(apply(alias, "loads-first")) == [
        "k: no straight-line load to issue earlier (line 14: a is not a const __restrict__ pointer)"
    ]
    tight = KERNEL.replace("  const float s = expf(w[i / 32]);\n  if (s == 0.f) return;\n", "").replace(
        "x.v[0] * s", "x.v[0]"
    )
    assert remarks(apply(tight, "loads-first")) == [
        "k: no straight-line load to issue earlier (line 12: already issued where its address is known)"
    ]
    assert apply(tight, "loads-first").knobs == ()


@pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")
def test_both_configs_compile_for_sm90(tmp_path: Path) -> None:
    assert NVCC is not None
    t = merge()
    for value in (0, 1):
        src = tmp_path / "k.cu"
        src.write_text(
            t.instantiate({"LOADS_FIRST": value})
            + f"\n[[maybe_unused]] static void* ktx_use() {{ return (void*)&{t.name_expression()}; }}\n"
        )
        flags = ["-std=c++17", "-use_fast_math", "--expt-relaxed-constexpr", "-arch=sm_90"]
        proc = subprocess.run(
            [NVCC, *flags, "-cubin", "-o", str(tmp_path / "k.cubin"), str(src)],
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr


@pytest.mark.gpu
def test_merge_attn_states_configs_verify_on_the_gpu() -> None:
    from ktx.measure.gpu import Options
    from ktx.measure.harness import Harness
    from ktx.pipeline import candidate_from_template, template_for_spec

    spec = load_spec(ROOT / "kernels" / "merge_attn_states")
    t = template_for_spec(spec, "loads-first,coarsen")
    configs = [{"LOADS_FIRST": lf, "COARSEN": c} for lf in (0, 1) for c in (1, 4)]
    jobs = [(candidate_from_template(spec, t, c), p) for c in configs for p in spec.shape_set("quick").points]
    options = Options(rounds=max(3, spec.verify.rounds), time=False, odd=True)
    failures: list[str] = []
    with Harness(spec, options=options) as harness:
        for (cand, point), m in zip(jobs, harness.measure_many(jobs), strict=True):
            if not m.ok:
                failures.append(f"{dict(cand.config)} @ {point.name}: {m.status.value}: {m.message[:300]}")
    assert not failures, "\n".join(failures)


def test_rules_planner_tries_loads_first_on_short_calls_with_math_between_loads() -> None:
    from ktx.agent.analysis import Analysis, Device, KernelFacts, ShapeAnalysis
    from ktx.agent.rules import RULES

    names = [r.pass_name for r in RULES]
    assert names.index("loads-first") == names.index("early-loads") + 1
    rule = RULES[names.index("loads-first")]
    facts = KernelFacts("merge_attn_states_kernel", vector_types=("uint4",), math_calls=("expf", "logf"))
    small = ShapeAnalysis("tokens=1,heads=32", "ok", "graph", time_us=2.4, sol_fraction=0.04, bound="latency")
    assert "expf, logf" in (rule.fires(Analysis("k", "", Device(), facts, (small,))) or "")
    long = ShapeAnalysis("tokens=4096", "ok", "single", time_us=45.0, sol_fraction=0.4, bound="latency")
    assert rule.fires(Analysis("k", "", Device(), facts, (long,))) is None
    reduction = KernelFacts("k", vector_types=("uint4",), math_calls=("expf",), shuffles=True)
    assert rule.fires(Analysis("k", "", Device(), reduction, (small,))) is None
