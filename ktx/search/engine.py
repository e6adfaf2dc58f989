"""Searching with Optuna: one study per shape (or one for all shapes), stopped by a budget.

The budget counts *evaluations*: distinct candidates judged by the backend at this shape, as
Kernel Tuner counts function evaluations. A repeat answered from the cache and a point refused
by a constraint cost no GPU time and do not count; a compile error or a wrong result does. A
shape's search stops when the budget is spent, when every feasible config has been evaluated,
when the sampler keeps repeating itself (``stall`` trials with nothing new), or at the deadline.

Each trial stores its outcome in ``user_attrs["ktx"]`` (status, source, cache key, config,
objective time) and the backend's measurement in ``user_attrs["measurement"]``, so the study
alone answers every later question: counts for the progress display and the budget, the best
config, the evidence for the report, and what a resumed or distributed run has already done.
Failures are trial states, never crashes: a failed candidate is a PRUNED trial (TPE treats it as
bad), an exception in ktx itself a FAIL.
"""

from __future__ import annotations

import math
import random
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from ktx.measure.types import Measurement, config_key
from ktx.search.costmodel import ModelSampler, Pool
from ktx.search.evaluate import Evaluation, Evaluator, cacheable, objective_time
from ktx.search.space import Config, Space
from ktx.search.study import make_sampler, resolve_sampler, seed_for
from ktx.spec import ShapePoint

optuna.logging.set_verbosity(optuna.logging.WARNING)


@dataclass(frozen=True)
class Settings:
    """How hard to search. ``trials`` is the evaluation budget per shape (per run in joint mode)."""

    trials: int = 100
    sampler: str = "auto"
    seed: int | None = None
    metric: str = "auto"
    jobs: int = 1  # trials in flight in this process (compiles overlap the GPU)
    warm_start: int = 3  # best configs taken from each of the two nearest tuned shapes
    #: Stop taking warm-start seeds once one measures slower than the original kernel: the
    #: neighbour's optimum does not carry over to this shape (:func:`search_shape`).
    warm_drop: bool = True
    stall: int = 60
    max_trials_factor: int = 20


@dataclass(frozen=True)
class StudyStats:
    """What a study holds so far, derived from its trials alone."""

    trials: int
    evaluations: int
    failures: Mapping[str, int]
    refused: int  # refused before compiling (constraints, launch limits)
    best_value: float | None
    best_config: Mapping[str, int] | None
    since_new: int
    order: tuple[tuple[str, float | None], ...] = field(default=(), repr=False)  # (key, value) by first use


def _ktx(trial: FrozenTrial) -> dict[str, Any]:
    data = trial.user_attrs.get("ktx")
    return data if isinstance(data, dict) else {}


def study_stats(study: optuna.Study) -> StudyStats:
    finished = study.get_trials(
        deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
    )
    finished = sorted(finished, key=lambda t: t.number)
    seen: dict[str, float | None] = {}
    failures: Counter[str] = Counter()
    refused = 0
    since_new = 0
    best: FrozenTrial | None = None
    for t in finished:
        info = _ktx(t)
        key = info.get("key", "") if info.get("source") in ("measured", "cache") else ""
        if info.get("source") == "static":
            refused += 1
        if key and key not in seen:
            seen[key] = t.value if t.state == TrialState.COMPLETE else None
            since_new = 0
            if info.get("status", "ok") != "ok":
                failures[str(info["status"])] += 1
        else:
            since_new += 1
        better = best is None or best.value is None or (t.value is not None and t.value < best.value)
        if t.state == TrialState.COMPLETE and t.value is not None and better:
            best = t
    return StudyStats(
        trials=len(finished),
        evaluations=len(seen),
        failures=dict(failures),
        refused=refused,
        best_value=None if best is None else best.value,
        best_config=None if best is None else dict(_ktx(best).get("config", {})),
        since_new=since_new,
        order=tuple(seen.items()),
    )


def best_measurement(study: optuna.Study) -> tuple[dict[str, int], Measurement] | None:
    """The best complete trial's config and measurement (None when nothing succeeded)."""
    try:
        best = study.best_trial
    except ValueError:
        return None
    data = best.user_attrs.get("measurement")
    if not isinstance(data, dict):
        return None
    return dict(_ktx(best).get("config", {})), Measurement.from_dict(data)


