"""``ktx tune --workers N``: the workers do every measuring phase side by side (issue 23 item 7).

On the replay backend over a SYNTHETIC recording, with its throttle (a real sleep per
measurement) standing in for GPU time. The workers are real processes, so these tests run on the
real clock: the first checks who measured what (no timing in it), the second the ratio of
evaluations against one worker with a margin wide enough for a loaded two-core host.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ktx.search.runlog import read_log
from ktx.search.runner import share_of
from ktx.spec import ShapePoint

from .conftest import ROOT, SILU, TUNED, TUNED_ARG

sys.path.insert(0, str(ROOT / "scripts"))
from issue23_timeline import timeline


def tune(recording: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable, "-m", "ktx", "tune", str(SILU), "--backend", f"replay:{recording}",
        "--shapes", TUNED_ARG, "--sampler", "random", "--seed", "1", "--out", str(out), "--quiet", *extra,
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT)


def process(event: dict[str, Any]) -> str:
    """``main``, ``worker0``, ... (the log names each process ``NAME:PID``)."""
    return str(event["worker"]).split(":")[0]


@pytest.mark.slow
def test_the_workers_check_and_measure_ahead_so_the_main_process_measures_nothing(
    recording_path: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    done = tune(recording_path, out, "--trials", "6", "--workers", "2", "--throttle", "0.02")
    assert done.returncode == 0, done.stderr
    events = list(read_log(out / "log.jsonl"))
    measured = [e for e in events if e["event"] == "measure"]
    assert measured and not [e for e in measured if process(e) == "main"], "the workers measured everything"
    # each worker checked its own share of the shapes, after every worker had stopped searching
    points = [ShapePoint((("tokens", t), ("d", d))) for t, d in TUNED]
    checks = {str(e["shape"]): process(e) for e in events if e["event"] == "paired"}
    want = {p.name: f"worker{i}" for i in range(2) for p in share_of(points, i, 2)}
    assert checks == want
    waits = [e for e in events if e["event"] == "searches_done"]
    assert len(waits) == 2 and all(e["seen"] == 2 for e in waits)
    # the held-out points (the midpoints tokens=4 and 64 at d=4096) were measured ahead by the
    # workers, and the main process found them in the cache
    summary = json.loads((out / "summary.json").read_text())
    held = {row["shape"]: row for row in summary["holdout"]}
    assert set(held) == {"tokens=4,d=4096", "tokens=64,d=4096"}
    assert all(row["original_us"] for row in held.values())
    ahead = {str(e["shape"]) for e in measured if e["shape"] in held}
    assert ahead == set(held)
    assert [r["paired"]["status"] for r in summary["shapes"]] == ["unsupported"] * len(TUNED)


@pytest.mark.slow
def test_two_workers_make_nearly_twice_the_evaluations_of_one(recording_path: Path, tmp_path: Path) -> None:
    """The same time limit, 0.4 s a measurement: two workers make at least 1.6x the search's
    evaluations of one (the goal on GPUs is 0.9 N; the margin is for a loaded host, where each
    worker's Python start-up alone costs seconds of the limit)."""
    args = ("--trials", "1000", "--throttle", "0.4", "--time-limit", "40", "--holdout", "none")
    counts = {}
    for n in (1, 2):
        out = tmp_path / f"w{n}"
        done = tune(recording_path, out, *args, "--workers", str(n))
        assert done.returncode == 0, done.stderr
        counts[n] = timeline(out)["search_evaluations"]
    assert counts[1] > 10, counts
    assert counts[2] >= 1.6 * counts[1], counts
