"""online's ONLINE=2 for a mean/variance pair: the count, Σx and Σx² of what the variance loop reads,
summed in double in the first loop, so that ``vectorize`` packs the fused loop (Welford's running
shift, ONLINE=1, is a value carried from one iteration to the next, which vectorize refuses).

What is checked: the knob offers 2 only where a mean/variance pair is fused; the default is the
original and ONLINE=1 still Welford; a numpy replay of the emitted sums and of
``ktx_sum_pair_reduce`` (butterfly, then shared memory) against the two-pass sum of squares with
the same centre, on random rows and rows whose mean is 1e4 times their spread, and the same replay
in float32 (llm.c v4's Σx, Σx² pair) losing the digits the double keeps; both fused
thread-per-row kernels run on the host beside the original; llm.c layernorm v1 and
fused_residual v2 after ``row-owner,online,vectorize`` pack the fused loop in every ownership
branch, and build for sm_90 with 16-byte loads and no spills.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ktx.passes.online import PAIR_HELPERS
from passtest import apply, assert_built_without_spills, build_for_sm90, remarks
from test_online_welford import ARGS, CONFIG_LINE, DRIVER, GXX, HOST, KERNELS, LADDER_KERNELS, _template
from test_row_owner import LLMC

from ktx.measure.compile import find_nvcc
from ktx.pipeline import candidate_from_template

SOFTMAX = """\
__global__ void softmax_rows(float* out, const float* inp, int N, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        const float* x = inp + i * C;
        float maxval = -INFINITY;
        for (int j = 0; j < C; j++) {
            maxval = fmaxf(maxval, x[j]);
        }
        float sum = 0.0f;
        for (int j = 0; j < C; j++) {
            out[i * C + j] = expf(x[j] - maxval);
            sum += out[i * C + j];
        }
        for (int j = 0; j < C; j++) {
            out[i * C + j] /= sum;
        }
    }
}
"""


def test_two_is_offered_only_for_a_mean_variance_pair() -> None:
    for src in KERNELS.values():
        knob = next(k for k in apply(src, "online").knobs if k.name == "ONLINE")
        assert tuple(knob.values) == (0, 1, 2)
    soft = next(k for k in apply(SOFTMAX, "online").knobs if k.name == "ONLINE")
    assert tuple(soft.values) == (0, 1)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_two_is_the_sum_pair_one_stays_welford_zero_the_original(name: str) -> None:
    t = apply(KERNELS[name], "online")
    assert CONFIG_LINE.sub("", t.instantiate({"ONLINE": 0}), count=1) == KERNELS[name]
    welford = t.instantiate({"ONLINE": 1})
    assert "ktx_v_m2" in welford and "ktx_v_s2" not in welford
    pair = t.instantiate({"ONLINE": 2})
    assert pair.count("for (") + pair.count("for(") == KERNELS[name].count("for") - 1
    assert "ktx_v_m2" not in pair and "ktx_v_k" not in pair  # no running shift
    # every state of the fused loop is a += reduction (what vectorize can reorder)
    assert re.findall(r"ktx_v_\w+ [-+*/]=", pair) == ["ktx_v_n +=", "ktx_v_s1 +=", "ktx_v_s2 +="]
    assert not re.findall(r"(?m)^\s*ktx_v_\w+ = ", pair)  # no plain reassignment (Welford's k = ...)
    assert "v += (float)(ktx_v_s2 - (double)(" in pair


# -- the emitted arithmetic, replayed in numpy -----------------------------------------------------


def _pair_row(x: np.ndarray, lanes: int, dtype: Any) -> tuple[Any, Any, Any]:
    """(n, Σx, Σx²) of a row as the fused loop and ``ktx_sum_pair_reduce<lanes>`` leave them in
    lane 0, in ``dtype`` (the emitted double; float32 for llm.c v4's form)."""
    D = dtype
    n, s1, s2 = (np.zeros(lanes, D) for _ in range(3))
    xs = x.astype(D)
    for start in range(0, len(x), lanes):  # iteration i: lane l reads x[l + i * lanes]
        chunk = xs[start : start + lanes]
        c = len(chunk)
        n[:c] += D(1)
        s1[:c] = (s1[:c] + chunk).astype(D)
        s2[:c] = (s2[:c] + chunk * chunk).astype(D)
    o = min(lanes, 32) // 2
    while o > 0:  # the butterfly: every lane adds lane ^ o's sums, all at once
        partner = np.arange(lanes) ^ o
        n, s1, s2 = (v + v[partner] for v in (n, s1, s2))
        o //= 2
    tn, t1, t2 = n[0], s1[0], s2[0]
    for w in range(1, lanes // 32):  # past a warp: lane 0 of each warp, in order
        tn, t1, t2 = D(tn + n[32 * w]), D(t1 + s1[32 * w]), D(t2 + s2[32 * w])
    return tn, t1, t2


def _variance(x: np.ndarray, lanes: int, dtype: Any) -> float:
    """v as the emitted epilogue computes it: the centre is the float mean the first loop made."""
    D = dtype
    centre = np.float32(np.sum(x, dtype=np.float32) / np.float32(len(x)))
    n, s1, s2 = _pair_row(x, lanes, D)
    c = D(centre)
    return float(np.float32(s2 - c * (D(2) * s1 - n * c)))


def _reference(x: np.ndarray) -> float:
    """The two-pass sum of squares about the same float centre, in exact-enough float64."""
    centre = np.float32(np.sum(x, dtype=np.float32) / np.float32(len(x)))
    return float(np.sum((x.astype(np.float64) - float(centre)) ** 2))


def _rows() -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(29)
    rows = []
    for c in (1, 7, 768, 4097):
        rows.append((f"normal C={c}", rng.standard_normal(c).astype(np.float32)))
        rows.append((f"offset C={c}", (1e4 + 0.1 * rng.standard_normal(c)).astype(np.float32)))
        rows.append((f"ramp C={c}", np.linspace(-3, 5, c, dtype=np.float32)))
    return rows


def test_the_replay_pins_the_emitted_reduce() -> None:
    shuffles = [f"{v} += __shfl_xor_sync(mask, {v}, o);" for v in ("n", "s1", "s2")]
    shared = ["n += pn[w];", "s1 += p1[w];", "s2 += p2[w];"]
    for line in (*shuffles, *shared):
        assert line in PAIR_HELPERS


@pytest.mark.parametrize("lanes", [1, 32, 256, 1024])
def test_the_double_pair_matches_the_two_pass_sum_and_a_float_pair_would_not(lanes: int) -> None:
    worst_float_offset = 0.0
    for label, x in _rows():
        want = _reference(x)
        got = _variance(x, lanes, np.float64)
        if len(x) == 1:  # v is 0 up to the rounding of x^2 - c (2x - c)
            assert abs(got - want) <= 2.0**-50 * float(x[0]) ** 2, (label, got, want)
            continue
        # the bound docs/passes.md states: v's own float rounding, plus the cancellation of
        # Σx² against c (2 Σx - n c): C 2^-53 (mean^2 / variance) at worst
        x64 = x.astype(np.float64)
        ratio = float(np.mean(x64) ** 2 / np.var(x64))
        bound = 4 * 2.0**-24 + len(x) * 2.0**-53 * ratio
        err = abs(got - want) / want
        assert err <= bound, (label, lanes, got, want, bound)
        if label.startswith("offset") and len(x) > 7:
            assert err < 1e-4, (label, err)  # mean 1e5 spreads: still inside an fp32 spec's 1e-4
            worst_float_offset = max(worst_float_offset, abs(_variance(x, lanes, np.float32) - want) / want)
    # the guard is needed: the float Σx, Σx² pair (llm.c v4) is off by far more than any fp32 spec allows
    assert worst_float_offset > 1e-2, worst_float_offset


@pytest.mark.skipif(GXX is None, reason="no host C++ compiler")
@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.slow
def test_the_sum_pair_matches_the_two_passes_on_the_host(tmp_path: Path, name: str) -> None:
    assert GXX is not None
    t = apply(KERNELS[name], "online")
    (tmp_path / "orig.cu").write_text(KERNELS[name])
    (tmp_path / "cand.cu").write_text(t.instantiate({"ONLINE": 2}))
    main = DRIVER.replace("KERNEL", name).replace("ARGS1", ARGS[name][0]).replace("ARGS2", ARGS[name][1])
    (tmp_path / "main.cpp").write_text(main)
    shutil.copy(HOST / "host_cuda.h", tmp_path / "host_cuda.h")
    exe = tmp_path / "run"
    built = subprocess.run([GXX, "-std=c++20", "-O1", "-o", str(exe), str(tmp_path / "main.cpp")],
                           capture_output=True, text=True)  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    ran = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and "bad=0" in ran.stdout, ran.stdout[-2000:]


# -- llm.c layernorm v1 and fused_residual v2 under row-owner,online,vectorize ---------------------

PACKED = "row-owner,online,vectorize"


def _pair_branch(source: str) -> str:
    """The ``#if KTX_ONLINE == 2`` branches of a template, joined (up to each ``#elif KTX_ONLINE``)."""
    return "\n".join(re.findall(r"(?s)#if KTX_ONLINE == 2\n(.*?)\n#elif KTX_ONLINE\n", source))


@pytest.mark.skipif(LLMC is None, reason="llm.c is not at ../shared/llmc")
@pytest.mark.parametrize("kernel", LADDER_KERNELS)
def test_llmc_vectorize_packs_the_fused_loop_in_every_ownership_branch(tmp_path: Path, kernel: str) -> None:
    _, t, _ = _template(tmp_path, kernel, PACKED)
    assert not [m for m in remarks(t, "skipped") if "ktx_v_s" in m or "ktx_v_n" in m], remarks(t, "skipped")
    branches = re.findall(r"(?s)#if KTX_ONLINE == 2\n(.*?)\n#elif KTX_ONLINE\n", t.source)
    assert len(branches) == 3  # a block per row, a warp per row, a thread per row
    for b in branches:
        packed = re.search(r"(?s)ktx::load<KTX_VEC_\w+>\(.*?ktx_v_s2 \+= ", b)
        assert packed is not None, b[:3000]


@pytest.mark.skipif(LLMC is None, reason="llm.c is not at ../shared/llmc")
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not on PATH")
@pytest.mark.slow
def test_llmc_the_packed_pair_builds_for_sm90_without_spills_with_16_byte_loads(tmp_path: Path) -> None:
    jobs: list[tuple[str, Any, Path, str]] = []
    ptx: dict[str, tuple[Any, Path, str]] = {}
    for kernel in LADDER_KERNELS:
        spec, t, folder = _template(tmp_path / kernel, kernel, PACKED)
        vec = {k.name: max(k.values) for k in t.knobs if k.name.startswith("VEC_")}
        for tpr in (1, 32, 256):
            config = {"ONLINE": 2, "THREADS_PER_ROW": tpr, **vec}
            source = candidate_from_template(spec, t, config).source
            jobs.append((f"{kernel} THREADS_PER_ROW={tpr}", spec, folder, source))
            if tpr == 32:
                ptx[kernel] = (spec, folder, source)
    assert_built_without_spills(build_for_sm90(jobs))
    nvcc = find_nvcc()
    assert nvcc is not None
    for kernel, (spec, folder, source) in ptx.items():
        (tmp_path / f"{kernel}.cu").write_text(source)
        out = tmp_path / f"{kernel}.ptx"
        flags = [f for f in spec.flags if f != "-lineinfo"]
        made = subprocess.run([nvcc, "-ptx", "-arch=sm_90", *flags, "-I", str(folder), "-o", str(out),
                               str(tmp_path / f"{kernel}.cu")], capture_output=True, text=True)  # fmt: skip
        assert made.returncode == 0, made.stderr[-2000:]
        text = out.read_text()
        # 16-byte loads: float4 (ld.global.v4.f32 / .v4.u32) or 8 bf16 (ld.global.v4.u32 / .v2.u64)
        wide = re.findall(r"ld\.global(?:\.\w+)*\.(?:v4\.(?:f32|u32|b32)|v2\.(?:u64|b64|f64))", text)
        assert wide, f"{kernel}: no 16-byte global load in the PTX"


@pytest.mark.skipif(LLMC is None, reason="llm.c is not at ../shared/llmc")
@pytest.mark.skipif(GXX is None, reason="no host C++ compiler")
@pytest.mark.slow
def test_llmc_layernorm_v1_sum_pair_matches_on_the_host_with_large_mean_rows(tmp_path: Path) -> None:
    """llm.c layernorm v1 at ONLINE=2, one thread per row, run on the host beside the original
    (test_online_llmc_host's driver: B=1 T=1024 C=768 and odd variants, normal rows and rows of
    mean 1e4, spread 0.1; mean, rstd and out within 1e-4 relative)."""
    import test_online_llmc_host as H

    assert LLMC is not None and GXX is not None
    lad = next(lad for lad in H.LADDER.LADDERS if lad.name == "layernorm_forward")
    spec = H.load_spec(H.LADDER.stage(lad, lad.naive, LLMC, tmp_path / "stage"))
    t = H.template_for_spec(spec, "online")
    cand = candidate_from_template(spec, t, {"ONLINE": 2})
    original = candidate_from_template(spec, t, {"ONLINE": 0})
    assert "ktx_v_s2" in cand.source and "ktx_v_s2" not in original.source
    (tmp_path / "orig.cu").write_text(H._kernel_text(original.source, H.KERNEL))
    (tmp_path / "cand.cu").write_text(H._kernel_text(cand.source, H.KERNEL))
    (tmp_path / "main.cpp").write_text(H.DRIVER.replace("KERNEL", H.KERNEL))
    shutil.copy(HOST / "host_cuda.h", tmp_path / "host_cuda.h")
    exe = tmp_path / "run"
    built = subprocess.run([GXX, "-std=c++20", "-O1", "-o", str(exe), str(tmp_path / "main.cpp")],
                           capture_output=True, text=True)  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    ran = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0 and "bad=0" in ran.stdout, ran.stdout[-2000:]
