"""cluster-rows: a row reduction over a thread-block cluster; the original at CLUSTER=1; sm_90 builds.

The compile tests build every CLUSTER of the suite's norms with nvcc for sm_90 (the spec's
flags) and read the PTX: the cluster shape, the distributed shared-memory reads (``mapa``) and
the cluster barriers must be there. The tuned file that ``ktx report`` writes (the original, the
variant in its namespace, the launcher choosing through the dispatch header) is compiled too,
host code included, so the patch launches a cluster config through its own launcher.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from passtest import ROOT, apply, changed, code, remarks, suite_source

from ktx.measure.compile import find_nvcc
from ktx.measure.types import Candidate
from ktx.pipeline import mapping_from_spec, run
from ktx.report.diffs import tuned_source
from ktx.search.dispatch import DispatchTable, Rule, header
from ktx.spec import ShapePoint
from ktx.specload import load_spec
from ktx.template import Template

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")

ROW_MAX = """\
__global__ void row_max(float* __restrict__ out, const float* __restrict__ x, int d) {
  __shared__ float part[32];
  const int t = threadIdx.x;
  float m = -1e30f;
  for (int i = t; i < d; i += blockDim.x) m = fmaxf(m, x[blockIdx.x * d + i]);
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (t % 32 == 0) part[t / 32] = m;
  __syncthreads();
  if (t == 0) {
    for (int w = 1; w < blockDim.x / 32; ++w) part[0] = fmaxf(part[0], part[w]);
  }
  __syncthreads();
  const float top = part[0];
  for (int i = t; i < d; i += blockDim.x) out[blockIdx.x * d + i] = x[blockIdx.x * d + i] - top;
}
void launch(float* out, const float* x, int rows, int d) {
  dim3 grid(rows);
  row_max<<<grid, 128>>>(out, x, d);
}
"""


def suite(name: str) -> Template:
    path = ROOT / "kernels" / name
    spec = load_spec(path)
    return run(
        (path / "kernel.cu").read_text(),
        "cluster-rows",
        mapping=mapping_from_spec(spec),
        template_args=spec.template_args,
        path=str(path / "kernel.cu"),
    )


@pytest.mark.parametrize("name", ["rmsnorm", "fused_add_rmsnorm"])
def test_norms_get_a_cluster_knob_and_the_default_is_the_original(name: str) -> None:
    t = suite(name)
    assert [(k.name, k.values, k.default) for k in t.knobs] == [("CLUSTER", (1, 2, 4, 8), 1)]
    assert "block totals meet through smem[0]" in remarks(t)[0]
    launch = t.launch()
    assert launch is not None and launch.grid == ("tokens", "CLUSTER")
    kept = [line for line in t.instantiate().splitlines(keepends=True) if not line.startswith("// ktx: `")]
    assert "".join(kept) == t.original
    four = t.instantiate({"CLUSTER": 4})
    assert "__attribute__((cluster_dims(1, 4, 1)))" in four
    assert "const int thread_id = blockIdx.y * (blockDim.x * blockDim.y) + threadIdx.y * blockDim.x" in four
    assert "const int num_threads = (blockDim.x * blockDim.y) * 4;" in four
    assert "const float rms_rcp = rsqrtf(ktx_cluster_total / static_cast<float>(d) + eps);" in four
    assert "dim3 grid(num_tokens, 4);" in four
    assert "#if" not in four.split("template <typename T>", 1)[1].split("#ifndef __CUDACC_RTC__")[0]


def test_max_reduction_combines_with_fmaxf_and_loop_headers_change() -> None:
    t = apply(ROW_MAX, "cluster-rows")
    out = t.instantiate({"CLUSTER": 2})
    assert "ktx_cluster_total = fmaxf(ktx_cluster_total, *static_cast<const float*>(" in out
    assert "const float top = ktx_cluster_total;" in out
    # t is also used outside the loop headers, so the loops change, not its declaration.
    assert "for (int i = blockIdx.y * blockDim.x + t; i < d; i += blockDim.x * 2) m = fmaxf(" in out
    assert "  const int t = threadIdx.x;" in out
    assert "dim3 grid(rows, 2);" in out
    assert "-  dim3 grid(rows);" in changed(ROW_MAX, out)


def test_a_tree_reduction_whose_last_barrier_is_in_its_halving_loop() -> None:
    """tree_sum's block total is in sdata[0] after the halving loop: the exchange goes after it."""
    source = (ROOT / "tests" / "passes" / "kernels" / "tree_sum" / "kernel.cu").read_text()
    t = apply(source, "cluster-rows")
    assert remarks(t) == [
        "tree_sum_kernel: exposed CLUSTER {1, 2, 4, 8}; row loops L0 interleave over the cluster; "
        "block totals meet through sdata[0]"
    ]
    out = t.instantiate({"CLUSTER": 2})
    assert "for (int i = blockIdx.y * blockDim.x + tid; i < n; i += blockDim.x * 2) acc += row[i];" in out
    loop_end = out.index("    __syncthreads();\n  }\n")
    assert (
        loop_end
        < out.index("__cluster_map_shared_rank(&sdata[0], 0)")
        < out.index("if (tid == 0) out[blockIdx.x] = ktx_cluster_total;")
    )


