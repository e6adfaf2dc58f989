"""Replaying ``ktx tune``'s search over an exhaustive recording, many seeds: evaluations to 0.98.

:mod:`ktx.search.compare` runs one sampler at one shape. A tune does more: it searches its shapes
in order (:func:`ktx.search.runner.order_points`), seeds each shape's study with the best configs
of the nearest shapes tuned before it (:func:`ktx.search.engine.warm_start_configs`), and, with
the default sampler, lets the cost model pick. :func:`replay_tune` does the same on the replay
backend, with the original's measurement put in each study as the run puts it (the warm start's
drop rule reads it), so that the numbers are those of ``ktx tune``'s own code path.

What is read off each shape's study is the number of evaluations (distinct configs judged,
warm-start seeds included, failures included) until one reaches ``fraction`` of the exhaustive
optimum (optimum / time >= 0.98), or None when the budget ran out first.

>>> quartiles([3, 5, None, 9])
(4.5, 7.0, inf)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import optuna

from ktx.measure.types import Measurement
from ktx.search.cache import MeasurementCache
from ktx.search.compare import optimum
from ktx.search.engine import (
    WARM_WORK_RATIO,
    Settings,
    evaluation_curve,
    launch_blocks,
    open_study,
    search_shape,
    top_configs,
    warm_start_configs,
)
from ktx.search.evaluate import Evaluator, objective_time
from ktx.search.recording import Recording, RecordingBackend
from ktx.search.runlog import RunLog
from ktx.search.tunable import Tunable
from ktx.spec import ShapePoint, Spec


@dataclass(frozen=True)
class Method:
    """One way of running the tune: a sampler and its warm-start rules."""

    name: str
    sampler: str = "auto"
    warm_start: int = 3
    warm_drop: bool = True
    max_work_ratio: float = WARM_WORK_RATIO


@dataclass(frozen=True)
class ShapeOutcome:
    """One method at one shape over the seeds."""

    method: str
    shape: str
    optimum_us: float
    feasible: int
    within: int  # configs at or above the fraction of the optimum
    evals: tuple[int | None, ...]  # per seed: evaluations until the fraction (None: not within the budget)
    #: per seed: optimum / best time found within the mark's evaluations (0.0: nothing succeeded)
    at_mark: tuple[float, ...] = ()

    @property
    def mark(self) -> int:
        """The goal's budget: 1% of the space, at least 10 evaluations (issue 23)."""
        return goal_mark(self.feasible)

    @property
    def within_mark(self) -> int:
        """Seeds that reached the fraction within the mark."""
        return sum(e is not None and e <= self.mark for e in self.evals)

    @property
    def goal_met(self) -> bool:
        """Whether the median seed reached the fraction within the mark."""
        return self.quartiles[1] <= self.mark

    @property
    def reached(self) -> int:
        return sum(e is not None for e in self.evals)

    @property
    def quartiles(self) -> tuple[float, float, float]:
        return quartiles(self.evals)


def goal_mark(feasible: int) -> int:
    """1% of a space of ``feasible`` configs, at least 10 evaluations.

    >>> goal_mark(2304), goal_mark(140)
    (23, 10)
    """
    return max(10, round(0.01 * feasible))


def fraction_at(curve: Sequence[float | None], optimum_us: float, n: int) -> float:
    """optimum / the best time among the first ``n`` evaluations (0.0 where none succeeded).

    >>> fraction_at([2.0, None, 1.25, 1.0], 1.0, 3)
    0.8
    """
    times = [v for v in curve[:n] if v is not None and v > 0]
    return optimum_us / min(times) if times else 0.0


def quartiles(evals: Sequence[int | None]) -> tuple[float, float, float]:
    """25th, 50th and 75th percentiles of the evaluations, a seed that never reached counting as
    infinitely many (so a median of ``inf`` says at least half the seeds missed)."""
    values = sorted(math.inf if e is None else float(e) for e in evals)

    def at(q: float) -> float:
        pos = q * (len(values) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(values) - 1)
        if values[hi] == math.inf:
            return values[lo] if pos == lo else math.inf
        return values[lo] + (values[hi] - values[lo]) * (pos - lo)

    return at(0.25), at(0.5), at(0.75)


