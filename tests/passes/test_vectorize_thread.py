"""vectorize on one-element-per-thread kernels (``VEC_THREAD``): rewrite, launch, refusals, nvcc.

The goldens under ``tests/golden/vectorize/thread_*.cu`` pin the emitted text; this file checks
what text alone does not show: the default config is the original, the launch still covers
every element for every block size and VEC, element sizes behind typedefs in local headers,
and that every config compiles for sm_90 with 16-byte accesses where the type allows (PTX
``ld.global.v4``/``st.global.v4``). llm.c's gelu/residual ``kernel1`` files are templated in
place from ``../shared/llmc`` (or ``shared/llmc`` in the checkout; skipped where it is absent) and
every config is compiled.
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from ktx.ir import parse
from ktx.ir.facts.elements import element_body
from ktx.ir.facts.types import type_size
from passtest import ROOT, apply, remarks
from test_vectorize import lines, without_machinery

from ktx.cli import main

NVCC = shutil.which("nvcc")
GOLDEN = ROOT / "tests" / "golden" / "vectorize"
#: llm.c's dev/cuda: ../shared/llmc beside the checkout, or shared/llmc inside it (GPU hosts).
LLMC = (
    next(
        (
            p
            for p in (ROOT.parent / "shared", ROOT / "shared")
            if (p / "llmc" / "dev" / "cuda" / "common.h").is_file()
        ),
        ROOT.parent / "shared",
    )
    / "llmc"
    / "dev"
    / "cuda"
)
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")

GELU = """\
#include <cuda_bf16.h>
typedef __nv_bfloat16 floatX;

__global__ void gelu(floatX* out, const floatX* inp, int N) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        float xi = inp[i];
        float cube = 0.044715f * xi * xi * xi;
        out[i] = 0.5f * xi * (1.0f + tanhf(0.7978845608f * (xi + cube)));
    }
}

void launch(floatX* out, const floatX* inp, int N, int block_size) {
    gelu<<<(N + block_size - 1) / block_size, block_size>>>(out, inp, N);
}
"""

RETURN = """\
__global__ void relu(float* y, const float* x, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  y[i] = x[i] > 0.f ? x[i] : 0.f;
}

void launch(float* y, const float* x, unsigned n) { relu<<<(n + 127) / 128, 128>>>(y, x, n); }
"""

#: cuBLAS names that llm.c's common.h uses in host code; the machine may lack cuBLAS's headers.
CUBLAS_STUB = """\
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>
typedef int cublasStatus_t;
typedef void* cublasHandle_t;
typedef void* cublasLtHandle_t;
typedef int cublasComputeType_t;
typedef int cublasMath_t;
enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
       CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3 };
