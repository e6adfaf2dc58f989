"""The run's last phases under a time limit: what to reserve, and the paired final check.

``--time-limit`` bounds the whole command (issue 12: a ``--time-limit 240`` run was still going
at 330 s and was killed before it wrote anything). The run therefore measures the originals
first, timing each, and from those costs reserves time up front for what must follow the search:
the paired final check of every shape (:mod:`ktx.search.paired`), the held-out check, and writing
the outputs. The search gets the rest. Every later phase checks the clock before each step and
skips what no longer fits, so the outputs are always written, near the limit.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ktx.search.evaluate import Evaluator
from ktx.search.paired import (
    IDENTICAL,
    NONE,
    PAIRS,
    SKIPPED,
    UNSUPPORTED,
    PairedCheck,
    from_pairs,
    same_code,
)
from ktx.spec import ShapePoint

#: Seconds assumed for one measurement at a shape whose original's cost is unknown.
DEFAULT_COST_S = 1.0

#: The most of a time limit reserved for the phases after the search.
MAX_RESERVE = 0.35

#: Seconds kept for writing the outputs (summary, dispatch table, sources, recording).
WRITE_S = 1.0

#: A timing-only measurement's cost as a share of the original's verified one. Verification
#: runs the kernel and its reference over several rounds and odd sizes and the check only
#: times, so the share is below 1 on a GPU; 1 keeps the reserve an upper bound (a check cut by
#: the limit keeps the original, losing a real win).
TIMING_SHARE = 1.0


@dataclass(frozen=True)
class Shortlist:
    """One shape's input to the final check: its best config (None: nothing to check)."""

    point: ShapePoint
    metric: str
    config: Mapping[str, int] | None
    #: The search's speedup at this shape: the largest wins are checked first, so a limit
    #: that runs out drops the smallest ones.
    gain: float | None = None


#: The fewest pairs a check runs with when the full :data:`PAIRS` do not fit the time left
#: (two give an interval, but one noisy pair then decides it).
MIN_PAIRS = 3


def check_cost(cost_s: float, pairs: int = PAIRS) -> float:
    """Seconds the paired check of one shape is expected to take: ``2 * pairs`` timing-only
    measurements, each :data:`TIMING_SHARE` of what the original's verified measurement cost."""
    return 2 * pairs * TIMING_SHARE * cost_s + 0.2


def reserve(costs: Mapping[str, float], holdout: int, time_limit: float, pairs: int = PAIRS) -> float:
    """Seconds to keep free after the search: the final check of every shape, ``holdout``
    held-out shapes (original and chosen config, verified) and writing; at most
    :data:`MAX_RESERVE` of ``time_limit``."""
    known = [c for c in costs.values() if c > 0]
    typical = max(known) if known else DEFAULT_COST_S
    final = sum(check_cost(costs.get(name) or typical, pairs) for name in costs)
    held = 2 * holdout * typical
    return min(MAX_RESERVE * time_limit, final + held + WRITE_S)


def final_check(
    evaluator: Evaluator,
    shapes: Sequence[Shortlist],
    deadline: float | None,
    costs: Mapping[str, float],
    pairs: int = PAIRS,
    log: Callable[[PairedCheck], None] | None = None,
) -> dict[str, PairedCheck]:
    """Re-measure each shape's best config against the original, interleaved, in one worker
    process (``measure_paired`` of the backend); identical code is 1.0 without measuring."""
    out: dict[str, PairedCheck] = {}
    backend = evaluator.backend
    paired = getattr(backend, "measure_paired", None)
    recorded = getattr(backend, "recorded_check", None)
    original = evaluator.tunable.candidate({})
    # The estimate comes from the original's verified measurement, an upper bound (a check
    # only times); once a check has run, its real cost scales the estimates of the rest.
    scale = 1.0
    order = sorted(shapes, key=lambda it: -(it.gain or 0.0))
    for item in order:
        name = item.point.name
        if item.config is None:
            check = PairedCheck(name, item.metric, NONE)
        else:
            config = dict(item.config)
            candidate = evaluator.tunable.candidate(evaluator.space.normalize(config))
            per_pair = scale * (check_cost(costs.get(name) or DEFAULT_COST_S, 1) - 0.2)
            expected = per_pair * pairs + 0.2
            left = None if deadline is None else deadline - time.monotonic()
            n = pairs if left is None else min(pairs, int(max(0.0, left - 0.2) / max(per_pair, 1e-9)))
            if same_code(original, candidate, evaluator.spec, item.point):
                check = PairedCheck(name, item.metric, IDENTICAL, config, reason="the original's code")
            elif callable(recorded):  # the replay of a recorded run: the run's own check, as it went
                check = recorded(name, config)
            elif not callable(paired):
                check = PairedCheck(
                    name, item.metric, UNSUPPORTED, config, reason="the backend cannot re-measure"
                )
            elif left is not None and n < min(pairs, MIN_PAIRS):
                why = f"{left:.1f} s left of the time limit, the check needs about {expected:.1f} s"
                check = PairedCheck(name, item.metric, SKIPPED, config, reason=why)
            else:
                timeout = None if left is None else max(1.0, left)
                start = time.monotonic()
                with evaluator._gpu:  # the backend measures one thing at a time
                    measured = paired(original, candidate, item.point, n, timeout)
                spent = time.monotonic() - start
                check = from_pairs(name, item.metric, config, measured)
                if measured and per_pair > 0:
                    scale = min(1.0, scale * spent / (per_pair * n + 0.2))
        out[name] = check
        if log is not None:
            log(check)
    return {item.point.name: out[item.point.name] for item in shapes}
