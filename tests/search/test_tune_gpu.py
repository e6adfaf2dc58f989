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


def test_paired_check_of_identical_code_is_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 12: the original against itself, interleaved in one worker, gives an interval that
    holds 1.0 and an estimate within 2% of it, in graph and single mode; and a tune's summary
    quotes the paired check for its shape."""
    from ktx.measure.harness import Harness
    from ktx.measure.types import original_candidate
    from ktx.search.paired import MEASURED, from_pairs
    from ktx.specload import load_spec

    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path / "cache"))
    spec = load_spec(SILU)
    point = spec.find_point("tokens=64,d=4096")
    with Harness(spec) as harness:
        original = original_candidate(spec)
        assert harness.measure(original, point).ok
        check = from_pairs(
            point.name, "graph", {"X": 0}, harness.measure_paired(original, original, point, 5)
        )
    assert check.status == MEASURED, check.reason
    for iv in (check.graph, check.single):
        assert iv is not None and iv.lo <= 1.0 <= iv.hi, iv
        assert abs(iv.estimate - 1.0) < 0.02, iv
    assert not check.confirms(None), "the same kernel is never faster than itself"
    out = tmp_path / "run"
    argv = ["tune", str(SILU), "--passes", "block-size", "--shapes", "tokens=64,d=4096", "--trials", "4"]
    assert main([*argv, "--seed", "1", "--holdout", "none", "--out", str(out), "--quiet"]) == 0
    (row,) = json.loads((out / "summary.json").read_text())["shapes"]
    assert row["paired"]["status"] == MEASURED and len(row["paired"]["pairs"]) >= 5
    lo, hi = row["speedup_interval"]
    assert lo <= row["speedup"] <= hi
    assert row["dispatched"] == (lo > 1.01)
