"""SIGKILL a running ``ktx tune`` and start it again: nothing finished is lost or measured twice.

The run uses the replay backend on a SYNTHETIC recording with ``--throttle`` (a sleep standing
in for GPU time per measurement), so the kill lands mid-search.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from ktx.search.runlog import read_log
from ktx.search.study import run_folder_storage

from .conftest import SILU

SHAPES = "tokens=1,d=4096;tokens=16,d=4096"
BUDGET = 30


def command(recording_path: Path, out: Path, throttle: float) -> list[str]:
    return [
        sys.executable, "-m", "ktx", "tune", str(SILU), "--backend", f"replay:{recording_path}",
        "--shapes", SHAPES, "--trials", str(BUDGET), "--sampler", "tpe", "--seed", "11",
        "--out", str(out), "--quiet", "--holdout", "none", "--throttle", str(throttle),
    ]  # fmt: skip


def finished_trials(out: Path) -> dict[tuple[str, int], tuple[str, object, object]]:
    """(study, number) -> (state, params, value) of every finished trial in the run's storage."""
    storage = run_folder_storage(out)
    assert storage is not None and (out / "study.jsonl").is_file(), "the default study is the journal"
    found: dict[tuple[str, int], tuple[str, object, object]] = {}
    for summary in optuna.get_all_study_summaries(storage):
        study = optuna.load_study(study_name=summary.study_name, storage=storage)
        for t in study.trials:
            if t.state.is_finished():
                found[(summary.study_name, t.number)] = (t.state.name, t.params, t.value)
    return found


def measure_events(out: Path) -> list[dict[str, object]]:
    return [e for e in read_log(out / "log.jsonl") if e["event"] == "measure"]


@pytest.mark.slow
def test_sigkill_then_resume(tmp_path: Path, recording_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.Popen(
        command(recording_path, out, 0.05), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 120
    try:
        while len(measure_events(out)) < 20:  # some trials done, mid-way through the first shape
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "the run made no progress"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    before = finished_trials(out)
    measured_before = len(measure_events(out))
    assert before and measured_before >= 20

    again = subprocess.run(command(recording_path, out, 0.0), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    after = finished_trials(out)
    # No finished trial is lost or changed.
    for key, value in before.items():
        assert after[key] == value, key
    # No (config, shape) measured twice, over both runs.
    keys = [e["key"] for e in measure_events(out)]
    assert len(keys) == len(set(keys))
    # The budget counts what the killed run did: each shape ends with exactly BUDGET evaluations.
    storage = run_folder_storage(out)
    assert storage is not None
    for summary in optuna.get_all_study_summaries(storage):
        study = optuna.load_study(study_name=summary.study_name, storage=storage)
        evaluated = {
            t.user_attrs["ktx"]["key"] for t in study.trials if t.user_attrs.get("ktx", {}).get("key")
        }
        assert len(evaluated) == BUDGET, summary.study_name
        running = [t for t in study.trials if t.state == optuna.trial.TrialState.RUNNING]
        assert not running, "the killed run's trial was marked FAIL on resume"
    tuned = {str(e["shape"]) for e in measure_events(out) if e["config"]}
    assert tuned == set(SHAPES.split(";"))