#: How many of the best configs a narrow optimum's shape re-measures (:func:`remeasure_top`).
REMEASURE_TOP = 3


def remeasure_top(
    evaluator: Evaluator,
    study: optuna.Study,
    point: ShapePoint,
    metric: str,
    k: int = REMEASURE_TOP,
    deadline: float | None = None,
) -> dict[str, Any] | None:
    """Measure the ``k`` best configs of ``study`` once more and choose among them by the mean of
    their two times; recorded in the study (``remeasured``) and returned.

    Issue 23: at a narrow optimum a longer search does not help, and the optimum may be the
    moment's, not the config's: on the shared act_and_mul_scalar recording (H200) each of the 3
    fastest configs at tokens=16 is 13-15% faster than the median of its siblings that differ
    only in unroll or cache policy. Each of the few best gets a second measurement, so that one
    lucky one does not decide alone; the final check then pairs the chosen config with the
    original. None where fewer than two configs could be measured again."""
    rows: list[dict[str, Any]] = []
    for config in top_configs(study, k):
        first = next(
            (float(t.value) for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
             if t.value is not None and config_key(_ktx(t).get("config", {})) == config_key(config)),
            None,
        )  # fmt: skip
        m = evaluator.remeasure(config, point, deadline)
        again = None if m is None or not m.ok else objective_time(m, metric)
        if first is None or again is None or m is None:
            continue
        rows.append({"config": config, "first_us": first, "again_us": again, "measurement": m.to_dict()})
    if len(rows) < 2:
        return None
    chosen = min(rows, key=lambda r: (r["first_us"] + r["again_us"]) / 2)
    record = {
        "configs": [{k: v for k, v in r.items() if k != "measurement"} for r in rows],
        "chosen": chosen["config"],
        "measurement": chosen["measurement"],
    }
    study.set_user_attr("remeasured", record)
    return record


def remeasured_best(study: optuna.Study) -> tuple[dict[str, int], Measurement] | None:
    """The config :func:`remeasure_top` chose and its second measurement (None: not re-measured)."""
    data = study.user_attrs.get("remeasured")
    if not isinstance(data, dict) or not isinstance(data.get("chosen"), dict):
        return None
    try:
        return {str(k): int(v) for k, v in data["chosen"].items()}, Measurement.from_dict(data["measurement"])
    except (KeyError, TypeError, ValueError):
        return None


def top_configs(study: optuna.Study, k: int) -> list[dict[str, int]]:
    """The ``k`` best distinct configs of a study, best first."""
    done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if t.value is not None]
    out: list[dict[str, int]] = []
    seen: set[str] = set()
    for t in sorted(done, key=lambda t: float(t.value or math.inf)):
        config = dict(_ktx(t).get("config", {}))
        key = config_key(config)
        if key not in seen:
            seen.add(key)
            out.append(config)
        if len(out) >= k:
            break
    return out


class _Study(optuna.Study):
    """A study whose ``ask`` is serialised within the process.

    ``ask`` first pops an enqueued (WAITING) trial if there is one. Optuna claims it with a
    row lock, which SQLite does not have: two threads of ``optimize(n_jobs=...)`` can pop the same
    trial and the second ``tell`` then fails. One lock per process closes that race; between
    processes on SQLite the rare loser is caught in :func:`_optimize`.
    """

    _ask_lock = threading.Lock()

    def ask(self, fixed_distributions: Any = None) -> optuna.Trial:
        with self._ask_lock:
            return super().ask(fixed_distributions)


def open_study(
    storage: optuna.storages.BaseStorage, name: str, sampler: optuna.samplers.BaseSampler
) -> optuna.Study:
    """Create or load; two workers racing to create the same study both end up loading it."""
    for _ in range(5):
        try:
            optuna.create_study(storage=storage, study_name=name, direction="minimize", load_if_exists=True)
            break
        except optuna.exceptions.DuplicatedStudyError:
            time.sleep(0.2)
    return _Study(study_name=name, storage=storage, sampler=sampler)


