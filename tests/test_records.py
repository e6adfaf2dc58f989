"""Run records (``ktx/records.py``): typed, versioned, and a damaged line is an error naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ktx.ir.errors import KtxError, Location

from ktx.records import (
    RecordedRound,
    RecordedRun,
    RecordedShape,
    RoundLine,
    RunState,
    check_schema,
    read_jsonl,
    read_rounds,
    schema_of,
)
from ktx.search.cache import MeasurementCache

HERE = Location("x.json")


def test_a_recorded_run_round_trips() -> None:
    run = RecordedRun(
        115.0,
        "budget",
        (
            RecordedRound(
                1,
                "split",
                "improved",
                1.117,
                (RecordedShape("tokens=1,d=4096", 2, ({"SPLIT": 4}, {"SPLIT": 2})),),
            ),
            RecordedRound(
                2, "split,block-size", "no-gain", None, (RecordedShape("t", 0, (), {"status": "measured"}),)
            ),
        ),
        derived_from="a run folder",
        wall_s=118.0,
        notes=("n",),
    )
    data = json.loads(json.dumps(run.to_json()))
    assert data["schema"] == "ktx.recorded-run/1"
    assert RecordedRun.from_json(data, HERE) == run


@pytest.mark.parametrize("schema", ["ktx.recorded-run/2", "ktx.recorded-run/0", "ktx.rounds/1"])
def test_an_unknown_version_is_a_clear_error(schema: str) -> None:
    data = {**RecordedRun(None, "rounds", ()).to_json(), "schema": schema}
    with pytest.raises(
        KtxError, match=rf"x.json: {schema} is not a schema this ktx reads \(it reads ktx.recorded-run/1\)"
    ):
        RecordedRun.from_json(data, HERE)


def test_a_record_without_a_version_is_version_1() -> None:
    # files from before versions: the documented migration reads them as version 1
    check_schema({"round": 1}, "rounds", HERE)
    assert schema_of("rounds") == "ktx.rounds/1"


def round_line(index: int) -> dict[str, object]:
    return {
        "schema": "ktx.rounds/1", "round": index, "status": "improved", "pipeline": "split",
        "planner": "rules", "rationale": "why", "plan": {"attempts": [{}, {}], "fallback": ""},
        "geomean_speedup": 1.2,
        "best_after": 1.2, "note": "", "failures": [{"name": "unroll", "reasons": ["no loop"]}],
        "usage": {"total_tokens": 7}, "noise": 0.02, "wall_s": 3.0, "share_s": None,
        "result": {"shapes": [{"shape": "s", "metric": "graph", "original_us": 2.0, "best_us": 1.0,
                               "effective_us": 1.0, "speedup": 2.0, "wins": True,
                               "best_config": {"SPLIT": 4}}],
                   "failures": {"crash": 1}, "evaluations": 5, "trials": 6, "wall_s": 2.5},
    }  # fmt: skip


def test_rounds_read_typed(tmp_path: Path) -> None:
    path = tmp_path / "rounds.jsonl"
    path.write_text("".join(json.dumps(round_line(i)) + "\n" for i in (1, 2)))
    rounds = read_rounds(path)
    assert [r.index for r in rounds] == [1, 2]
    r = rounds[0]
    assert isinstance(r, RoundLine)
    assert (r.tokens, r.plan_attempts, r.failures) == (7, 2, (("unroll", ("no loop",)),))
    assert r.result is not None and r.result.evaluations == 5 and dict(r.result.failures) == {"crash": 1}
    shape = r.result.shapes[0]
    assert (shape.effective_us, shape.wins, dict(shape.best_config or {})) == (1.0, True, {"SPLIT": 4})


def test_a_corrupt_rounds_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "rounds.jsonl"
    path.write_text(
        json.dumps(round_line(1)) + "\n" + '{"round": 2, "sta\n' + json.dumps(round_line(3)) + "\n"
    )
    with pytest.raises(KtxError, match=rf"^{path}:2:1: line is not JSON"):
        read_rounds(path)


def test_a_rounds_line_of_another_version_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "rounds.jsonl"
    path.write_text(
        json.dumps(round_line(1)) + "\n" + json.dumps({**round_line(2), "schema": "ktx.rounds/7"}) + "\n"
    )
    with pytest.raises(KtxError, match=rf"^{path}:2:1: ktx.rounds/7 is not a schema this ktx reads"):
        read_rounds(path)


def test_a_rounds_line_missing_a_field_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "rounds.jsonl"
    path.write_text(json.dumps({"schema": "ktx.rounds/1", "round": 1}) + "\n")
    with pytest.raises(KtxError, match=rf"^{path}:1:1: not a round record"):
        read_rounds(path)


def test_only_an_unfinished_last_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "rounds.jsonl"
    path.write_text(json.dumps(round_line(1)) + "\n" + '{"round": 2, "sta')  # a killed writer's
    assert [r.index for r in read_rounds(path)] == [1]
    assert [n for n, _ in read_jsonl(path, "rounds")] == [1]


def test_the_run_state_checks_its_format() -> None:
    with pytest.raises(KtxError, match=r"optimize\.json is of format 'ktx\.optimize/2', not ktx\.optimize/1"):
        RunState.from_json({"format": "ktx.optimize/2"}, HERE)
    state = RunState.from_json(
        {
            "format": "ktx.optimize/1",
            "kernel": "k",
            "best_round": 1,
            "shapes": [round_line(1)["result"]["shapes"][0]],
        },  # type: ignore[index]
        HERE,
    )
    assert state.kernel == "k" and state.best_round == 1 and state.shapes[0].speedup == 2.0


def test_cache_lines_carry_their_version_and_an_unknown_one_is_an_error(tmp_path: Path) -> None:
    from ktx.measure.types import Measurement, Status

    path = tmp_path / "cache.jsonl"
    cache = MeasurementCache(path)
    cache.put("k1", Measurement("kern", "s", {}, Status.CRASH, "x"))
    assert json.loads(path.read_text())["schema"] == "ktx.cache/1"
    assert MeasurementCache(path).get("k1") is not None
    row = json.loads(path.read_text())
    path.write_text(path.read_text() + json.dumps({**row, "key": "k2", "schema": "ktx.cache/3"}) + "\n")
    with pytest.raises(KtxError, match=rf"^{path}:2:1: ktx.cache/3 is not a schema this ktx reads"):
        MeasurementCache(path)
