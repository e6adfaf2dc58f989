"""``ktx tune --passes ...`` through the real harness (templates instantiated by the pass
framework, compiled by nvcc/NVRTC in the compile pool) with a CPU stand-in for the GPU worker
(tests/measure/fake_gpu.py: every candidate takes 1 µs). Checks plumbing, not speed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ktx.cli import main
from ktx.measure.compile import find_nvcc
from ktx.search.recording import Recording
from ktx.search.runlog import read_log

from .conftest import ROOT, SILU

FAKE = f"harness:{ROOT / 'tests' / 'measure' / 'fake_gpu.py'}:handle"


@pytest.mark.slow
@pytest.mark.skipif(find_nvcc() is None, reason="no nvcc here to compile the candidates")
def test_tune_through_the_harness(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path / "cubins"))
    out = tmp_path / "run"
    argv = ["tune", str(SILU), "--backend", FAKE, "--passes", "block-size,split{max=4}"]
    argv += ["--shapes", "tokens=4,d=4096", "--trials", "6", "--seed", "2", "--jobs", "3", "--out", str(out)]
    assert main([*argv, "--quiet", "--holdout", "none"]) == 0, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    (row,) = summary["shapes"]
    assert row["evaluations"] == 6 and not row["failures"], "trials in flight do not pass the budget"
    measured = [e for e in read_log(out / "log.jsonl") if e["event"] == "measure"]
    assert all(e["status"] == "ok" for e in measured)
    # each measurement keeps the request's wall seconds (the stand-in gives no account of its own)
    assert all(e["costs"]["request_s"] > 0 for e in measured)
    source = (out / "best" / "variant_0.cu").read_text() if (out / "best" / "variant_0.cu").exists() else ""
    assert not source or "KTX_" not in source.split("\n", 1)[1], "variants are instantiated, readable CUDA"
    recording = Recording.load(out / "recording.json")
    assert len(recording.measurements) == row["evaluations"] + 1
    assert set(recording.space.names) == {"BLOCK_X", "SPLIT"}
    # a CPU stand-in is never labelled as a real device, nor its numbers as measurements
    assert recording.synthetic and recording.stand_in == FAKE and "STAND-IN" in recording.label
    assert summary["device"] == f"stand-in ({FAKE})"
    assert any("STAND-IN" in note for note in summary["notes"])
    for name in ("summary.json", "summary.md", "recording.json", "log.jsonl"):
        assert "H100" not in (out / name).read_text(), name
