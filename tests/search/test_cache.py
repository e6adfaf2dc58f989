"""The measurement cache: keys, persistence, torn lines."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from ktx.ir.expr import Expr

from ktx.measure.types import Candidate, Measurement, Status, Timing
from ktx.search.cache import MeasurementCache, cache_key
from ktx.search.evaluate import Evaluator
from ktx.search.runlog import RunLog
from ktx.search.space import Knob, Space
from ktx.search.tunable import Tunable
from ktx.spec import Dist, ShapePoint, Spec, Tolerance
from ktx.specload import load_spec

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


class Scripted:
    """Answers each call with the next status of a script (per config key)."""

    fingerprint = "scripted"

    def __init__(self, script: dict[str, list[tuple[Status, str]]]) -> None:
        self.script = script
        self.calls: dict[str, int] = {}

    def measure(self, candidate: Candidate, shape: ShapePoint) -> Measurement:
        key = json.dumps(dict(candidate.config), sort_keys=True)
        n = self.calls.get(key, 0)
        self.calls[key] = n + 1
        steps = self.script[key]
        status, message = steps[min(n, len(steps) - 1)]
        graph = Timing.of([1.0]) if status is Status.OK else None
        return Measurement("k", shape.name, dict(candidate.config), status, message, graph=graph)


def test_transient_failures_are_retried_or_not_cached(tmp_path: Path) -> None:
    ok, crash, timeout = (Status.OK, ""), (Status.CRASH, "worker died"), (Status.TIMEOUT, "no answer")
    broken_pool = (Status.COMPILE_ERROR, "compile process failed: BrokenProcessPool")
    bad_reference = (Status.CRASH, "reference failed: illegal address")
    wrong = (Status.WRONG_RESULT, "max abs error 3")
    spec = load_spec(SILU)
    point = spec.shape_set().points[0]

    class FakeTunable:
        space = Space((Knob("B", (1, 2, 3, 4, 5), 1),))

        def candidate(self, config: dict[str, int]) -> Candidate:
            return replace(CAND, config=dict(config))

    backend = Scripted({
        "{}": [wrong, ok],  # the original (reference) failing: not cached
        '{"B": 1}': [crash, ok],  # a crash that was bad luck: retried once, ok
        '{"B": 2}': [timeout, timeout, ok],  # a real hang: retried once, then cached
        '{"B": 3}': [broken_pool, ok],  # the compile machinery broke: not cached
        '{"B": 5}': [bad_reference, bad_reference, ok],  # the reference failed: not cached
    })  # fmt: skip
    cache = MeasurementCache(tmp_path / "cache.jsonl")
    ev = Evaluator(spec, FakeTunable(), backend, cache, RunLog(None))  # type: ignore[arg-type]

    def status(config: dict[str, int]) -> Status:
        m = ev.measure(FakeTunable().candidate(config), point)[0]
        assert m is not None
        return m.status

    assert status({}) is Status.WRONG_RESULT and status({}) is Status.OK
    assert status({"B": 1}) is Status.OK and backend.calls['{"B": 1}'] == 2
    assert status({"B": 2}) is Status.TIMEOUT and status({"B": 2}) is Status.TIMEOUT
    assert backend.calls['{"B": 2}'] == 2, "retried once, then the cache answers"
    assert status({"B": 3}) is Status.COMPILE_ERROR and status({"B": 3}) is Status.OK
    assert status({"B": 5}) is Status.CRASH and status({"B": 5}) is Status.OK
    assert backend.calls['{"B": 5}'] == 3
    assert len(MeasurementCache(tmp_path / "cache.jsonl")) == 5  # {}, B=1, B=2, B=3 and B=5 (the ok ones)
