"""``--time-limit`` bounds the whole run (issue 12): baselines, search, final check, held-out
check and outputs, and the summary and dispatch table are written even when the limit cuts the
search or the baselines short. Stand-ins for GPU time: the replay backend's throttle (seconds
per measurement), on a virtual clock that only the throttle moves (``virtual_clock``: the
outcome does not depend on how loaded the machine is, so the limits are kept exactly), and the
stand-in worker's ``KTX_TEST_MEASURE_S`` (a slow test on the real clock, compiles included)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ktx.cli import main
from ktx.measure.compile import find_nvcc
from ktx.search.final import MAX_RESERVE, TIMING_SHARE, check_cost, reserve
from ktx.search.runlog import read_log

from .conftest import ROOT, SILU, TUNED_ARG, VirtualClock

STAND_IN = f"harness:{ROOT / 'tests' / 'search' / 'paired_gpu.py'}:handle"


def _timed(argv: list[str]) -> float:
    start = time.monotonic()
    assert main(argv) == 0
    return time.monotonic() - start


def _outputs(out: Path) -> dict[str, object]:
    for name in ("summary.json", "summary.md", "dispatch.json", "dispatch.h"):
        assert (out / name).is_file(), f"{name} is always written"
    data: dict[str, object] = json.loads((out / "summary.json").read_text())
    return data


def test_reserve_covers_the_final_check_and_is_capped() -> None:
    costs = {"a": 0.1, "b": 0.3}
    assert check_cost(0.3, 5) == pytest.approx(10 * TIMING_SHARE * 0.3 + 0.2)
    kept = reserve(costs, holdout=2, time_limit=100.0)
    assert kept == pytest.approx(check_cost(0.1) + check_cost(0.3) + 2 * 2 * 0.3 + 1.0)
    assert reserve(costs, holdout=2, time_limit=4.0) == pytest.approx(MAX_RESERVE * 4.0)


def test_a_short_limit_ends_in_time_and_writes_everything(
    recording_path: Path, tmp_path: Path, virtual_clock: VirtualClock
) -> None:
    out = tmp_path / "run"
    limit = 6.0
    argv = ["tune", str(SILU), "--backend", f"replay:{recording_path}", "--shapes", TUNED_ARG]
    argv += ["--trials", "100", "--sampler", "random", "--seed", "1", "--throttle", "0.1"]
    argv += ["--time-limit", str(limit)]
    wall = _timed([*argv, "--out", str(out), "--quiet"])
    assert wall <= limit, f"{wall:.2f} s for a {limit} s limit"
    data = _outputs(out)
    assert float(data["wall_s"]) <= limit  # type: ignore[arg-type]
    shapes = data["shapes"]
    assert isinstance(shapes, list) and len(shapes) == 4
    assert all(0 < s["evaluations"] < 100 for s in shapes), "each shape got a share, none the whole budget"
    events = [e["event"] for e in read_log(out / "log.jsonl")]
    assert "time_budget" in events and events[-1] == "finished"


def test_baselines_cut_short_still_write_the_summary(
    recording_path: Path, tmp_path: Path, virtual_clock: VirtualClock
) -> None:
    out = tmp_path / "run"
    limit = 2.0
    argv = ["tune", str(SILU), "--backend", f"replay:{recording_path}", "--shapes", TUNED_ARG]
    argv += ["--trials", "50", "--throttle", "0.4", "--time-limit", str(limit), "--holdout", "none"]
    wall = _timed([*argv, "--out", str(out), "--quiet"])
    assert wall <= limit, f"{wall:.2f} s for a {limit} s limit"
    data = _outputs(out)
    shapes = data["shapes"]
    assert isinstance(shapes, list)
    unmeasured = [s for s in shapes if s["original_us"] is None]
    assert 0 < len(unmeasured) < len(shapes), "the limit cut the baselines, after the first"
    assert all(s["evaluations"] == 0 for s in unmeasured)
    best = json.loads((out / "best.json").read_text())
    assert all(best[s["shape"]]["dispatch"] == "original" for s in unmeasured)
    notes = data["notes"]
    assert isinstance(notes, list) and any("time limit ran out" in n for n in notes)
    table = json.loads((out / "dispatch.json").read_text())
    assert table["fallback"] == "original"


@pytest.mark.slow
@pytest.mark.skipif(find_nvcc() is None, reason="no nvcc here to compile the candidates")
def test_time_limit_through_the_stand_in_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real harness and worker process (compiles included), 0.2 s per measurement: the run
    ends near its limit with the final check done."""
    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path / "cubins"))
    monkeypatch.setenv("KTX_TEST_MEASURE_S", "0.2")
    out = tmp_path / "run"
    limit = 12.0
    argv = ["tune", str(SILU), "--backend", STAND_IN, "--passes", "block-size,split{max=8}"]
    argv += ["--shapes", "tokens=16,d=4096", "--trials", "500", "--seed", "3", "--time-limit", str(limit)]
    wall = _timed([*argv, "--out", str(out), "--quiet", "--holdout", "none"])
    assert wall <= limit * 1.05 + 1.0, f"{wall:.2f} s for a {limit} s limit"
    data = _outputs(out)
    shapes = data["shapes"]
    assert isinstance(shapes, list) and len(shapes) == 1
    row = shapes[0]
    assert 0 < row["evaluations"] < 28, "the limit, not the space, ended the search"
    # the stand-in times every config alike: where the search saw no gain the check is not run
    # (no-gain), else it ran within the limit
    assert row["paired"]["status"] in ("measured", "identical", "no-gain"), json.dumps(row["paired"])
    capsys.readouterr()
