"""``scripts/record_space.py``: the default space is big enough to separate samplers (issue 12),
and what it records is a recording the replay backend and the sampler comparison read."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from ktx.cli import main as ktx_main
from ktx.measure.compile import find_nvcc
from ktx.search.compare import compare
from ktx.search.recording import Recording
from ktx.specload import load_spec

from .conftest import ROOT, SILU

STAND_IN = f"harness:{ROOT / 'tests' / 'search' / 'paired_gpu.py'}:handle"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("record_space", ROOT / "scripts" / "record_space.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_default_space_is_large_and_has_interacting_knobs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    assert _script().main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    knobs = next(line for line in out.splitlines() if line.startswith("knobs: "))
    assert knobs.count("[") >= 4, knobs
    feasible = int(out.split(" configs, ")[1].split(" feasible")[0])
    assert feasible >= 2000, out


@pytest.mark.slow
@pytest.mark.skipif(find_nvcc() is None, reason="no nvcc here to compile the candidates")
def test_a_recorded_space_replays(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path / "cubins"))
    path = tmp_path / "space.json"
    argv = [str(SILU), "--passes", "block-size{min=128,max=512}"]
    argv += ["--shapes", "tokens=16,d=4096;tokens=4,d=4096"]
    assert _script().main([*argv, "--out", str(path), "--backend", STAND_IN]) == 0
    recording = Recording.load(path)
    data = json.loads(path.read_text())
    assert data["exhaustive"] and data["stats"]["measured"] == 2 * (1 + 4)
    assert data["stats"]["exhaustive_shapes"] == ["tokens=16,d=4096", "tokens=4,d=4096"]
    assert recording.stand_in == STAND_IN and "STAND-IN" in recording.label
    assert set(recording.space.names) == {"BLOCK_X"} and len(recording.measurements) == 10
    best, results = compare(load_spec(SILU), recording, "tokens=16,d=4096", ("random", "grid"), seeds=2)
    assert best.config == {"BLOCK_X": 128} and best.time_us == pytest.approx(1.6)
    assert all(r.reached == 2 for r in results), "an exhaustive budget always finds the optimum"
    out = tmp_path / "run"
    argv = ["tune", str(SILU), "--backend", f"replay:{path}", "--shapes", "tokens=16,d=4096"]
    assert ktx_main([*argv, "--trials", "4", "--out", str(out), "--quiet", "--holdout", "none"]) == 0
    (row,) = json.loads((out / "summary.json").read_text())["shapes"]
    assert row["evaluations"] == 4
    # the recording names its kernel folder: one command scores it
    assert data["kernel_dir"] == "kernels/silu_and_mul"
    replay = _load("search_replay")
    assert replay.main([str(path), "--seeds", "2", "--trials", "4", "--methods", "after"]) == 0
    # a needle check: chosen configs measured in rounds, not a whole space
    again = tmp_path / "again.json"
    chosen = '[{"BLOCK_X": 128}, {"BLOCK_X": 256}]'
    argv2 = [str(SILU), "--passes", "block-size{min=128,max=512}", "--shapes", "tokens=16,d=4096"]
    argv2 += ["--configs", chosen, "--repeat", "2"]
    assert _script().main([*argv2, "--out", str(again), "--backend", STAND_IN]) == 0
    redo = json.loads(again.read_text())
    assert redo["stats"]["measured"] == 2 * (1 + 2) and not redo["exhaustive"]
    assert redo["stats"]["exhaustive_shapes"] == []
    order = [m["config"].get("BLOCK_X") for m in redo["measurements"]]
    assert order == [None, 128, 256, None, 128, 256], "in rounds, the original first in each"


@pytest.mark.slow
@pytest.mark.skipif(find_nvcc() is None, reason="no nvcc here to compile the candidates")
def test_a_terminated_recording_keeps_what_it_measured(tmp_path: Path) -> None:
    """The GPU scripts guard record_space.py with `timeout`: SIGTERM ends the loop, the recording
    is written with what was measured, and no shape is claimed complete that was not."""
    import signal
    import subprocess
    import sys
    import time

    path = tmp_path / "space.json"
    argv = [sys.executable, str(ROOT / "scripts" / "record_space.py"), str(SILU), "--passes",
            "block-size{min=128,max=512}", "--shapes", "tokens=16,d=4096;tokens=4,d=4096", "--jobs", "1",
            "--backend", STAND_IN, "--out", str(path)]  # fmt: skip
    env = {**__import__("os").environ, "KTX_CACHE_DIR": str(tmp_path / "cubins")}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert proc.stdout is not None
    for line in proc.stdout:  # printed once the harness is up, before the first measurement
        if line.startswith("measuring 10 jobs"):
            break
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=60)[0]
    assert "terminated after" in out and path.is_file(), out
    data = json.loads(path.read_text())
    assert not data["exhaustive"] and data["stats"]["measured"] < 10
    complete = data["stats"]["exhaustive_shapes"]
    assert all(data["stats"]["per_shape"][s] == 5 for s in complete), "only whole shapes are claimed"
    assert all(
        m["status"] == "ok" or "compile process failed" not in m["message"] for m in data["measurements"]
    )
