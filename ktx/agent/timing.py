"""The run's phase clock: what :class:`ktx.records.phases.PhaseTimings` is filled from.

A run's phases are timed where they happen (the loop, the assembly in :func:`ktx.agent.loop.optimize`)
and read once at the end, so one mutable accumulator is passed around and the frozen record is
made from it (:meth:`PhaseClock.record`). The compiles are asked of the backend at the end: the
GPU harness keeps every compile result it waited for (``compile_results``); a replay has none.

>>> clock = PhaseClock(start=0.0)
>>> clock.add("load", 1.5)
>>> clock.round(1).plan_s = 0.25
>>> timings = clock.record(now=2.0)
>>> timings.rounds[0].plan_s, round(timings.other_s, 2)
(0.25, 0.25)
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ktx.records.phases import PhaseTimings, RoundPhases, compile_counts

#: The fixed phases, in the order the line prints them.
FIXED = ("load", "backend", "originals", "ncu", "report")


@dataclass
class _Round:
    index: int
    plan_s: float = 0.0
    template_s: float = 0.0
    search_s: float = 0.0
    check_s: float = 0.0
    recheck_s: float = 0.0
    evaluations: int = 0

    def frozen(self) -> RoundPhases:
        return RoundPhases(self.index, self.plan_s, self.template_s, self.search_s, self.check_s,
                           self.recheck_s, self.evaluations)  # fmt: skip


@dataclass
class PhaseClock:
    """Seconds per phase, added as they are measured; ``start``: ``time.monotonic()`` when the
    command started (before the spec was loaded)."""

    start: float = field(default_factory=time.monotonic)
    fixed: dict[str, float] = field(default_factory=dict)
    rounds: dict[int, _Round] = field(default_factory=dict)
    backend: Any = None

    def add(self, phase: str, seconds: float) -> None:
        if phase not in FIXED:
            raise ValueError(f"unknown phase {phase!r} (phases: {', '.join(FIXED)})")
        self.fixed[phase] = self.fixed.get(phase, 0.0) + max(0.0, seconds)

    @contextmanager
    def timing(self, phase: str) -> Iterator[None]:
        began = time.monotonic()
        try:
            yield
        finally:
            self.add(phase, time.monotonic() - began)

    def round(self, index: int) -> _Round:
        if index not in self.rounds:
            self.rounds[index] = _Round(index)
        return self.rounds[index]

    def record(self, now: float | None = None) -> PhaseTimings:
        wall = (time.monotonic() if now is None else now) - self.start
        results = getattr(self.backend, "compile_results", None)
        compiles = compile_counts(results()) if callable(results) else ()
        return PhaseTimings(
            load_s=self.fixed.get("load", 0.0),
            backend_s=self.fixed.get("backend", 0.0),
            originals_s=self.fixed.get("originals", 0.0),
            ncu_s=self.fixed.get("ncu", 0.0),
            rounds=tuple(self.rounds[i].frozen() for i in sorted(self.rounds)),
            report_s=self.fixed.get("report", 0.0),
            wall_s=wall,
            compiles=compiles,
        )
