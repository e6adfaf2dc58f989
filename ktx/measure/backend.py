"""The seam between the search and the hardware: anything that answers ``measure``.

The GPU harness (:class:`ktx.measure.harness.Harness`) measures for real; the replay backend
(:class:`ktx.measure.replay.ReplayBackend`) answers from recorded measurements, so search
strategies can be compared on a CPU, deterministically.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ktx.measure.types import Candidate, Measurement
from ktx.spec import ShapePoint


@runtime_checkable
class Backend(Protocol):
    def measure(self, candidate: Candidate, shape: ShapePoint) -> Measurement:
        """Verify and time ``candidate`` at ``shape``; failures come back as measurements."""
        ...
