"""Odd-size verification honours the template's constraints (CPU: the fake worker handler).

Regression: the odd variants of a shape (``d + 1``, ``d - 3``) were checked against the spec's
``require`` only, so a config whose template constraints exclude them (``vectorize{tail=false}``
with a vector width that must divide ``d``; ``rows-per-block`` where an odd ``tokens`` breaks
``grid % ROWS == 0``) was run there, and failed verification every time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ktx.measure.gpu import Options, verify_shapes
from ktx.measure.harness import Harness
from ktx.measure.types import Candidate, Measurement, Status
from ktx.pipeline import candidate
from ktx.spec import Spec
from ktx.specload import load_spec

from .test_harness_cpu import FAKE, needs_compiler

ROOT = Path(__file__).resolve().parents[2]
SCALAR = ROOT / "kernels" / "act_and_mul_scalar"
PIPELINE = "vectorize{tail=false}"


@pytest.fixture(scope="module")
def spec() -> Spec:
    return load_spec(SCALAR)


def test_odd_split_skips_what_the_constraints_exclude(spec: Spec) -> None:
    point = spec.find_point("tokens=1,d=4096")
    both = ["tokens=1,d=4097", "tokens=1,d=4093"]
    assert [p.name for p in spec.odd_points(point)] == both  # no config: the spec's require only
    constraints = ("VEC_L0 == 1 or (d) % VEC_L0 == 0",)
    kept, skipped = spec.odd_split(point, {"VEC_L0": 4}, constraints)
    assert kept == [] and [p.name for p in skipped] == both
    kept, skipped = spec.odd_split(point, {"VEC_L0": 1}, constraints)
    assert [p.name for p in kept] == both and skipped == []
    # A constraint naming something unknown is not checked; one that cannot be evaluated excludes.
    assert spec.odd_split(point, {"VEC_L0": 4}, ("NOPE == 1",))[1] == []
    kept, skipped = spec.odd_split(point, {"VEC_L0": 0}, ("d % VEC_L0 == 0",))
    assert kept == [] and len(skipped) == 2


def test_candidate_carries_the_template_constraints(spec: Spec) -> None:
    cand = candidate(spec, PIPELINE, {"VEC_L0": 4})
    assert "VEC_L0 == 1 or (d) % VEC_L0 == 0" in cand.constraints
    again = Candidate.from_dict(cand.to_dict())
    assert again == cand and again.digest == cand.digest
    plain = Candidate("src", "k", ("1",), ("1",))
    assert "constraints" not in plain.to_dict()  # digests and cache keys of the rest unchanged
    assert Candidate.from_dict(plain.to_dict()) == plain
    point = spec.find_point("tokens=1,d=4096")
    shapes, skipped = verify_shapes(spec, cand, point, Options())
    assert shapes == [point] and [p.name for p in skipped] == ["tokens=1,d=4097", "tokens=1,d=4093"]
    assert verify_shapes(spec, cand, point, Options(odd=False)) == ([point], [])
    scalar = candidate(spec, PIPELINE, {"VEC_L0": 1})
    assert len(verify_shapes(spec, scalar, point, Options())[0]) == 3


def test_measurement_round_trips_the_skipped_variants() -> None:
    m = Measurement("k", "d=8", {"V": 4}, Status.OK, verified=("k",), odd_skipped=("d=9", "d=5"))
    assert Measurement.from_dict(m.to_dict()) == m
    old = m.to_dict()
    del old["odd_skipped"]  # a record written before the field existed
    assert Measurement.from_dict(old).odd_skipped == ()


@needs_compiler
def test_harness_records_verified_and_skipped_odd_variants(spec: Spec) -> None:
    point = spec.find_point("tokens=1,d=4096")
    wide = candidate(spec, PIPELINE, {"VEC_L0": 4})
    scalar = candidate(spec, PIPELINE, {"VEC_L0": 1})
    with Harness(spec, handler=FAKE, timeout_s=60) as h:
        assert h._shapes(wide, point) == [point]
        m = h.measure(wide, point)
        assert m.status is Status.OK, m.message
        assert m.odd_skipped == ("tokens=1,d=4097", "tokens=1,d=4093")
        assert len(h._shapes(scalar, point)) == 3
        m = h.measure(scalar, point)
        assert m.status is Status.OK and m.odd_skipped == ()
        assert h.measure(h.original, point).odd_skipped == ()
