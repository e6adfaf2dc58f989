"""On a GPU: ``ktx tune`` end to end on the CuPy backend, one small shape and a few trials.

The replay tests cover the search's logic; this one checks that the real harness answers it: every
trial is compiled, verified against the original and timed, the best config is faster or the table
keeps the original, and the dispatch table and best source are written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ktx.cli import main
from ktx.search.runlog import read_log

pytestmark = pytest.mark.gpu

SILU = Path(__file__).resolve().parents[2] / "kernels" / "silu_and_mul"


def test_tune_on_the_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "run"
    argv = ["tune", str(SILU), "--passes", "block-size,unroll", "--shapes", "tokens=64,d=4096"]
    code = main([*argv, "--trials", "8", "--seed", "1", "--holdout", "none", "--out", str(out), "--quiet"])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert "SYNTHETIC" not in json.dumps(summary) and "replay" not in summary.get("backend", "")
    (row,) = summary["shapes"]
    assert row["original_us"] > 0 and row["best_us"] > 0
    assert row["evaluations"] >= 1
    measured = [e for e in read_log(out / "log.jsonl") if e["event"] == "measure" and e.get("config")]
    assert measured, "no candidate was measured"
    ok = [e for e in measured if e["status"] == "ok"]
    assert ok, f"no candidate verified: {[e['status'] for e in measured]}"
    assert row["best_us"] <= row["original_us"] * 1.5, "best is one of the measured, not an outlier"
    assert (out / "dispatch.h").is_file() and (out / "dispatch.json").is_file()
