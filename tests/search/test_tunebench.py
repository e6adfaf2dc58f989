"""The replay harness of ktx tune's search (ktx.search.tunebench) on the committed exhaustive
silu_and_mul recording (H200, 140 configs at two shapes, every one measured)."""

from __future__ import annotations

import math

import pytest

from ktx.search.compare import optimum
from ktx.search.evaluate import objective_time
from ktx.search.recording import Recording
from ktx.search.tunebench import Method, bench, evaluations_to_fraction, markdown, quartiles, replay_tune
from ktx.specload import load_spec

from .conftest import SILU

RECORDING = SILU / "recorded" / "exhaustive_h200_2026-11-21.json"
SHAPES = ("tokens=1,d=4096", "tokens=64,d=14336")


@pytest.fixture(scope="module")
def exhaustive() -> Recording:
    return Recording.load(RECORDING)


def test_quartiles_count_a_miss_as_infinitely_many() -> None:
    assert quartiles([1, 2, 3, 4, 5]) == (2.0, 3.0, 4.0)
    assert quartiles([1, None, None, None]) == (math.inf, math.inf, math.inf)
    assert quartiles([4, 2, None]) == (3.0, 4.0, math.inf)


def test_evaluations_to_fraction_reads_the_first_good_enough() -> None:
    assert evaluations_to_fraction([None, 1.5, 1.03, 1.01], 1.0, 0.98) == 4
    assert evaluations_to_fraction([1.5], 1.0, 0.98) is None


def test_a_replayed_tune_follows_its_budget_and_is_repeatable(exhaustive: Recording) -> None:
    spec = load_spec(SILU)
    method = Method("after")
    a = replay_tune(spec, exhaustive, SHAPES, method, seed=1, trials=12)
    b = replay_tune(spec, exhaustive, SHAPES, method, seed=1, trials=12)
    assert set(a) == set(SHAPES) and a == b
    for shape, curve in a.items():
        assert len(curve) == 12, shape
        recorded = {
            objective_time(m, optimum(exhaustive, shape).metric) for m in exhaustive.at(shape) if m.config
        }
        assert set(curve) <= recorded, "every value is one the recording holds at that shape"


@pytest.mark.slow  # 20 seeds, ~7 s
def test_bench_counts_the_target_and_the_cost_model_beats_random(exhaustive: Recording) -> None:
    """On this held-out space (the model's defaults were chosen on act_and_mul_scalar), the
    default reaches 0.98 of the optimum within 10 evaluations (1% of 140 is below the floor of
    10) in the median of 20 seeds at both shapes; random sampling needs about 8 (12-13 of the 140
    configs are within 2%) and varies far more. Eight seeds were too few to compare the tails:
    with session 11's defaults the model's upper quartile at tokens=64 was 10 against random's
    7.75 on seeds 0-7, and 11 against 14.5 on twenty."""
    spec = load_spec(SILU)
    outcomes = bench(spec, exhaustive, SHAPES, [Method("after"), Method("random", "random")], range(20), 30)
    by = {(o.method, o.shape): o for o in outcomes}
    for shape in SHAPES:
        best = optimum(exhaustive, shape)
        width = sum(
            1
            for m in exhaustive.at(shape)
            if m.config and m.ok and best.time_us / float(objective_time(m, best.metric) or math.inf) >= 0.98
        )
        assert by[("after", shape)].within == width and width > 0
        assert by[("after", shape)].quartiles[1] <= 10, by[("after", shape)].evals
        assert by[("after", shape)].quartiles[2] <= by[("random", shape)].quartiles[2]
        mine = by[("after", shape)]
        assert mine.mark == 10 and mine.goal_met
        # the fraction each seed held at the mark agrees with the evaluations it needed
        assert [f >= 0.98 for f in mine.at_mark] == [e is not None and e <= 10 for e in mine.evals]
        assert mine.within_mark == sum(f >= 0.98 for f in mine.at_mark)
    table = markdown(outcomes, 0.98)
    assert table.count("\n") == 2 + len(outcomes) - 1 and "| 10 |" in table and "| met |" in table
