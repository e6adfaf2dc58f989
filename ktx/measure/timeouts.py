"""How long a measurement may take: derived from the original kernel's own cost at the shape.

A fixed timeout must fit the slowest shape of any kernel, so it is minutes long; a hung
candidate then cost minutes, twice over with a retry at full length (issue 12: a planted
``while (clock64() > 0) {}`` took 180 s plus 180 s). Yet a candidate does the same work as the
original (verify at the shape and its odd variants, then time), so a generous multiple of what
the original's request cost at that shape bounds any candidate that terminates, and a hang is
found in seconds. Until the original has been measured at a shape the configured ceiling holds.

A retry after a timeout is short: it only tells a flaky worker (which answers quickly the
second time) from a hang (which hangs again), so it need not wait the full timeout again.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TimeoutPolicy:
    """``timeout = clamp(multiple * original_cost, floor_s, ceiling_s)`` seconds."""

    ceiling_s: float = 180.0  # before the original's cost is known, and the most ever allowed
    floor_s: float = 3.0  # a request also loads modules and may refill the reference memo
    multiple: float = 50.0
    retry_multiple: float = 5.0  # the retry after a timeout: enough to answer, not to hang long

    def timeout(self, original_cost_s: float | None) -> float:
        """Seconds for a first measurement at a shape whose original cost ``original_cost_s``."""
        if original_cost_s is None or original_cost_s <= 0:
            return self.ceiling_s
        return min(self.ceiling_s, max(self.floor_s, self.multiple * original_cost_s))

    def retry_timeout(self, original_cost_s: float | None) -> float:
        """Seconds for measuring again a candidate that timed out at this shape."""
        first = self.timeout(original_cost_s)
        if original_cost_s is None or original_cost_s <= 0:
            return min(first, max(self.floor_s, 0.1 * self.ceiling_s))
        return min(first, max(self.floor_s, self.retry_multiple * original_cost_s))


def request_cost(seconds: float, costs: dict[str, float] | None) -> float:
    """The part of a request's wall time a candidate repeats: without one-off costs the worker
    reports (a process warm-up, the Python reference check of the original, cached on disk
    afterwards)."""
    one_off = 0.0
    for name in ("warmup_s", "python_s"):
        value = (costs or {}).get(name, 0.0)
        one_off += float(value) if isinstance(value, int | float) else 0.0
    return max(seconds - one_off, 0.0)
