"""The llm.c ladder (benchmarks/llmc): specs load, the unmodified llm.c files compile for sm_90
through ktx's compile path, the references agree with direct numpy evaluations, and run.py's
plumbing (staging, the optimize and bench calls, the table, partial saves) works with a stand-in
ktx. The llm.c files are read in place from ``shared/llmc`` or ``../shared/llmc`` (skipped when
absent)."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from ktx.measure.compile import CompileRequest, compile_kernel, find_nvcc
from ktx.specload import load_spec

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "llmc"


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


run = _load("llmc_run", BENCH / "run.py")


def _llmc() -> Path:
    for cand in (ROOT / "shared" / "llmc", ROOT.parent / "shared" / "llmc"):
        if (cand / "dev" / "cuda" / "common.h").is_file():
            return cand / "dev" / "cuda"
    pytest.skip("llm.c (shared/llmc) is not here")


VERSIONS = [(lad, v) for lad in run.LADDERS for v in (lad.naive, *lad.hand)]


def test_every_version_has_a_spec() -> None:
    for lad, v in VERSIONS:
        assert (BENCH / lad.name / v / "ktx.toml").is_file(), (lad.name, v)
        assert (BENCH / lad.name / "reference.py").is_file()


@pytest.mark.parametrize(("lad", "version"), VERSIONS, ids=[f"{lad.name}-{v}" for lad, v in VERSIONS])
@pytest.mark.slow
def test_spec_loads_and_kernel_compiles(lad: Any, version: str, tmp_path: Path) -> None:
    cuda = _llmc()
    folder = run.stage(lad, version, cuda, tmp_path)
    spec = load_spec(folder)
    ladder = spec.shape_set("ladder").points
    assert len({run.base_shape(p.name) for p in ladder}) == 3  # a smaller, llm.c's, a larger shape
    # the staged file is llm.c's, byte for byte
    assert (folder / f"{lad.name}.cu").read_bytes() == (cuda / f"{lad.name}.cu").read_bytes()
    if find_nvcc() is None:
        pytest.skip("no nvcc")
    req = CompileRequest(spec.source_text(), spec.kernel, tuple(spec.flags), "90", (str(folder),), "nvcc")
    result = compile_kernel(req)
    assert result.ok, result.log[-2000:]
    assert spec.kernel in result.lowered_name or result.lowered_name


def _module(kernel: str) -> ModuleType:
    return _load(f"llmc_ref_{kernel}", BENCH / kernel / "reference.py")


def test_references_against_direct_numpy() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=64)
    gelu = _module("gelu_forward").gelu_forward({"inp": x}, {"B": 1, "T": 8, "C": 8})["out"]
    want = np.array([0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3))) for v in x])
    np.testing.assert_allclose(gelu, want, rtol=1e-12)

    a, b = rng.normal(size=16), rng.normal(size=16)
    np.testing.assert_allclose(
        _module("residual_forward").residual_forward({"inp1": a, "inp2": b}, {})["out"], a + b
    )

    B, T, C, V = 2, 3, 4, 5
    ids = rng.integers(0, V, (B, T)).astype(np.float64)
    wte, wpe = rng.normal(size=(V, C)), rng.normal(size=(T, C))
    enc = _module("encoder_forward").encoder_forward(
        {"inp": ids, "wte": wte, "wpe": wpe}, {"B": B, "T": T, "C": C}
    )
    for bi in range(B):
        for t in range(T):
            np.testing.assert_allclose(enc["out"][bi, t], wte[int(ids[bi, t])] + wpe[t])

    rows = rng.normal(size=(3, 7))
    w, bias = rng.uniform(0.5, 1.5, 7), rng.normal(size=7)
    ln = _module("layernorm_forward").layernorm_forward({"inp": rows, "weight": w, "bias": bias}, {"C": 7})
    for r in range(3):
        m = sum(rows[r]) / 7
        var = sum((v - m) ** 2 for v in rows[r]) / 7
        s = 1 / math.sqrt(var + 1e-5)
        assert ln["mean"][r] == pytest.approx(m) and ln["rstd"][r] == pytest.approx(s)
        np.testing.assert_allclose(ln["out"][r], (rows[r] - m) * s * w + bias)

    sm = _module("softmax_forward").softmax_forward({"inp": rows}, {"C": 7})["out"]
    for r in range(3):
        e = [math.exp(v - max(rows[r])) for v in rows[r]]
        np.testing.assert_allclose(sm[r], [v / sum(e) for v in e])

    probs = rng.uniform(0.01, 1, (2, 3, 5))
    targets = rng.integers(0, 5, (2, 3)).astype(np.float64)
    ce = _module("crossentropy_forward").crossentropy_forward({"probs": probs, "targets": targets}, {"V": 5})
    want_ce = [-math.log(probs[i, j, int(targets[i, j])]) for i in range(2) for j in range(3)]
    np.testing.assert_allclose(ce["losses"], want_ce)

    fused = _module("fused_residual_forward")
    # bf16 rounding: 1 + 2^-9 is a tie between 1 and 1 + 2^-7 (ties to even: 1); 1 + 3 * 2^-9 rounds up
    np.testing.assert_array_equal(
        fused.round_bf16(np.array([1 + 2**-9, 1 + 3 * 2**-9, -2.0])), [1.0, 1 + 2**-7, -2.0]
    )
    i1, i2 = rng.normal(size=(2, 7)), rng.normal(size=(2, 7))
    out = fused.fused_residual_forward({"inp1": i1, "inp2": i2, "weight": w, "bias": bias}, {"C": 7})
    np.testing.assert_allclose(out["residual"], i1 + i2)
    stored = fused.round_bf16(i1 + i2)
    m = (i1 + i2).mean(axis=1)
    s = 1 / np.sqrt(((stored - m[:, None]) ** 2).mean(axis=1) + 1e-5)
    np.testing.assert_allclose(out["normed"], (stored - m[:, None]) * s[:, None] * w + bias)


FAKE_KTX = """
import json, sys
from pathlib import Path
cmd, args = sys.argv[1], sys.argv[2:]
folder = Path(args[0])
def opt(name):
    return args[args.index(name) + 1]
