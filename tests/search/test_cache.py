"""The measurement cache: keys, persistence, torn lines."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ktx.expr import Expr
from ktx.measure.types import Candidate, Measurement, Status, Timing
from ktx.search.cache import MeasurementCache, cache_key
from ktx.search.evaluate import Evaluator
from ktx.search.runlog import RunLog
from ktx.search.tunable import Tunable
from ktx.spec import Dist, ShapePoint, Spec, Tolerance, load_spec

from .conftest import SILU

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


class Counting:
    """A backend that measures everything as 1 µs and counts its calls."""

    fingerprint = "counting"

    def __init__(self) -> None:
        self.calls = 0

    def measure(self, candidate: Candidate, shape: ShapePoint) -> Measurement:
        self.calls += 1
        return Measurement("k", shape.name, dict(candidate.config), Status.OK, graph=Timing.of([1.0]))


def test_spec_verification_and_accounting_are_part_of_the_key(tmp_path: Path) -> None:
    """A tighter tolerance, another bytes expression, other verify rounds or input distribution
    change what a measurement says: none of them may be answered from the old cache."""
    spec = load_spec(SILU)
    point = spec.shape_set().points[0]
    cache = MeasurementCache(tmp_path / "cache.jsonl")
    backend = Counting()
    log = RunLog(None)

    def original(s: Spec) -> None:
        Evaluator(s, Tunable.original(s), backend, cache, log).original(point)

    original(spec)
    original(spec)
    assert backend.calls == 1, "the same spec is answered from the cache"
    variants = [
        replace(spec, tolerance=(("bf16", Tolerance(1e-3, 1e-3, 0.1)),)),
        replace(spec, bytes=Expr.parse("tokens * d * 6")),
        replace(spec, verify=replace(spec.verify, rounds=spec.verify.rounds + 1)),
        replace(spec, reference=replace(spec.reference, use="python", python="ref:silu")),
        replace(spec, args=(replace(spec.args[0], dist=Dist("uniform")), *spec.args[1:])),
    ]
    for i, changed in enumerate(variants, start=2):
        original(changed)
        assert backend.calls == i, f"variant {i - 2} was answered from the old cache"
    fingerprints = {Tunable.original(s).fingerprint for s in (spec, *variants)}
    assert len(fingerprints) == len(variants) + 1, "the original's fingerprint (study name) changes too"
