"""online: a row max and the sum of exp(x - max) after it fuse into one pass of running pairs.

What the facts take (:mod:`ktx.ir.facts.online`: the three ways a sum reads ``exp(x - m)``) and
refuse, with the line; the default (ONLINE=0) instantiates to the original bytes; ONLINE=1 run
on the CPU (``host/host_cuda.h``, one thread after another) against the original, row by row,
within rounding; and every config of llm.c's ``softmax_forward_kernel1`` (read in place from
``../shared/llmc``), alone and after row-owner, compiles for sm_90 without spills.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ktx.ir import parse
from ktx.ir.facts.online import online_pairs
from passtest import apply, assert_built_without_spills, build_for_sm90, remarks
from test_row_owner import LADDER, LLMC

from ktx.measure.compile import find_nvcc
from ktx.pipeline import candidate_from_template, template_for_spec
from ktx.specload import load_spec

HOST = Path(__file__).resolve().parent / "host"
GXX = shutil.which("g++") or shutil.which("c++")
CONFIG_LINE = re.compile(r"(?m)^// ktx: `[^`]*` instantiated with [^\n]*\n")

#: llm.c v1's shape: the sum reads the element it just stored; the in-place loop after it
STORED = """\
__global__ void stored(float* out, const float* inp, int N, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        const float* x = inp + i * C;
        float* o = out + i * C;
        float m = -INFINITY;
        for (int j = 0; j < C; j++) {
            if (x[j] > m) {
                m = x[j];
            }
        }
        double s = 0.0;
        for (int j = 0; j < C; j++) {
            o[j] = expf(x[j] - m);
            s += o[j];
        }
        for (int j = 0; j < C; j++) {
            o[j] /= (float)s;
        }
    }
}
"""
#: the sum through a local, fmaxf for the max, a one-line in-place loop
LOCAL = """\
__global__ void local(float* out, const float* inp, int N, int C) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < N) {
    const float* x = inp + r * C;
    float* o = out + r * C;
    float mx = -1e30f;
    for (int j = 0; j < C; j++) mx = fmaxf(mx, x[j]);
    float total = 0.f;
    for (int j = 0; j < C; j++) {
      float e = __expf(x[j] - mx);
      o[j] = e;
      total += e;
    }
    const float inv = 1.f / total;
    for (int j = 0; j < C; j++) o[j] *= inv;
  }
}
"""
#: the sum folded directly, written once after: no loop to join
DIRECT = """\
__global__ void direct(float* lse, const float* inp, int N, int C) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < N) {
    float m = -INFINITY;
    for (int j = 0; j < C; j++) m = fmaxf(m, inp[r * C + j]);
    float s = 0.f;
    for (int j = 0; j < C; j++) s += expf(inp[r * C + j] - m);
    lse[r] = m + logf(s);
  }
}
"""
KERNELS = {"stored": STORED, "local": LOCAL, "direct": DIRECT}


def _pairs(src: str, name: str) -> tuple[Any, ...]:
    m = parse(src)
    return online_pairs(m, m.kernel(name))


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_the_facts_take_each_form_of_the_sum(name: str) -> None:
    pairs, why = _pairs(KERNELS[name], name)
    assert len(pairs) == 1 and not why, why
    p = pairs[0]
    assert (p.maximum.op, p.total.op) == ("max", "sum")
    assert p.exp == ("__expf" if name == "local" else "expf")
    # the stores stay and join the in-place loop; a sum folded directly leaves nothing to join
    assert (p.fused is not None) == (name != "direct")
    assert len(p.rest) == {"stored": 1, "local": 2, "direct": 0}[name]


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        ("s += expf(inp[r * C + j] - m)", "s += expf(inp[r * C + j + 1] - m)", "the max read inp[r*C+j]"),
        ("float s = 0.f;", "float s = 1.f;", "s must be declared starting at zero"),
        ("float m = -INFINITY;", "float m = 0.f;", "m must be declared starting at -INFINITY"),
        ("for (int j = 0; j < C; j++) s +=", "for (int j = 1; j < C; j++) s +=", "headers differ"),
        ("float s = 0.f;", "float s = 0.f; m += 1.f;", "a statement between the max and the sum loops"),
        ("s += expf(inp[r * C + j] - m)", "s += logf(inp[r * C + j] - m)", "is not exp(x - m)"),
    ],
)
def test_refusals_name_what_stops_the_fusion(old: str, new: str, why: str) -> None:
    src = DIRECT.replace(old, new)
    assert src != DIRECT
    pairs, reasons = _pairs(src, "direct")
    assert not pairs
    assert any(why in r for r in reasons), reasons
    t = apply(src, "online")
    assert not t.knobs
    assert any(why in r for r in remarks(t, "skipped")), remarks(t)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_default_is_the_original_byte_for_byte(name: str) -> None:
    t = apply(KERNELS[name], "online")
    assert [k.name for k in t.knobs] == ["ONLINE"]
    assert CONFIG_LINE.sub("", t.instantiate({"ONLINE": 0}), count=1) == KERNELS[name]
    fused = t.instantiate({"ONLINE": 1})
    # one loop fewer reads the row: max and sum share one, the stores join the loop after
    assert fused.count("for (") == KERNELS[name].count("for (") - 1
    assert "ktx_up ?" in fused


# -- on the CPU: ONLINE=1 against the original, row by row --------------------------------------

DRIVER = r"""
#include "host_cuda.h"
#include <cstdio>
#include <cmath>
#include <vector>
#define __expf expf  // glibc declares __expf but exports no definition
namespace orig {
#include "orig.cu"
}
namespace cand {
#include "cand.cu"
}
static void launch(unsigned grid, unsigned block, auto&& body) {
  gridDim.x = grid; blockDim.x = block;
  for (unsigned b = 0; b < grid; ++b)
    for (unsigned t = 0; t < block; ++t) { blockIdx.x = b; threadIdx.x = t; body(); }
}
int main() {
  int bad = 0, cases = 0;
  for (int C : {1, 2, 7, 64, 1000}) for (int pattern = 0; pattern < 5; ++pattern) {
    const int N = 5;
    std::vector<float> x(N * C), o1(N * C, -1.f), o2(N * C, -1.f);
    for (int i = 0; i < N * C; ++i) {
      // rising (the max moves every element), falling, mixed, large (exp overflows unscaled)
      float v = pattern == 0 || pattern == 4 ? 0.01f * i : pattern == 1 ? -0.01f * i
              : pattern == 2 ? float((i * 37) % 101) * 0.25f - 7.f : 80.f + float(i % 13);
      // a masked prefix: the first three elements of each row at -inf (pattern 4; a row of
      // three or fewer is all -inf, NaN in the original: skipped below)
      x[i] = pattern == 4 && i % C < 3 ? -INFINITY : v;
    }
    launch(2, 4, [&] { orig::KERNEL(o1.data(), x.data(), N, C); });
    launch(2, 4, [&] { cand::KERNEL(o2.data(), x.data(), N, C); });
    for (size_t i = 0; i < o1.size(); ++i) {
      if (pattern == 4 && C <= 3) continue;
      ++cases;
      if (!(std::fabs(o1[i] - o2[i]) <= 1e-5f * std::fabs(o1[i]) + 1e-30f)) {
        ++bad; if (bad < 5) std::printf("C=%d pattern=%d i=%zu: %g vs %g\n", C, pattern, i, o1[i], o2[i]);
      }
    }
  }
  std::printf("cases=%d bad=%d\n", cases, bad);
  return bad != 0;
}
"""


@pytest.mark.skipif(GXX is None, reason="no host C++ compiler")
@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.slow
def test_online_matches_the_three_passes_on_the_host(tmp_path: Path, name: str) -> None:
    assert GXX is not None
    t = apply(KERNELS[name], "online")
    (tmp_path / "orig.cu").write_text(KERNELS[name])
    (tmp_path / "cand.cu").write_text(t.instantiate({"ONLINE": 1}))
    (tmp_path / "main.cpp").write_text(DRIVER.replace("KERNEL", name))
    shutil.copy(HOST / "host_cuda.h", tmp_path / "host_cuda.h")
    exe = tmp_path / "run"
    built = subprocess.run([GXX, "-std=c++20", "-O1", "-o", str(exe), str(tmp_path / "main.cpp")],
                           capture_output=True, text=True)  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    ran = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and "bad=0" in ran.stdout, ran.stdout[-2000:]


# -- llm.c softmax_forward v1, staged the way ktx optimize stages it ----------------------------

PIPELINES = ("online", "row-owner,online", "row-owner,online,vectorize")


def _template(tmp_path: Path, pipeline: str) -> tuple[Any, Any, Path]:
    assert LLMC is not None
    lad = next(lad for lad in LADDER.LADDERS if lad.name == "softmax_forward")
    folder = LADDER.stage(lad, lad.naive, LLMC, tmp_path / "stage")
    spec = load_spec(folder)
    return spec, template_for_spec(spec, pipeline), folder


@pytest.mark.skipif(LLMC is None, reason="llm.c is not at ../shared/llmc")
@pytest.mark.parametrize("pipeline", PIPELINES)
def test_llmc_softmax_v1_is_fused_in_every_ownership_branch(tmp_path: Path, pipeline: str) -> None:
    _, t, _ = _template(tmp_path, pipeline)
    assert "ONLINE" in [k.name for k in t.knobs], remarks(t)
    note = next(m for m in remarks(t, "rewritten") if "one pass" in m)
    # alone: the one branch; after row-owner: its block, warp and thread branches
    assert note.count("in one pass") == (1 if pipeline == "online" else 3), note
    assert note.count("joins the stores") == note.count("in one pass")


@pytest.mark.skipif(LLMC is None, reason="llm.c is not at ../shared/llmc")
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not on PATH")
@pytest.mark.slow
def test_llmc_every_config_compiles_for_sm90_without_spills(tmp_path: Path) -> None:
    jobs: list[tuple[str, Any, Path, str]] = []
    for pipeline in PIPELINES[:2]:
        spec, t, folder = _template(tmp_path / pipeline.replace(",", "_"), pipeline)
        names = [k.name for k in t.knobs]
        tprs = [1] if "THREADS_PER_ROW" not in names else [1, 32, 256, 1024]
        for tpr in tprs:
            config = {"ONLINE": 1, **({"THREADS_PER_ROW": tpr} if len(tprs) > 1 else {})}
            source = candidate_from_template(spec, t, config).source
            jobs.append((f"{pipeline} {config}", spec, folder, source))
        if len(tprs) > 1:  # a warp per row in online8's blocks of 1024
            config = {"ONLINE": 1, "THREADS_PER_ROW": 32, "ROW_BLOCK": 1024}
            source = candidate_from_template(spec, t, config).source
            jobs.append((f"{pipeline} {config}", spec, folder, source))

    results = build_for_sm90(jobs)
    assert len(results) == 6
    assert_built_without_spills(results)


def _fused_loop_loads(ptx: str, kernel: str) -> int:
    """``ld.global`` instructions in the PTX of ``kernel`` (the whole entry)."""
    entry = re.search(r"\.entry (\w*" + kernel + r"\w*)\((.*?)\n\}\n", ptx, re.S)
    assert entry is not None, "kernel not in the PTX"
    return len(re.findall(r"ld\.global", entry.group(2)))


@pytest.mark.skipif(LLMC is None, reason="llm.c is not at ../shared/llmc")
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not on PATH")
@pytest.mark.slow
def test_llmc_block_per_row_fused_loop_is_unrolled(tmp_path: Path) -> None:
    """At T > 32 the fused loop steps by the constant T, so nvcc unrolls it and issues several
    loads at once; with `+= blockDim.x` it kept one ld.global per loop (2 in the kernel)."""
    nvcc = find_nvcc()
    assert nvcc is not None
    spec, t, folder = _template(tmp_path, "row-owner,online")
    counts = {}
    for online in (0, 1):
        source = candidate_from_template(spec, t, {"ONLINE": online, "THREADS_PER_ROW": 1024}).source
        cu = tmp_path / f"k{online}.cu"
        cu.write_text(source)
        ptx = tmp_path / f"k{online}.ptx"
        cmd = [nvcc, "-arch=sm_90", "-ptx", *spec.flags, "-I", str(folder), str(cu), "-o", str(ptx)]
        ran = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert ran.returncode == 0, ran.stderr[-2000:]
        counts[online] = _fused_loop_loads(ptx.read_text(), spec.kernel)
    # ONLINE=0 keeps row-owner's three rolled `+= blockDim.x` loops: one load each
    assert counts[0] == 3, counts
    # ONLINE=1: the fused loop unrolled by nvcc (4 + a remainder), the write loop rolled
    assert counts[1] >= 5, counts


@pytest.mark.skipif(LLMC is None, reason="llm.c is not at ../shared/llmc")
def test_llmc_block_per_row_constant_step_keeps_the_write_loop_packed(tmp_path: Path) -> None:
    """The fused loop's constant step is that loop's alone: after ``row-owner,online,vectorize``
    the write loop of the block-per-row form still strides by blockDim.x and vectorize packs it
    (16-byte loads, peeled head for C = 50257's odd rows), while the fused loop steps by T."""
    spec, t, _ = _template(tmp_path, "row-owner,online,vectorize{tie=true,peel=true}")
    config = {"THREADS_PER_ROW": 256, "ONLINE": 1, "VEC_LOOPS": 4}
    source = candidate_from_template(spec, t, config).source
    body = source[source.index("void softmax_forward_kernel1(") :]
    body = body[: body.index("\n}\n")]
    assert "for (int j = threadIdx.x; j < C; j += (256 > 32 ? 256 : (int)blockDim.x)) {" in body
    assert re.search(r"ktx::load<4>\(inp_row \+ ktx_head_\w+ \+ ktx_p \* 4\)", body), body
    assert re.search(r"for \(int ktx_p = threadIdx\.x; ktx_p < ktx_packs_\w+; ktx_p \+= blockDim\.x\)", body)
