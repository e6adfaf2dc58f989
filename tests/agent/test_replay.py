"""A replay replays: ``ktx optimize`` over a recording follows the recorded run (its rounds, its
candidates, its final checks, its stop reason) and answers only with recorded measurements."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ktx.ir.errors import KtxError

from ktx.agent.loop import OptimizeRequest, load_records, optimize
from ktx.records import measured_configs, read_jsonl
from ktx.search.recording import Recording, ReplayDiverged
from ktx.search.runlog import read_log

from .model_backend import ModelBackend

ROOT = Path(__file__).resolve().parents[2]
KERNEL = ROOT / "kernels" / "silu_and_mul"
COMMITTED = KERNEL / "recorded" / "optimize" / "quick_h200_2026-11-21.json"
SHAPES = ("tokens=1,d=4096", "tokens=4096,d=4096")


class PairedModel(ModelBackend):
    """The modelled GPU, able to re-measure a config against the original (the final check)."""

    def measure_paired(self, first: Any, second: Any, shape: Any, pairs: int, timeout: float | None) -> Any:
        return [(self.measure(first, shape), self.measure(second, shape)) for _ in range(pairs)]


def replay_request(recording: Path, out: Path, **kw: Any) -> OptimizeRequest:
    base: dict[str, Any] = dict(kernel_dir=KERNEL, backend=f"replay:{recording}", out=out, ncu="off")
    base.update(kw)
    return OptimizeRequest(**base)


def assert_follows(run_dir: Path, recording: Recording) -> None:
    """Every cache entry is a recorded measurement; rounds, searches and stop are the recording's."""
    assert recording.run is not None
    recorded = {json.dumps(m.to_dict(), sort_keys=True) for m in recording.measurements}
    cache = [row for _, row in read_jsonl(run_dir / "cache.jsonl", "cache")]
    assert cache
    for row in cache:
        assert json.dumps(row["measurement"], sort_keys=True) in recorded, row["config"]
    rounds = load_records(run_dir)
    assert [(r["round"], r["pipeline"], r["status"]) for r in rounds] == [
        (r.index, r.pipeline, r.status) for r in recording.run.rounds
    ]
    for r in recording.run.rounds:
        events = list(read_log(run_dir / f"round-{r.index:02d}" / "log.jsonl"))
        mine = measured_configs(events)
        for s in r.shapes:
            assert mine.get(s.shape, []) == [dict(c) for c in s.measured], (r.index, s.shape)
    state = json.loads((run_dir / "optimize.json").read_text())
    assert state["stop_reason"] == recording.run.stop_reason
    assert state["rounds"] == len(recording.run.rounds)


def test_the_committed_recording_holds_its_run() -> None:
    rec = Recording.load(COMMITTED)
    assert rec.run is not None
    run = rec.run
    # the real run (results/session2 optimize_runs.tar.gz, runs/silu_and_mul-s0): a 115 s budget,
    # spent after round 2; its searches were cut by the clock at 5, 5 and 1 evaluations
    assert (run.budget_s, run.stop_reason, len(run.rounds)) == (115.0, "budget", 2)
    assert [(r.pipeline, r.status) for r in run.rounds] == [
        ("split", "improved"),
        ("split,block-size", "no-gain"),
    ]
    assert [s.evaluations for s in run.rounds[0].shapes] == [5, 5, 1]
    every = {
        (s.shape, json.dumps(dict(c), sort_keys=True))
        for r in run.rounds
        for s in r.shapes
        for c in s.measured
    }
    for shape, config in every:  # the script names only recorded measurements
        assert rec.get(shape, json.loads(config)) is not None, (shape, config)


@pytest.mark.slow
def test_the_replay_of_the_committed_recording_is_the_recorded_run(tmp_path: Path) -> None:
    rec = Recording.load(COMMITTED)
    req = replay_request(
        COMMITTED, tmp_path / "run", shapes=("quick",), rounds=4, trials_per_round=16, seed=0
    )
    result = optimize(req)
    assert result.stop_reason == "budget" and len(result.rounds) == 2
    assert [r.geomean_speedup for r in result.rounds] == pytest.approx(
        [r.geomean_speedup for r in rec.run.rounds]  # type: ignore[union-attr]
    )
    assert any(n.startswith("replay: the recorded run stopped after round 2 (budget)") for n in result.notes)
    assert_follows(tmp_path / "run", rec)
    text = (tmp_path / "run" / "cache.jsonl").read_text()
    assert "not in the recording" not in text


