"""Template and search one round: the seam between the agent loop and ``ktx.pipeline``/``ktx.search``.

Kept in one module on purpose: the loop talks only to :class:`RoundSearch` and to
:func:`build_template`, so that a change of the search's internals touches this file alone.

A round's search is ``ktx tune``'s (:mod:`ktx.search.runner`): one Optuna study per shape in the
round's folder (``study.jsonl``), the measurement cache shared by all rounds (a config measured in
an earlier round is not measured again), verification of every candidate against the original
by the backend, and the same outputs ``ktx tune`` writes (best configs and sources, dispatch
table, summary). Each study is warm-started with the best config of the best round so far at
that shape, mapped onto the new knob space (knobs the new template lacks are dropped, new knobs
take their defaults), so that a round starts where the last gain left off. Right after it come
the one-knob steps of the knobs the round adds (:func:`sweep_new_knobs`): the earlier knobs were
searched in earlier rounds, so a round of a handful of evaluations a shape spends them on what
the new pass offers at the best point found, not on random points an earlier round ruled out.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import optuna
from ktx.ir.errors import KtxError
from ktx.ir.expr import Value

from ktx.measure.backend import Backend
from ktx.measure.occupancy import DeviceLimits
from ktx.measure.types import Candidate, Measurement, config_key, original_candidate
from ktx.registry import Registry
from ktx.search.cache import MeasurementCache
from ktx.search.engine import dispatched_speedup, speedup_geomeans
from ktx.search.evaluate import Evaluator, objective_time
from ktx.search.paired import PairedCheck
from ktx.search.progress import Display
from ktx.search.recording import Recording
from ktx.search.runlog import RunLog
from ktx.search.space import Config, Knob, Space
from ktx.search.tunable import Tunable
from ktx.spec import ShapePoint, Spec
from ktx.template import KnobSpace, Template


def build_template(spec: Spec, pipeline: str, registry: Registry | None = None) -> Template:
    """Run ``pipeline`` on the spec's kernel, launched as the spec says (``ktx tune``'s seam)."""
    from ktx.pipeline import template_for_spec

    return template_for_spec(spec, pipeline, registry)


#: The one knob of a template whose passes expose none (``hoist``): 0 the original, 1 the rewrite.
REWRITTEN = "REWRITTEN"


def tunable_for(spec: Spec, template: Template) -> Tunable:
    """The template as the search sees it.

    A template with knobs is ``ktx tune``'s. One without (every pass of its pipeline rewrites
    without exposing a knob, as ``hoist`` does) would be indistinguishable from the original,
    whose config is ``{}``: it gets a two-valued knob :data:`REWRITTEN`, so the search measures
    the rewrite, the cache and recordings key it apart, and the dispatch table can choose it.
    """
    if template.knobs:
        return Tunable.from_template(spec, template)
    base = original_candidate(spec)
    fields = template.candidate_fields({})
    space = Space((Knob(REWRITTEN, (0, 1), 0, owner=template.pipeline),))

    def make(config: Config) -> Candidate:
        if not config or not config.get(REWRITTEN, 0):
            return base
        return Candidate(
            source=fields["source"],
            name_expression=fields["name_expression"],
            grid=tuple(fields["grid"]),
            block=tuple(fields["block"]),
            shared=fields["shared"],
            flags=base.flags,
            config={REWRITTEN: 1},
            label=template.pipeline,
        )

    digest = hashlib.sha256(json.dumps({"pipeline": template.pipeline, "source": fields["source"]}).encode())
    return Tunable(spec.name, template.pipeline, space, make, digest.hexdigest())


def restricted(template: Template, space: KnobSpace) -> Template:
    """The template with a narrowed knob space (values are subsets; source and trace unchanged)."""
    return dataclasses.replace(template, space=space)


@dataclass(frozen=True)
class ShapeOutcome:
    """One shape after a round: the original, the round's best, and the time the table gives.

    The dispatch table never picks a config slower than the original, so the *effective* time at
    a shape is the better of the two; ``speedup`` is original / effective (at least 1).
    """

    shape: str
    metric: str
    original: Measurement
    best_config: Mapping[str, int] | None
    best: Measurement | None
    min_gain: float = 0.0  # the dispatch table's: a config must beat the original by this much
    #: The paired final check (:mod:`ktx.search.paired`): where it re-measured, it decides
    #: whether the best config wins, and its speedup is the one quoted.
    paired: PairedCheck | None = None

    @property
    def original_us(self) -> float | None:
        return objective_time(self.original, self.metric)

    @property
    def best_us(self) -> float | None:
        """The best config's time: original / re-measured speedup where the final check ran."""
        found = None if self.best is None else objective_time(self.best, self.metric)
        speedup = None if self.paired is None else self.paired.speedup
        o = self.original_us
        return found if found is None or speedup is None or o is None else o / speedup

    @property
    def wins(self) -> bool:
        verdict = None if self.paired is None else self.paired.verdict(self.min_gain)
        if verdict is not None:
            return verdict and self.best_config is not None
        o, b = self.original_us, self.best_us
        return b is not None and (o is None or b * (1.0 + self.min_gain) < o)

    @property
    def effective_us(self) -> float | None:
        return self.best_us if self.wins else self.original_us

    @property
    def effective(self) -> Measurement:
        """The measurement the table's choice stands on at this shape."""
        return self.best if self.wins and self.best is not None else self.original

    @property
    def speedup(self) -> float | None:
        """What the dispatch table delivers here (``ktx tune``'s dispatched speedup)."""
        return dispatched_speedup(self.original_us, self.best_us, self.wins)

    @property
    def spread(self) -> float | None:
        """Relative noise (p90 - p10) / median of the effective time."""
        m = self.effective
        timing = m.graph if self.metric == "graph" and m.graph is not None else m.single or m.graph
        return None if timing is None else timing.spread

    def to_json(self) -> dict[str, Any]:
        eff = self.effective
        sol = None if eff.sol_us is None or self.effective_us is None else eff.sol_us / self.effective_us
        return {
            "shape": self.shape,
            "metric": self.metric,
            "original_us": self.original_us,
            "best_us": self.best_us,
            "effective_us": self.effective_us,
            "speedup": self.speedup,
            "wins": self.wins,
            "sol_fraction": sol,
            "original_sol_fraction": None
            if self.original.sol_us is None or self.original_us is None
            else self.original.sol_us / self.original_us,
            "best_config": None if self.best_config is None else dict(self.best_config),
            "spread": self.spread,
            "paired": None if self.paired is None else self.paired.to_dict(),
        }