def admission(study: optuna.Study, budget: int) -> Callable[[], bool]:
    """Admits new backend calls while this process's evaluations (finished ones in the study,
    plus those in flight) stay within the budget, so ``--jobs`` does not overshoot it."""
    lock = threading.Lock()
    admitted = [study_stats(study).evaluations]

    def admit() -> bool:
        with lock:
            if admitted[0] >= budget:
                return False
            admitted[0] += 1
            return True

    return admit


def study_lookup(study: optuna.Study) -> Callable[[str], Measurement | None]:
    """Measurements other workers recorded in the study, by cache key: the RDB storage is the
    cache that workers on different machines share."""

    def lookup(key: str) -> Measurement | None:
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)):
            data = t.user_attrs.get("measurement")
            if _ktx(t).get("key") == key and isinstance(data, dict):
                m = Measurement.from_dict(data)
                if cacheable(m):
                    return m
        return None

    return lookup


def _record(trial: optuna.Trial, ev: Evaluation, value: float | None) -> None:
    trial.set_user_attr(
        "ktx",
        {
            "config": dict(ev.config),
            "status": ev.status,
            "source": ev.source,
            "key": ev.key,
            "reason": ev.reason[:500],
            "value": value,
        },
    )
    if ev.measurement is not None:
        trial.set_user_attr("measurement", ev.measurement.to_dict())


Progress = Callable[[StudyStats], None]


@dataclass(frozen=True)
class Plan:
    """What one study will do: its sampler and its budget, with the reasons."""

    sampler: str
    budget: int
    space_size: int | None
    feasible: int | None


def plan(space: Space, evaluator: Evaluator, points: Sequence[ShapePoint], settings: Settings) -> Plan:
    """Resolve ``auto`` and cap the budget by the number of configs feasible at every point."""
    size = space.size()
    feasible: int | None = None
    if size is not None:
        feasible = sum(
            1 for c in space.configs() if all(not space.violations(c, evaluator.spec.env(p)) for p in points)
        )
    sampler = resolve_sampler(settings.sampler, feasible, settings.trials)
    budget = settings.trials if feasible is None else min(settings.trials, feasible)
    return Plan(sampler, budget, size, feasible)


def _optimize(
    study: optuna.Study,
    objective: Callable[[optuna.Trial], float],
    budget: int,
    settings: Settings,
    deadline: float | None,
    progress: Progress | None,
    after: Callable[[optuna.Study, FrozenTrial], None] | None = None,
    feed: GridFeed | None = None,
) -> None:
    cap = budget * settings.max_trials_factor + 100

    def done(stats: StudyStats) -> bool:
        return stats.evaluations >= budget or stats.trials >= cap or stats.since_new >= settings.stall

    def late() -> bool:
        return deadline is not None and time.monotonic() >= deadline

    def callback(study: optuna.Study, trial: FrozenTrial) -> None:
        if after is not None:
            after(study, trial)
        stats = study_stats(study)
        if progress is not None:
            progress(stats)
        if done(stats) or late() or (feed is not None and feed.exhausted):
            study.stop()
        elif feed is not None:
            feed.feed(1)

    stats = study_stats(study)
    if progress is not None:
        progress(stats)
    if done(stats) or budget <= 0 or late():
        return
    if feed is not None:
        if feed.exhausted:
            return
        feed.feed(settings.jobs)
    # The deadline is kept by ``callback`` (and by the evaluator, which measures nothing after
    # it), not by Optuna's ``timeout``: that one reads the wall clock, ktx's time limit
    # ``time.monotonic()``, and one run should have one clock (a test can then stand in for it).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        while True:
            try:
                study.optimize(objective, n_jobs=settings.jobs, callbacks=[callback])
                return
            except (optuna.exceptions.UpdateFinishedTrialError, ValueError) as exc:
                # Another process on the same SQLite file ran the same queued trial first; its
                # result stands (and the cache holds the measurement). Carry on. Optuna 5 reports
                # this race from its tell as a ValueError ("Cannot tell a COMPLETE trial.")
                # rather than UpdateFinishedTrialError; any other ValueError is a real error.
                if isinstance(exc, ValueError) and not finished_trial_race(exc):
                    raise
                if done(study_stats(study)) or late():
                    return


