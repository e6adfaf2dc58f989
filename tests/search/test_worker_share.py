"""Workers measure the originals side by side and search to the run's deadline (issue 23: with
``--workers 4`` the main process measured every original serially before starting the workers, and
each worker's start-up came on top of its time limit)."""

from __future__ import annotations

import time

import pytest

from ktx.search.runner import DEADLINE_ENV, run_deadline, share_of
from ktx.spec import ShapePoint

POINTS = tuple(ShapePoint((("tokens", t),)) for t in range(21))


def test_the_shares_cover_every_shape_once() -> None:
    shares = [share_of(POINTS, i, 4) for i in range(4)]
    assert sorted((p for s in shares for p in s), key=lambda p: p.values) == sorted(
        POINTS, key=lambda p: p.values
    )
    assert [len(s) for s in shares] == [6, 5, 5, 5]
    assert share_of(POINTS, 0, 1) == POINTS


def test_a_worker_keeps_the_runs_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Started 30 s into a 60 s run, a worker has 30 s left, not its own 60."""
    monkeypatch.setenv(DEADLINE_ENV, repr(time.time() + 30.0))
    own = time.monotonic() + 60.0
    got = run_deadline(own)
    assert got is not None and abs(got - (time.monotonic() + 30.0)) < 0.5
    monkeypatch.delenv(DEADLINE_ENV)
    assert run_deadline(own) == own