@dataclass(frozen=True)
class RoundResult:
    """What a round's search found, per shape, and what it cost."""

    shapes: tuple[ShapeOutcome, ...]
    failures: Mapping[str, int]
    evaluations: int
    trials: int
    wall_s: float
    folder: Path

    @property
    def geomean_speedup(self) -> float | None:
        """The dispatched geomean (what the round's table delivers, >= 1.0 per shape)."""
        return speedup_geomeans([(s.original_us, s.best_us, s.wins) for s in self.shapes])[1]

    @property
    def search_geomean_speedup(self) -> float | None:
        """The search geomean (best found / original, losers included)."""
        return speedup_geomeans([(s.original_us, s.best_us, s.wins) for s in self.shapes])[0]

    def best_configs(self) -> dict[str, dict[str, int]]:
        return {s.shape: dict(s.best_config) for s in self.shapes if s.wins and s.best_config is not None}

    def to_json(self) -> dict[str, Any]:
        return {
            "geomean_speedup": self.geomean_speedup,
            "search_geomean_speedup": self.search_geomean_speedup,
            "shapes": [s.to_json() for s in self.shapes],
            "failures": dict(self.failures),
            "evaluations": self.evaluations,
            "trials": self.trials,
            "wall_s": round(self.wall_s, 3),
            "folder": str(self.folder),
        }


