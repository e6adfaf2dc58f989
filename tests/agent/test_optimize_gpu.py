"""On a GPU: ``ktx optimize`` (rules planner) end to end on the CuPy backend, two short rounds.

The loop's logic is covered on modelled times; this checks that on real measurements the analysis
reads a device, the rounds are logged, and the final result is verified and no slower than the
original on any tuned shape (the dispatch table falls back to it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ktx.agent.loop import load_records
from ktx.cli import main

pytestmark = pytest.mark.gpu

SILU = Path(__file__).resolve().parents[2] / "kernels" / "silu_and_mul"


def test_optimize_on_the_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "run"
    argv = ["optimize", str(SILU), "--rounds", "2", "--trials-per-round", "6", "--ncu", "off"]
    code = main([*argv, "--shapes", "tokens=256,d=11008", "--seed", "0", "--out", str(out)])
    assert code == 0
    records = load_records(out)
    assert 1 <= len(records) <= 2
    first = records[0]
    assert first["analysis"]["device"], "the analysis names the device it measured on"
    state = json.loads((out / "optimize.json").read_text())
    assert state["state"] == "done" and state["device"], "a finished run names its device"
    statuses = {"improved", "no-gain", "template-failed", "repeat", "stopped", "search-failed"}
    assert all(r["status"] in statuses for r in records)
    (shape,) = state["shapes"]
    assert shape["original_us"] > 0
    if shape["wins"]:
        assert shape["best_us"] < shape["original_us"] and shape["best_config"]
        assert state["best_round"] >= 1 and (out / "final" / "template.cu").is_file()
    else:
        assert shape["effective_us"] == shape["original_us"], "no win: the original is kept"
    assert (out / "final").is_dir()
