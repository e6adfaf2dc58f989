"""Every run folder and recording committed under results/ and kernels/ still loads through the
typed, versioned readers: they were written before most files had a version, and version 1 *is*
their layout. The tarballs' JSON files are extracted to a temporary folder (a few MB; the
kernels, headers and study databases are left in the archive)."""

from __future__ import annotations

import json
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ktx.ir.errors import Location

from ktx.agent.llm import AnswerCache
from ktx.records import RecordedRun, RunState, read_rounds
from ktx.records.files import BaselineRecord, PlanRecord, PluginsRecord, read_record
from ktx.report.data import read_dispatch, read_trace
from ktx.search.cache import MeasurementCache
from ktx.search.recording import Recording, recording_of_run
from ktx.search.runlog import read_log

ROOT = Path(__file__).resolve().parents[2]
TARBALLS = sorted((ROOT / "results").rglob("*.tar.gz"))
RECORDINGS = sorted((ROOT / "kernels").glob("*/recorded/**/*.json"))


def _state(path: Path) -> object:
    return RunState.from_json(json.loads(path.read_text()), Location(str(path)))


#: File name -> its typed reader (each raises a located KtxError on a record it cannot read).
READERS: dict[str, Callable[[Path], Any]] = {
    "optimize.json": _state,
    "rounds.jsonl": read_rounds,
    "cache.jsonl": lambda p: MeasurementCache(p).measurements(),
    "log.jsonl": lambda p: list(read_log(p)),
    "llm_cache.jsonl": lambda p: len(AnswerCache(p)),
    "trace.json": read_trace,
    "dispatch.json": read_dispatch,
    "plan.json": PlanRecord.read,
    "plugins.json": PluginsRecord.read,
    "summary.json": lambda p: read_record(p, "summary")["shapes"],
    "best.json": lambda p: read_record(p, "best"),
    "baseline.json": BaselineRecord.read,
    "recording.json": Recording.load,
}


def _extract(tarball: Path, into: Path) -> list[Path]:
    out = []
    with tarfile.open(tarball) as archive:
        for member in archive.getmembers():
            if member.isfile() and Path(member.name).name in READERS:
                archive.extract(member, into, filter="data")
                out.append(into / member.name)
    return out


def test_there_are_committed_runs_to_check() -> None:
    assert TARBALLS and RECORDINGS


@pytest.mark.slow
@pytest.mark.parametrize("tarball", TARBALLS, ids=lambda p: str(p.relative_to(ROOT)))
def test_committed_run_folders_load_through_the_typed_readers(tarball: Path, tmp_path: Path) -> None:
    files = _extract(tarball, tmp_path)
    if not files:
        pytest.skip("no run records in this archive (test logs only)")
    seen: set[str] = set()
    for path in files:
        READERS[path.name](path)
        seen.add(path.name)
    if "rounds.jsonl" in seen:  # an optimize run that searched: its rounds' plans and traces are there
        assert {"optimize.json", "plan.json", "trace.json"} <= seen
    # the replay's recorder reads the same folders through the same typed readers
    for path in files:
        if path.name == "rounds.jsonl" and (path.parent / "optimize.json").is_file():
            doc = recording_of_run(path.parent, device="d", toolkit="t", synthetic=False)
            run = RecordedRun.from_json(doc["run"], Location(str(path)))
            assert [r.index for r in run.rounds] == [r.index for r in read_rounds(path)]


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: str(p.relative_to(ROOT)))
def test_committed_recordings_load(path: Path) -> None:
    recording = Recording.load(path)
    assert recording.measurements
    data = json.loads(path.read_text())
    if isinstance(data.get("run"), dict):
        assert RecordedRun.from_json(data["run"], Location(str(path))).rounds
