"""Every file of a run folder is versioned (``ktx/records/files.py``): each round-trips, a file of a
version this ktx does not know is an error naming it, and a file written before versions reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ktx.ir.errors import KtxError

from ktx.agent.llm import AnswerCache, CachedAnswer
from ktx.records import schema_of
from ktx.records.files import (
    FORMATS,
    BaselineRecord,
    PlanRecord,
    PluginsRecord,
    format_of,
    read_record,
    stamped,
    write_record,
)
from ktx.registry import record_plugins, recorded_plugins
from ktx.report.data import read_dispatch, read_trace
from ktx.search.dispatch import DispatchTable, Rule
from ktx.search.runlog import RunLog, read_log
from ktx.template import TRACE_VERSION

PLAN = {
    "plan": {"passes": [{"name": "split", "why": "rows are long"}], "planner": "rules", "pipeline": "split"},
    "attempts": [],
    "fallback": "",
}


def test_the_trace_version_is_the_templates() -> None:
    assert FORMATS["trace"] == TRACE_VERSION


@pytest.mark.parametrize("kind", sorted(FORMATS))
def test_each_kind_round_trips_with_its_tag(kind: str, tmp_path: Path) -> None:
    path = tmp_path / f"{kind}.json"
    write_record(path, kind, {"tokens=1": {"speedup": 1.5}, "notes": ["a"]})
    raw = json.loads(path.read_text())
    tag = raw.get("version") if kind == "trace" else raw.get("format")
    assert tag in (format_of(kind), FORMATS[kind]), raw
    assert read_record(path, kind) == {"tokens=1": {"speedup": 1.5}, "notes": ["a"]}


@pytest.mark.parametrize("kind", sorted(FORMATS))
def test_an_unknown_version_names_the_file(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "future.json"
    tag = {"version": 99} if kind == "trace" else {"format": f"ktx.{kind}/99"}
    path.write_text(json.dumps({**tag, "x": 1}))
    with pytest.raises(KtxError) as err:
        read_record(path, kind)
    assert str(err.value).startswith(str(path)), str(err.value)
    assert "99" in str(err.value)


@pytest.mark.parametrize("kind", ["summary", "best", "plan", "plugins", "dispatch"])
def test_a_file_from_before_versions_reads_as_version_1(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"plugins": ["p.py"]}))
    assert read_record(path, kind) == {"plugins": ["p.py"]}


def test_a_file_that_is_not_an_object_or_not_json_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    path.write_text("[1, 2]")
    with pytest.raises(KtxError, match="expected a JSON object"):
        read_record(path, "summary")
    path.write_text('{"a": ')
    with pytest.raises(KtxError) as err:
        read_record(path, "summary")
    assert str(err.value).startswith(f"{path}:1:")


def test_plan_record_reads_the_planners_reasons(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(stamped("plan", PLAN)))
    plan = PlanRecord.read(path)
    assert (plan.planner, plan.pipeline) == ("rules", "split")
    assert [(p.name, p.why) for p in plan.passes] == [("split", "rows are long")]
    path.write_text(json.dumps(PLAN))  # written before plan.json had a tag
    assert PlanRecord.read(path).passes == plan.passes


def test_plugins_round_trip_and_old_files_read(tmp_path: Path) -> None:
    record_plugins(tmp_path, ["a.py", "b"])
    assert json.loads((tmp_path / "plugins.json").read_text())["format"] == format_of("plugins")
    assert recorded_plugins(tmp_path) == ("a.py", "b")
    (tmp_path / "plugins.json").write_text(json.dumps({"plugins": ["old.py"]}))
    assert recorded_plugins(tmp_path) == ("old.py",)
    assert PluginsRecord.read(tmp_path / "plugins.json") == PluginsRecord(("old.py",))


def test_log_lines_carry_their_schema_and_read_without_it(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    RunLog(path).write("measure", shape="s", config={"X": 1})
    (line,) = path.read_text().splitlines()
    assert json.loads(line)["schema"] == schema_of("log")
    (event,) = read_log(path)
    assert event["event"] == "measure" and "schema" not in event
    with path.open("a") as handle:  # a line from before versions, then one from the future
        handle.write('{"t":1,"event":"start","worker":"main"}\n')
        handle.write('{"schema":"ktx.log/5","t":2,"event":"end","worker":"main"}\n')
    with pytest.raises(KtxError) as err:
        list(read_log(path))
    assert str(err.value).startswith(f"{path}:3:1: ktx.log/5")


def test_llm_cache_lines_round_trip_and_refuse_an_unknown_version(tmp_path: Path) -> None:
    path = tmp_path / "llm_cache.jsonl"
    AnswerCache(path).put("k", CachedAnswer("{}", 3, 4), "m", [])
    assert json.loads(path.read_text())["schema"] == schema_of("llm-cache")
    assert AnswerCache(path).get("k") == CachedAnswer("{}", 3, 4)
    with path.open("a") as handle:
        handle.write('{"key":"old","text":"x"}\n')  # before versions: read
    assert AnswerCache(path).get("old") == CachedAnswer("x", 0, 0)
    with path.open("a") as handle:
        handle.write('{"schema":"ktx.llm-cache/2","key":"new","text":"y"}\n')
    with pytest.raises(KtxError) as err:
        AnswerCache(path)
    assert str(err.value).startswith(f"{path}:3:1:")


def test_dispatch_json_keeps_its_format_tag_and_reads_typed(tmp_path: Path) -> None:
    table = DispatchTable(
        "k", ("n",), "n", ({"X": 2},), (Rule((), None, None, 0, ("n=4",)),), ("X",), {"X": 1}
    )
    path = tmp_path / "dispatch.json"
    path.write_text(table.to_json())
    assert json.loads(path.read_text())["format"] == format_of("dispatch")
    assert read_dispatch(path) == table
    path.write_text(table.to_json().replace("ktx.dispatch/1", "ktx.dispatch/3"))
    with pytest.raises(KtxError, match=r"ktx\.dispatch/3 is not a format"):
        read_dispatch(path)


def test_trace_with_an_unknown_version_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"version": 2, "steps": []}))
    with pytest.raises(KtxError) as err:
        read_trace(path)
    assert str(err.value).startswith(str(path))


def test_baseline_reads_typed_and_refuses_an_unknown_schema(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    shape = {"metric": "single", "measurement": {"shape": "n=4", "status": "ok"}}
    path.write_text(
        json.dumps({"schema": schema_of("baseline"), "kernel": "k", "shapes": [shape], "ncu": {}})
    )
    record = BaselineRecord.read(path)
    assert record.kernel == "k" and [(s.shape, s.metric) for s in record.shapes] == [("n=4", "single")]
    path.write_text(json.dumps({"schema": "ktx.baseline/4", "kernel": "k", "shapes": []}))
    with pytest.raises(KtxError) as err:
        BaselineRecord.read(path)
    assert str(err.value).startswith(str(path)) and "ktx.baseline/4" in str(err.value)
