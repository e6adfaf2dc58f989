"""Comparing samplers on a recorded exhaustive space, the way Kernel Tuner's authors do.

For one kernel and shape the recording holds every feasible config, so the optimum is known.
Each sampler is run many times (seeds) on the replay backend, and two things are read off the
order in which it evaluated distinct configs:

* evaluations to reach within ``tolerance`` (2%) of the exhaustive optimum, per seed;
* the fraction of the optimum reached (optimum time / best time so far) after N evaluations,
  averaged over seeds.

Evaluations count distinct candidates the backend judged, failures included; repeats answered
from the cache and points refused by a constraint are free, as in a real tune.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import optuna
from ktx.ir.errors import KtxError

from ktx.search.cache import MeasurementCache
from ktx.search.engine import Settings, evaluation_curve, search_shape
from ktx.search.evaluate import Evaluator, choose_metric, objective_time
from ktx.search.recording import Recording, RecordingBackend
from ktx.search.runlog import RunLog
from ktx.search.tunable import Tunable
from ktx.spec import ShapePoint, Spec

CHECKPOINTS = (5, 10, 20, 50, 100, 200)


@dataclass(frozen=True)
class Optimum:
    shape: str
    metric: str
    time_us: float
    config: dict[str, int]
    feasible: int  # configs with a recorded measurement at this shape (original excluded)
    ok: int  # of which ran correctly


def optimum(recording: Recording, shape: str, metric: str = "auto") -> Optimum:
    """The exhaustive best at ``shape`` from the recording itself."""
    measurements = list(recording.at(shape))
    original = next((m for m in measurements if not m.config), None)
    if metric == "auto":
        if original is None:
            raise KtxError(f"the recording has no original measurement at {shape}")
        metric = choose_metric("auto", original)
    tuned = [m for m in measurements if m.config]
    timed = [(t, m) for m in tuned if m.ok and (t := objective_time(m, metric)) is not None]
    if not timed:
        raise KtxError(f"no successful recorded config at {shape}")
    t, best = min(timed, key=lambda pair: pair[0])
    return Optimum(shape, metric, t, dict(best.config), len(tuned), len(timed))


def evaluations_to_reach(curve: Sequence[float | None], target: float) -> int | None:
    """1-based index of the first evaluation at or under ``target`` (None: never)."""
    for i, value in enumerate(curve, start=1):
        if value is not None and value <= target:
            return i
    return None


def fraction_curve(curve: Sequence[float | None], best: float, checkpoints: Sequence[int]) -> list[float]:
    """optimum / best-so-far after each checkpoint's number of evaluations (0 before any success)."""
    out: list[float] = []
    so_far = math.inf
    values = list(curve)
    for n in checkpoints:
        for value in values[:n]:
            if value is not None:
                so_far = min(so_far, value)
        out.append(0.0 if not math.isfinite(so_far) else best / so_far)
    return out


def run_sampler(
    spec: Spec, recording: Recording, shape: str, sampler: str, seed: int, budget: int, metric: str
) -> list[float | None]:
    """One replayed search; the objective values of its distinct evaluations in order."""
    tunable = Tunable.recorded(spec.name, recording.space, recording.digest, recording.launches())
    evaluator = Evaluator(spec, tunable, RecordingBackend(recording), MeasurementCache(None), RunLog(None))
    settings = Settings(trials=budget, sampler=sampler, seed=seed)
    storage = optuna.storages.InMemoryStorage()
    point = ShapePoint.from_name(shape)
    study = search_shape(evaluator, storage, f"compare|{sampler}|{seed}", point, metric, settings)
    return evaluation_curve(study)