cublasStatus_t cublasCreate(cublasHandle_t*);
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t);
cublasStatus_t cublasLtCreate(cublasLtHandle_t*);
"""


def test_gelu_shape_takes_packs_and_shrinks_the_grid() -> None:
    t = apply(GELU, "vectorize")
    assert [(k.name, k.values, k.default) for k in t.knobs] == [("VEC_THREAD", (1, 2, 4, 8), 1)]
    launch = t.launch()
    assert launch is not None and launch.grid == ("ceil_div((N + block_size - 1) // block_size, VEC_THREAD)",)
    out = t.instantiate({"VEC_THREAD": 8})
    assert "const int ktx_p = blockIdx.x * blockDim.x + threadIdx.x;" in out
    assert "ktx::aligned<8>(inp) &&" in out and "ktx_p * 8 + 8 <= N) {" in out
    assert "const auto ktx_inp = ktx::load<8>(inp + ktx_p * 8);" in out
    assert "ktx_out.v[ktx_j] = 0.5f * xi" in out and "ktx::store(out + ktx_p * 8, ktx_out);" in out
    # the scalar path: every element of the pack, each under the original guard
    assert re.search(r"const int i = ktx_p \* 8 \+ ktx_j;\n\s+if \(i < N\) \{", out)
    assert "gelu<<<((N + block_size - 1) / block_size + 7) / 8, block_size>>>" in out
    assert "floatX is __nv_bfloat16 (2 B)" in remarks(t)[0]


@pytest.mark.parametrize("source", [GELU, RETURN], ids=["if", "return"])
def test_default_config_is_the_original(source: str) -> None:
    t = apply(source, "vectorize")
    assert t.knobs
    assert without_machinery(t.instantiate()) == lines(source)


def test_crlf_files_stay_crlf() -> None:
    t = apply(GELU.replace("\n", "\r\n"), "vectorize")
    out = t.instantiate({"VEC_THREAD": 4})
    body = out[out.find("__global__") : out.find("void launch")]
    assert "\r\r" not in body and body.count("\n") == body.count("\r\n") > 20


def test_tail_false_keeps_the_check_and_says_so() -> None:
    t = apply(GELU, "vectorize{tail=false}")
    assert "tail=false applies to loops only" in remarks(t)[0]
    assert "ktx::aligned<4>(inp)" in t.instantiate({"VEC_THREAD": 4})


def test_return_guard_becomes_continue_on_the_scalar_path() -> None:
    out = apply(RETURN, "vectorize").instantiate({"VEC_THREAD": 4})
    assert "if (i >= n) continue;" in out and "return;" not in out.split("__global__")[1]
    # the conditional load of x[i] reads the pack the unconditional one loads anyway
    assert "ktx_y.v[ktx_j] = ktx_x.v[ktx_j] > 0.f ? ktx_x.v[ktx_j] : 0.f;" in out


@pytest.mark.parametrize("vec", [2, 4, 8])
@pytest.mark.parametrize("block", [32, 96, 256, 1024])
def test_the_smaller_grid_still_covers_every_element(vec: int, block: int) -> None:
    t = apply(GELU, "vectorize")
    launch = t.launch()
    assert launch is not None
    for n in (1, 7, block * vec - 1, block * vec + 1, 1_000_003):
        (grid,), (threads,), _ = launch.evaluate({"N": n, "block_size": block, "VEC_THREAD": vec})
        assert threads == block
        assert grid * block * vec >= n > (grid - 1) * block * vec


def test_kernels_of_other_shapes_get_no_per_thread_remark() -> None:
    loop = """\
__global__ void k(float* __restrict__ y, const float* __restrict__ x, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = x[i];
}
"""
    m = parse(loop)
    assert element_body(m, m.kernel()) is None
    t = apply(loop + "void go(float* y, const float* x, int n) { k<<<64, 256>>>(y, x, n); }\n", "vectorize")
    assert [k.name for k in t.knobs] == ["VEC_L0"]


def test_loops_in_the_body_are_left_to_the_loop_sites() -> None:
    rows = """\