class RoundSearch(Protocol):
    """Searches one template's knobs at every shape; returns per-shape outcomes."""

    def search(
        self,
        folder: Path,
        tunable: Tunable,
        warm: Mapping[str, Config],
        deadline: float | None,
        trials: int,
        stop_after: Mapping[str, int] | None = None,
        recorded: Mapping[str, Sequence[Config]] | None = None,
    ) -> RoundResult:
        """``stop_after`` and ``recorded`` (the replay of a recorded run): per shape, the
        evaluations after which the search stops and the configs it measured, in order, as the
        recorded run's did."""
        ...


def map_config(config: Config, tunable: Tunable) -> dict[str, int] | None:
    """``config`` (from an earlier template) on ``tunable``'s space, or None if it does not fit."""
    space = tunable.space
    full = {k.name: k.default for k in space.knobs}
    for name, value in config.items():
        knob = next((k for k in space.knobs if k.name == name), None)
        if knob is None:
            continue
        if value not in knob.values:
            return None
        full[name] = int(value)
    return space.normalize(full)


#: Most steps enqueued after the warm start, per shape and round; the last
#: :data:`NEIGHBOUR_STEPS` of them are kept for the earlier knobs' neighbours.
SWEEP_LIMIT = 8
NEIGHBOUR_STEPS = 2


def sweep_new_knobs(
    space: Space,
    start: Mapping[str, int],
    known: Collection[str],
    env: Mapping[str, Value],
    limit: int = SWEEP_LIMIT,
) -> list[dict[str, int]]:
    """Steps from ``start`` along the knobs not in ``known`` (the ones this round adds), then
    along the earlier knobs to their neighbours.

    Why: a round that adds a pass to the best pipeline so far measures 5-17 configs a shape
    within the ladder's budget (session 9, llm.c). Left to the sampler, they landed on points the
    earlier rounds had ruled out (one thread a row, 1024 threads on a 768-wide row), and the one
    config that mattered was never measured: layernorm's warp-per-row with float4 packs (round 4)
    or with the row kept in registers (round 2). Here the earlier knobs stay at their best and
    each new knob takes each of its other values, largest first (the widest pack, the most packs
    kept, the most rows: the step that shows soonest whether the pass pays), the new knobs taken
    in turn so that every one gets its largest step before any gets its second. The last
    :data:`NEIGHBOUR_STEPS` places go to the earlier knobs, one value either way along their
    list, the new knobs at the first step's values: the new pass can move the best of an earlier
    knob (wider packs want fewer threads a row: encoder at B=1, 128 threads with 16-byte packs,
    where row-owner alone was best at 256). Steps that break a constraint at ``env``, or that
    normalize back onto a config already listed (a knob inactive there), are left out; at most
    ``limit``.
    """
    base = space.normalize(start)
    fresh = [k for k in space.knobs if k.name not in known and len(k.values) > 1]
    earlier = [k for k in space.knobs if k.name in known and len(k.values) > 1]
    seen = {config_key(base)}
    steps: list[dict[str, int]] = []

    def take(config: dict[str, int], cap: int) -> None:
        step = space.normalize(config)
        key = config_key(step)
        if len(steps) < cap and key not in seen and not space.violations(step, env):
            seen.add(key)
            steps.append(step)

    lanes = [[v for v in sorted(k.values, reverse=True) if v != base.get(k.name)] for k in fresh]
    cap = limit - NEIGHBOUR_STEPS if earlier else limit
    for rank in range(max((len(lane) for lane in lanes), default=0)):
        for knob, lane in zip(fresh, lanes, strict=True):
            if rank < len(lane):
                take({**base, knob.name: lane[rank]}, cap)
    if not fresh:
        return steps  # the round adds no knob: the sampler has the whole round
    lead = steps[0] if steps else base
    for knob in earlier:
        at = knob.values.index(lead[knob.name]) if lead.get(knob.name) in knob.values else None
        for delta in (1, -1):
            if at is not None and 0 <= at + delta < len(knob.values):
                take({**lead, knob.name: knob.values[at + delta]}, limit)
    return steps


#: The DRAM bytes per thread a bundle's first steps aim at (their order, not which are taken):
#: session 10's configs faster than llm.c's hand kernels move 192 B a thread (softmax 8x768, a
#: warp a row with float4) and 392 B (1x50257, 1024 threads a row); 256 lies between them in
#: log2 (distance 0.4 and 0.6), the next candidates (96 B, 785 B) 1.4 and 1.6 away.
BYTES_PER_THREAD = 256.0


