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

from collections.abc import Mapping
from dataclasses import dataclass

from ktx.measure.cost import request_overhead


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


def candidate_cost(seconds: float, costs: Mapping[str, float] | None) -> float:
    """Seconds a candidate's measurement at a shape is expected to take, from the original's
    request there (``seconds``, with the worker's account ``costs``): its timing, the request's
    fixed part, and a verification counted at most as long as the timing.

    Why (issue 23 item 6, llm.c layernorm v1 on an H200): the original's request is the
    costliest a run makes: it alone checks the kernel against the float64 Python reference
    (host work on buffers of 25M floats, at four shapes and three rounds), 22 s for three
    shapes where timing a 0.6 ms kernel took about 0.7 s each. A candidate is checked against
    the original's outputs kept on the device: the same launches and on-device comparisons,
    fewer launches than its timing's, so its verification costs at most about its timing.
    Without a report (a stand-in handler) the whole request is the estimate.

    >>> candidate_cost(7.0, {"warmup_s": 0.0, "python_s": 1.0, "verify_s": 6.0, "time_s": 0.7})
    1.7
    >>> candidate_cost(1.0, {"verify_s": 0.1, "time_s": 0.7})
    1.0
    >>> candidate_cost(0.2, None)
    0.2
    """
    if not costs or not isinstance(costs.get("time_s"), int | float):
        return request_cost(seconds, dict(costs) if costs else None)
    timing = float(costs["time_s"])
    verify, python = costs.get("verify_s", 0.0), costs.get("python_s", 0.0)
    own = (
        float(verify) - float(python)
        if isinstance(verify, int | float) and isinstance(python, int | float)
        else 0.0
    )
    return round(timing + min(max(0.0, own), timing) + request_overhead(seconds, costs), 6)


def timing_cost(seconds: float, costs: Mapping[str, float] | None) -> float:
    """Seconds a timing-only request at a shape is expected to take (each side of a paired
    check), from the original's request there: its timing and the request's fixed part, no
    verification. Without the worker's account, :func:`candidate_cost`.

    >>> timing_cost(7.0, {"warmup_s": 0.0, "python_s": 1.0, "verify_s": 6.0, "time_s": 0.7})
    1.0
    """
    if not costs or not isinstance(costs.get("time_s"), int | float):
        return candidate_cost(seconds, costs)
    return round(float(costs["time_s"]) + request_overhead(seconds, costs), 6)