def finished_trial_race(exc: ValueError) -> bool:
    """Whether Optuna refused to tell a trial that another worker had already finished.

    >>> finished_trial_race(ValueError("Cannot tell a COMPLETE trial."))
    True
    >>> finished_trial_race(ValueError("bad value"))
    False
    """
    return str(exc).startswith("Cannot tell a ") and str(exc).rstrip(".").endswith(" trial")


def search_shape(
    evaluator: Evaluator,
    storage: optuna.storages.BaseStorage,
    study_name: str,
    point: ShapePoint,
    metric: str,
    settings: Settings,
    neighbours: Sequence[Config] = (),
    deadline: float | None = None,
    progress: Progress | None = None,
    concurrent: bool = False,
    planned: Plan | None = None,
    seed_name: str | None = None,
    stop_after: int | None = None,
    share: tuple[int, int] = (0, 1),
) -> optuna.Study:
    """Search one shape; ``neighbours`` are warm-start configs (best of nearby shapes).
    ``share``: (index, count) of this process among the workers searching the shape: the
    grid sampler queues that share of the grid (:class:`GridFeed`).
    ``seed_name`` (default: the study name) derives the sampler's seed, so that a replay of a
    run, whose studies are named after another backend, samples what the run sampled.
    ``stop_after``: stop after this many evaluations without changing the sampler (whose
    choice and settings follow the budget): a replay stops where the recorded run's clock did."""
    space = evaluator.space
    p = planned or plan(space, evaluator, (point,), settings)
    seed = seed_for(settings.seed, seed_name or study_name)
    if p.sampler == "model":
        sampler: optuna.samplers.BaseSampler = model_sampler(evaluator, point, seed)
    else:
        sampler = make_sampler(p.sampler, space, seed, p.budget, concurrent or settings.jobs > 1)
    study = open_study(storage, study_name, sampler)
    study.set_user_attr("shape", point.name)
    study.set_user_attr("metric", metric)
    study.set_user_attr("sampler", p.sampler)
    seeds: list[dict[str, int]] = []
    feed = None
    if p.sampler == "grid":
        feed = GridFeed(study, evaluator, point, settings.seed, share)
    elif neighbours and not study.trials:
        env = evaluator.spec.env(point)
        seeds = [full for c in neighbours if not space.violations(full := space.normalize(c), env)]
        if not settings.warm_drop or settings.jobs > 1 or concurrent:
            # Trials in flight (several jobs or workers) take the seeds at once: there is no
            # "after the first one" to drop the others on, so all are queued, as before.
            for config in seeds:
                study.enqueue_trial(
                    space.to_params(config), user_attrs={"warm_start": True}, skip_if_exists=True
                )
            seeds = []
        elif seeds:
            study.enqueue_trial(
                space.to_params(seeds.pop(0)), user_attrs={"warm_start": True}, skip_if_exists=True
            )
    after = warm_seeder(space, seeds, original_time(study, metric)) if seeds else None

    shared = study_lookup(study) if concurrent else None
    budget = p.budget if stop_after is None else min(p.budget, stop_after)
    admit = admission(study, budget)

    def objective(trial: optuna.Trial) -> float:
        ev = evaluator.evaluate(space.suggest(trial), point, shared, admit, deadline)
        value = ev.time(metric)
        _record(trial, ev, value)
        if value is None:
            raise optuna.TrialPruned(f"{ev.status}: {ev.reason}")
        return value

    _optimize(study, objective, budget, settings, deadline, progress, after, feed)
    return study


def original_time(study: optuna.Study, metric: str) -> float | None:
    """The original kernel's time at the study's shape, where the run recorded it in the study."""
    data = study.user_attrs.get("original")
    if not isinstance(data, dict):
        return None
    try:
        m = Measurement.from_dict(data)
    except (KeyError, TypeError, ValueError):
        return None
    return m.graph_us if metric == "graph" else m.single_us