def test_the_reductions_last_block_barrier_gives_way_to_the_cluster_barrier() -> None:
    """A reduction that ends in ``__syncthreads();`` loses it in a cluster: the cluster barrier
    right after it orders the block's threads too (one bar.sync fewer on a latency-bound row's
    path, as the hand cluster kernel has none); the original keeps it; a reduction that ends in
    its halving loop keeps its barriers."""
    t = apply(ROW_MAX, "cluster-rows")
    one, two = t.instantiate({"CLUSTER": 1}), t.instantiate({"CLUSTER": 2})
    assert one.count("__syncthreads();") == 2 and two.count("__syncthreads();") == 1
    # the block's partials are still combined behind the first barrier; the exchange follows the if
    handover, combine = two.index("__syncthreads();"), two.index("if (t == 0) {")
    assert handover < combine < two.index("__cluster_barrier_arrive();")
    tree = (ROOT / "tests" / "passes" / "kernels" / "tree_sum" / "kernel.cu").read_text()
    t = apply(tree, "cluster-rows")
    assert t.instantiate({"CLUSTER": 2}).count("__syncthreads()") == t.instantiate({"CLUSTER": 1}).count(
        "__syncthreads()"
    )


@needs_nvcc
@pytest.mark.slow
def test_rmsnorm_in_a_cluster_has_one_block_barrier(tmp_path: Path) -> None:
    """The PTX of kernels/rmsnorm at CLUSTER=8 (block-size,cluster-rows,row-registers, the wide-row
    form): one bar.sync (the partials' handover to warp 0), the cluster barrier, no spill."""
    from ktx.pipeline import candidate_from_template, template_for_spec

    spec = load_spec(ROOT / "kernels" / "rmsnorm")
    t = template_for_spec(spec, "block-size,cluster-rows,row-registers")
    cand = candidate_from_template(spec, t, {"CLUSTER": 8, "BLOCK_Y": 4, "PACKS": 1})
    cu = tmp_path / "k.cu"
    cu.write_text(cand.source + "\ntemplate __global__ void rmsnorm_kernel<__nv_bfloat16>(__nv_bfloat16*, "
                  "const __nv_bfloat16*, const __nv_bfloat16*, int, float);\n")  # fmt: skip
    ptx = tmp_path / "k.ptx"
    subprocess.run([str(NVCC), "-arch=sm_90", *spec.flags, "-ptx", "-o", str(ptx), str(cu)], check=True)
    body = ptx.read_text()
    assert len(re.findall(r"\bbar(rier)?\.sync\b", body)) == 1
    assert len(re.findall(r"\bbarrier\.cluster\.arrive", body)) == 2
    assert len(re.findall(r"\bbarrier\.cluster\.wait", body)) == 2