def test_a_shape_the_recording_lacks_is_the_recordings_error(tmp_path: Path) -> None:
    with pytest.raises(KtxError) as info:
        optimize(replay_request(COMMITTED, tmp_path / "run", shapes=("default",)))
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith(f"{COMMITTED}: the recording holds no measurements at tokens=1,d=11008;")
    assert "it holds tokens=1,d=4096; tokens=256,d=11008; tokens=4096,d=14336" in text
    assert "[[args]]" not in text


def test_the_missing_shape_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ktx.cli import main

    code = main(["optimize", str(KERNEL), "--backend", f"replay:{COMMITTED}", "--shapes", "default",
                 "--out", str(tmp_path / "run"), "--ncu", "off"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and str(COMMITTED) in err[0]


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run on the modelled GPU, paired final checks included: it writes ``recording.json``."""
    out = tmp_path_factory.mktemp("rec") / "run"
    req = OptimizeRequest(KERNEL, rounds=2, trials_per_round=6, out=out, shapes=SHAPES, ncu="off")
    optimize(req, backend=PairedModel())
    return out


def test_a_run_records_what_its_replay_needs(recorded_run: Path, tmp_path: Path) -> None:
    rec = Recording.load(recorded_run / "recording.json")
    assert rec.synthetic  # a model's numbers, said so
    assert rec.run is not None and rec.run.rounds
    assert any(
        s.paired is not None and s.paired.get("status") == "measured"
        for r in rec.run.rounds
        for s in r.shapes
    )
    out = tmp_path / "replayed"
    result = optimize(replay_request(recorded_run / "recording.json", out, rounds=2, trials_per_round=6,
                                     shapes=SHAPES))  # fmt: skip
    assert_follows(out, rec)
    first = json.loads((recorded_run / "optimize.json").read_text())
    again = json.loads((out / "optimize.json").read_text())
    assert again["geomean_speedup"] == pytest.approx(first["geomean_speedup"])
    # the final checks are the recorded ones, pair for pair
    assert [s["paired"] for s in again["shapes"]] == [s["paired"] for s in first["shapes"]]
    assert result.stop_reason == first["stop_reason"]


def test_a_replay_that_leaves_the_recording_stops(recorded_run: Path, tmp_path: Path) -> None:
    data = json.loads((recorded_run / "recording.json").read_text())
    first = data["run"]["rounds"][0]
    first["status"] = "no-gain" if first["status"] == "improved" else "improved"
    rec = tmp_path / "edited.json"
    rec.write_text(json.dumps(data))
    with pytest.raises(ReplayDiverged, match="the replay left the recorded run: round 1 is"):
        optimize(replay_request(rec, tmp_path / "out", rounds=2, trials_per_round=6, shapes=SHAPES))


def test_a_measurement_the_recording_lacks_is_an_error_not_a_crash(
    recorded_run: Path, tmp_path: Path
) -> None:
    data = json.loads((recorded_run / "recording.json").read_text())
    data["measurements"] = [m for m in data["measurements"] if not m["config"] or m["shape"] != SHAPES[0]]
    rec = tmp_path / "thin.json"
    rec.write_text(json.dumps(data))
    with pytest.raises(ReplayDiverged, match="which the recorded run never measured"):
        optimize(replay_request(rec, tmp_path / "out", rounds=2, trials_per_round=6, shapes=SHAPES))


def test_a_replay_of_a_run_replays_all_of_its_shapes(tmp_path: Path) -> None:
    with pytest.raises(KtxError, match="the recorded run searched tokens=1,d=4096; tokens=256,d=11008; "):
        optimize(replay_request(COMMITTED, tmp_path / "run", shapes=("tokens=1,d=4096",)))
