"""row-registers on scalar rows: llm.c's layernorm and fused_residual shapes, element by element.

What the facts keep (:class:`ktx.ir.facts.rowkeep.ScalarKeep`: the first loop's elements for
every later loop with the same header, the const weight early) and what they leave (an element a
later loop stores, a store between the loops); the default instantiates to the original bytes;
every PACKS value run on the host against the original, bit for bit (the arithmetic and its order
are unchanged, only where the value comes from); and llm.c's layernorm v1 and fused_residual v2
after row-owner, every branch, built for sm_90 without spills.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ktx.ir import parse
from ktx.ir.facts.rowkeep import ScalarKeep, row_keeps
from passtest import apply, assert_built_without_spills, build_for_sm90, remarks
from test_row_owner import LADDER, LLMC

from ktx.measure.compile import find_nvcc
from ktx.pipeline import candidate_from_template, template_for_spec
from ktx.specload import load_spec

HOST = Path(__file__).resolve().parent / "host"
GXX = shutil.which("g++") or shutil.which("c++")
CONFIG_LINE = re.compile(r"(?m)^// ktx: `[^`]*` instantiated with [^\n]*\n")

#: layernorm v1's shape, one thread per row, three loops over the row; out stored at [i * C + j]
NORM = """\
__global__ void norm(float* out, const float* inp, const float* w, int N, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        const float* x = inp + i * C;
        float m = 0.0f;
        for (int j = 0; j < C; j++) {
            m += x[j];
        }
        m = m / C;
        float v = 0.0f;
        for (int j = 0; j < C; j++) {
            float d = x[j] - m;
            v += d * d;
        }
        float s = 1.0f / sqrtf(v / C + 1e-5f);
        for (int j = 0; j < C; j++) {
            out[i * C + j] = s * (x[j] - m) * w[j];
        }
    }
}
"""


def _keeps(src: str, name: str) -> Any:
    m = parse(src)
    return row_keeps(m, m.kernel(name))


def test_the_first_loop_serves_every_later_loop_and_the_weight_loads_early() -> None:
    keeps = _keeps(NORM, "norm")
    assert not isinstance(keeps, str) and len(keeps) == 1, keeps
    k = keeps[0]
    assert isinstance(k, ScalarKeep)
    assert [b.start_point[0] + 1 for b in k.seconds] == [11, 16]
    assert [(ld.kind, ld.element, ld.type, len(ld.reads)) for ld in k.loads] == [
        ("kept", "x[j]", "float", 2),
        ("early", "w[j]", "float", 1),
    ]


@pytest.mark.parametrize(
    ("old", "new", "first", "kept"),
    [
        # a store between the first two loops: the variance loop's elements serve the last loop only
        ("m = m / C;", "m = m / C; out[i] = m;", 11, "x[j]"),
        # the weight is written by the kernel: no longer early, x still kept
        ("out[i * C + j] = s", "w[j] = 0.f; out[i * C + j] = s", 6, "x[j]"),
        # a later loop stores at another index than the counter's: nothing is kept
        ("out[i * C + j] = s", "out[i * C + j + 1] = s", 0, None),
    ],
)
def test_what_the_facts_leave(old: str, new: str, first: int, kept: str | None) -> None:
    src = NORM.replace(old, new)
    assert src != NORM
    if "w[j] = 0.f" in new:
        src = src.replace("const float* w", "float* w")
    keeps = _keeps(src, "norm")
    if kept is None:
        assert isinstance(keeps, str) and "nor scalar rows" in keeps, keeps
        assert any("nor scalar rows" in r for r in remarks(apply(src, "row-registers"), "skipped"))
        return
    assert not isinstance(keeps, str) and len(keeps) == 1
    assert keeps[0].first.start_point[0] + 1 == first
    assert [ld.element for ld in keeps[0].loads if ld.kind == "kept"] == [kept]
    assert ("w[j]" in [ld.element for ld in keeps[0].loads]) == ("w[j] = 0.f" not in new)


def test_default_is_the_original_and_packs_count_elements() -> None:
    t = apply(NORM, "row-registers")
    knob = next(k for k in t.knobs if k.name == "PACKS")
    assert tuple(knob.values) == (0, 1, 2, 4, 8, 16, 32)
    assert CONFIG_LINE.sub("", t.instantiate({"PACKS": 0}), count=1) == NORM
    kept = t.instantiate({"PACKS": 4})
    assert "float ktx_keep0_x[4];" in kept and "ktx_keep1_w[ktx_k] = w[j];" in kept
    # the later loops' heads read x from the slot: only the first loop's head loads it
    assert kept.count("ktx_keep0_x[ktx_k] = x[j];") == 1
    assert kept.count("(ktx_keep0_x[ktx_k] - m)") == 1 and "ktx_keep0_x[ktx_k] - m;" in kept


DRIVER = r"""
#include "host_cuda.h"
#include <cstdio>
#include <cstring>
#include <vector>
namespace orig {
#include "orig.cu"
}
CANDIDATES
static void launch(unsigned grid, unsigned block, auto&& body) {
  gridDim.x = grid; blockDim.x = block;
  for (unsigned b = 0; b < grid; ++b)
    for (unsigned t = 0; t < block; ++t) { blockIdx.x = b; threadIdx.x = t; body(); }
}
int main() {
  int bad = 0, cases = 0;
  for (int C : {1, 3, 8, 33, 200}) {
    const int N = 5;
    std::vector<float> x(N * C), w(C), o1(N * C, -1.f), o2(N * C, -1.f);
    for (int i = 0; i < N * C; ++i) x[i] = float((i * 37) % 101) * 0.25f - 7.f;
    for (int j = 0; j < C; ++j) w[j] = 0.5f + 0.01f * j;
    launch(2, 4, [&] { orig::norm(o1.data(), x.data(), w.data(), N, C); });
    RUNS
  }
  std::printf("cases=%d bad=%d\n", cases, bad);
  return bad != 0;
}
"""
RUN = """
    std::fill(o2.begin(), o2.end(), -1.f);
    launch(2, 4, [&] {{ cand{p}::norm(o2.data(), x.data(), w.data(), N, C); }});
    ++cases;
    if (std::memcmp(o1.data(), o2.data(), o1.size() * sizeof(float)) != 0) {{
      ++bad; std::printf("PACKS={p} C=%d differs\\n", C);
    }}"""
PACKS = (1, 2, 4, 8, 32)


@pytest.mark.skipif(GXX is None, reason="no host C++ compiler")
@pytest.mark.slow
def test_every_packs_value_matches_the_original_bit_for_bit_on_the_host(tmp_path: Path) -> None:
    assert GXX is not None
    t = apply(NORM, "row-registers")
    (tmp_path / "orig.cu").write_text(NORM)
    spaces = []
    for p in PACKS:
        (tmp_path / f"cand{p}.cu").write_text(t.instantiate({"PACKS": p}))
        spaces.append(f'namespace cand{p} {{\n#include "cand{p}.cu"\n}}')
    main = DRIVER.replace("CANDIDATES", "\n".join(spaces)).replace(
        "RUNS", "".join(RUN.format(p=p) for p in PACKS)
    )
    (tmp_path / "main.cpp").write_text(main)
    shutil.copy(HOST / "host_cuda.h", tmp_path / "host_cuda.h")
    exe = tmp_path / "run"
    built = subprocess.run([GXX, "-std=c++20", "-O1", "-o", str(exe), str(tmp_path / "main.cpp")],
                           capture_output=True, text=True)  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    ran = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and f"cases={5 * len(PACKS)} bad=0" in ran.stdout, ran.stdout[-2000:]


# -- llm.c layernorm v1 and fused_residual v2 after row-owner -------------------------------------

LADDER_KERNELS = ("layernorm_forward", "fused_residual_forward")


def _template(tmp_path: Path, kernel: str, pipeline: str) -> tuple[Any, Any, Path]:
    assert LLMC is not None
    lad = next(lad for lad in LADDER.LADDERS if lad.name == kernel)
    folder = LADDER.stage(lad, lad.naive, LLMC, tmp_path / "stage")
    spec = load_spec(folder)
    return spec, template_for_spec(spec, pipeline), folder


@pytest.mark.skipif(LLMC is None, reason="llm.c is not at ../shared/llmc")
@pytest.mark.parametrize("kernel", LADDER_KERNELS)
def test_llmc_rows_are_kept_in_every_row_owner_branch(tmp_path: Path, kernel: str) -> None:
    _, t, _ = _template(tmp_path, kernel, "row-owner,row-registers")
    assert "PACKS" in [k.name for k in t.knobs], remarks(t)
    note = next(m for m in remarks(t, "rewritten") if "elements in registers" in m)
    row = "x[i]" if kernel == "layernorm_forward" else "residual[c]"
    weight = "weight[i]" if kernel == "layernorm_forward" else "weight[c]"
    # the block, warp and thread branches: the row kept for both later loops, the weight early
    assert note.count(f"{row} (kept)") == 3 and note.count(f"{weight} (early)") == 3, note


@pytest.mark.skipif(LLMC is None, reason="llm.c is not at ../shared/llmc")
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not on PATH")
@pytest.mark.slow
def test_llmc_packs_configs_compile_for_sm90_without_spills(tmp_path: Path) -> None:
    jobs: list[tuple[str, Any, Path, str]] = []
    for kernel in LADDER_KERNELS:
        spec, t, folder = _template(tmp_path / kernel, kernel, "row-owner,row-registers")
        for tpr, packs in ((1, 32), (32, 32), (256, 8), (1024, 8)):
            config = {"THREADS_PER_ROW": tpr, "PACKS": packs}
            assert t.space.feasible(config, {"B": 8, "T": 1024, "C": 768}), config
            source = candidate_from_template(spec, t, config).source
            jobs.append((f"{kernel} {config}", spec, folder, source))

    results = build_for_sm90(jobs)
    assert len(results) == 8
    assert_built_without_spills(results)