def warm_seeder(
    space: Space, seeds: list[dict[str, int]], original: float | None
) -> Callable[[optuna.Study, FrozenTrial], None]:
    """Enqueue the warm-start seeds one at a time, the next only while the last one measured
    faster than the original kernel (or, where the original's time is unknown, succeeded).

    A neighbour shape's best configs are a guess about this shape. On act_and_mul_scalar (H200)
    the best configs at tokens=16 reach 0.51 of the optimum at tokens=4096, slower than the
    original there: every further seed from the same neighbour spent an evaluation on the same
    wrong guess. The first bad seed now ends the warm start and the sampler takes over."""
    pending = list(seeds)

    def after(study: optuna.Study, trial: FrozenTrial) -> None:
        if not pending or not trial.user_attrs.get("warm_start"):
            return
        good = trial.state == TrialState.COMPLETE and trial.value is not None
        if good and original is not None and trial.value is not None:
            good = trial.value < original
        if not good:
            study.set_user_attr("warm_start_dropped", len(pending))
            pending.clear()
            return
        study.enqueue_trial(
            space.to_params(pending.pop(0)), user_attrs={"warm_start": True}, skip_if_exists=True
        )

    return after


def model_sampler(evaluator: Evaluator, point: ShapePoint, seed: int | None) -> ModelSampler:
    """The cost-model sampler over every config feasible at ``point``, with the launch each maps
    to there (the template's launch mapping, or the recording's where the tunable is one)."""
    space = evaluator.space
    tunable = evaluator.tunable
    spec = evaluator.spec

    def launch(config: Config) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
        if tunable.launch_hint is not None:
            return tunable.launch_hint(config, point.name)
        return None  # the knob features alone (instantiating every config would cost more)

    configs = space.feasible_configs(spec.env(point))
    return ModelSampler(space, Pool.build(space, configs, point.as_dict(), launch), seed)


def enqueue_grid(
    study: optuna.Study,
    evaluator: Evaluator,
    points: Sequence[ShapePoint],
    seed: int | None,
    concurrent: bool,
) -> int:
    """The grid sampler: every distinct config feasible at all ``points``, once, in a seeded
    random order, enqueued as trials (so workers sharing the study each take the next one).

    Optuna's GridSampler walks the full product of the knobs, infeasible and duplicate points
    included, and costs O(trials) per trial; here only what can be measured is queued.
    """
    if study.trials or study.user_attrs.get("grid_enqueued"):
        return 0
    study.set_user_attr("grid_enqueued", True)
    space = evaluator.space
    envs = [evaluator.spec.env(p) for p in points]
    configs = [c for c in space.configs() if all(not space.violations(c, env) for env in envs)]
    random.Random(seed).shuffle(configs)
    for config in configs:
        study.enqueue_trial(space.to_params(config), skip_if_exists=concurrent)
    return len(configs)


class GridFeed:
    """The grid sampler of one shape's search, queued as it goes (issue 23 item 7).

    :func:`enqueue_grid` queues every config up front: one SQLite commit each (38 ms on a loaded
    host: 90 s for act_and_mul_scalar's 2,304 configs, at every shape), and with workers sharing
    the study each enqueue also scanned every trial (``skip_if_exists``), quadratic in the grid,
    while that worker measured nothing. Here process ``index`` of ``count`` takes every
    ``count``-th config of one shuffled order (the same order in every worker, so the shares
    partition the grid: nothing is queued twice and nothing needs checking), skips what the
    study already holds (a resumed run), and keeps only ``jobs`` trials queued ahead; when its
    share is done its search of the shape stops (the others finish theirs)."""

    def __init__(
        self,
        study: optuna.Study,
        evaluator: Evaluator,
        point: ShapePoint,
        seed: int | None,
        share: tuple[int, int] = (0, 1),
    ) -> None:
        index, count = share
        space = evaluator.space
        env = evaluator.spec.env(point)
        configs = [c for c in space.configs() if not space.violations(c, env)]
        # one order for every worker: their seeds differ (seed + index), the study's name does not
        order_seed = seed if count == 1 else seed_for(0, study.study_name)
        random.Random(order_seed).shuffle(configs)
        held = {config_key(t.params) for t in study.get_trials(deepcopy=False)}
        self.study = study
        self.todo = [space.to_params(c) for c in configs[index::count]]
        self.todo = [params for params in self.todo if config_key(params) not in held]
        self.todo.reverse()  # popped from the end
        self._lock = threading.Lock()

    @property
    def exhausted(self) -> bool:
        return not self.todo

    def feed(self, n: int = 1) -> None:
        """Queue the next ``n`` configs of this process's share."""
        for _ in range(n):
            with self._lock:
                if not self.todo:
                    return
                params = self.todo.pop()
            self.study.enqueue_trial(params)


