"""The measurement cache: keys, persistence, torn lines."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ktx.measure.types import Candidate, Measurement, Status
from ktx.search.cache import MeasurementCache, cache_key

CAND = Candidate("src", "k<float>", ("n",), ("256",), config={"B": 256})


def test_key_covers_what_changes_a_measurement_but_not_the_label() -> None:
    base = cache_key(CAND, "n=1", "H200")
    assert cache_key(replace(CAND, label="other"), "n=1", "H200") == base
    assert cache_key(replace(CAND, block=("128",)), "n=1", "H200") != base  # launch-only knobs
    assert cache_key(replace(CAND, flags=("-O3",)), "n=1", "H200") != base
    assert cache_key(CAND, "n=2", "H200") != base
    assert cache_key(CAND, "n=1", "H100") != base


def test_persists_and_skips_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "cache.jsonl"
    m = Measurement("k", "n=1", {"B": 256}, Status.WRONG_RESULT, "bad")
    cache = MeasurementCache(path)
    cache.put("a", m, {"shape": "n=1"})
    with path.open("a") as handle:
        handle.write('{"key": "b", "measurement": {"kern')  # a writer killed mid-line
    again = MeasurementCache(path)
    assert len(again) == 1 and again.get("a") == m and again.get("b") is None
    again.put("c", m)
    assert len(MeasurementCache(path)) == 2
