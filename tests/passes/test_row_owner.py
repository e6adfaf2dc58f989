"""row-owner: a thread per row becomes a warp or a block per row.

The default (THREADS_PER_ROW=1) instantiates to the original bytes; the knob, constraint and
launch follow the rewrite; refusals name the construct and its line; and every config of llm.c's
``layernorm_forward_kernel1`` and ``softmax_forward_kernel1`` (read in place from
``../shared/llmc``, skipped where absent) compiles for sm_90 with nvcc in a staged kernel folder,
alone and with vectorize and unroll composed on the new loops; so does every config of the
other naive row kernels of the benchmark (encoder_forward v1, fused_residual_forward v2, bf16).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from ktx.ir.errors import KtxError
from passtest import ROOT, apply, remarks

from ktx.measure.compile import CompileRequest, compile_kernel, find_nvcc
from ktx.pipeline import candidate_from_template, template_for_spec
from ktx.specload import load_spec

GOLDEN = ROOT / "tests" / "golden" / "row_owner"
CONFIG_LINE = re.compile(r"(?m)^// ktx: `[^`]*` instantiated with [^\n]*\n")


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


LADDER = _load("llmc_run_row_owner", ROOT / "benchmarks" / "llmc" / "run.py")


def _llmc() -> Path | None:
    for cand in (ROOT.parent / "shared" / "llmc", ROOT / "shared" / "llmc"):
        if (cand / "dev" / "cuda" / "common.h").is_file():
            return cand / "dev" / "cuda"
    return None


LLMC = _llmc()
needs_llmc = pytest.mark.skipif(LLMC is None, reason="llm.c is not at ../shared/llmc")
KERNELS = {"layernorm_forward": "layernorm_forward_kernel1", "softmax_forward": "softmax_forward_kernel1"}
#: The llm.c ladders whose naive version gives a thread a whole row (the benchmark's specs).
LADDERS = ("encoder_forward", "fused_residual_forward", "layernorm_forward", "softmax_forward")

LN = """\
__global__ void ln(float* __restrict__ y, float* __restrict__ mu,
                   const float* __restrict__ x, int rows, int C) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < rows) {
    const float* xr = x + row * C;
    float s = 0.f;
    for (int i = 0; i < C; i++) s += xr[i];
    float m = s / C;
    for (int i = 0; i < C; i++) y[row * C + i] = xr[i] - m;
    mu[row] = m;
  }
}