def geomean(values: Sequence[float]) -> float | None:
    """Geometric mean of the positive finite values (None when there are none)."""
    good = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in good) / len(good)) if good else None


def search_speedup(original_us: float | None, best_us: float | None) -> float | None:
    """original / best found, losers included (below 1 when the search found nothing better)."""
    return None if original_us is None or best_us is None else original_us / best_us


def dispatched_speedup(original_us: float | None, best_us: float | None, used: bool) -> float | None:
    """What the dispatch table delivers at a shape: original / best where it uses the best
    config, else 1.0 (it runs the original); at least 1.0 by construction of the table."""
    if original_us is None:
        return None
    if not used or best_us is None:
        return 1.0
    return original_us / best_us


def speedup_geomeans(
    shapes: Sequence[tuple[float | None, float | None, bool]],
) -> tuple[float | None, float | None]:
    """(search geomean, dispatched geomean) over ``(original_us, best_us, used by the table)``:
    the one helper ``ktx tune``'s summary and the agent report both geometric means with.

    >>> speedup_geomeans([(2.0, 1.0, True), (1.0, 2.0, False)])
    (1.0, 1.4142135623730951)
    """
    search = [search_speedup(o, b) for o, b, _ in shapes]
    dispatched = [dispatched_speedup(o, b, used) for o, b, used in shapes]
    return (
        geomean([v for v in search if v is not None]),
        geomean([v for v in dispatched if v is not None]),
    )


def search_joint(
    evaluator: Evaluator,
    storage: optuna.storages.BaseStorage,
    study_name: str,
    points: Sequence[ShapePoint],
    metrics: Mapping[str, str],
    originals: Mapping[str, float],
    settings: Settings,
    deadline: float | None = None,
    progress: Progress | None = None,
    concurrent: bool = False,
    seed_name: str | None = None,
) -> optuna.Study:
    """One config for all ``points``: minimise the geometric mean of time / original time."""
    space = evaluator.space
    p = plan(space, evaluator, points, settings)
    if p.sampler == "model":  # the cost model ranks the candidates of one shape
        p = Plan("tpe", p.budget, p.space_size, p.feasible)
    seed = seed_for(settings.seed, seed_name or study_name)
    sampler = make_sampler(p.sampler, space, seed, p.budget, concurrent or settings.jobs > 1)
    study = open_study(storage, study_name, sampler)
    study.set_user_attr("shapes", [pt.name for pt in points])
    study.set_user_attr("sampler", p.sampler)
    if p.sampler == "grid":
        enqueue_grid(study, evaluator, points, settings.seed, concurrent)

    def objective(trial: optuna.Trial) -> float:
        config = space.normalize(space.suggest(trial))
        refused = next((r for r in (evaluator.refusal(config, pt) for pt in points) if r is not None), None)
        ratios: list[float] = []
        per_shape: dict[str, float] = {}
        outcome = refused or Evaluation(config, "ok", "measured", config_key(config))
        for pt in points if refused is None else ():
            ev = evaluator.evaluate(config, pt, deadline=deadline)
            t = ev.time(metrics[pt.name])
            if t is None:
                outcome = Evaluation(
                    config, ev.status, "measured", config_key(config), f"{pt.name}: {ev.reason}"
                )
                break
            per_shape[pt.name] = t
            ratios.append(t / originals[pt.name])
        value = geomean(ratios) if len(ratios) == len(points) else None
        _record(trial, outcome, value)
        trial.set_user_attr("per_shape_us", per_shape)
        if value is None:
            raise optuna.TrialPruned(f"{outcome.status}: {outcome.reason}")
        return value

    _optimize(study, objective, p.budget, settings, deadline, progress)
    return study