def test_refusals_name_the_construct() -> None:
    assert remarks(apply(suite_source("per_token_group_quant_fp8"), "cluster-rows")) == [
        "per_token_group_quant_8bit_kernel: no row loop: none strides over the row by the block's "
        "size (for (i = threadIdx.x; i < n; i += blockDim.x))"
    ]
    old = apply(ROW_MAX, "cluster-rows{arch=80}")
    assert remarks(old) == ["row_max: thread-block clusters need sm_90 or later; the target is sm_80"]
    assert old.source == old.original
    early = ROW_MAX.replace("  float m = -1e30f;", "  if (d == 0) return;\n  float m = -1e30f;")
    assert "returns early (line 4)" in remarks(apply(early, "cluster-rows"))[0]
    stride = ROW_MAX.replace("m = fmaxf(m, x[blockIdx.x", "m = fmaxf(m, x[blockIdx.x % gridDim.x")
    assert (
        "reads gridDim.x (line 5): rows are walked grid-stride" in remarks(apply(stride, "cluster-rows"))[0]
    )
    nobar = ROW_MAX.replace("  __syncthreads();\n  const float", "  const float").replace(
        "  __syncthreads();\n", ""
    )
    assert (
        "no __syncthreads() between the row loop that accumulates m"
        in remarks(apply(nobar, "cluster-rows"))[0]
    )
    sub = ROW_MAX.replace("m = fmaxf(m, x[", "m = m - fabsf(x[").replace(
        "]);\n  for (int o", "]);\n  for (int o"
    )
    assert "is neither acc += x nor" in remarks(apply(sub, "cluster-rows"))[0]
    rewrite = ROW_MAX.replace("const float top = part[0];", "const float top = part[0];\n  part[0] = 0.f;")
    assert "writes part again after the reduction" in remarks(apply(rewrite, "cluster-rows"))[0]
    one_line = ROW_MAX.replace(
        "  dim3 grid(rows);\n  row_max<<<grid, 128>>>", "  dim3 grid(rows); row_max<<<grid, 128>>>"
    )
    assert "code follows the statement on its line" in remarks(apply(one_line, "cluster-rows"))[0]
    assert code(apply(one_line, "cluster-rows")) == one_line


