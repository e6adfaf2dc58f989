"""The run's last phases under a time limit: what to reserve, and the paired final check.

``--time-limit`` bounds the whole command (issue 12: a ``--time-limit 240`` run was still going
at 330 s and was killed before it wrote anything). The run therefore measures the originals
first, timing each, and from those costs reserves time up front for what must follow the search:
the paired final check of every shape (:mod:`ktx.search.paired`), the held-out check, and writing
the outputs. The search gets the rest. Every later phase checks the clock before each step and
skips what no longer fits, so the outputs are always written, near the limit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from ktx.measure.cost import PAIRED_REQUEST_S, pair_seconds, rotated_sets
from ktx.measure.gpu import Options
from ktx.measure.types import Measurement, Status
from ktx.search.evaluate import Evaluator
from ktx.search.paired import (
    FAILED,
    IDENTICAL,
    MEASURED,
    NO_GAIN,
    NONE,
    PAIRED_MIN_GAIN,
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
    #: Per-launch times (µs, the single-launch median: it includes the launch's host time) of
    #: the original and of the config, and the bytes one launch moves: with them the check's
    #: cost is counted from its launches (:mod:`ktx.measure.cost`), not guessed from the
    #: original's verified measurement, which costs many times more than a timing (issue 23).
    original_us: float | None = None
    config_us: float | None = None
    set_bytes: int | None = None

    def pair_s(self, options: Options, overhead_s: float = 0.0, scale: float = 1.0) -> float | None:
        """Seconds one pair of this shape's check takes; None where a time is not known.
        ``overhead_s``: a request's measured seconds besides its launches, paid by each side of
        the pair; ``scale``: the measured wall time of a timing over its launches' count (see
        :func:`pair_estimate`)."""
        if not self.original_us or not self.config_us:
            return None
        nsets = rotated_sets(self.set_bytes, options)
        return scale * pair_seconds(self.original_us, self.config_us, options, nsets) + 2 * overhead_s


def measured_overheads(backend: object) -> tuple[float, float]:
    """(seconds a request costs besides its launches, the timing scale) as the backend measured
    them on this host (the GPU harness's ``request_overhead_s`` and ``observed_timing_scale``);
    (0, 1) for a backend that measured none."""
    overhead = getattr(backend, "request_overhead_s", None)
    scale = getattr(backend, "observed_timing_scale", None)
    return (
        float(overhead) if isinstance(overhead, int | float) else 0.0,
        float(scale) if isinstance(scale, int | float) and scale > 0 else 1.0,
    )


def start_estimate(backend: object) -> float:
    """Seconds the backend's worker needs before the check's request can start: 0 where it is
    warm (or the backend has no worker to start), else its measured restart cost."""
    ready = getattr(backend, "worker_ready", None)
    if not callable(ready) or ready():
        return 0.0
    seconds = getattr(backend, "worker_start_s", None)
    return float(seconds) if isinstance(seconds, int | float) else 0.0


def learned_scale(took_s: float, base_s: float, pairs: int, kind: str) -> float:
    """How much longer than counted a check's pairs took (``took_s``: its request alone, without
    a worker's start), bounded: the factor the next checks of the same kind are scaled by."""
    ratio = max(took_s - PAIRED_REQUEST_S, took_s / 2) / (base_s * pairs)
    low, high = (0.25, 4.0) if kind == "counted" else (0.0, 1.0)
    return min(high, max(low, ratio))


def pair_estimate(item: Shortlist, backend: object, options: Options) -> float | None:
    """Seconds of one pair of ``item``'s check: its launches counted from the per-launch times
    (:mod:`ktx.measure.cost`), scaled by how long timings really took on this host, plus each
    side's fixed request cost as measured (issue 23: leaving that out made the estimate many
    times short where it dominates, so it was capped below by the verified measurement's cost,
    which is many times too long for a slow original and dropped found wins)."""
    overhead, scale = measured_overheads(backend)
    return item.pair_s(options, overhead, scale)


#: The fewest pairs a check runs with when the full :data:`PAIRS` do not fit the time left
#: (two give an interval, but one noisy pair then decides it).
MIN_PAIRS = 3

#: A search gain at least this large is checked with as few as :data:`FLOOR_PAIRS` pairs rather
#: than skipped: a check of two pairs is noisier than three, but keeping a kernel many times
#: slower because three did not fit loses far more than a noisy check can (issue 23: encoder B=1
#: kept its naive kernel, 72x slower, after the search found one about 70x faster).
LARGE_GAIN = 1.5

#: The fewest pairs that give an interval (:func:`ktx.search.paired.from_pairs`).
FLOOR_PAIRS = 2

#: A search gain at least this large is checked first with :data:`EARLY_PAIRS` pairs; the rest of
#: the pairs run only where those leave the verdict open (:func:`decided_early`).
EARLY_GAIN = 2.0

#: Pairs of a check's first request where the search's gain is :data:`EARLY_GAIN` or more.
EARLY_PAIRS = 2

#: The lower end of the first pairs' interval that counts as far above 1 ...
EARLY_LOW = 1.5

#: ... where the interval's half-width (on the log scale) is at most this share of the
#: estimate's distance from 1 (also on the log scale).
EARLY_SPREAD = 0.25


def decided_early(check: PairedCheck, least_gain: float) -> bool:
    """Whether the first pairs of a check already decide it, so the rest need not run: their
    95% interval lies above both ``1 + least_gain`` and :data:`EARLY_LOW`, and is narrow against
    its distance from 1 (half-width at most :data:`EARLY_SPREAD` of ``log(estimate)``).

    Why (issue 23 item 6, llm.c softmax_forward, H200, --budget 300): the naive original takes
    40 ms a launch, so five pairs of the round's check took 80.9 s to confirm a 42x win (17-132x
    per shape) that two pairs already put far above 1; the reserve priced alike left "less than
    one candidate's measurement" for a second round, and the configs that beat the hand kernels
    were never reached. The interval reported is always the one of the pairs run; a marginal
    gain (below :data:`EARLY_GAIN` by the search, or an interval near 1) runs every pair.

    >>> from ktx.search.paired import MEASURED, ratio_interval
    >>> def check(*ratios):
    ...     iv = ratio_interval(ratios)
    ...     return PairedCheck("s", "graph", MEASURED, {}, iv, iv)
    >>> decided_early(check(40.0, 41.0), 0.01), decided_early(check(1.03, 1.031), 0.01)
    (True, False)
    >>> decided_early(check(3.0, 9.0), 0.01)  # far above 1 by the estimate, but too wide
    False
    """
    iv = check.interval
    if check.status != MEASURED or iv is None or iv.lo <= max(EARLY_LOW, 1.0 + least_gain):
        return False
    half = math.log(iv.hi / iv.lo) / 2
    return half <= EARLY_SPREAD * math.log(iv.estimate)


def first_pairs(gain: float | None, pairs: int) -> int:
    """Pairs of a check's first request: :data:`EARLY_PAIRS` where the search's gain is
    :data:`EARLY_GAIN` or more (the rest run only where they are needed), else all ``pairs``.

    >>> first_pairs(42.0, 5), first_pairs(1.03, 5), first_pairs(42.0, 2), first_pairs(None, 5)
    (2, 5, 2, 5)
    """
    return min(pairs, EARLY_PAIRS) if (gain or 0.0) >= EARLY_GAIN else pairs


def pairs_needed(gain: float | None) -> int:
    """Pairs a check of a shape whose search gain is ``gain`` is expected to need, for the
    reserve (:mod:`ktx.agent.budget`): :data:`EARLY_PAIRS` for a gain of :data:`EARLY_GAIN` or
    more, whose first pairs decide it, else :data:`MIN_PAIRS`.

    >>> pairs_needed(42.0), pairs_needed(1.5), pairs_needed(None)
    (2, 3, 3)
    """
    return EARLY_PAIRS if (gain or 0.0) >= EARLY_GAIN else MIN_PAIRS


#: A check's request may run this many times its expected seconds before the worker is killed,
#: even where that passes the deadline by a little. The session-8 real-code run (H200, 30 s a
#: kernel) sized each round's first check to the time left and then killed it at that limit:
#: first checks took 0.8-1.5x their estimate, 13 of them ran past it, and every one was lost as
#: "the original: timeout" with the worker killed (ggml diag_mask_inf_f32 kept its original at a
#: shape the search had made 4.6x faster). Passing the deadline by half a check's few seconds
#: costs far less than a lost win and the restart of a killed worker.
CHECK_SLACK = 1.5

#: A check that times out within this many times its expected seconds was cut by the time
#: limit, not hung: it counts as skipped (a later re-check with more time measures it), never
#: as failed (kept as is: ``ktx optimize``'s re-check measured only skipped checks again).
HANG_FACTOR = 4.0


#: The most a paired request may run past the deadline, as a share of the time limit (and at
#: most :data:`GRACE_MAX_S`): ``--time-limit`` promises an over-run of at most 5% or 10 s.
GRACE_SHARE = 0.05
GRACE_MAX_S = 10.0


def check_grace(time_limit: float | None) -> float:
    """Seconds a check planned to end by the deadline may run past it before it is killed.

    Why (session 8's real-code runs): 13 checks, each planned to fit the time left, took 5-35%
    longer than estimated and were killed at the deadline: the check was lost (the original
    kept) and the worker with it, whose restart the next check paid (3-4 s). The number of
    pairs is still chosen to end by the deadline; the grace only absorbs the estimate's error.

    >>> check_grace(None), check_grace(40.0), check_grace(1000.0)
    (0.0, 2.0, 10.0)
    """
    if time_limit is None or time_limit <= 0:
        return 0.0
    return min(GRACE_MAX_S, GRACE_SHARE * time_limit)


def check_cost(cost_s: float, pairs: int = PAIRS) -> float:
    """Seconds the paired check of one shape is expected to take: ``2 * pairs`` timing-only
    measurements, each :data:`TIMING_SHARE` of what the original's verified measurement cost."""
    return 2 * pairs * TIMING_SHARE * cost_s + 0.2


def reserve(
    costs: Mapping[str, float],
    holdout: int,
    time_limit: float,
    pairs: int = PAIRS,
    pair_s: Mapping[str, float] | None = None,
) -> float:
    """Seconds to keep free after the search: the final check of every shape, ``holdout``
    held-out shapes (original and chosen config, verified) and writing; at most
    :data:`MAX_RESERVE` of ``time_limit``. ``pair_s``: seconds of one check pair per shape,
    counted from per-launch times (:meth:`Shortlist.pair_s`); other shapes fall back to the
    original's verified cost, an upper bound many times too high."""
    known = [c for c in costs.values() if c > 0]
    typical = max(known) if known else DEFAULT_COST_S
    counted = pair_s or {}
    final = sum(
        PAIRED_REQUEST_S + pairs * counted[name]
        if counted.get(name)
        else check_cost(costs.get(name) or typical, pairs)
        for name in costs
    )
    held = 2 * holdout * typical
    return min(MAX_RESERVE * time_limit, final + held + WRITE_S)


def cut_by_limit(
    measured: Sequence[tuple[Measurement, Measurement]], timeout: float | None, expected_s: float
) -> bool:
    """Whether a check's failure is the time limit's doing: its request timed out, and the
    timeout it had was less than :data:`HANG_FACTOR` times what the check was expected to take
    (a kernel that hangs times out whatever it is given; a check given a few seconds that needed
    a few more did not fail, it was cut).

    >>> from types import SimpleNamespace as NS
    >>> late = [(NS(status=Status.TIMEOUT), NS(status=Status.TIMEOUT))]
    >>> cut_by_limit(late, 3.0, 2.5), cut_by_limit(late, 30.0, 2.5), cut_by_limit(late, None, 2.5)
    (True, False, False)
    >>> cut_by_limit([(NS(status=Status.CRASH), NS(status=Status.OK))], 3.0, 2.5)
    False
    """
    if timeout is None or not measured:
        return False
    bad = {m.status for pair in measured for m in pair if m.status != Status.OK}
    return bad == {Status.TIMEOUT} and timeout < HANG_FACTOR * max(expected_s, 0.25)


def pairs_note(ran: int, planned: int, first: int, early: bool, check: PairedCheck) -> str:
    """How many pairs a measured check ran and why, for its reason (its interval is theirs).
    ``early``: the first ``first`` pairs decided it (:func:`decided_early`)."""
    iv = check.interval
    shown = "" if iv is None else f": {iv.text()}"
    if early:
        return (
            f"{ran} of {planned} pairs: the first {first} already lay far above 1{shown} "
            f"(lower end over {EARLY_LOW}x, half-width within {EARLY_SPREAD:.0%} of the distance from 1)"
        )
    if ran < planned:
        return f"{ran} of {planned} pairs: the rest did not fit the time left{shown}"
    if first < planned:
        return f"{ran} pairs: the first {first} left the verdict open{shown}"
    return f"{ran} pairs{shown}"


def final_check(
    evaluator: Evaluator,
    shapes: Sequence[Shortlist],
    deadline: float | None,
    costs: Mapping[str, float],
    pairs: int = PAIRS,
    log: Callable[[PairedCheck], None] | None = None,
    options: Options | None = None,
    spent: dict[str, dict[str, float]] | None = None,
    grace_s: float = 0.0,
    min_gain: float | None = None,
) -> dict[str, PairedCheck]:
    """Re-measure each shape's best config against the original, interleaved, in one worker
    process (``measure_paired`` of the backend); identical code is 1.0 without measuring.

    A check that does not fit the time left with all ``pairs`` runs with fewer: down to
    :data:`MIN_PAIRS`, or :data:`FLOOR_PAIRS` where the search's gain is :data:`LARGE_GAIN` or
    more. A search gain of :data:`EARLY_GAIN` or more is measured :data:`EARLY_PAIRS` pairs first,
    and the rest of the pairs only where those do not decide it (:func:`decided_early`); a measured
    check's reason says how many pairs ran and why (:func:`pairs_note`).

    ``spent`` (filled when given): per shape measured, the expected and the real seconds
    and the pairs run, so that a run's log shows how honest the estimate was. ``grace_s``: how
    far past the deadline a check may run before it is killed (:func:`check_grace`).

    A shape whose search found less than ``1 + min_gain`` (:data:`PAIRED_MIN_GAIN` when None) is
    not checked: the check confirms a gain the search saw, it does not find one. In session 8's
    real-code run (H200) 39 of 92 checks were of such shapes, each a second or two of a round's
    share, and none confirmed a gain."""
    out: dict[str, PairedCheck] = {}
    backend = evaluator.backend
    paired = getattr(backend, "measure_paired", None)
    recorded = getattr(backend, "recorded_check", None)
    found = getattr(backend, "options", None)
    opts = options or (found if isinstance(found, Options) else Options())
    original = evaluator.tunable.candidate({})
    # Estimates counted from per-launch times ("counted") and those from the original's verified
    # measurement ("verified", an upper bound) are corrected apart: once a check of a kind has
    # run, its real cost scales the rest of that kind.
    scale = {"counted": 1.0, "verified": 1.0}
    least_gain = PAIRED_MIN_GAIN if min_gain is None else min_gain
    order = sorted(shapes, key=lambda it: -(it.gain or 0.0))
    for item in order:
        name = item.point.name
        if item.config is None:
            check = PairedCheck(name, item.metric, NONE)
        else:
            config = dict(item.config)
            candidate = evaluator.tunable.candidate(evaluator.space.normalize(config))
            counted = pair_estimate(item, backend, opts)
            kind = "verified" if counted is None else "counted"
            verified = check_cost(costs.get(name) or DEFAULT_COST_S, 1) - 0.2
            # counted: launches and the measured fixed cost of each side's request (no cap: the
            # verified cost is many times too long for a slow original, and dropped found wins)
            base = verified if counted is None else counted
            per_pair = scale[kind] * base
            start_s = start_estimate(backend)  # a retired worker's restart, paid first
            expected = per_pair * pairs + PAIRED_REQUEST_S + start_s
            floor = FLOOR_PAIRS if (item.gain or 0.0) >= LARGE_GAIN else MIN_PAIRS
            left = None if deadline is None else deadline - time.monotonic() - start_s
            n = (
                pairs
                if left is None
                else min(pairs, int(max(0.0, left - PAIRED_REQUEST_S) / max(per_pair, 1e-9)))
            )
            if same_code(original, candidate, evaluator.spec, item.point):
                check = PairedCheck(name, item.metric, IDENTICAL, config, reason="the original's code")
            elif callable(recorded):  # the replay of a recorded run: the run's own check, as it went
                check = recorded(name, config)
            elif item.gain is not None and item.gain < 1.0 + least_gain:
                least = 1.0 + least_gain
                why = f"the search found {item.gain:.3f}x here, below the {least:.2f}x a check confirms"
                check = PairedCheck(name, item.metric, NO_GAIN, config, reason=why)
            elif not callable(paired):
                check = PairedCheck(
                    name, item.metric, UNSUPPORTED, config, reason="the backend cannot re-measure"
                )
            elif left is not None and n < min(pairs, floor):
                least = per_pair * min(pairs, floor) + PAIRED_REQUEST_S + start_s
                why = (
                    f"{left + start_s:.1f} s left of the time limit, the check needs about {least:.1f} s "
                    f"with {min(pairs, floor)} pairs ({expected:.1f} s with {pairs})"
                )
                check = PairedCheck(name, item.metric, SKIPPED, config, reason=why)
            else:
                began = time.monotonic()
                warm = getattr(backend, "warm_worker", None)
                first = first_pairs(item.gain, n)
                guess = per_pair * first + PAIRED_REQUEST_S
                with evaluator._gpu:  # the backend measures one thing at a time
                    if start_s > 0 and callable(warm):
                        warm()  # apart from the request: its timeout and the scale below exclude it
                    start = time.monotonic()
                    left = None if deadline is None else deadline - start
                    timeout = None if left is None else max(1.0, left + grace_s, CHECK_SLACK * guess)
                    measured = list(paired(original, candidate, item.point, first, timeout))
                took = time.monotonic() - start
                check = from_pairs(name, item.metric, config, measured)
                ran = first
                early = first < n and decided_early(check, least_gain)
                if first < n and check.status == MEASURED and not early:
                    # the first pairs left the verdict open: the rest, in a second request
                    rest = n - first
                    more_guess = per_pair * rest + PAIRED_REQUEST_S
                    with evaluator._gpu:
                        left = None if deadline is None else deadline - time.monotonic()
                        if left is None or left >= more_guess:
                            timeout = (
                                None if left is None else max(1.0, left + grace_s, CHECK_SLACK * more_guess)
                            )
                            measured += paired(original, candidate, item.point, rest, timeout)
                            ran, guess = n, guess + more_guess
                    check = from_pairs(name, item.metric, config, measured)
                if check.status == MEASURED:
                    check = replace(check, reason=pairs_note(ran, n, first, early, check))
                if check.status == FAILED and cut_by_limit(measured, timeout, guess):
                    check = PairedCheck(
                        name, item.metric, SKIPPED, config,
                        reason=f"cut by the time limit: the check of {n} pairs ran past its {timeout:.1f} s "
                        f"(expected {guess:.1f} s) and its worker was killed",
                    )  # fmt: skip
                guess += start_s
                if spent is not None:
                    spent[name] = {
                        "expected_s": round(guess, 3),
                        "spent_s": round(took + start - began, 3),
                        "pairs": float(ran),
                        "start_s": round(start - began, 3),
                    }
                if check.status == MEASURED and base > 0 and first > 0:
                    # the pairs' share of the time (the request's own part is not per pair); not
                    # from a failed check (one the limit cut ran to its timeout, not to its end);
                    # from the first request alone, whose seconds ``took`` are
                    scale[kind] = learned_scale(took, base, first, kind)
        out[name] = check
        if log is not None:
            log(check)
    return {item.point.name: out[item.point.name] for item in shapes}
