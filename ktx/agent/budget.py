"""What the end of an optimize run keeps back so that the last round's found wins get checked.

A round searches inside its share of ``--budget`` and then checks its winners in pairs against
the original (:mod:`ktx.search.final`); a check its share could not hold runs again with the rest
of the budget (:meth:`ktx.agent.loop.Optimizer.recheck`). For the last round there is no rest:
session 9's real-code run (4x H200, 50 s a kernel) found 12 wins in 6 kernels that the table
never used, each "skipped: -0.8 s left of the time limit, the check needs about 2.5 s" (silu_and_mul
4.28x, add_id 1.79x, k_get_rows 1.59x, pre_rms_norm 1.44x, ...). Their checks needed 1-6 s.

So the run keeps back what one round's final check needs at
:data:`~ktx.search.final.MIN_PAIRS` pairs, counted from the originals' measured per-launch times
(both sides at the original's time: the winner is faster, so this is an upper bound), times the
estimate's observed error, plus one evaluation that may end past the search's deadline (a
candidate already compiling or measuring: in session 9 an nvcc compile of 7-9 s ran past it and
left ggml k_get_rows "-5.1 s" for its check). No round's search may eat into it; a round's check
that its share cut then always finds that time left. The shapes counted are those an earlier
round's search made faster (all of them before the first round): a reserve for every shape cost
rounds that found wins (``benchmarks/realcode/budget_replay.py``). Fewer pairs rather than none: the check
itself still shrinks to :data:`~ktx.search.final.FLOOR_PAIRS` where the time runs short.

A shape an earlier round made :data:`~ktx.search.final.EARLY_GAIN` times faster or more is priced
at :data:`~ktx.search.final.EARLY_PAIRS` pairs instead: its check's first pairs decide such a gain
(:func:`~ktx.search.final.decided_early`). Priced at three pairs of a 40 ms original, llm.c
softmax_forward's reserve (H200, --budget 300) left no second round after a first that won 42x.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ktx.measure.cost import PAIRED_REQUEST_S
from ktx.measure.gpu import Options
from ktx.measure.types import Measurement
from ktx.search.final import MIN_PAIRS, WRITE_S, Shortlist, check_cost, pair_estimate, pairs_needed
from ktx.spec import ShapePoint

#: A check's real seconds over its estimate, as session 9's real-code run measured them
#: (149 paired checks on H200, ``paired_cost`` events: median 1.19, 90th percentile 1.51).
#: The reserve uses the 90th percentile: a reserve that is too short loses the win it was for.
CHECK_ERROR = 1.5


@dataclass(frozen=True)
class CheckReserve:
    """Seconds kept back at the end of the run: per shape, what its check needs; and one
    evaluation's overrun (``overrun_s``) and a worker restart (``restart_s``)."""

    per_shape: tuple[tuple[str, float], ...]
    overrun_s: float = 0.0
    restart_s: float = 0.0

    @property
    def seconds(self) -> float:
        return sum(s for _, s in self.per_shape) + self.overrun_s + self.restart_s + WRITE_S

    def text(self) -> str:
        shapes = ", ".join(f"{name} {s:.1f} s" for name, s in self.per_shape)
        return (
            f"{self.seconds:.1f} s kept back for the last round's final check ({shapes}; one evaluation "
            f"past the search's end {self.overrun_s:.1f} s; a worker restart {self.restart_s:.1f} s)"
        )


def launch_us(m: Measurement) -> float | None:
    """The single-launch median (it holds the launch's host time), else the graph one."""
    value = m.single_us if m.single_us else m.graph_us
    return value if m.ok and value and value > 0 else None


def shape_check_s(
    point: ShapePoint,
    original: Measurement,
    backend: object,
    options: Options,
    cost_s: float | None,
    pairs: int = MIN_PAIRS,
) -> float:
    """Seconds the final check of ``point`` needs at ``pairs`` pairs (:data:`MIN_PAIRS`, or
    :func:`ktx.search.final.pairs_needed` for a shape an earlier round won at), with both sides
    at the original's per-launch time, times :data:`CHECK_ERROR`; where no launch time is known,
    the original's verified measurement (``cost_s``) per timing, an upper bound."""
    per_launch = launch_us(original)
    item = Shortlist(point, "graph", None, None, per_launch, per_launch, original.bytes)
    pair = pair_estimate(item, backend, options)
    if pair is None:
        return CHECK_ERROR * check_cost(cost_s or 1.0, pairs)
    return CHECK_ERROR * (PAIRED_REQUEST_S + pairs * pair)


def evaluation_overrun_s(compiles: Iterable[Mapping[str, object]], candidate_s: float | None) -> float:
    """One evaluation that started before the search's deadline and ends after it: the longest
    compile seen so far (not cached) and a candidate's measurement (``candidate_s``: at the
    slowest shape)."""
    longest = 0.0
    for c in compiles:
        seconds = c.get("seconds")
        if not c.get("cached") and isinstance(seconds, int | float):
            longest = max(longest, float(seconds))
    return longest + (candidate_s or 0.0)


def check_reserve(
    originals: Sequence[tuple[ShapePoint, Measurement]],
    backend: object,
    costs: Mapping[str, float] | None = None,
    candidate_s: float | None = None,
    gains: Mapping[str, float] | None = None,
) -> CheckReserve:
    """The reserve for ``originals`` (each searched shape and its original's measurement) on
    ``backend``: its options, its measured request overhead and timing scale
    (:func:`ktx.search.final.measured_overheads`), its compiles so far and its worker's restart.
    ``gains``: per shape, the largest search gain an earlier round found there; a shape won by
    :data:`~ktx.search.final.EARLY_GAIN` or more is priced at the pairs such a gain needs
    (:func:`~ktx.search.final.pairs_needed`), the others at :data:`MIN_PAIRS`."""
    found = getattr(backend, "options", None)
    options = found if isinstance(found, Options) else Options()
    costs = costs or {}
    gains = gains or {}
    per = tuple(
        (p.name, shape_check_s(p, m, backend, options, costs.get(p.name), pairs_needed(gains.get(p.name))))
        for p, m in originals
    )
    results = getattr(backend, "compile_results", None)
    compiles = results() if callable(results) else ()
    restart = getattr(backend, "worker_start_s", None)
    return CheckReserve(
        per,
        evaluation_overrun_s(compiles, candidate_s),
        float(restart) if isinstance(restart, int | float) else 0.0,
    )
