"""Searches replayed on recordings measured on a GPU, once they are committed
(``kernels/<name>/recorded/*.json``, ``results/**/recording*.json``). Skips until then."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktx.search.compare import compare, optimum
from ktx.search.recording import Recording
from ktx.specload import load_spec

from .conftest import ROOT

FOUND = sorted(
    {*ROOT.glob("kernels/*/recorded/*.json"), *ROOT.glob("results/**/recording*.json")},
)


def kernel_dir(recording: Recording) -> Path:
    return ROOT / "kernels" / recording.kernel


@pytest.mark.skipif(not FOUND, reason="no GPU recordings committed yet (scripts/gpu_tune.sh makes them)")
@pytest.mark.parametrize("path", FOUND, ids=[str(p.relative_to(ROOT)) for p in FOUND])
def test_search_on_a_recording(path: Path) -> None:
    recording = Recording.load(path)
    assert not recording.synthetic, "committed recordings are measurements"
    spec = load_spec(kernel_dir(recording))
    shape = max(recording.shapes, key=lambda s: sum(1 for _ in recording.at(s)))
    best = optimum(recording, shape)
    assert best.ok > 0
    _, results = compare(spec, recording, shape, ("tpe", "grid"), seeds=2, budget=min(40, best.feasible))
    for r in results:
        assert all(e is None or 1 <= e <= min(40, best.feasible) for e in r.evals)
        assert 0.0 < r.fractions[-1] <= 1.0 + 1e-9