def _ptx(source: str, name_expression: str, tmp: Path) -> str:
    assert NVCC is not None
    src = tmp / "k.cu"
    src.write_text(
        source + f"\n[[maybe_unused]] static void* ktx_use() {{ return (void*)&{name_expression}; }}\n"
    )
    flags = ["-std=c++17", "-use_fast_math", "--expt-relaxed-constexpr", "-arch=sm_90"]
    proc = subprocess.run(
        [NVCC, *flags, "-ptx", "-o", str(tmp / "k.ptx"), str(src)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    return (tmp / "k.ptx").read_text()


@needs_nvcc
@pytest.mark.parametrize("name", ["rmsnorm", "fused_add_rmsnorm"])
@pytest.mark.slow
def test_every_cluster_compiles_for_sm90(name: str, tmp_path: Path) -> None:
    t = suite(name)
    for value in t.knobs[0].values:
        ptx = _ptx(t.instantiate({"CLUSTER": value}), t.name_expression(), tmp_path)
        if value == 1:
            assert ".reqnctapercluster" not in ptx and "mapa" not in ptx
            continue
        assert re.search(rf"\.reqnctapercluster 1, {value}, 1", ptx), value
        assert "mapa.shared::cluster" in ptx or "mapa.u" in ptx or "mapa" in ptx
        assert "barrier.cluster.arrive" in ptx and "barrier.cluster.wait" in ptx


@needs_nvcc
@pytest.mark.slow
def test_tuned_file_and_dispatch_header_launch_a_cluster_variant(tmp_path: Path) -> None:
    """The patch's file: the original, variant 0 (CLUSTER=4) and the launcher that dispatches."""
    t = suite("rmsnorm")
    original = t.original
    variant = t.instantiate({"CLUSTER": 4})
    rule = Rule((("d", 4096),), None, 17, 0, ("tokens=1,d=4096",))
    dispatch = DispatchTable(
        "rmsnorm_kernel", ("tokens", "d"), "tokens", ({"CLUSTER": 4},), (rule,), ("CLUSTER",), {"CLUSTER": 1}
    )
    text, what = tuned_source(original, (variant,), dispatch.to_dict(), "rmsnorm_dispatch.h")
    assert text is not None and "ktx_launch_rmsnorm" in text, what
    (tmp_path / "rmsnorm_dispatch.h").write_text(header(dispatch))
    (tmp_path / "k.cu").write_text(text)
    assert NVCC is not None
    flags = ["-std=c++17", "-use_fast_math", "--expt-relaxed-constexpr", "-arch=sm_90"]
    proc = subprocess.run(
        [NVCC, *flags, "-c", "-o", str(tmp_path / "k.o"), str(tmp_path / "k.cu")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "dim3 grid(num_tokens, 4);" in text


def test_rules_planner_tries_clusters_for_underfilled_reductions_far_from_speed_of_light() -> None:
    from ktx.agent.analysis import Analysis, Device, KernelFacts, ShapeAnalysis
    from ktx.agent.rules import RULES

    names = [r.pass_name for r in RULES]
    assert names.index("cluster-rows") == names.index("split") + 1
    rule = RULES[names.index("cluster-rows")]
    facts = KernelFacts("rmsnorm_kernel", shared_arrays=("smem",), shuffles=True, syncthreads=2)
    slow = ShapeAnalysis(
        "tokens=16,d=4096", "ok", "graph", time_us=2.8, sol_fraction=0.12, blocks=16, sms=132, bound="latency"
    )
    fast = ShapeAnalysis(
        "tokens=4096,d=4096",
        "ok",
        "graph",
        time_us=40.0,
        sol_fraction=0.8,
        blocks=4096,
        sms=132,
        bound="memory",
    )
    reason = rule.fires(Analysis("rmsnorm_kernel", "", Device(), facts, (slow, fast)))
    assert reason is not None and "tokens=16,d=4096: 16 blocks for 132 SMs, 12%" in reason
    assert rule.fires(Analysis("k", "", Device(), facts, (fast,))) is None
    near = ShapeAnalysis(
        "t=1", "ok", "graph", time_us=2.0, sol_fraction=0.5, blocks=1, sms=132, bound="latency"
    )
    assert rule.fires(Analysis("k", "", Device(), facts, (near,))) is None
    assert rule.fires(Analysis("k", "", Device(), KernelFacts("k"), (slow,))) is None


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["rmsnorm", "fused_add_rmsnorm", "tree_sum"])
def test_every_cluster_and_prefetch_verifies_on_the_gpu(name: str) -> None:
    """Every (CLUSTER, PREFETCH) of ``cluster-rows,early-loads`` against the spec's reference, at the
    quick shapes (the smallest default one for tree_sum) and their odd sizes (d + 1, d - 3: the
    scalar tail loops walk the whole row)."""
    from ktx.measure.gpu import Options
    from ktx.measure.harness import Harness
    from ktx.measure.types import Status
    from ktx.pipeline import candidate_from_template, template_for_spec

    folder = ROOT / "kernels" / name
    spec = load_spec(folder if folder.exists() else ROOT / "tests" / "passes" / "kernels" / name)
    t = template_for_spec(spec, "cluster-rows,early-loads")
    prefetch = (0, 1, 2, 4) if any(k.name == "PREFETCH" for k in t.knobs) else (None,)
    configs = [
        {"CLUSTER": c, **({} if p is None else {"PREFETCH": p})} for c in (1, 2, 4, 8) for p in prefetch
    ]
    names = {s.name for s in spec.shapes}
    points = spec.shape_set("quick").points if "quick" in names else spec.shape_set().points[:2]
    jobs = [(candidate_from_template(spec, t, c), p) for c in configs for p in points]
    options = Options(rounds=max(3, spec.verify.rounds), time=False, odd=True)
    failures: list[str] = []
    verified: set[str] = set()
    with Harness(spec, options=options) as harness:
        for (cand, point), m in zip(jobs, harness.measure_many(jobs), strict=True):
            if m.ok:
                verified.add(point.name)
            elif m.status is not Status.RESOURCES:
                # A config whose block does not fit the registers (PREFETCH 4 at 1024 threads
                # on H100) is refused before launch, as the search refuses it; anything else
                # is a wrong rewrite.
                failures.append(f"{dict(cand.config)} @ {point.name}: {m.status.value}: {m.message[:300]}")
    assert not failures, "\n".join(failures)
    assert verified == {p.name for p in points}


def test_a_combine_call_must_fold_the_accumulator() -> None:
    """``m = fmaxf(a, b)`` without ``m`` in it overwrites m: no reduction to combine (the shared
    recogniser says so; the pass's own check used to look at the callee alone)."""
    overwrite = ROW_MAX.replace("m = fmaxf(m, x[", "m = fmaxf(-1e30f, x[")
    assert "is neither acc += x nor" in remarks(apply(overwrite, "cluster-rows"))[0]


# -- wide rows at decode (issue 23 item 3): a cluster per row, each block's part in registers ----

WIDE = "block-size,cluster-rows,row-registers"
#: the probe's design at d = 8192, tokens = 1 (BLOCK_Y, CLUSTER, PACKS): 4 warps x 8 blocks x 1
#: pack of 8 is the whole row in registers; 4 blocks need 2 packs; the hand variant's shape
WIDE_CONFIGS = ((4, 8, 1), (4, 8, 2), (8, 4, 1), (4, 4, 2), (8, 8, 1), (0, 8, 0), (4, 1, 2))


def test_cluster_rows_and_row_registers_compose_on_rmsnorm() -> None:
    """The pass's form of the hand variant: the clustered thread index and stride are what the
    register heads step by, so each block keeps its own interleaved part of the row."""
    spec = load_spec(ROOT / "kernels" / "rmsnorm")
    from ktx.pipeline import candidate_from_template, template_for_spec

    t = template_for_spec(spec, WIDE)
    assert [k.name for k in t.knobs] == ["BLOCK_Y", "CLUSTER", "PACKS"]
    src = candidate_from_template(spec, t, {"BLOCK_Y": 4, "CLUSTER": 8, "PACKS": 1}).source
    assert "cluster_dims(1, 8, 1)" in src
    assert "const int num_threads = (blockDim.x * blockDim.y) * 8;" in src
    assert "const int i = (thread_id) + ktx_k * (num_threads);" in src
    # the row part and the weight loaded in one head before any math, as the hand variant does
    loads = "ktx_keep_in[ktx_k].load(input_row + i * VEC); ktx_keep_w[ktx_k].load(weight + i * VEC);"
    assert loads in src and "in = ktx_keep_in[ktx_k];" in src
    assert "__cluster_map_shared_rank(&smem[0], ktx_rank)" in src
    # written the other way round, the pipeline runs cluster-rows first all the same
    # (row-registers,cluster-rows used to step the heads by one block's threads in every block)
    cfg = {"BLOCK_Y": 4, "CLUSTER": 8, "PACKS": 1}
    other = template_for_spec(spec, "block-size,row-registers,cluster-rows")
    line = re.compile(r"(?m)^// ktx: `[^`]*` instantiated with [^\n]*\n")
    assert line.sub("", other.instantiate(cfg)) == line.sub("", t.instantiate(cfg))
    hand = load_spec(ROOT / "benchmarks" / "cluster_rows")
    assert hand.kernel == "rmsnorm_cluster_hand"
    assert {p.name for p in hand.shape_set("decode").points} >= {"tokens=1,d=8192", "tokens=64,d=4096"}


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not on PATH")
@pytest.mark.slow
def test_wide_row_configs_and_the_hand_variant_compile_for_sm90_without_spills() -> None:
    from ktx.measure.compile import CompileRequest, compile_kernel
    from ktx.pipeline import candidate_from_template, template_for_spec

    spec = load_spec(ROOT / "kernels" / "rmsnorm")
    t = template_for_spec(spec, WIDE)
    jobs = []
    for y, c, p in WIDE_CONFIGS:
        src = candidate_from_template(spec, t, {"BLOCK_Y": y, "CLUSTER": c, "PACKS": p}).source
        jobs.append((f"{(y, c, p)}", src, spec, ROOT / "kernels" / "rmsnorm"))
    hand = load_spec(ROOT / "benchmarks" / "cluster_rows")
    hand_src = (ROOT / "benchmarks" / "cluster_rows" / "kernel.cu").read_text()
    jobs.append(("hand", hand_src, hand, ROOT / "benchmarks" / "cluster_rows"))
    failed, spilled = [], []
    for name, src, sp, folder in jobs:
        name_expr = f"{sp.kernel}<__nv_bfloat16>"
        req = CompileRequest(src, name_expr, (*sp.flags, "-Xptxas", "-v"), "90", (str(folder),), "nvcc")
        r = compile_kernel(req)
        if not r.ok:
            failed.append(f"{name}: {r.log[-800:]}")
        elif re.search(r"[1-9]\d* bytes spill stores", r.log):
            spilled.append(name)
    assert not failed, "\n".join(failed)
    assert not spilled, spilled


def wide_jobs() -> list[tuple[Candidate, ShapePoint]]:
    """(candidate, shape) of every WIDE_CONFIGS point on rmsnorm at its decode shapes with tokens
    1 and 16: what the GPU test verifies, built on the CPU."""
    from ktx.pipeline import candidate_from_template, template_for_spec

    spec = load_spec(ROOT / "kernels" / "rmsnorm")
    t = template_for_spec(spec, WIDE)
    points = [p for p in spec.shape_set("decode").points if p.as_dict()["tokens"] in (1, 16)]
    return [
        (candidate_from_template(spec, t, {"BLOCK_Y": y, "CLUSTER": c, "PACKS": k}), p)
        for y, c, k in WIDE_CONFIGS
        for p in points
    ]


def test_the_gpu_tests_jobs_are_every_wide_config_at_tokens_1_and_16() -> None:
    """The GPU test's jobs build here (it once read ``p.as_dict()["tokens"]`` from a point whose
    values became (name, value) pairs, a TypeError before any kernel ran)."""
    jobs = wide_jobs()
    configs = {tuple(sorted(dict(c.config).items())) for c, _ in jobs}
    assert len(configs) == len(WIDE_CONFIGS)
    assert sorted({p.name for _, p in jobs}) == [
        "tokens=1,d=4096", "tokens=1,d=8192", "tokens=16,d=4096", "tokens=16,d=8192"
    ]  # fmt: skip
    assert len(jobs) == 4 * len(WIDE_CONFIGS)


@pytest.mark.gpu
def test_wide_row_configs_and_the_hand_variant_verify_on_the_gpu() -> None:
    """Every WIDE_CONFIGS point of block-size,cluster-rows,row-registers on rmsnorm at its decode
    shapes (tokens 1 and 16, d 4096 and 8192, odd sizes too), and the hand variant against the
    suite's reference at its own shapes. A config the device refuses for its resources at a
    shape is excused there, but each config must verify at one shape at least."""
    from ktx.measure.gpu import Options
    from ktx.measure.harness import Harness
    from ktx.measure.types import Status
    from ktx.pipeline import candidate_from_template, template_for_spec

    spec = load_spec(ROOT / "kernels" / "rmsnorm")
    jobs = wide_jobs()
    failures: list[str] = []
    verified: set[str] = set()
    with Harness(spec, options=Options(rounds=2, time=False, odd=True)) as harness:
        for (cand, point), m in zip(jobs, harness.measure_many(jobs), strict=True):
            if m.ok:
                verified.add(repr(dict(cand.config)))
            elif m.status is not Status.RESOURCES:
                failures.append(f"{dict(cand.config)} @ {point.name}: {m.status.value}: {m.message[:300]}")
    assert not failures, "\n".join(failures)
    never = {repr(dict(c.config)) for c, _ in jobs} - verified
    assert not never, f"refused for resources at every shape: {sorted(never)}"
    hand = load_spec(ROOT / "benchmarks" / "cluster_rows")
    th = template_for_spec(hand, "")  # the hand kernel as written, against the suite's reference
    hjobs = [(candidate_from_template(hand, th, {}), p) for p in hand.shape_set("decode").points]
    with Harness(hand, options=Options(rounds=2, time=False, odd=False)) as harness:
        bad = [
            f"{p.name}: {m.message[:300]}"
            for (_, p), m in zip(hjobs, harness.measure_many(hjobs), strict=True)
            if not m.ok
        ]
    assert not bad, "\n".join(bad)