#: The largest ratio of work (product of the shape variables), and of the original kernel's block
#: count, between a shape and a tuned shape whose best configs seed its search
#: (:func:`warm_start_configs`): one step of 4x, as between neighbouring shapes of the usual token
#: ladders (1, 4, 16, ... 4096).
WARM_WORK_RATIO = 4.0


def warm_start_configs(
    tuned: Mapping[str, list[dict[str, int]]],
    point: ShapePoint,
    bucket_var: str,
    per_neighbour: int,
    max_work_ratio: float = WARM_WORK_RATIO,
    blocks: Mapping[str, float] | None = None,
) -> list[dict[str, int]]:
    """Best configs of the two tuned shapes nearest ``point``: same other dimensions first, then
    by distance in log2 of every variable. Only shapes near in what sets the parallelism: their
    work (the product of the shape variables) within ``max_work_ratio`` of this one's, and, where
    ``blocks`` gives the original kernel's block count at both shapes (its grid there, known
    before anything is compiled), that too. The act_and_mul_scalar optimum at tokens=16 reaches
    0.51 of the one at tokens=4096 on an H200 (256x the work), so seeding the large shape from
    the small one cost evaluations (issue 23: 33.4 evaluations to within 2% against 22.2 for TPE
    alone). Work alone is blind to the split between rows and row length: tokens=1024,d=16384
    has the work of tokens=4096,d=4096 but a quarter of its blocks when the grid is one block a
    row, and a config fitted to fill the GPU with 4096 rows is a guess for 1024 long ones."""
    if per_neighbour <= 0:
        return []
    mine = point.as_dict()

    def work(values: Mapping[str, int]) -> float:
        return math.prod(max(v, 1) for v in values.values())

    def within(ratio: float) -> bool:
        return 1.0 / max_work_ratio <= ratio <= max_work_ratio

    def near(name: str) -> bool:
        if not within(work(ShapePoint.from_name(name).as_dict()) / work(mine)):
            return False
        theirs, ours = (blocks or {}).get(name), (blocks or {}).get(point.name)
        return not (theirs and ours) or within(theirs / ours)

    def distance(name: str) -> tuple[int, float]:
        other = ShapePoint.from_name(name).as_dict()
        same = all(other.get(k) == v for k, v in mine.items() if k != bucket_var)
        gap = sum(abs(math.log2(max(other.get(k, v), 1)) - math.log2(max(v, 1))) for k, v in mine.items())
        return (0 if same else 1, gap)

    ranked = sorted((n for n in tuned if n != point.name and tuned[n] and near(n)), key=distance)[:2]
    out: list[dict[str, int]] = []
    seen: set[str] = set()
    for name in ranked:
        for config in tuned[name][:per_neighbour]:
            key = config_key(config)
            if key not in seen:
                seen.add(key)
                out.append(config)
    return out


def launch_blocks(m: Measurement | None) -> float | None:
    """Blocks in the launch of a measurement (its grid's product), None where it has none.

    >>> from ktx.measure.types import Status
    >>> launch_blocks(Measurement("k", "s", {}, Status.OK, grid=(64, 2, 1), block=(256, 1, 1)))
    128.0
    """
    if m is None or not m.grid:
        return None
    return float(math.prod(max(1, int(g)) for g in m.grid))


def evaluation_curve(study: optuna.Study) -> list[float | None]:
    """Objective values of the distinct evaluations in order (None for failures): the x axis of
    a sampler comparison."""
    return [value for _, value in study_stats(study).order]


def stale_running(study: optuna.Study) -> list[FrozenTrial]:
    return list(study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))


def fail_running(storage: optuna.storages.BaseStorage, study: optuna.Study) -> int:
    """Mark RUNNING trials FAIL: only when this process knows no one else runs (it holds the run
    folder's lock on a local storage); distributed storages rely on heartbeats instead."""
    count = 0
    for t in stale_running(study):
        try:
            storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
            count += 1
        except RuntimeError:
            continue
    return count