__global__ void rowsum(float* __restrict__ out, const float* __restrict__ x, int N, int C) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx < N) {
    float s = 0.f;
    for (int c = 0; c < C; c++) s += x[idx * C + c];
    out[idx] = s;
  }
}
void go(float* o, const float* x, int N, int C) { rowsum<<<(N + 127) / 128, 128>>>(o, x, N, C); }
"""
    found = remarks(apply(rows, "vectorize"))
    assert "rowsum: the body of element idx has a loop (line 5): its loops are vectorized instead" in found


ALIAS = """\
__global__ void k(float* out, float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { BODY }
}
void go(float* o, float* x, int n) { k<<<(n + 255) / 256, 256>>>(o, x, n); }
"""


@pytest.mark.parametrize(
    ("body", "verdict"),
    [
        ("in[i] = in[i] * in[i];", "VEC_THREAD"),  # in place: one pack, read then written
        ("out[i] = in[i] + 1.f;", "VEC_THREAD"),  # loads precede the store of the same element
        ("float t = in[i]; out[i] = t; out[i] += in[i];", "in[i] (line 3) is accessed after out[i]"),
        # another offset through another pointer: packed where a thread's elements are disjoint
        ("out[i] = in[i + 1];", "out and in may alias: packed only where a run-time check"),
        ("out[i] = 1.f; in[i] = 2.f;", "a packed store would write last"),
    ],
)
def test_reordering_rule_without_restrict(body: str, verdict: str) -> None:
    t = apply(ALIAS.replace("BODY", body), "vectorize")
    found = remarks(t)[0]
    assert verdict in found, found
    restricted = apply(ALIAS.replace("BODY", body).replace("float* ", "float* __restrict__ ", 2), "vectorize")
    assert [k.name for k in restricted.knobs] == ["VEC_THREAD"]  # no aliasing, no order to keep


def test_a_call_given_a_pointer_may_touch_a_pack() -> None:
    decl = "__device__ void put(float* p, int i, float v);\n"
    found = remarks(apply(decl + ALIAS.replace("BODY", "put(out, i, in[i]);"), "vectorize", kernel="k"))
    assert found == ["k: the body passes out to put (line 4), which may touch in[i] around its pack"]
    loads = ALIAS.replace("BODY", "out[i] = __ldg(&in[i]) + sqrtf(in[i]);")
    assert [k.name for k in apply(loads, "vectorize").knobs] == ["VEC_THREAD"]  # values, not pointers


def test_a_guard_condition_on_the_lane_is_refused() -> None:
    src = RETURN.replace("if (i >= n) return;", "if (i >= n || threadIdx.x % 2) return;")
    found = remarks(apply(src, "vectorize"))
    assert found == [
        "relu: the guard's condition `!(threadIdx.x % 2)` (line 3) reads threadIdx.x: it would be tested "
        "once for all the elements of a thread"
    ]


def test_one_pointer_at_two_offsets_is_a_dependence_even_with_restrict() -> None:
    body = ALIAS.replace("BODY", "in[i] = in[i + 1];").replace("float* ", "float* __restrict__ ", 2)
    assert (
        "in[i + 1] (line 3) and in[i] (line 3) reach the same memory" in remarks(apply(body, "vectorize"))[0]
    )


def test_element_size_through_typedefs_in_local_headers(tmp_path: Path) -> None:
    (tmp_path / "common.h").write_text(
        "#if defined(USE_BF16)\ntypedef __nv_bfloat16 floatX;\n#elif defined(USE_FP16)\n"
        "typedef half floatX;\n#else\ntypedef float floatX;\n#endif\n"
    )
    kernel = "__global__ void k(floatX* y, int n) {}\n"
    for defines, size in (("#define USE_BF16\n", 2), ("#define USE_FP16\n", 2), ("", 4)):
        path = tmp_path / "k.cu"
        path.write_text(defines + '#include "common.h"\n' + kernel)
        m = parse(path.read_text(), str(path))
        found = type_size(m, m.kernel(), (), "floatX")
        assert found is not None and found[0] == size, defines
    # a condition it cannot evaluate: the widest candidate, legal for every branch
    (tmp_path / "common.h").write_text(
        "#if FLOATX_BITS == 16\ntypedef half floatX;\n#else\ntypedef double floatX;\n#endif\n"
    )
    m = parse(path.read_text(), str(path))
    assert type_size(m, m.kernel(), (), "floatX") == (8, "floatX is double")


# -- nvcc ------------------------------------------------------------------------------------------


def _compile(source: str, folder: Path, name: str, includes: tuple[Path, ...] = ()) -> str:
    """nvcc for sm_90; returns the PTX of the file's kernels (the test asserts on its accesses)."""
    assert NVCC is not None
    path = folder / f"{name}.cu"
    path.write_text(source)
    cmd = [NVCC, "-std=c++17", "-arch=sm_90", "--ptx", "-o", str(folder / f"{name}.ptx"), str(path)]
    cmd += [f"-I{p}" for p in includes]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{name}: nvcc failed\n{proc.stderr[-3000:]}"
    return (folder / f"{name}.ptx").read_text()


def _golden_sources() -> list[tuple[str, str]]:
    """(name, instantiated source) for every VEC_THREAD config of the per-thread goldens."""
    jobs: list[tuple[str, str]] = []
    for path in sorted(GOLDEN.glob("thread_*.cu")):
        source = path.read_text()
        module = parse(source, str(path))
        for fn in module.kernels:
            t = apply(source, "vectorize", kernel=fn.name)
            for knob in t.knobs:
                assert knob.name == "VEC_THREAD"
                for v in knob.values:
                    jobs.append((f"{path.stem}_{fn.name}_{v}", t.instantiate({"VEC_THREAD": v})))
    return jobs