void launch(float* y, float* mu, const float* x, int rows, int C) {
  ln<<<(rows + 127) / 128, 128>>>(y, mu, x, rows, C);
}
"""


def _plain(text: str) -> str:
    return CONFIG_LINE.sub("", text, count=1)


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*.cu")), ids=lambda p: p.stem)
def test_default_is_the_original_byte_for_byte(path: Path) -> None:
    source = path.read_text()
    t = apply(source, "row-owner")
    assert _plain(t.instantiate(t.space.defaults())) == source


NAIVE = {
    **KERNELS,
    "encoder_forward": "encoder_forward_kernel1",
    "fused_residual_forward": "fused_residual_forward2",
}


@needs_llmc
@pytest.mark.parametrize("stem", sorted(NAIVE))
def test_llmc_default_is_the_original_byte_for_byte(stem: str) -> None:
    assert LLMC is not None
    source = (LLMC / f"{stem}.cu").read_text()
    t = apply(source, "row-owner", kernel=NAIVE[stem])
    assert [k.name for k in t.knobs] == ["THREADS_PER_ROW", "ROW_BLOCK"]
    assert _plain(t.instantiate({"THREADS_PER_ROW": 1})) == source


def test_knob_constraint_and_launch() -> None:
    t = apply(LN, "row-owner")
    assert [(k.name, k.values, k.default) for k in t.knobs] == [
        ("THREADS_PER_ROW", (1, 32, 64, 128, 256, 512, 1024), 1),
        ("ROW_BLOCK", (0, 128, 1024), 0),
    ]
    assert t.space.constraints == (
        "THREADS_PER_ROW > 32 or (128) % THREADS_PER_ROW == 0",
        "THREADS_PER_ROW == 32 or ROW_BLOCK == 0",
    )
    launch = t.launch()
    assert launch is not None
    # T = 32: the original 128-thread blocks hold 4 rows, 32 times the blocks; T > 32: a block a row.
    assert launch.evaluate({"rows": 1000, "THREADS_PER_ROW": 32, "ROW_BLOCK": 0})[:2] == ((8 * 32,), (128,))
    assert launch.evaluate({"rows": 1000, "THREADS_PER_ROW": 256, "ROW_BLOCK": 0})[:2] == ((8 * 128,), (256,))
    assert launch.evaluate({"rows": 1000, "THREADS_PER_ROW": 1, "ROW_BLOCK": 0})[:2] == ((8,), (128,))
    # T = 32 in blocks of ROW_BLOCK: the original's 1024 rows (8 blocks of 128), 32 a block
    assert launch.evaluate({"rows": 1000, "THREADS_PER_ROW": 32, "ROW_BLOCK": 1024})[:2] == ((32,), (1024,))
    assert launch.evaluate({"rows": 1000, "THREADS_PER_ROW": 32, "ROW_BLOCK": 128})[:2] == ((256,), (128,))
    small = apply(LN, "row-owner{max=128}")
    assert small.knobs[0].values == (1, 32, 64, 128) and small.knobs[1].values == (0, 128)


def test_warp_and_block_forms() -> None:
    t = apply(LN, "row-owner")
    warp = t.instantiate({"THREADS_PER_ROW": 32})
    assert "const int ktx_lane = threadIdx.x % 32;" in warp
    assert "int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;" in warp
    assert "for (int i = ktx_lane; i < C; i += 32) s += xr[i];" in warp
    assert "s = ktx_row_reduce<32>(s, ktx_row_sum());" in warp
    assert "if (ktx_lane == 0) mu[row] = m;" in warp
    assert "ln<<<((rows + 127) / 128) * 32, 128>>>" in warp
    block = t.instantiate({"THREADS_PER_ROW": 512})
    assert "int row = blockIdx.x;" in block and "ktx_lane" not in block
    assert "for (int i = threadIdx.x; i < C; i += blockDim.x) s += xr[i];" in block
    assert "s = ktx_row_reduce<512>(s, ktx_row_sum());" in block
    assert "if (threadIdx.x == 0) mu[row] = m;" in block
    assert "ln<<<((rows + 127) / 128) * (128), 512>>>" in block
    # a warp per row in blocks of 1024: the same kernel text as the warp form, a new launch
    wide = t.instantiate({"THREADS_PER_ROW": 32, "ROW_BLOCK": 1024})
    assert "int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;" in wide
    assert "ln<<<(((rows + 127) / 128) * (128) * 32 + 1024 - 1) / 1024, 1024>>>" in wide
    with pytest.raises(KtxError, match="ROW_BLOCK == 0"):
        t.instantiate({"THREADS_PER_ROW": 256, "ROW_BLOCK": 1024})


def test_reduction_forms() -> None:
    maxes = LN.replace("s += xr[i];", "if (xr[i] > s) s = xr[i];")
    out = apply(maxes, "row-owner").instantiate({"THREADS_PER_ROW": 64})
    assert "s = ktx_row_reduce<64>(s, ktx_row_max());" in out
    mins = LN.replace("s += xr[i];", "s = fminf(xr[i], s);")
    assert "ktx_row_min()" in apply(mins, "row-owner").instantiate({"THREADS_PER_ROW": 32})
    plus = LN.replace("s += xr[i];", "s = s + xr[i] * xr[i];")
    assert "ktx_row_sum()" in apply(plus, "row-owner").instantiate({"THREADS_PER_ROW": 32})
    # a sum that does not start at zero: the other lanes start it at zero, so it is counted once
    seeded = LN.replace("float s = 0.f;", "float s = xr[0];")
    out = apply(seeded, "row-owner").instantiate({"THREADS_PER_ROW": 32})
    assert "    if (ktx_lane != 0) s = 0;\n    for (int i = ktx_lane;" in out


def test_the_shared_recogniser_decides_what_is_a_reduction() -> None:
    """Forms come from ktx.ir.facts.reductions; the pass keeps those ktx_row_reduce combines."""
    counted = LN.replace("s += xr[i];", "if (xr[i] > 0.f) ++s;")
    assert "ktx_row_sum()" in apply(counted, "row-owner").instantiate({"THREADS_PER_ROW": 32})
    minus = LN.replace("s += xr[i];", "s = s - xr[i];")
    assert "ktx_row_sum()" in apply(minus, "row-owner").instantiate({"THREADS_PER_ROW": 32})
    for body in ("s *= xr[i];", "s += s * xr[i];", "s = __hmax(s, xr[i]);"):
        assert "is not a reduction this pass knows" in _skip(LN.replace("s += xr[i];", body)), body


def test_a_store_in_a_braceless_branch_keeps_its_else() -> None:
    src = LN.replace("mu[row] = m;", "if (m > 0.f) mu[row] = m; else mu[row] = -m;")
    out = apply(src, "row-owner").instantiate({"THREADS_PER_ROW": 32})
    assert "if (m > 0.f) { if (ktx_lane == 0) mu[row] = m; } else { if (ktx_lane == 0) mu[row] = -m; }" in out


def _skip(source: str) -> str:
    t = apply(source, "row-owner")
    assert not t.knobs
    (remark,) = remarks(t)
    return remark


def test_refusals_name_the_construct_and_line() -> None:
    assert _skip(LN.replace("i < C; i++) s", "i < C; i += 2) s")) == (
        "ln: line 7: the loop over i steps by `i += 2`, not by 1: only loops in which one thread "
        "walks the row element by element are rewritten"
    )
    assert _skip(LN.replace("s += xr[i];", "{ s += xr[i]; C--; }")) == (
        "ln: line 7: the loop's bound `C` is not row-invariant: the loop writes C"
    )
    assert _skip(LN.replace("s += xr[i];", "{ s += xr[i]; if (s > 9.f) break; }")) == (
        "ln: line 7: `break` inside the row loop at line 7: the lanes would leave it at different iterations"
    )
    assert _skip(LN.replace("mu[row] = m;", "mu[row] = m + (float)threadIdx.x;")) == (
        "ln: line 10: the kernel reads threadIdx.x beside the thread index row: a group of threads "
        "per row would change what it means"
    )
    assert _skip(LN.replace("float m = s / C;", "float m = s / C;\n    __syncthreads();")) == (
        "ln: line 9: a barrier (__syncthreads): its threads already cooperate"
    )
    assert _skip(LN.replace("    mu[row] = m;\n", "    int k = 0;\n    while (k < 4) k++;\n")) == (
        "ln: line 11: a while loop beside the row loops: only `for (i = start; i < bound; i++)` loops "
        "over the row are rewritten"
    )
    assert _skip(LN.replace("s += xr[i];", "s = s * xr[i];")) == (
        "ln: line 7: `s = s * xr[i];` carries s from one iteration of the "
        "row loop at line 7 to the next, and is not a reduction this pass knows (s += e, s = s + e, "
        "m = fmaxf(m, e), max/min, if (e > m) m = e)"
    )
    assert _skip(LN.replace("mu[row] = m;", "mu[row] = y[row * C];")) == (
        "ln: line 10: y[row * C] touches y outside the row loops, and a row loop writes it: another lane "
        "may own that element"
    )
    assert _skip(LN.replace("for (int i = 0; i < C; i++) s", "if (C > 0) for (int i = 0; i < C; i++) s")) == (
        "ln: line 7: the for loop is the body of a statement without braces: its reduction would land "
        "outside that statement"
    )
    assert _skip(
        LN.replace("float s = 0.f;", "float s = 0.f; int i;").replace(
            "(int i = 0; i < C; i++) s", "(i = 0; i < C; i++) s"
        )
    ) == (
        "ln: line 7: the loop variable i is declared outside the loop: its final value, used after it, "
        "would differ from lane to lane"
    )
    assert _skip(LN.replace("mu[row] = m;", "float t; t = (mu[row] = m);")) == (
        "ln: line 10: `t = (mu[row] = m);` stores to memory and sets t: written by lane 0 alone, the "
        "other lanes would not have t"
    )
    assert _skip(LN.replace("float m = s / C;", "mu[row] = s;\n    float m = mu[row] / C;")) == (
        "ln: line 9: mu[row] touches mu, which lane 0 alone writes at line 8: the other lanes would not "
        "see that write"
    )
    arr = LN.replace("float s = 0.f;", "float s = 0.f, part[2] = {0.f, 0.f};").replace(
        "s += xr[i];", "part[i % 2] += xr[i];"
    )
    assert _skip(arr) == (
        "ln: line 7: the row loop at line 7 writes `part[i % 2] += xr[i];` into the local part, declared "
        "outside it: each lane would hold only its own part of it"
    )
    one = (
        "__global__ void k(float* y, const float* x, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) y[i] = 2.f * x[i];\n}\n"
        "void go(float* y, const float* x, int n) { k<<<n / 64, 64>>>(y, x, n); }\n"
    )
    assert _skip(one) == (
        "k: no loop walks a row: each thread computes its element(s) without a sequential loop over "
        "the row indexed by i"
    )


def test_after_a_loop_pass_it_refuses_and_says_to_run_first() -> None:
    t = apply(LN, "vectorize,row-owner")
    (remark,) = [r for r in remarks(t) if "preprocessor" in r]
    assert remark.endswith(
        "a preprocessor group (#if) in the kernel body, such as an earlier pass writes: run row-owner "
        "before vectorize, tile and the other loop passes"
    )
    assert all(not k.name.startswith("THREADS") for k in t.knobs)


def test_llmc_online_softmax_and_crossentropy_are_refused_precisely() -> None:
    if LLMC is None:
        pytest.skip("llm.c is not at ../shared/llmc")
    soft = (LLMC / "softmax_forward.cu").read_text()
    t = apply(soft, "row-owner", kernel="softmax_forward_online_kernel1")
    assert not t.knobs
    assert "the update of sum reads maxval" in remarks(t)[0] and "online softmax" in remarks(t)[0]
    ce = (LLMC / "crossentropy_forward.cu").read_text()
    t = apply(ce, "row-owner", kernel="crossentropy_forward_kernel1")
    assert not t.knobs and "no loop walks a row" in remarks(t)[0]


def test_vectorize_and_unroll_compose_on_the_new_loops() -> None:
    t = apply(LN, "row-owner,vectorize,unroll")
    names = [k.name for k in t.knobs]
    assert names[0] == "THREADS_PER_ROW"
    # the reduction and store loops pack in both new forms (N: loops the pass created), block and
    # warp: the other form's copy sits in another #if branch, never compiled with this one
    assert sum(n.startswith("VEC_N") for n in names) == 4
    assert {"UNROLL_N4", "UNROLL_N6"} <= set(names)  # the stores' loops, block and warp
    config = {k.name: max(k.values) for k in t.knobs} | {"THREADS_PER_ROW": 256, "ROW_BLOCK": 0}
    out = t.instantiate(config)
    assert "for (int ktx_p = threadIdx.x; ktx_p < ktx_packs_N3; ktx_p += blockDim.x) {" in out
    assert "const auto ktx_xr = ktx::load<4>(xr + ktx_p * 4);" in out  # 16 bytes a lane
    assert "s = ktx_row_reduce<256>(s, ktx_row_sum());" in out


# -- sm_90 compiles of the llm.c kernels, staged the way ktx optimize stages them ---------------


def _ladder(stem: str) -> Any:
    return next(lad for lad in LADDER.LADDERS if lad.name == stem)


def _jobs(tmp_path: Path) -> list[tuple[str, Path, Any, dict[str, int]]]:
    assert LLMC is not None
    jobs: list[tuple[str, Path, Any, dict[str, int]]] = []
    for stem in LADDERS:
        lad = _ladder(stem)
        folder = LADDER.stage(lad, lad.naive, LLMC, tmp_path / "stage")
        spec = load_spec(folder)
        composed = ("row-owner,vectorize", "row-owner,unroll") if stem in KERNELS else ()
        for pipeline in ("row-owner", *composed):
            t = template_for_spec(spec, pipeline)
            assert t.knobs[0].name == "THREADS_PER_ROW", (stem, pipeline, remarks(t))
            values = [v for v in t.knobs[0].values if v > 1] if pipeline == "row-owner" else [32, 256]
            for v in values:
                config = {k.name: max(k.values) for k in t.knobs[1:]}
                config["THREADS_PER_ROW"] = v
                config["ROW_BLOCK"] = 1024 if v == 32 else 0  # the block of a warp per row only
                if not t.space.feasible(config, {}):
                    continue
                source = candidate_from_template(spec, t, config).source
                jobs.append((f"{stem} {pipeline} {config}", folder, spec, {"source": source}))
    return jobs


@needs_llmc
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not on PATH")
@pytest.mark.slow
def test_llmc_every_config_compiles_for_sm90_without_spills(tmp_path: Path) -> None:
    jobs = _jobs(tmp_path)
    assert len(jobs) >= 4 * 6 + 2 * 2 * 2

    def build(job: tuple[str, Path, Any, dict[str, Any]]) -> tuple[str, bool, str]:
        name, folder, spec, extra = job
        flags = (*spec.flags, "-Xptxas", "-v")
        req = CompileRequest(extra["source"], spec.kernel, flags, "90", (str(folder),), "nvcc")
        result = compile_kernel(req)
        return name, result.ok, result.log

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(build, jobs))
    failed = [f"{name}:\n{log[-1500:]}" for name, ok, log in results if not ok]
    assert not failed, "\n".join(failed)
    spills = [name for name, _, log in results if re.search(r"[1-9]\d* bytes spill stores", log)]
    assert not spills, spills


@needs_llmc
@pytest.mark.parametrize("stem", sorted(NAIVE))
def test_vectorize_packs_every_loop_of_the_naive_llmc_row_kernels_after_row_owner(stem: str) -> None:
    """Every loop of every ownership branch is packed: llm.c's ``floatX`` is sized from
    ``common.h``; softmax's ``if (x > maxval) maxval = x;`` is a max reduction; the loops after a
    row reduction (``ktx_row_reduce``, a barrier among the row's threads) may re-read what the
    loop before it wrote; a thread's own ``for (c = 0; c < C; ++c)`` row is its own in any order."""
    assert LLMC is not None
    path = LLMC / f"{stem}.cu"
    t = apply(path.read_text(), "row-owner,vectorize{tie=true}", kernel=NAIVE[stem], path=str(path))
    vec = [o for o in t.outcomes if o.pass_name == "vectorize" and o.site != "prelude"]
    assert vec and all(o.status == "rewritten" for o in vec), [o.message for o in vec]
    assert [k.name for k in t.knobs] == ["THREADS_PER_ROW", "ROW_BLOCK", "VEC_LOOPS"]


@needs_llmc
def test_vectorize_packs_every_loop_of_llmc_layernorm_after_row_owner() -> None:
    """row-owner writes one copy of the kernel per ownership (``#if``/``#elif``/``#else``);
    vectorize must not take the other copies' accesses of ``out`` for this copy's (it refused
    every write loop), and the naive kernel's pointers carry no ``__restrict__``, so the write
    loops are packed behind ``ktx::apart``. One tied width covers all nine loops."""
    assert LLMC is not None
    source = (LLMC / "layernorm_forward.cu").read_text()
    t = apply(source, "row-owner,vectorize{tie=true}", kernel="layernorm_forward_kernel1")
    vec = [o for o in t.outcomes if o.pass_name == "vectorize" and o.site != "prelude"]
    assert len(vec) == 9 and all(o.status == "rewritten" for o in vec), [o.message for o in vec]
    assert [k.name for k in t.knobs] == ["THREADS_PER_ROW", "ROW_BLOCK", "VEC_LOOPS"]
    text = t.instantiate({"THREADS_PER_ROW": 32, "VEC_LOOPS": 4})
    assert "ktx::apart(x, out_idx, C)" in text


def test_a_block_per_row_kernel_is_refused_naming_its_indices() -> None:
    """ggml's soft_max_f32 shape (written anew): the row is blockIdx, the lanes threadIdx; the
    refusal says where the kernel's own mapping is, not only that none was found."""
    src = """\
__global__ void rows(float* y, const float* x, int n) {
  const int tid = threadIdx.x;
  const int row = blockIdx.x;
  for (int i = tid; i < n; i += blockDim.x) y[row * n + i] = x[row * n + i];
}
"""
    t = apply(src, "row-owner")
    assert not t.knobs
    (why,) = remarks(t, "skipped")
    assert "reads threadIdx.x (line 2) and blockIdx.x (line 3)" in why, why
    assert "not a thread-per-row kernel" in why


@pytest.mark.parametrize("row_block", [128, 1024])
@pytest.mark.parametrize("rows", [1, 31, 1000, 4097])
def test_row_block_launch_gives_every_row_one_warp(rows: int, row_block: int) -> None:
    """Host check of ROW_BLOCK's index logic: the mapping's grid and block at the shape, and the
    warp form's row index ``blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32`` (asserted in the
    instantiated text), give each row below ``rows`` to exactly one warp; the rest fail the guard."""
    t = apply(LN, "row-owner")
    config = {"THREADS_PER_ROW": 32, "ROW_BLOCK": row_block}
    assert "int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;" in t.instantiate(config)
    launch = t.launch()
    assert launch is not None
    (grid,), (block,) = launch.evaluate({"rows": rows, **config})[:2]
    assert block == row_block
    owners = [b * (block // 32) + w for b in range(grid) for w in range(block // 32)]
    inside = [r for r in owners if r < rows]
    assert sorted(inside) == list(range(rows))
    assert len(owners) - len(inside) < block // 32 + 128  # at most a block and the original's rounding
