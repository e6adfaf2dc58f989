"""online's second pair: a row sum (the mean, once divided) and the sum of squared deviations from it.

What the facts take (:class:`ktx.ir.facts.online.VariancePair`: the deviation through a local or
written out, the element stored by the first loop and read back) and refuse, with the line; the
default instantiates to the original bytes; a numpy replay of the emitted Welford update and of
``ktx_welford_combine`` over a row's lanes (the butterfly of ``ktx_welford_reduce``, then its
shared-memory pass) against the two-pass sum of squares with the same centre, on random rows and
on rows whose mean is 1e4 times their spread (where the Σx, Σx² pair loses every digit); the
fused thread-per-row kernel run on the host against the original; and llm.c's layernorm v1 and
fused_residual v2, alone and after row-owner, built for sm_90 without spills.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ktx.ir import parse
from ktx.ir.facts.online import VariancePair, online_pairs
from ktx.passes.online import WELFORD_HELPERS
from passtest import apply, assert_built_without_spills, build_for_sm90, remarks
from test_row_owner import LADDER, LLMC

from ktx.measure.compile import find_nvcc
from ktx.pipeline import candidate_from_template, template_for_spec
from ktx.specload import load_spec

HOST = Path(__file__).resolve().parent / "host"
GXX = shutil.which("g++") or shutil.which("c++")
CONFIG_LINE = re.compile(r"(?m)^// ktx: `[^`]*` instantiated with [^\n]*\n")

#: llm.c layernorm v1's shape: the deviation through a local, the mean divided between the loops
LOCAL = """\
__global__ void local(float* out, float* var, const float* inp, int N, int C) {
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
            float xshift = x[j] - m;
            v += xshift * xshift;
        }
        v = v / C;
        var[i] = v;
        float s = 1.0f / sqrtf(v + 1e-5f);
        for (int j = 0; j < C; j++) {
            out[i * C + j] = s * (x[j] - m);
        }
    }
}
"""
#: fused_residual v2's shape: the first loop stores what it sums, the second reads it back;
#: the centre is a local computed between the loops, the square written out
STORED = """\
__global__ void stored(float* res, float* var, const float* a, const float* b, int N, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float m = 0.0f;
    for(int c = 0; c < C; ++c) {
        float o = a[i * C + c] + b[i * C + c];
        m += o;
        res[i * C + c] = o;
    }
    const float mu = m / C;
    float v = 0.0f;
    for (int c = 0; c < C; c++) v += (res[i * C + c] - mu) * (res[i * C + c] - mu);
    var[i] = v / C;
}
"""
KERNELS = {"local": LOCAL, "stored": STORED}
#: STORED with the mean divided in place: the recogniser sees the dependence, so each refusal is said
DIVIDED = STORED.replace("const float mu = m / C;", "m = m / C;").replace("- mu)", "- m)")


def _pairs(src: str, name: str) -> tuple[tuple[Any, ...], tuple[str, ...]]:
    m = parse(src)
    return online_pairs(m, m.kernel(name))


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_the_facts_take_each_form_of_the_deviation(name: str) -> None:
    pairs, why = _pairs(KERNELS[name], name)
    assert len(pairs) == 1 and not why, why
    p = pairs[0]
    assert isinstance(p, VariancePair)
    assert (p.m, p.v, p.v_type) == ("m", "v", "float")
    assert (p.element, p.center) == {"local": ("x[j]", "m"), "stored": ("res[i * C + c]", "mu")}[name]
    assert p.group == "" and p.after is None


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        ("res[i * C + c] = o;", "res[i * C + c + 1] = o;", "writes memory at an index other than c plus"),
        ("res[i * C + c] = o;", "res[c] = o;", "reads res at another index than the first loop writes"),
        ("float v = 0.0f;", "float v = 1.0f;", "v must be declared starting at zero"),
        ("for (int c = 0; c < C; c++) v +=", "for (int c = 1; c < C; c++) v +=", "headers differ"),
        ("m = m / C;", "m = m / C + a[0];", "reads memory or calls"),
        (
            "(res[i * C + c] - m) * (res[i * C + c] - m)",
            "(res[i * C + c] - m) * res[i * C + c]",
            "is not (x - c) * (x - c)",
        ),
        ("m += o;", "m += o; if (o > 9.f) continue;", "can leave an iteration early"),
    ],
)
def test_refusals_name_what_stops_the_fusion(old: str, new: str, why: str) -> None:
    src = DIVIDED.replace(old, new)
    assert src != DIVIDED
    pairs, reasons = _pairs(src, "stored")
    assert not pairs
    assert any(why in r for r in reasons), reasons
    t = apply(src, "online")
    assert not t.knobs
    assert any(why in r for r in remarks(t, "skipped")), remarks(t)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_default_is_the_original_and_one_loop_reads_the_row_less(name: str) -> None:
    t = apply(KERNELS[name], "online")
    assert [k.name for k in t.knobs] == ["ONLINE"]
    assert CONFIG_LINE.sub("", t.instantiate({"ONLINE": 0}), count=1) == KERNELS[name]
    fused = t.instantiate({"ONLINE": 1})
    assert fused.count("for (") + fused.count("for(") == KERNELS[name].count("for") - 1
    assert "v += ktx_v_m2 + ktx_v_n * ((ktx_v_k - " in fused


# -- the emitted arithmetic, replayed in numpy float32 --------------------------------------------

#: the combine ktx_welford_combine emits, as the replay does it
EMITTED_COMBINE = (
    "k = n > V(0) ? k : ok;",
    "const V tn = n + on;",
    "const V w = tn > V(0) ? on / tn : V(0);",
    "const V d = (ok - k) + (omean - mean);",
    "mean += d * w;",
    "m2 += om2 + d * d * n * w;",
    "n = tn;",
)
F = np.float32
Quad = tuple[Any, Any, Any, Any]


def _combine(a: Quad, b: Quad) -> Quad:
    n, k, mean, m2 = a
    on, ok, omean, om2 = b
    k = np.where(n > 0, k, ok).astype(F)
    tn = F(n + on)
    w = np.where(tn > 0, on / np.where(tn > 0, tn, F(1)), F(0)).astype(F)
    d = F(F(ok - k) + F(omean - mean))
    return tn, k, F(mean + d * w), F(m2 + (om2 + d * d * n * w))


def _welford_row(x: np.ndarray, lanes: int) -> Quad:
    """The quadruple of a row as the fused loop and ``ktx_welford_reduce<lanes>`` leave it in lane 0."""
    n, k, mean, m2 = (np.zeros(lanes, F) for _ in range(4))
    for start in range(0, len(x), lanes):  # iteration i: lane l reads x[l + i * lanes]
        chunk = x[start : start + lanes]
        c = len(chunk)
        k[:c] = np.where(n[:c] > 0, k[:c], chunk)
        y = F(chunk - k[:c])
        n[:c] += F(1)
        d = F(y - mean[:c])
        mean[:c] = F(mean[:c] + d / n[:c])
        m2[:c] = F(m2[:c] + d * (y - mean[:c]))
    q: Quad = (n, k, mean, m2)
    o = min(lanes, 32) // 2
    while o > 0:  # the butterfly: every lane combines with lane ^ o, all at once
        partner = np.arange(lanes) ^ o
        q = _combine(q, tuple(v[partner] for v in q))  # type: ignore[arg-type]
        o //= 2
    total: Quad = tuple(v[0] for v in q)  # type: ignore[assignment]
    for w in range(1, lanes // 32):  # past a warp: lane 0 of each warp, in order, from shared memory
        total = _combine(total, tuple(v[32 * w] for v in q))  # type: ignore[arg-type]
    return total


def _rows() -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(23)
    rows = []
    for c in (1, 7, 768, 4097):
        rows.append((f"normal C={c}", rng.standard_normal(c).astype(F)))
        # cancellation: mean 1e4, spread 1e-1 (the Σx, Σx² pair cancels 1e8 against 1e-2)
        rows.append((f"offset C={c}", (F(1e4) + F(0.1) * rng.standard_normal(c)).astype(F)))
        rows.append((f"ramp C={c}", np.linspace(-3, 5, c, dtype=F)))
    return rows


def test_the_replay_pins_the_emitted_combine() -> None:
    body = WELFORD_HELPERS.split("ktx_welford_combine(V& n", 1)[1].split("}", 1)[0]
    assert tuple(line.strip() for line in body.splitlines()[1:] if line.strip()) == EMITTED_COMBINE


@pytest.mark.parametrize("lanes", [1, 32, 256, 1024])
def test_welford_matches_the_two_pass_sum_of_squares_with_the_same_centre(lanes: int) -> None:
    worst, worst_pair = 0.0, 0.0
    for name, x in _rows():
        c = F(np.sum(x, dtype=F) / F(len(x)))  # the centre, as the kernel divides its float sum
        exact = float(np.sum((x.astype(np.float64) - float(c)) ** 2))  # the original, without rounding
        n, k, mean, m2 = _welford_row(x, lanes)
        assert n == len(x), name
        dev = F(F(k - c) + mean)
        got = float(F(m2 + n * dev * dev))
        err = abs(got - exact) / max(exact, 1e-30)
        worst = max(worst, err)
        assert err < 2e-5, f"{name} lanes={lanes}: {got} vs {exact} (rel {err:.2e})"
        # the naive pair the issue warns about: Σx² - (Σx)²/n in float32
        s1, s2 = np.sum(x, dtype=F), np.sum(x * x, dtype=F)
        pair = float(F(s2 - s1 * s1 / F(len(x))) + F(len(x)) * (float(s1) / len(x) - float(c)) ** 2)
        worst_pair = max(worst_pair, abs(pair - exact) / max(exact, 1e-30))
    # the replay can tell a precise combine from an imprecise one: the Σx, Σx² pair is far off
    assert worst_pair > 1e-2 > worst


# -- on the CPU: the fused thread-per-row kernel against the original -----------------------------

DRIVER = r"""
#include "host_cuda.h"
#include <cstdio>
#include <cmath>
#include <vector>
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
  for (int C : {1, 2, 7, 64, 1000}) for (int pattern = 0; pattern < 3; ++pattern) {
    const int N = 5;
    std::vector<float> a(N * C), b(N * C), o1(N * C, -1.f), o2(N * C, -1.f), v1(N, -1.f), v2(N, -1.f);
    for (int i = 0; i < N * C; ++i) {
      // mixed; offset (mean 1e4, spread 0.1: cancellation); rising
      a[i] = pattern == 0 ? float((i * 37) % 101) * 0.25f - 7.f
           : pattern == 1 ? 1e4f + 0.1f * float((i * 53) % 17 - 8) : 0.01f * i;
      b[i] = float((i * 11) % 7) * 0.5f;
    }
    launch(2, 4, [&] { orig::KERNEL(ARGS1); });
    launch(2, 4, [&] { cand::KERNEL(ARGS2); });
    for (int r = 0; r < N; ++r) {
      ++cases;
      if (!(std::fabs(v1[r] - v2[r]) <= 1e-4f * std::fabs(v1[r]) + 1e-7f)) {
        ++bad; if (bad < 5) std::printf("C=%d pattern=%d row=%d: %g vs %g\n", C, pattern, r, v1[r], v2[r]);
      }
    }
    for (size_t i = 0; i < o1.size(); ++i) {
      ++cases;
      if (!(std::fabs(o1[i] - o2[i]) <= 1e-3f * std::fabs(o1[i]) + 1e-3f)) {
        ++bad; if (bad < 5) std::printf("C=%d pattern=%d i=%zu: %g vs %g\n", C, pattern, i, o1[i], o2[i]);
      }
    }
  }
  std::printf("cases=%d bad=%d\n", cases, bad);
  return bad != 0;
}
"""
ARGS = {
    "local": ("o1.data(), v1.data(), a.data(), N, C", "o2.data(), v2.data(), a.data(), N, C"),
    "stored": (
        "o1.data(), v1.data(), a.data(), b.data(), N, C",
        "o2.data(), v2.data(), a.data(), b.data(), N, C",
    ),
}


@pytest.mark.skipif(GXX is None, reason="no host C++ compiler")
@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.slow
def test_welford_matches_the_two_passes_on_the_host(tmp_path: Path, name: str) -> None:
    assert GXX is not None
    t = apply(KERNELS[name], "online")
    (tmp_path / "orig.cu").write_text(KERNELS[name])
    (tmp_path / "cand.cu").write_text(t.instantiate({"ONLINE": 1}))
    main = DRIVER.replace("KERNEL", name).replace("ARGS1", ARGS[name][0]).replace("ARGS2", ARGS[name][1])
    (tmp_path / "main.cpp").write_text(main)
    shutil.copy(HOST / "host_cuda.h", tmp_path / "host_cuda.h")
    exe = tmp_path / "run"
    built = subprocess.run([GXX, "-std=c++20", "-O1", "-o", str(exe), str(tmp_path / "main.cpp")],
                           capture_output=True, text=True)  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    ran = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and "bad=0" in ran.stdout, ran.stdout[-2000:]


# -- llm.c layernorm v1 and fused_residual v2, staged the way ktx optimize stages them -------------

LADDER_KERNELS = ("layernorm_forward", "fused_residual_forward")
PIPELINES = ("online", "row-owner,online")


def _template(tmp_path: Path, kernel: str, pipeline: str) -> tuple[Any, Any, Path]:
    assert LLMC is not None
    lad = next(lad for lad in LADDER.LADDERS if lad.name == kernel)
    folder = LADDER.stage(lad, lad.naive, LLMC, tmp_path / "stage")
    spec = load_spec(folder)
    return spec, template_for_spec(spec, pipeline), folder


@pytest.mark.skipif(LLMC is None, reason="llm.c is not at ../shared/llmc")
@pytest.mark.parametrize("kernel", LADDER_KERNELS)
@pytest.mark.parametrize("pipeline", PIPELINES)
def test_llmc_variance_pair_is_fused_in_every_ownership_branch(
    tmp_path: Path, kernel: str, pipeline: str
) -> None:
    _, t, _ = _template(tmp_path, kernel, pipeline)
    assert "ONLINE" in [k.name for k in t.knobs], remarks(t)
    note = next(m for m in remarks(t, "rewritten") if "(Welford)" in m)
    assert note.count("in one pass (Welford)") == (1 if pipeline == "online" else 3), note
    assert note.count("one triple reduction") == (0 if pipeline == "online" else 2), note


@pytest.mark.skipif(LLMC is None, reason="llm.c is not at ../shared/llmc")
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not on PATH")
@pytest.mark.slow
def test_llmc_every_welford_config_compiles_for_sm90_without_spills(tmp_path: Path) -> None:
    jobs: list[tuple[str, Any, Path, str]] = []
    for kernel in LADDER_KERNELS:
        for pipeline in PIPELINES:
            spec, t, folder = _template(tmp_path / f"{kernel}_{pipeline.replace(',', '_')}", kernel, pipeline)
            names = [k.name for k in t.knobs]
            tprs = [1] if "THREADS_PER_ROW" not in names else [1, 32, 256, 1024]
            for tpr in tprs:
                config = {"ONLINE": 1, **({"THREADS_PER_ROW": tpr} if len(tprs) > 1 else {})}
                source = candidate_from_template(spec, t, config).source
                jobs.append((f"{kernel} {pipeline} {config}", spec, folder, source))

    results = build_for_sm90(jobs)
    assert len(results) == 10
    assert_built_without_spills(results)
