"""A knob whose powers of two have a gap (row-owner's THREADS_PER_ROW: 1, then 32 .. 1024) is
suggested by index, not by exponent: an exponent range suggested 16, which is not in the domain,
and the trial failed ("knob 'THREADS_PER_ROW': 16 is not one of ...")."""

from __future__ import annotations

import optuna

from ktx.search.space import Knob, Space


def test_powers_of_two_with_a_gap_are_indexed() -> None:
    gap = Knob("THREADS_PER_ROW", (1, 32, 64, 128, 256, 512, 1024), 1)
    full = Knob("BLOCK", (32, 64, 128, 256, 512, 1024), 256)
    space = Space((gap, full))
    assert space.param_name(gap) == "THREADS_PER_ROW[i]"
    assert space.param_name(full) == "log2(BLOCK)"
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(40):
        config = space.suggest(study.ask())
        assert config["THREADS_PER_ROW"] in gap.values and config["BLOCK"] in full.values