def bundle_steps(
    space: Space,
    chosen: str,
    companions: Collection[str],
    env: Mapping[str, Value],
    limit: int = SWEEP_LIMIT,
    threads: Callable[[Config], int | None] | None = None,
    nbytes: int | None = None,
) -> list[dict[str, int]]:
    """A round's first steps at a shape it starts from the original (no warm start) when the
    planner added ``chosen`` with ``companions`` (:func:`ktx.agent.rules.companions`): every
    companion knob at its largest value (the widest pack, the fused pair), and ``chosen``'s knobs
    stepped one at a time through their other values, largest first.

    Why: the planner adds a companion because the facts say the two compose (row loops that,
    once owned, read contiguous packs); the round's space multiplies (llm.c softmax: 126
    configs), and a round with time for a handful of evaluations a shape (the ladder's softmax:
    4-8) left to the sampler measured the corners of one pass or the other. The configs faster
    than llm.c's hand kernels (session 10: a warp a row with float4 and the online pair at
    8x768, a 1024-thread block a row at 1x50257) are all companions on, the owner knob varied:
    here they are measured first. The chosen pass's default (its "off": one thread a row) is
    not stepped to: with the companions on alone it is the naive kernel again. Steps that break
    a constraint at ``env`` or repeat a config are left out; at most ``limit``.

    With ``threads`` (a config's launched threads at the shape, from the template's launch
    mapping) and ``nbytes`` (the bytes the shape moves), the steps are ordered by how far their
    bytes per thread lie from :data:`BYTES_PER_THREAD` (log2), largest first among equals: a
    768-float row is not given 1024 threads first, nor a 50257-float row 32. After the first two
    steps come the chosen pass's other knobs stepped at the first (row-owner's ROW_BLOCK at a
    warp a row: session 10's 8x768 config was 1024 threads a block, 1.4% ahead of the launcher's
    block); a round with three evaluations a shape (the ladder's encoder) still tries two widths.
    """
    defaults = {k.name: k.default for k in space.knobs}
    lit = {k.name: max(k.values) for k in space.knobs if k.owner in companions and len(k.values) > 1}
    if not lit:
        return []
    on = {**defaults, **lit}
    seen: set[str] = set()
    steps: list[dict[str, int]] = []
    for knob in (k for k in space.knobs if k.owner == chosen and len(k.values) > 1):
        for value in sorted((v for v in knob.values if v != knob.default), reverse=True):
            step = space.normalize({**on, knob.name: value})
            key = config_key(step)
            if key not in seen and not space.violations(step, env):
                seen.add(key)
                steps.append(step)
    if threads is not None and nbytes:

        def gap(step: dict[str, int]) -> float:
            n = threads(step)
            return math.inf if not n else abs(math.log2(nbytes / n / BYTES_PER_THREAD))

        steps.sort(key=gap)  # stable: largest first among equals
    if steps:
        # the chosen pass's other knobs one at a time at the first step (a warp a row: the
        # warps a block, ROW_BLOCK, which the first loop could not step from the default)
        lead, more = steps[0], []
        for knob in (k for k in space.knobs if k.owner == chosen and len(k.values) > 1):
            others = (v for v in knob.values if v not in (lead.get(knob.name), knob.default))
            for value in sorted(others, reverse=True):
                step = space.normalize({**lead, knob.name: value})
                key = config_key(step)
                if key not in seen and not space.violations(step, env):
                    seen.add(key)
                    more.append(step)
        steps = [*steps[:2], *more, *steps[2:]]  # the next owner step first: a short round
    return steps[:limit]


def threads_at(tunable: Tunable, point: ShapePoint) -> Callable[[Config], int | None]:
    """A config's launched threads at ``point`` (grid times block, from the template's launch
    mapping, without instantiating the source); None where the mapping does not evaluate."""
    hint = tunable.launch_hint

    def threads(config: Config) -> int | None:
        try:
            launch = None if hint is None else hint(config, point.name)
        except KtxError:
            return None
        return None if launch is None else math.prod(launch[0]) * math.prod(launch[1])

    return threads


