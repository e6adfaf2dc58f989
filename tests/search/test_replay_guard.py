"""Replay answers only the questions it recorded: the same pipeline, the same instantiated source."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from ktx.ir.errors import KtxError

from ktx.cli import main
from ktx.measure.replay import ReplayBackend, save_results
from ktx.measure.types import Candidate, Measurement, Status, Timing
from ktx.search.recording import Recording
from ktx.spec import ShapePoint

from .conftest import SILU


def test_a_recording_of_another_pipeline_is_refused(
    tmp_path: Path, recording_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads(recording_path.read_text())
    data["pipeline"] = "block-size"
    rec = tmp_path / "rec.json"
    rec.write_text(json.dumps(data))
    assert Recording.load(rec).pipeline == "block-size"
    argv = ["tune", str(SILU), "--backend", f"replay:{rec}", "--passes", "block-size,split"]
    code = main([*argv, "--shapes", "tokens=1,d=4096", "--out", str(tmp_path / "run"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "'block-size'" in err and "block-size,split" in err


CAND = Candidate("__global__ void k() {}", "k", ("1",), ("32",), config={"B": 32})
POINT = ShapePoint((("n", 1),))


def test_replay_refuses_another_source_for_the_same_config() -> None:
    m = Measurement("k", POINT.name, {"B": 32}, Status.OK, graph=Timing.of([1.0]), digest=CAND.digest)
    backend = ReplayBackend([m])
    assert backend.measure(CAND, POINT) == m
    other = replace(CAND, source="__global__ void k() { /* rewritten */ }")
    with pytest.raises(KtxError, match="another kernel"):
        backend.measure(other, POINT)
    # a recording without digests (older, or synthetic) still answers by config
    assert ReplayBackend([replace(m, digest="")]).measure(other, POINT).ok


def test_bench_json_replays(tmp_path: Path, recording_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``ktx bench --json`` output (save_results: no format tag, several kernels) is a recording."""
    synthetic = Recording.load(recording_path)
    originals = [m for m in synthetic.measurements if not m.config]
    other = [replace(m, kernel="rmsnorm", graph=Timing.of([99.0])) for m in originals]
    bench = tmp_path / "bench.json"
    save_results(bench, [*other, *originals], {"kind": "bench", "device": "NVIDIA H200"})
    rec = Recording.load(bench)
    assert rec.kernels == ("rmsnorm", "silu_and_mul") and not rec.synthetic
    assert rec.only("silu_and_mul").get(originals[0].shape, {}) == originals[0]
    out = tmp_path / "run"
    argv = ["tune", str(SILU), "--backend", f"replay:{bench}", "--passes", "block-size", "--trials", "2"]
    assert (
        main([*argv, "--shapes", originals[0].shape, "--out", str(out), "--quiet", "--holdout", "none"]) == 0
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["device"] == "NVIDIA H200"
    assert summary["shapes"][0]["original_us"] == pytest.approx(originals[0].graph_us)
