"""Fixtures for the search tests: a SYNTHETIC recording (analytic model, not measurements).

Real recordings, once committed (``kernels/<name>/recorded/*.json`` or ``results/**/recording*.json``),
are picked up by ``test_real_recordings.py``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ktx.search import synthetic
from ktx.search.recording import Recording, write

ROOT = Path(__file__).resolve().parents[2]
SILU = ROOT / "kernels" / "silu_and_mul"
#: Tuned shapes of the CLI tests, and the midpoints ``--holdout auto`` picks between them.
TUNED = ((1, 4096), (16, 4096), (256, 4096), (1, 11008))
HOLDOUT = ((4, 4096), (64, 4096))
TUNED_ARG = ";".join(synthetic.shape_name(t, d) for t, d in TUNED)


@pytest.fixture(scope="session")
def recording_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("recording") / "synthetic_silu.json"
    write(synthetic.recording((*TUNED, *HOLDOUT), kernel="silu_and_mul"), path)
    return path


@pytest.fixture(scope="session")
def recording(recording_path: Path) -> Recording:
    return Recording.load(recording_path)


class VirtualClock:
    """``time.monotonic`` and ``time.sleep`` for one test: only ``sleep`` moves the clock.

    Time limits in ktx read ``time.monotonic()``, and the test stand-in for GPU time (the replay
    backend's throttle) calls ``time.sleep``. On the real clock a test of a limit also counts the
    Python work between measurements, which a loaded machine (or a long pytest process) makes
    several times slower: a 6 s limit left a shape no evaluation in full-suite runs. On this
    clock the run's own work costs nothing and each stand-in measurement exactly what it says,
    so the outcome is the same under any load.
    """

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self._lock = threading.Lock()

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.now += max(0.0, seconds)


@pytest.fixture
def virtual_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[VirtualClock]:
    """Replace ``time.monotonic`` and ``time.sleep`` with a :class:`VirtualClock` for callers
    that look them up on the ``time`` module when called (as ktx does)."""
    clock = VirtualClock()
    monkeypatch.setattr(time, "monotonic", clock.monotonic)
    monkeypatch.setattr(time, "sleep", clock.sleep)
    yield clock