class TuneSearch:
    """:class:`RoundSearch` on ``ktx tune``'s machinery (:mod:`ktx.search.runner`)."""

    def __init__(
        self,
        spec: Spec,
        backend: Backend,
        recording: Recording | None,
        limits: DeviceLimits,
        points: Sequence[ShapePoint],
        cache: MeasurementCache,
        *,
        kernel_dir: Path,
        backend_text: str,
        seed: int | None,
        quiet: bool = True,
        sampler: str = "auto",
        min_gain: float = 0.0,
        jobs: int = 1,
    ) -> None:
        self.spec = spec
        self.backend = backend
        self.recording = recording
        self.limits = limits
        self.points = tuple(points)
        self.cache = cache
        self.kernel_dir = kernel_dir
        self.backend_text = backend_text
        self.seed = seed
        self.quiet = quiet
        self.sampler = sampler
        self.min_gain = min_gain
        #: trials in flight: with 2, the next candidate compiles (nvcc: seconds on real code)
        #: while the GPU measures this one, instead of after it
        self.jobs = jobs
        #: The latest ``time.monotonic()`` a round's search may run to (None: its deadline less
        #: its own reserve): ``ktx optimize`` keeps the last round's final check back from it
        #: (:mod:`ktx.agent.budget`).
        self.search_cap: float | None = None
        #: The round's plan, as (the pass the planner chose, its companions): set by ``ktx
        #: optimize`` before each round; a bundle's shapes with no warm start begin at
        #: :func:`bundle_steps`.
        self.bundle: tuple[str, tuple[str, ...]] | None = None

    def _context(self, folder: Path, tunable: Tunable, deadline: float | None, start: float,
                 trials: int, stop_after: Mapping[str, int] | None = None) -> Any:  # fmt: skip
        """``ktx tune``'s context for one round's folder (its studies and run log)."""
        from ktx.search import runner
        from ktx.search.study import default_url, open_storage

        folder.mkdir(parents=True, exist_ok=True)
        request = runner.TuneRequest(
            kernel_dir=self.kernel_dir,
            passes=tunable.pipeline,
            shapes=tuple(p.name for p in self.points),
            trials=max(1, trials),
            time_limit=None if deadline is None else max(0.0, deadline - start),
            sampler=self.sampler,
            seed=self.seed,
            backend=self.backend_text,
            out=folder,
            holdout="none",
            quiet=self.quiet,
            min_gain=self.min_gain,
            jobs=self.jobs,
            stop_after=tuple(sorted((stop_after or {}).items())),
        )
        url = default_url(folder)
        storage = open_storage(url)
        log = RunLog(folder / "log.jsonl")
        evaluator = Evaluator(self.spec, tunable, self.backend, self.cache, log, self.limits)
        return runner.Context(
            request, self.spec, tunable, self.points, folder, url, storage, self.backend, evaluator, log,
            self.recording, Display(enabled=not self.quiet),
        )  # fmt: skip

    def search(
        self,
        folder: Path,
        tunable: Tunable,
        warm: Mapping[str, Config],
        deadline: float | None,
        trials: int,
        stop_after: Mapping[str, int] | None = None,
        recorded: Mapping[str, Sequence[Config]] | None = None,
    ) -> RoundResult:
        """One round's search. ``recorded`` (the replay of a recorded run): per shape, the configs
        the recorded round measured, in order; they are enqueued first, so the replay asks the
        recording for exactly what the real run measured, whatever the sampler or the warm start
        of this ktx would pick (a later search change does not make a faithful replay diverge)."""
        from ktx.search import runner
        from ktx.search.engine import open_study

        start = time.monotonic()
        ctx = self._context(folder, tunable, deadline, start, trials, stop_after)
        try:
            runner.prepare_all(ctx, deadline)
            for point in ctx.searched:
                if recorded is not None:
                    study = open_study(
                        ctx.storage, runner.study_name(ctx, point), optuna.samplers.RandomSampler()
                    )
                    if not study.trials:
                        for measured in recorded.get(point.name, ()):
                            mapped = map_config(measured, tunable)
                            if mapped is not None and tunable.space.knobs:
                                study.enqueue_trial(
                                    tunable.space.to_params(mapped), user_attrs={"recorded": True}
                                )
                    continue
                config = warm.get(point.name)
                if config is None:
                    self._seed_bundle(ctx, tunable, point)
                    continue
                mapped = map_config(config, tunable)
                if mapped is None or not tunable.space.knobs:
                    continue
                if tunable.space.violations(mapped, self.spec.env(point)):
                    continue
                name = runner.study_name(ctx, point)
                study = open_study(ctx.storage, name, optuna.samplers.RandomSampler())
                if not study.trials:
                    study.enqueue_trial(tunable.space.to_params(mapped), user_attrs={"warm_start": True})
                    env = self.spec.env(point)
                    for step in sweep_new_knobs(tunable.space, mapped, config.keys(), env):
                        study.enqueue_trial(tunable.space.to_params(step), user_attrs={"new_knob_step": True})
            # the round's final check and outputs come out of its time share, reserved up front
            until = runner.search_until(ctx, deadline)
            if self.search_cap is not None:
                until = self.search_cap if until is None else min(until, self.search_cap)
            runner.tune_shapes(ctx, until)
            summary = runner.finalize(ctx, time.monotonic() - start, deadline, start)
        finally:
            ctx.display.close()
        return self._result(summary, folder, start)

    def _seed_bundle(self, ctx: Any, tunable: Tunable, point: ShapePoint) -> None:
        """Queue :func:`bundle_steps` first in ``point``'s study (a new study only)."""
        from ktx.search import runner
        from ktx.search.engine import open_study

        if self.bundle is None or not tunable.space.knobs:
            return
        chosen, companions = self.bundle
        env = self.spec.env(point)
        steps = bundle_steps(tunable.space, chosen, companions, env, threads=threads_at(tunable, point),
                             nbytes=self.spec.bytes_moved(env))  # fmt: skip
        if not steps:
            return
        study = open_study(ctx.storage, runner.study_name(ctx, point), optuna.samplers.RandomSampler())
        if study.trials:
            return
        for step in steps:
            study.enqueue_trial(tunable.space.to_params(step), user_attrs={"bundle_step": True})

    def recheck(
        self, folder: Path, tunable: Tunable, previous: RoundResult, deadline: float | None
    ) -> RoundResult:
        """The round in ``folder`` finalized again, searching nothing: the final checks its
        time share cut (status skipped) run now, within ``deadline``; every other shape keeps
        its check. The originals come from the shared measurement cache."""
        from ktx.search import runner

        start = time.monotonic()
        ctx = self._context(folder, tunable, deadline, start, previous.trials)
        keep = {s.shape: s.paired for s in previous.shapes if s.paired is not None}
        try:
            runner.prepare_all(ctx, deadline)
            summary = runner.finalize(ctx, previous.wall_s + time.monotonic() - start, deadline, None, keep)
        finally:
            ctx.display.close()
        result = self._result(summary, folder, start)
        return dataclasses.replace(result, wall_s=previous.wall_s + result.wall_s)

    def _result(self, summary: Any, folder: Path, start: float) -> RoundResult:
        """A round's outcome per shape from ``ktx tune``'s summary."""
        failures: dict[str, int] = {}
        evaluations = trials_run = 0
        outcomes = []
        for r in summary.results:
            for status, count in r.stats.failures.items():
                failures[status] = failures.get(status, 0) + count
            if r.stats.refused:
                failures["refused"] = failures.get("refused", 0) + r.stats.refused
            evaluations += r.stats.evaluations
            trials_run += r.stats.trials
            outcomes.append(
                ShapeOutcome(
                    r.point.name,
                    r.metric,
                    r.original,
                    r.best_config,
                    r.best,
                    self.min_gain,
                    summary.paired.get(r.point.name),
                )
            )
        return RoundResult(
            tuple(outcomes), failures, evaluations, trials_run, time.monotonic() - start, folder
        )
