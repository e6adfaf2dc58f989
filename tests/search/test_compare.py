"""Sampler comparison on a SYNTHETIC recorded exhaustive space."""

from __future__ import annotations

import pytest

from ktx.search.compare import compare, evaluations_to_reach, fraction_curve, markdown, optimum
from ktx.search.recording import Recording
from ktx.specload import load_spec

from .conftest import SILU


def test_reading_curves() -> None:
    curve = [None, 5.0, 3.0, None, 2.0]
    assert evaluations_to_reach(curve, 3.0) == 3
    assert evaluations_to_reach(curve, 1.0) is None
    assert fraction_curve(curve, 2.0, (1, 2, 3, 5, 10)) == [0.0, 0.4, pytest.approx(2 / 3), 1.0, 1.0]


@pytest.mark.slow
def test_compare_reports_every_sampler(recording: Recording) -> None:
    shape = "tokens=16,d=4096"
    best = optimum(recording, shape)
    assert best.metric == "graph" and best.feasible == len(
        recording.space.feasible_configs({"tokens": 16, "d": 4096})
    )
    _, results = compare(load_spec(SILU), recording, shape, ("random", "grid"), seeds=2, budget=best.feasible)
    by = {r.sampler: r for r in results}
    assert by["grid"].reached == 2, "an exhaustive grid always reaches the optimum"
    assert by["grid"].fractions[-1] == pytest.approx(1.0)
    text = markdown(best, results, 0.02, (5, 10, 20, 50, 100, 200))
    assert "| grid | 2/2 |" in text


def test_budgets_as_fractions_and_random_band(recording: Recording) -> None:
    from ktx.search.compare import fraction_checkpoints

    best = optimum(recording, "tokens=16,d=4096")
    checkpoints = fraction_checkpoints([0.01, 0.05, 0.1], best.feasible)
    assert checkpoints == tuple(max(1, round(f * best.feasible)) for f in (0.01, 0.05, 0.1))
    _, (random,) = compare(load_spec(SILU), recording, "tokens=16,d=4096", ("random",), 4, max(checkpoints),
                           checkpoints=checkpoints)  # fmt: skip
    assert len(random.per_seed) == 4 and all(len(s) == 3 for s in random.per_seed)
    for i, mean in enumerate(random.fractions):
        band = random.band(i)
        assert band is not None and band[0] <= mean <= band[1] <= 1.0