if "crossentropy" in str(folder):
    sys.exit(3)  # a kernel that dies writes nothing: the others must still be reported
if cmd == "optimize":
    out = Path(opt("--out")); out.mkdir(parents=True, exist_ok=True)
    shapes = [{"shape": "B=1,T=1024,C=768", "metric": "graph", "original_us": 10.0, "effective_us": 4.0,
               "speedup": 2.5, "wins": True, "best_config": {"VEC": 8}, "sol_fraction": 0.5}]
    (out / "optimize.json").write_text(json.dumps({"state": "done", "pipeline": "vectorize",
        "device": {"name": "Fake H100"}, "shapes": shapes, "rounds": 2, "stop_reason": "x"}))
elif cmd == "bench":
    bs = 256 if "v2" in folder.name else 128
    ms = [{"shape": f"B=1,T=1024,C=768,bs={b}", "status": "ok", "single": {"median_us": 9.0},
           "graph": {"median_us": 2.0 if b == bs else 3.0}} for b in (128, 256)]
    Path(opt("--json")).write_text(json.dumps({"device": "Fake H100", "measurements": ms}))
"""


@pytest.mark.parametrize("gpus", [1, 2])
def test_run_plumbing_with_a_stand_in_ktx(tmp_path: Path, gpus: int) -> None:
    cuda = _llmc()
    fake = tmp_path / "fake_ktx.py"
    fake.write_text(FAKE_KTX)
    out = tmp_path / "out"
    code = run.main([
        "--llmc", str(cuda.parent.parent),
        "--kernels", "gelu_forward", "crossentropy_forward", "encoder_forward",
        "--budget", "60", "--out", str(out), "--work", str(tmp_path / "work"),
        "--ktx", f"{sys.executable} {fake}", "--gpus", str(gpus),
    ])  # fmt: skip
    assert code == 0
    report = json.loads((out / "results.json").read_text())
    assert report["device"] == "Fake H100"
    by = {k["kernel"]: k for k in report["kernels"]}
    assert list(by) == ["gelu_forward", "encoder_forward", "crossentropy_forward"]  # LADDERS order
    gelu = by["gelu_forward"]["rows"][0]
    # ktx 4.0 graph µs against v2's best graph time: 2.0 at bs=256
    assert (gelu["naive_us"], gelu["ktx_us"], gelu["hand_us"], gelu["hand_block"]) == (10.0, 4.0, 2.0, 256)
    assert gelu["ktx_over_hand"] == pytest.approx(2.0)
    enc = by["encoder_forward"]["rows"][0]
    assert enc["hand_version"] in ("v2", "v3") and enc["hand_us"] == 2.0
    assert by["crossentropy_forward"]["rows"] == []
    assert any("wrote no optimize.json" in n for n in by["crossentropy_forward"]["notes"])
    md = (out / "results.md").read_text()
    assert (
        "| gelu_forward (v1) | B=1,T=1024,C=768 | graph | 10.00 | 4.00 | vectorize | 2.00 (v2, 256) | 2.00x |"
        in md
    )
    assert report["geomean_ktx_over_hand"] == pytest.approx(2.0)
    assert (out / "llmc-runs.tar.gz").is_file()


def test_hand_from_reuses_an_earlier_runs_hand_times_by_shape_and_metric(tmp_path: Path) -> None:
    cuda = _llmc()
    fake = tmp_path / "fake_ktx.py"
    fake.write_text(FAKE_KTX + "\nif cmd == 'bench': sys.exit('benched although --hand-from was given')\n")
    earlier = tmp_path / "earlier.json"
    row = {"kernel": "gelu_forward", "shape": "B=1,T=1024,C=768", "metric": "graph", "hand_us": 1.6,
           "hand_version": "v2", "hand_block": 512, "hand_failures": []}  # fmt: skip
    other = dict(row, shape="B=8,T=1024,C=768")
    kernels = [{"kernel": "gelu_forward", "rows": [row, other]}]
    earlier.write_text(json.dumps({"device": "Fake H100", "date": "2026-11-24", "kernels": kernels}))
    out = tmp_path / "out"
    code = run.main([
        "--llmc", str(cuda.parent.parent), "--kernels", "gelu_forward", "--budget", "30",
        "--out", str(out), "--work", str(tmp_path / "work"), "--ktx", f"{sys.executable} {fake}",
        "--hand-from", str(earlier),
    ])  # fmt: skip
    assert code == 0
    report = json.loads((out / "results.json").read_text())
    gelu = report["kernels"][0]
    (r,) = gelu["rows"]
    assert (r["hand_us"], r["hand_version"], r["hand_block"]) == (1.6, "v2", 512)
    assert r["ktx_over_hand"] == pytest.approx(4.0 / 1.6)
    assert any("not re-benched" in n and "Fake H100" in n for n in gelu["notes"])
    assert report["hand_from"] == str(earlier)


def test_metric_time_follows_ktx_rule() -> None:
    m = {"status": "ok", "single": {"median_us": 30.0}, "graph": {"median_us": 25.0}}
    assert run.metric_time(m, "single") == 30.0 and run.metric_time(m, "graph") == 25.0
    assert run.metric_time(m, None) == 30.0  # at or above 20 µs: one launch
    assert (
        run.metric_time({"status": "ok", "single": {"median_us": 5.0}, "graph": {"median_us": 3.0}}, None)
        == 3.0
    )
    assert run.metric_time({"status": "wrong_result"}, "graph") is None


def test_nvcc_compiles_a_kernel_that_shares_its_name_with_a_host_launcher() -> None:
    """llm.c names a kernel and its launcher alike (fused_residual_forward2): taking the address
    to instantiate it would be ambiguous, and a plain kernel needs no instantiation."""
    if find_nvcc() is None:
        pytest.skip("no nvcc")
    source = (
        "__global__ void twice(float* out, int n) {\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) out[i] *= 2.0f;\n"
        "}\n"
        "void twice(float* out, int n, int block) { twice<<<(n + block - 1) / block, block>>>(out, n); }\n"
    )
    result = compile_kernel(CompileRequest(source, "twice", (), "90", (), "nvcc"))
    assert result.ok, result.log
    assert result.lowered_name == "_Z5twicePfi"


def test_lanes_balance_the_weights_and_keep_softmax_last() -> None:
    two = run.lanes(run.LADDERS, 2)
    assert sorted(lad.name for lane in two for lad in lane) == sorted(lad.name for lad in run.LADDERS)
    weights = [sum(lad.weight for lad in lane) for lane in two]
    assert max(weights) - min(weights) <= max(lad.weight for lad in run.LADDERS)
    for lane in two:
        names = [lad.name for lad in lane]
        assert "softmax_forward" not in names or names[-1] == "softmax_forward"
    assert run.lanes(run.LADDERS, 1) == [list(run.LADDERS)]
    assert len(run.lanes(run.LADDERS[:2], 4)) == 2


def test_lane_device_takes_the_callers_visible_devices() -> None:
    assert run.lane_device(0, "2,3") == "2"
    assert run.lane_device(1, "2, 3") == "3"
    assert run.lane_device(3, None) == "3"
    with pytest.raises(SystemExit, match="names only"):
        run.lane_device(2, "2,3")


@pytest.mark.gpu
def test_every_version_runs_and_matches_the_reference_on_the_gpu(tmp_path: Path) -> None:
    """Each staged version at its ``quick`` shape (llm.c's launch, block 256 for the hand ones)
    against the numpy reference, through ``ktx bench``: the specs' launches and references agree
    with the kernels before the ladder spends its budget on them."""
    from ktx.cli import main

    cuda = _llmc()
    for lad, version in VERSIONS:
        folder = run.stage(lad, version, cuda, tmp_path / "stage")
        out = tmp_path / f"{lad.name}-{version}.json"
        code = main(["bench", str(folder), "--shapes", "quick", "--reference", "python", "--json", str(out)])
        data = json.loads(out.read_text())
        ms = data["measurements"]
        bad = [(m["shape"], m["status"], m["message"][:300]) for m in ms if m["status"] != "ok"]
        assert code == 0 and not bad, (lad.name, version, bad)


PIPELINES = {
    "gelu_forward": "vectorize,coarsen,block-size",
    "residual_forward": "vectorize,block-size",
    "encoder_forward": "block-size,unroll",
    "layernorm_forward": "vectorize,block-size,unroll,rows-per-block",
    "fused_residual_forward": "block-size,unroll,rows-per-block",
    "crossentropy_forward": "block-size,coarsen",
    "softmax_forward": "block-size,unroll,fast-math,cache-hints",
}


@pytest.mark.parametrize("lad", run.LADDERS, ids=[lad.name for lad in run.LADDERS])
@pytest.mark.slow
def test_rewritten_naive_kernels_compile_in_the_staged_folder(lad: Any, tmp_path: Path) -> None:
    """ktx's rewrites of the unmodified llm.c files (largest knob values) compile for sm_90 with
    nvcc, ``common.h`` and the cuBLAS stubs found through the staged folder: what every candidate
    of the GPU run goes through."""
    from ktx.pipeline import candidate_from_template, template_for_spec

    cuda = _llmc()
    if find_nvcc() is None:
        pytest.skip("no nvcc")
    folder = run.stage(lad, lad.naive, cuda, tmp_path)
    spec = load_spec(folder)
    template = template_for_spec(spec, PIPELINES[lad.name])
    config = {k.name: max(k.values) for k in template.knobs}
    assert config, "the pipeline exposes no knob on the naive kernel"
    if "ROWS" in config:
        config["BLOCK_X"] = 64  # ROWS * threads <= 1024
    cand = candidate_from_template(spec, template, config)
    req = CompileRequest(cand.source, spec.kernel, tuple(cand.flags), "90", (str(folder),), "nvcc")
    result = compile_kernel(req)
    assert result.ok, (config, result.log[-2000:])


ROW_KERNELS = ["encoder_forward", "layernorm_forward", "fused_residual_forward", "softmax_forward"]


@pytest.mark.parametrize("name", ROW_KERNELS)
@pytest.mark.slow
def test_row_owner_then_vectorize_compiles_on_the_thread_per_row_kernels(name: str, tmp_path: Path) -> None:
    """The combination the rules planner tries first on llm.c's thread-per-row kernels (a warp or
    a block per row, then vector width) compiles for sm_90 at 32 and 256 threads per row."""
    from ktx.pipeline import candidate_from_template, template_for_spec
    from ktx.registry import default_registry

    if "row-owner" not in default_registry().names():
        pytest.skip("no row-owner pass in this build")
    cuda = _llmc()
    if find_nvcc() is None:
        pytest.skip("no nvcc")
    lad = next(lad for lad in run.LADDERS if lad.name == name)
    folder = run.stage(lad, lad.naive, cuda, tmp_path)
    spec = load_spec(folder)
    template = template_for_spec(spec, "row-owner,vectorize")
    assert "THREADS_PER_ROW" in {k.name for k in template.knobs}
    for threads in (32, 256):
        config = {k.name: threads if k.name == "THREADS_PER_ROW" else max(k.values) for k in template.knobs}
        if threads != 32:  # row-owner's ROW_BLOCK is the block of a warp per row only
            config["ROW_BLOCK"] = 0
        cand = candidate_from_template(spec, template, config)
        req = CompileRequest(cand.source, spec.kernel, tuple(cand.flags), "90", (str(folder),), "nvcc")
        result = compile_kernel(req)
        assert result.ok, (config, result.log[-2000:])