@dataclass(frozen=True)
class SamplerResult:
    sampler: str
    seeds: int
    reached: int
    evals: tuple[int | None, ...]
    fractions: tuple[float, ...]  # mean fraction of the optimum at each checkpoint
    per_seed: tuple[tuple[float, ...], ...] = ()  # each seed's fractions at the checkpoints

    def band(self, index: int, coverage: float = 0.95) -> tuple[float, float] | None:
        """The central ``coverage`` range of the seeds' fractions at checkpoint ``index``
        (empirical quantiles): random sampling's band is the yardstick for the others."""
        values = sorted(seed[index] for seed in self.per_seed)
        if len(values) < 2:
            return None
        tail = (1.0 - coverage) / 2

        def at(q: float) -> float:
            pos = q * (len(values) - 1)
            lo = int(pos)
            hi = min(lo + 1, len(values) - 1)
            return values[lo] + (values[hi] - values[lo]) * (pos - lo)

        return at(tail), at(1.0 - tail)

    @property
    def mean_to_reach(self) -> float | None:
        got = [e for e in self.evals if e is not None]
        return statistics.fmean(got) if got else None

    @property
    def median_to_reach(self) -> float | None:
        got = [e for e in self.evals if e is not None]
        return float(statistics.median(got)) if got else None

    @property
    def stdev_to_reach(self) -> float | None:
        got = [e for e in self.evals if e is not None]
        return statistics.stdev(got) if len(got) > 1 else None


def compare(
    spec: Spec,
    recording: Recording,
    shape: str,
    samplers: Sequence[str] = ("tpe", "random", "grid"),
    seeds: int = 20,
    budget: int | None = None,
    tolerance: float = 0.02,
    metric: str = "auto",
    checkpoints: Sequence[int] = CHECKPOINTS,
) -> tuple[Optimum, list[SamplerResult]]:
    best = optimum(recording, shape, metric)
    limit = budget or best.feasible
    target = best.time_us * (1.0 + tolerance)
    results: list[SamplerResult] = []
    for sampler in samplers:
        evals: list[int | None] = []
        fractions: list[list[float]] = []
        for seed in range(seeds):
            curve = run_sampler(spec, recording, shape, sampler, seed, limit, best.metric)
            evals.append(evaluations_to_reach(curve, target))
            fractions.append(fraction_curve(curve, best.time_us, checkpoints))
        mean = tuple(statistics.fmean(col) for col in zip(*fractions, strict=True))
        per_seed = tuple(tuple(f) for f in fractions)
        reached = sum(e is not None for e in evals)
        results.append(SamplerResult(sampler, seeds, reached, tuple(evals), mean, per_seed))
    return best, results


def fraction_checkpoints(fractions: Sequence[float], feasible: int) -> tuple[int, ...]:
    """Budgets as fractions of the space (0.01 = 1%) in evaluations, at least 1 each.

    >>> fraction_checkpoints([0.01, 0.05, 0.1], 2304)
    (23, 115, 230)
    """
    return tuple(max(1, round(f * feasible)) for f in fractions)


def markdown(
    best: Optimum, results: Sequence[SamplerResult], tolerance: float, checkpoints: Sequence[int]
) -> str:
    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    lines = [
        f"Exhaustive optimum at {best.shape}: {best.time_us:.3f} µs ({best.metric}), config {best.config}; "
        f"{best.feasible} feasible configs, {best.ok} ran correctly.",
        "",
        f"| sampler | seeds reaching {tolerance:.0%} | mean evals | median | stdev | "
        + " | ".join(f"@{n}" for n in checkpoints)
        + " |",
        "| --- | ---: | ---: | ---: | ---: | " + " | ".join("---:" for _ in checkpoints) + " |",
    ]
    for r in results:
        cells = [r.sampler, f"{r.reached}/{r.seeds}", fmt(r.mean_to_reach), fmt(r.median_to_reach)]
        cells += [fmt(r.stdev_to_reach), *(f"{f:.3f}" for f in r.fractions)]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "mean/median/stdev: evaluations (distinct configs judged) until one within the tolerance, over "
        "the seeds that reached it; @N: mean fraction of the optimum (optimum / best so far) after N "
        "evaluations.",
    ]
    return "\n".join(lines)