@needs_nvcc
@pytest.mark.slow
def test_every_config_of_the_goldens_compiles_with_packed_accesses(tmp_path: Path) -> None:
    jobs = _golden_sources()
    assert len(jobs) >= 10
    with ThreadPoolExecutor(2) as pool:
        ptx = dict(
            zip([n for n, _ in jobs], pool.map(lambda j: _compile(j[1], tmp_path, j[0]), jobs), strict=True)
        )
    # 8 x bf16 and 4 x float: one 16-byte load and store per pack
    assert "ld.global.v4.u32" in ptx["thread_gelu_gelu_forward_8"]
    assert "st.global.v4.u32" in ptx["thread_gelu_gelu_forward_8"]
    assert "ld.global.v4" in ptx["thread_residual_residual_add_4"]
    assert "ld.global.v4" not in ptx["thread_residual_residual_add_1"]


def _llmc_jobs(tmp_path: Path) -> list[tuple[str, str]]:
    """``ktx apply`` on llm.c's files in place: every VEC_THREAD and COARSEN config of kernel1."""
    jobs: list[tuple[str, str]] = []
    for stem in ("gelu_forward", "residual_forward"):
        path = LLMC / f"{stem}.cu"
        kernel = f"{stem}_kernel1"
        for knob, passes, label, values in (
            ("VEC_THREAD", "vectorize", "vectorize", (1, 2, 4, 8)),
            ("COARSEN", "coarsen", "coarsen", (2, 8)),
            ("COARSEN", "coarsen{spacing=grid}", "coarsen-grid", (4,)),
        ):
            for v in values:
                out = tmp_path / f"{stem}_{label}_{v}.cu"
                err = io.StringIO()
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                    argv = ["apply", "--passes", passes, str(path), "--kernel", kernel]
                    code = main([*argv, "--config", f"{knob}={v}", "-o", str(out)])
                assert code == 0, err.getvalue()
                jobs.append((f"{stem}_{label}_{v}", out.read_text()))
    return jobs


@needs_nvcc
@pytest.mark.skipif(not (LLMC / "common.h").is_file(), reason="llm.c is not at ../shared/llmc")
@pytest.mark.slow
def test_llmc_kernel1_files_in_place_every_config_compiles(tmp_path: Path) -> None:
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    (stubs / "cublas_v2.h").write_text(CUBLAS_STUB)
    (stubs / "cublasLt.h").write_text("#pragma once\n#include <cublas_v2.h>\n")
    jobs = _llmc_jobs(tmp_path)
    texts = dict(jobs)
    gelu = texts["gelu_forward_vectorize_8"]
    assert "ktx::load<8>(inp + ktx_p * 8)" in gelu  # floatX is bf16 through common.h
    assert "gelu_forward_kernel1<<<(grid_size + 7) / 8, block_size>>>" in gelu
    assert (
        "int idx = (blockIdx.x * 8 + ktx_k) * blockDim.x + threadIdx.x;"
        in texts["residual_forward_coarsen_8"]
    )
    grid = "int idx = (blockIdx.x + ktx_k * gridDim.x) * blockDim.x + threadIdx.x;"
    assert grid in texts["residual_forward_coarsen-grid_4"]
    build = tmp_path / "build"
    build.mkdir()
    with ThreadPoolExecutor(2) as pool:
        ptx = list(pool.map(lambda j: _compile(j[1], build, j[0], (LLMC, stubs)), jobs))
    for (name, _), text in zip(jobs, ptx, strict=True):
        kernel = _entry(text, name.split("_forward")[0] + "_forward_kernel1")
        packed = "ld.global.v4.u32" in kernel and "st.global.v4.u32" in kernel
        assert packed == name.endswith("vectorize_8"), name  # 8 x bf16 = 16 bytes; 1, 2, 4 are narrower


def _entry(ptx: str, kernel: str) -> str:
    """The PTX of one kernel: from its ``.entry`` to the next one."""
    starts = [m.start() for m in re.finditer(r"\.entry ", ptx)]
    for k, start in enumerate(starts):
        header = ptx[start : ptx.find("(", start)]
        if kernel in header:
            return ptx[start : starts[k + 1] if k + 1 < len(starts) else len(ptx)]
    raise AssertionError(f"no .entry for {kernel}")
