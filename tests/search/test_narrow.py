"""Narrow optima (ktx.search.narrow): the needle at act_and_mul_scalar tokens=16 and a broad one."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktx.measure.types import config_key
from ktx.search.narrow import narrowness
from ktx.search.space import Knob, Space

SPACE = Space((Knob("A", (1, 2, 4), 1), Knob("B", (1, 2), 1)))


def times(values: dict[tuple[int, int], float]) -> dict[str, tuple[dict[str, int], float]]:
    out = {}
    for (a, b), t in values.items():
        config = {"A": a, "B": b}
        out[config_key(config)] = (config, t)
    return out


def test_a_lone_best_with_slow_neighbours_is_a_needle() -> None:
    found = narrowness(times({(2, 1): 1.0, (1, 1): 1.3, (4, 1): 1.2, (2, 2): 1.5, (4, 2): 1.01}), SPACE, "s")
    assert found is not None
    # (4, 2) is within 2% but differs in two knobs: it counts as company, not as a neighbour
    assert (found.within, found.neighbours) == (2, 3)
    assert found.nearest_slowdown == pytest.approx(0.2) and found.needle


def test_a_neighbour_within_ten_percent_is_no_needle() -> None:
    found = narrowness(times({(2, 1): 1.0, (1, 1): 1.05, (4, 1): 1.2}), SPACE, "s")
    assert found is not None and not found.needle and found.nearest_slowdown == pytest.approx(0.05)


def test_without_measured_neighbours_nothing_is_claimed() -> None:
    found = narrowness(times({(2, 1): 1.0, (4, 2): 1.5}), SPACE, "s")
    assert found is not None and found.neighbours == 0 and not found.needle
    assert narrowness({}, SPACE, "s") is None


RECORDING = Path("/work/shared/recordings/space_act_and_mul_scalar_h200.json.gz")


@pytest.mark.skipif(not RECORDING.is_file(), reason="the shared exhaustive recording is not here")
@pytest.mark.parametrize(
    ("shape", "metric", "needle"),
    [("tokens=16,d=4096", "graph", True), ("tokens=4096,d=4096", "single", False)],
)
def test_the_recorded_needle_and_the_broad_optimum(shape: str, metric: str, needle: bool) -> None:
    """Every config measured: tokens=16 has 2 configs within 2% and every one-knob neighbour of
    the best at least 16% slower (issue 23 says 14%); tokens=4096 has about a hundred."""
    import gzip
    import json

    from ktx.search.recording import Recording

    recording = Recording.from_dict(json.loads(gzip.decompress(RECORDING.read_bytes())), str(RECORDING))
    measured = {
        config_key(m.config): (dict(m.config), t)
        for m in recording.at(shape)
        if m.config and m.ok and (t := (m.graph_us if metric == "graph" else m.single_us)) is not None
    }
    found = narrowness(measured, recording.space, shape)
    assert found is not None and found.needle is needle
    if needle:
        assert found.within == 2 and found.neighbours == 19
        assert found.nearest_slowdown is not None and found.nearest_slowdown > 0.15
    else:
        assert found.within > 50