def replay_tune(
    spec: Spec,
    recording: Recording,
    shapes: Sequence[str],
    method: Method,
    seed: int,
    trials: int,
    bucket: str = "tokens",
) -> dict[str, list[float | None]]:
    """One replayed tune of ``shapes`` (in the run's order): each shape's objective values in the
    order its study evaluated them (None for failures)."""
    from ktx.search.runner import order_points

    tunable = Tunable.recorded(spec.name, recording.space, recording.digest, recording.launches())
    evaluator = Evaluator(spec, tunable, RecordingBackend(recording), MeasurementCache(None), RunLog(None))
    settings = Settings(
        trials=trials,
        sampler=method.sampler,
        seed=seed,
        warm_start=method.warm_start,
        warm_drop=method.warm_drop,
    )
    storage = optuna.storages.InMemoryStorage()
    tuned: dict[str, list[dict[str, int]]] = {}
    blocks: dict[str, float] = {}
    curves: dict[str, list[float | None]] = {}
    for point in order_points([ShapePoint.from_name(s) for s in shapes], bucket):
        best = optimum(recording, point.name)
        name = f"tunebench|{method.name}|{seed}|{point.name}"
        original = recording.get(point.name, {})
        if original is not None:  # as ktx.search.runner.prepare_shape leaves it in the study
            study = open_study(storage, name, optuna.samplers.RandomSampler())
            study.set_user_attr("original", original.to_dict())
        if (count := launch_blocks(original)) is not None:
            blocks[point.name] = count
        neighbours = warm_start_configs(
            tuned, point, bucket, method.warm_start, method.max_work_ratio, blocks
        )
        study = search_shape(evaluator, storage, name, point, best.metric, settings, neighbours)
        tuned[point.name] = top_configs(study, method.warm_start)
        curves[point.name] = evaluation_curve(study)
    return curves


def evaluations_to_fraction(curve: Sequence[float | None], optimum_us: float, fraction: float) -> int | None:
    """1-based index of the first evaluation with optimum / time >= ``fraction``.

    >>> evaluations_to_fraction([2.0, None, 1.01, 1.0], 1.0, 0.98)
    3
    """
    for i, value in enumerate(curve, start=1):
        if value is not None and value > 0 and optimum_us / value >= fraction:
            return i
    return None


def bench(
    spec: Spec,
    recording: Recording,
    shapes: Sequence[str],
    methods: Sequence[Method],
    seeds: Sequence[int],
    trials: int,
    fraction: float = 0.98,
) -> list[ShapeOutcome]:
    """Every method over every seed; one outcome per (method, shape)."""
    optima = {s: optimum(recording, s) for s in shapes}
    out: list[ShapeOutcome] = []
    for method in methods:
        per_shape: dict[str, list[int | None]] = {s: [] for s in shapes}
        marks: dict[str, list[float]] = {s: [] for s in shapes}
        for seed in seeds:
            curves = replay_tune(spec, recording, shapes, method, seed, trials)
            for shape in shapes:
                best_us = optima[shape].time_us
                per_shape[shape].append(evaluations_to_fraction(curves[shape], best_us, fraction))
                marks[shape].append(fraction_at(curves[shape], best_us, goal_mark(optima[shape].feasible)))
        for shape in shapes:
            best = optima[shape]
            out.append(
                ShapeOutcome(
                    method.name,
                    shape,
                    best.time_us,
                    best.feasible,
                    within_fraction(recording.at(shape), best.time_us, best.metric, fraction),
                    tuple(per_shape[shape]),
                    tuple(marks[shape]),
                )
            )
    return out


def within_fraction(
    measurements: Iterable[Measurement], optimum_us: float, metric: str, fraction: float
) -> int:
    """How many tuned configs reach ``fraction`` of the optimum (the target's width)."""
    count = 0
    for m in measurements:
        t = objective_time(m, metric) if m.config and m.ok else None
        if t is not None and optimum_us / t >= fraction:
            count += 1
    return count


def markdown(outcomes: Sequence[ShapeOutcome], fraction: float) -> str:
    """One row per (shape, method): the target's width, seeds reaching, quartiles, 1% of the space."""

    def fmt(v: float) -> str:
        return "never" if math.isinf(v) else f"{v:g}"

    lines = [
        f"| shape | method | space | configs >= {fraction} | seeds reaching | q25 | median | q75 "
        "| 1% of the space (min 10) | seeds within it | fraction at it: min / median | goal |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for o in outcomes:
        q25, q50, q75 = o.quartiles
        at = o.at_mark
        frac = f"{min(at):.3f} / {statistics.median(at):.3f}" if at else "-"
        lines.append(
            f"| {o.shape} | {o.method} | {o.feasible} | {o.within} | {o.reached}/{len(o.evals)} "
            f"| {fmt(q25)} | {fmt(q50)} | {fmt(q75)} | {o.mark} | {o.within_mark}/{len(o.evals)} "
            f"| {frac} | {'met' if o.goal_met else 'not met'} |"
        )
    return "\n".join(lines)


def as_json(outcomes: Sequence[ShapeOutcome]) -> list[Mapping[str, object]]:
    return [
        {
            "method": o.method,
            "shape": o.shape,
            "optimum_us": o.optimum_us,
            "feasible": o.feasible,
            "within": o.within,
            "evals": list(o.evals),
            "quartiles": [None if math.isinf(q) else q for q in o.quartiles],
            "mark": o.mark,
            "within_mark": o.within_mark,
            "at_mark": list(o.at_mark),
            "goal_met": o.goal_met,
        }
        for o in outcomes
    ]
