"""The agent loop: analyze -> plan -> template -> test + search -> record, until no gain or no budget.

One call of :func:`optimize` is one ``ktx optimize`` run. The run folder holds::

    optimize.json      the request, the device, the outcome (rewritten at the end of each round)
    rounds.jsonl       one line per round: analysis, probes, plan (with LLM attempts and tokens),
                       template outcomes per site, knob ranges, search results, decision
    baseline.json      the original kernel's measurements per shape (and Nsight metrics)
    cache.jsonl        measurements of every candidate, shared by all rounds
    llm_cache.jsonl    the LLM planner's answers by prompt hash (a rerun replays them)
    round-NN/          the round's template (template.cu, trace.json), plan, studies and the
                       outputs of ``ktx tune`` (best/, dispatch.json/.h, summary.json)
    final/             the best round's template, trace, dispatch table and variants
    recording.json     (runs that measured) every measurement and the run itself: what a replay
                       on a CPU needs to follow it round for round (:func:`recording_of_run`)

Over a recording with a run section (``--backend replay:FILE``, or ``auto`` without a GPU), the
loop replays that run: each round's search stops after the evaluations the recorded one made,
the run after the recorded rounds with the recorded stop reason, and every round is checked
against the recording (:meth:`Optimizer.follow`); a difference is :class:`ReplayDiverged`.

A round's pipeline is the planner's whole pipeline; passes that rewrote nothing are reported
back to the planner (``failures``) and a round whose new passes all failed is not searched.
A round *improves* when the geometric-mean speedup over the shapes (each shape at the better of
the original and the round's best, as the dispatch table will choose) beats the best so far by
more than the noise: ``max(min_gain, half the median relative spread of the timings)``. The loop
stops after ``patience`` rounds without improvement, when the planner says stop, when the
rounds or the time budget run out. The result is the best round's template and dispatch table.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ktx.ir import parse
from ktx.ir.errors import KtxError, Location

from ktx.agent.analysis import Analysis, Device, KernelFacts, NcuMetrics, analyze, kernel_facts
from ktx.agent.budget import CheckReserve, check_reserve
from ktx.agent.catalog import Catalog
from ktx.agent.plan import Plan, restrict_knobs
from ktx.agent.planner import PassFailure, PlanContext, Planner, PlanOutcome, Probe, RoundSummary, Usage
from ktx.agent.rules import RulesPlanner, placed
from ktx.agent.search import (
    RoundResult,
    RoundSearch,
    ShapeOutcome,
    TuneSearch,
    build_template,
    restricted,
    tunable_for,
)
from ktx.agent.timing import PhaseClock
from ktx.measure.backend import Backend
from ktx.measure.occupancy import DeviceLimits
from ktx.measure.types import Measurement
from ktx.passbase import Rewritten
from ktx.records import RecordedRun, measured_configs, read_jsonl, schema_of
from ktx.records.files import stamped
from ktx.records.phases import PhaseTimings
from ktx.registry import Registry, default_registry
from ktx.search.cache import MeasurementCache
from ktx.search.engine import geomean
from ktx.search.evaluate import Evaluator, choose_metric
from ktx.search.paired import SKIPPED
from ktx.search.recording import Recording, ReplayDiverged, RunReplayBackend, recording_of_run, write
from ktx.search.runlog import RunLog, read_log
from ktx.search.space import Config
from ktx.search.tunable import Tunable
from ktx.spec import ShapePoint, Spec
from ktx.specload import load_spec
from ktx.template import KnobSpace, Template

FORMAT = "ktx.optimize/1"
PLANNERS = ("rules", "llm")


@dataclass(frozen=True)
class OptimizeRequest:
    """Everything ``ktx optimize`` is asked; the defaults are the CLI's."""

    kernel_dir: Path
    planner: str = "rules"
    model: str | None = None
    base_url: str | None = None
    rounds: int = 6
    trials_per_round: int = 40
    budget_s: float | None = None
    seed: int = 0
    backend: str = "cupy"
    out: Path | None = None
    shapes: tuple[str, ...] = ()
    patience: int = 2
    min_gain: float = 0.02
    ncu: str = "auto"
    llm_attempts: int = 3
    llm_timeout_s: float = 60.0
    quiet: bool = True
    #: Let the rules plan a round the model never answered (``--llm-fallback``); else it stops.
    llm_fallback: bool = False

    def check(self) -> None:
        if self.planner not in PLANNERS:
            raise KtxError(f"unknown planner {self.planner!r}", None, "use rules or llm")
        for name, value, low in (
            ("--rounds", self.rounds, 1),
            ("--trials-per-round", self.trials_per_round, 1),
            ("--patience", self.patience, 1),
            ("--llm-attempts", self.llm_attempts, 1),
        ):
            if value < low:
                raise KtxError(f"{name} {value}: must be at least {low}")
        if self.budget_s is not None and self.budget_s <= 0:
            raise KtxError(f"--budget {self.budget_s}: must be positive")
        if self.ncu not in ("auto", "on", "off"):
            raise KtxError(f"--ncu {self.ncu!r}", None, "use auto, on or off")

    def to_json(self) -> dict[str, Any]:
        return {k: (str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v)
                for k, v in self.__dict__.items()}  # fmt: skip


@dataclass(frozen=True)
class RoundRecord:
    """One round, as logged (``rounds.jsonl``) and as the report reads it."""

    index: int
    status: str  # improved | no-gain | template-failed | repeat | stopped | search-failed
    outcome: PlanOutcome
    analysis: Analysis
    probes: tuple[Probe, ...] = ()
    failures: tuple[PassFailure, ...] = ()
    sites: tuple[Mapping[str, Any], ...] = ()
    knobs: tuple[tuple[str, tuple[int, ...]], ...] = ()
    range_problems: tuple[str, ...] = ()
    result: RoundResult | None = None
    noise: float = 0.0
    best_after: float | None = None
    note: str = ""
    wall_s: float = 0.0
    #: Seconds of the budget the round was given when it started (None without a budget).
    share_s: float | None = None

    @property
    def plan(self) -> Plan:
        return self.outcome.plan

    @property
    def geomean_speedup(self) -> float | None:
        return None if self.result is None else self.result.geomean_speedup

    def summary(self) -> RoundSummary:
        return RoundSummary(
            self.index,
            self.plan.pipeline,
            self.plan.planner,
            self.plan.rationale,
            self.status,
            self.geomean_speedup,
            self.best_after,
            self.failures,
            self.knobs,
            self.note,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": schema_of("rounds"),
            "round": self.index,
            "status": self.status,
            "pipeline": self.plan.pipeline,
            "planner": self.plan.planner,
            "rationale": self.plan.rationale,
            "plan": self.outcome.to_json(),
            "analysis": self.analysis.to_json(),
            "probes": [p.to_json() for p in self.probes],
            "failures": [f.to_json() for f in self.failures],
            "sites": list(self.sites),
            "knobs": {k: list(v) for k, v in self.knobs},
            "range_problems": list(self.range_problems),
            "result": None if self.result is None else self.result.to_json(),
            "geomean_speedup": self.geomean_speedup,
            "noise": self.noise,
            "best_after": self.best_after,
            "note": self.note,
            "wall_s": round(self.wall_s, 3),
            "share_s": None if self.share_s is None else round(self.share_s, 3),
            "usage": self.outcome.usage.to_json(),
        }


@dataclass(frozen=True)
class OptimizeResult:
    kernel: str
    run_dir: Path
    rounds: tuple[RoundRecord, ...]
    best_round: int
    pipeline: str
    shapes: tuple[ShapeOutcome, ...]
    stop_reason: str
    wall_s: float
    usage: Usage = field(default_factory=Usage)
    notes: tuple[str, ...] = field(default=())
    #: Where the wall time went (``optimize.json``'s ``phases``); None from a fake loop.
    phases: PhaseTimings | None = None

    @property
    def geomean_speedup(self) -> float | None:
        return geomean([s.speedup for s in self.shapes if s.speedup is not None])


# -- helpers -----------------------------------------------------------------------------------


def search_jobs(backend: str, recording: Recording | None, injected: bool = False) -> int:
    """Trials in flight in a round's search: 2 on a GPU, so each candidate's compile (nvcc takes
    seconds on real project code, and it sat on the critical path between two measurements)
    overlaps the measurement before it; the GPU still measures one at a time. A replay and the
    stand-in backends keep 1: their order of evaluation is part of what they reproduce, and so
    does a backend handed in by a caller (tests' models, under the default ``--backend cupy``)."""
    return 2 if recording is None and backend == "cupy" and not injected else 1


def error_budget(spec: Spec) -> tuple[str, bool]:
    """The outputs' tolerances in words, and whether they leave room for fast math (rtol >= 1e-3)."""
    parts: list[str] = []
    loose = True
    for arg in spec.all_args:  # the [[buffers]] a struct points at too
        if not (arg.is_array and arg.is_output):
            continue
        tol = spec.tolerance_for(arg.dtype)
        parts.append(f"{arg.name} {arg.dtype.name} rtol {tol.rtol:.1e} atol {tol.atol:.1e}")
        if tol.rtol < 1e-3 and tol.ulp < 1:
            loose = False
    return "; ".join(parts), loose and bool(parts)


def source_relpath(path: Path) -> str:
    """The kernel file relative to the working directory (a patch's path), or its name if outside."""
    rel = os.path.relpath(path.resolve(), Path.cwd())
    return path.name if rel.startswith("..") else rel


def device_of(limits: DeviceLimits, recording_device: str = "") -> Device:
    name = recording_device or limits.name
    return Device(name, limits.sm_count, limits.copy_bandwidth_gbs, limits.max_threads_per_sm)


def pipeline_names(plan: Plan) -> set[str]:
    return set(plan.names)


def probe_passes(
    spec: Spec, current: Plan, catalog: Catalog, registry: Registry, build: Callable[[str], Template]
) -> tuple[Probe, ...]:
    """Each pass not in the pipeline, added alone to it: sites rewritten, knobs, skip reasons."""
    probes: list[Probe] = []
    have = set(current.names)
    for info in catalog.passes:
        if info.name in have or (info.name in registry and registry.get(info.name).automatic):
            continue  # (an automatic pass: the pipeline adds it where it applies)
        at = placed(catalog, current.names, info.name)  # where the planner would write it
        text = ",".join(
            [p.text for p in current.passes[:at]] + [info.name] + [p.text for p in current.passes[at:]]
        )
        try:
            template = build(text)
        except KtxError as exc:
            probes.append(Probe(info.name, error=str(exc)[:300]))
            continue
        except Exception as exc:  # a pass bug must not stop the run; it is reported like a refusal
            probes.append(Probe(info.name, error=f"{type(exc).__name__} in the pass: {str(exc)[:200]}"))
            continue
        mine = [o for o in template.outcomes if o.pass_name == info.name]
        rewritten = sum(1 for o in mine if isinstance(o, Rewritten))
        skipped = tuple(dict.fromkeys(o.message for o in mine if not isinstance(o, Rewritten)))
        knobs = tuple((k.name, k.values) for k in template.knobs if k.pass_name == info.name)
        probes.append(Probe(info.name, rewritten, knobs, skipped[:5]))
    return tuple(probes)


def round_share(left: float, rounds_left: int, added: int) -> float:
    """A round's share of the ``left`` seconds: one part per pass it adds (a pass with its
    companions, :func:`ktx.agent.rules.companions`, is several), one per later round.

    An equal share gave llm.c softmax's first round (row-owner with online and vectorize, 126
    configs where row-owner alone has 9) a fifth of the budget, as much as a later round adding
    cache hints to 2 knobs: on the sleeping model (scripts/s11_ladder_replay.py) it measured 11
    configs over three shapes, fewer than its companions-on steps alone."""
    parts = max(1, added)
    return left * parts / (parts + max(1, rounds_left) - 1)


def bundle_of(plan: Plan, new: Sequence[str]) -> tuple[str, tuple[str, ...]] | None:
    """(the pass the planner chose, its companions written after it) when ``plan`` adds more
    than one pass (``new``): the chosen one is the one its rationale adds (``add NAME:``).
    Only the companions after it, which extend what it rewrote (online and vectorize on the
    owned rows): a companion written before it (block-size before row-registers) is a launch
    shape whose largest value is no "on". None for a single pass, no companion after it, or a
    plan that does not say which pass it chose."""
    if len(new) < 2:
        return None
    found = re.search(r"(?:^|; )add ([\w-]+):", plan.rationale)
    if found is None or found.group(1) not in new:
        return None
    chosen = found.group(1)
    names = list(plan.names)
    after = tuple(n for n in names[names.index(chosen) + 1 :] if n in new)
    return (chosen, after) if after else None


def check_seconds(log: Path) -> float:
    """Seconds the paired final checks logged in a round's ``log.jsonl`` took (their
    ``paired_cost`` events: only checks that measured; a skipped or identical one costs nothing)."""
    if not log.is_file():
        return 0.0
    return sum(float(e.get("spent_s") or 0.0) for e in read_log(log) if e.get("event") == "paired_cost")


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str) + "\n")
    os.replace(tmp, path)


def _append(path: Path, data: Mapping[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(data, separators=(",", ":"), default=str) + "\n")


class _Templates:
    """Templates by pipeline text, built once (probes, checks and the round share them)."""

    def __init__(self, spec: Spec, registry: Registry) -> None:
        self.spec = spec
        self.registry = registry
        self._made: dict[str, Template | KtxError] = {}

    def __call__(self, pipeline: str) -> Template:
        found = self._made.get(pipeline)
        if found is None:
            try:
                found = build_template(self.spec, pipeline, self.registry)
            except KtxError as exc:
                found = exc
            self._made[pipeline] = found
        if isinstance(found, KtxError):
            raise found
        return found


# -- the loop ----------------------------------------------------------------------------------


@dataclass
class _Best:
    round: int
    plan: Plan
    geomean: float
    shapes: tuple[ShapeOutcome, ...]
    template: Template | None = None


class Optimizer:
    """One run. Built by :func:`optimize`; tests construct it with a fake search or planner."""

    def __init__(
        self,
        request: OptimizeRequest,
        spec: Spec,
        planner: Planner,
        search: RoundSearch,
        evaluator: Evaluator,
        points: Sequence[ShapePoint],
        device: Device,
        run_dir: Path,
        registry: Registry,
        notes: Sequence[str] = (),
        ncu: Callable[[Sequence[str]], tuple[Mapping[str, NcuMetrics], list[str]]] | None = None,
        script: RecordedRun | None = None,
        script_path: str = "",
        clock: PhaseClock | None = None,
    ) -> None:
        self.request = request
        #: The run's phase timings; its ``start`` is the budget's (the command's start, so that
        #: loading the spec and opening the backend count against ``--budget`` as they cost).
        self.clock = clock or PhaseClock()
        #: The recorded run a replay follows (None: a run that decides for itself).
        self.script = script
        self.script_path = script_path
        self.spec = spec
        self.planner = planner
        self.search = search
        self.evaluator = evaluator
        self.points = tuple(points)
        self.device = device
        self.run_dir = run_dir
        self.registry = registry
        self.catalog = Catalog.from_registry(registry)
        self.templates = _Templates(spec, registry)
        self.notes = list(notes)
        self.ncu = ncu
        #: Each searched round's tunable (its study names derive from it): a re-check reopens it.
        self.tunables: dict[int, Tunable] = {}
        self.tolerance, self.fast_math_budget = error_budget(spec)
        with self.clock.timing("load"):
            self.facts: KernelFacts = kernel_facts(
                parse(spec.source_text(), str(spec.folder / spec.source)), spec.kernel
            )

    # -- pieces --------------------------------------------------------------------------------

    def analysis(self, pipeline: str, pairs: Sequence[tuple[Measurement, str]],
                 ncu: Mapping[str, NcuMetrics] | None = None) -> Analysis:  # fmt: skip
        return analyze(
            self.spec.name,
            pipeline,
            self.facts,
            pairs,
            self.device,
            flags=self.spec.flags,
            tolerance=self.tolerance,
            fast_math_budget=self.fast_math_budget,
            ncu=ncu,
        )

    def baseline(self) -> tuple[ShapeOutcome, ...]:
        out = []
        for point in self.points:
            m = self.evaluator.original(point)
            out.append(ShapeOutcome(point.name, choose_metric("auto", m), m, None, None))
        return tuple(out)

    def check(self, plan: Plan) -> list[str]:
        """The LLM planner's deeper check: the pipeline builds and its knob ranges fit."""
        try:
            template = self.templates(plan.pipeline)
        except KtxError as exc:
            return [f"the pipeline {plan.pipeline!r} cannot be built: {exc}"]
        except Exception as exc:
            return [f"the pipeline {plan.pipeline!r} cannot be built ({type(exc).__name__}: {exc})"]
        return list(restrict_knobs(template.knobs, plan, self.catalog).problems)

    def write_state(
        self, rounds: Sequence[RoundRecord], best: _Best, state: str, stop: str, start: float
    ) -> None:
        usage = sum((r.outcome.usage for r in rounds), Usage())
        _write_json(
            self.run_dir / "optimize.json",
            {
                "format": FORMAT,
                "state": state,
                "kernel": self.spec.name,
                "spec": str(self.spec.path.resolve()),  # export and report work from any folder
                "source": str((self.spec.folder / self.spec.source).resolve()),
                "source_rel": source_relpath(self.spec.folder / self.spec.source),
                "request": self.request.to_json(),
                "device": self.device.__dict__,
                "notes": self.notes,
                "flags": list(self.spec.flags),
                "tolerance": self.tolerance,
                "rounds": len(rounds),
                "best_round": best.round,
                "pipeline": best.plan.pipeline,
                "plan": best.plan.to_json(),
                "geomean_speedup": best.geomean,
                "shapes": [s.to_json() for s in best.shapes],
                "stop_reason": stop,
                "wall_s": round(time.monotonic() - start, 3),
                "usage": usage.to_json(),
                "fast_math": self.fast_math_used(best),
                "phases": self.clock.record().to_json(),
            },
        )

    def fast_math_used(self, best: _Best) -> dict[str, Any]:
        spec_flag = any(f in ("-use_fast_math", "--use_fast_math") for f in self.spec.flags)
        in_pipeline = "fast-math" in best.plan.names
        chosen = []
        if in_pipeline and best.template is not None:
            fm = {k.name for k in best.template.knobs if k.pass_name == "fast-math"}
            for s in best.shapes:
                if s.wins and s.best_config and any(s.best_config.get(n, 0) for n in fm):
                    chosen.append(s.shape)
        return {"spec_flags": spec_flag, "pass_in_pipeline": in_pipeline, "chosen_at": chosen}

    # -- run -----------------------------------------------------------------------------------

    def run(self) -> OptimizeResult:
        req = self.request
        start = self.clock.start
        deadline = None if req.budget_s is None else start + req.budget_s
        rounds_path = self.run_dir / "rounds.jsonl"
        if rounds_path.exists():
            rounds_path.unlink()  # a new run in the same folder starts a new log (the cache stays)
        (self.run_dir / "original.cu").write_text(self.spec.source_text())
        base_start = time.monotonic()
        base = self.baseline()
        self.clock.add("originals", time.monotonic() - base_start)
        self.baseline_s = self.repeatable_originals_s(time.monotonic() - base_start)
        self.candidates_s = self.expected_candidates_s()
        self.timings_s = self.expected_candidates_s("timing_cost")
        self.originals = base
        ncu: Mapping[str, NcuMetrics] = {}
        if self.ncu is not None:
            from ktx.agent.ncu import budgeted

            names = [self.points[0].name] + ([self.points[-1].name] if len(self.points) > 1 else [])
            names, why = budgeted(names, req.budget_s, req.ncu)
            if why:
                self.notes.append(f"ncu: {why}")
            if names:
                with self.clock.timing("ncu"):
                    ncu, errors = self.ncu(names)
                self.notes += [f"ncu: {e}" for e in errors]
        _write_json(
            self.run_dir / "baseline.json",
            {
                "schema": schema_of("baseline"),
                "kernel": self.spec.name,
                "shapes": [{"metric": s.metric, "measurement": s.original.to_dict()} for s in base],
                "ncu": {k: v.to_json() for k, v in ncu.items()},
                "facts": self.facts.to_json(),
            },
        )
        best = _Best(0, Plan((), "the original kernel"), 1.0, base)
        current_analysis = self.analysis("", [(s.original, s.metric) for s in base], ncu)
        records: list[RoundRecord] = []
        stale = 0
        stop = "rounds"
        self.write_state(records, best, "running", "", start)
        index = 0
        while True:
            index += 1
            if self.script is not None and index > len(self.script.rounds):
                stop = self.script.stop_reason
                self.notes.append(self.replay_stop_note())
                break
            if index > req.rounds and not self.keep_going(best, deadline, index):
                break
            if deadline is not None and time.monotonic() >= deadline:
                stop = "budget"
                break
            if deadline is not None and deadline - time.monotonic() < self.min_round_s():
                stop = "budget"
                self.notes.append(
                    f"budget: {max(0.0, deadline - time.monotonic()):.1f} s left, less than one round "
                    f"needs (about {self.min_round_s():.1f} s: {self.round_need_why()}, at least "
                    f"{self.MIN_ROUND_S:.0f} s); a larger --budget lets the planner try more"
                )
                break
            kept = 0.0 if deadline is None else self.reserve_s(records)
            if deadline is not None and deadline - kept - time.monotonic() < self.least_search_s():
                stop = "budget"
                self.notes.append(
                    f"budget: {max(0.0, deadline - time.monotonic()):.1f} s left, {kept:.1f} s of it kept "
                    f"back for the final check of the shapes earlier rounds made faster, less than one "
                    f"candidate's measurement ({self.least_search_s():.1f} s) for a search; a larger "
                    "--budget lets the planner try more"
                )
                break
            round_start = time.monotonic()
            probes = probe_passes(self.spec, best.plan, self.catalog, self.registry, self.templates)
            context = PlanContext(
                self.spec.name, index, max(0, req.rounds - index), current_analysis, self.catalog, best.plan,
                tuple(r.summary() for r in records), probes, check=self.check,
            )  # fmt: skip
            outcome = self.planner.plan(context)
            self.clock.round(index).plan_s = time.monotonic() - round_start
            record = self.round(
                index, outcome, current_analysis, probes, best, deadline, max(2, req.rounds - index + 1),
                None if deadline is None else deadline - kept,
            )
            record = replace(record, wall_s=time.monotonic() - round_start)
            if record.status == "improved" and record.result is not None:
                best = _Best(
                    index,
                    outcome.plan,
                    record.result.geomean_speedup or best.geomean,
                    record.result.shapes,
                    self.templates(outcome.plan.pipeline),
                )
                stale = 0
                pairs = [(s.effective, s.metric) for s in best.shapes]
                current_analysis = self.analysis(best.plan.pipeline, pairs)
            elif record.status != "stopped":
                stale += 1
            record = replace(record, best_after=best.geomean)
            records.append(record)
            _append(rounds_path, record.to_json())
            self.write_state(records, best, "running", "", start)
            self.follow(record)
            if record.status == "no-time":
                stop = "budget"
                self.notes.append(f"budget: {record.note}; a larger --budget lets the planner try more")
                break
            if record.status == "stopped":
                stop = "no answer from the LLM" if outcome.unanswered else "planner"
                self.notes.append(f"planner stop: {outcome.plan.rationale}")
                break
            if stale >= req.patience and not self.keep_going(best, deadline, index + 1):
                stop = f"{req.patience} round(s) without a gain beyond noise"
                break
            if deadline is not None and time.monotonic() >= deadline:
                stop = "budget"
                break
        script = self.script
        if script is not None and (len(records) != len(script.rounds) or stop != script.stop_reason):
            raise self.diverged(
                f"the replay stopped after round {len(records)} ({stop}); the recorded run after round "
                f"{len(script.rounds)} ({script.stop_reason})"
            )
        with self.clock.timing("report"):
            self.finish(best)
        self.write_state(records, best, "done", stop, start)
        return OptimizeResult(
            self.spec.name,
            self.run_dir,
            tuple(records),
            best.round,
            best.plan.pipeline,
            best.shapes,
            stop,
            time.monotonic() - start,
            sum((r.outcome.usage for r in records), Usage()),
            tuple(self.notes),
            self.clock.record(),
        )

    # -- the replay of a recorded run ----------------------------------------------------------

    def diverged(self, what: str) -> ReplayDiverged:
        return ReplayDiverged(
            f"the replay left the recorded run: {what}",
            Location(self.script_path or None),
            "the planner, the passes or the search changed since the recording; "
            "record the run again on a GPU",
        )

    def stop_after(self, index: int) -> dict[str, int]:
        """Per shape, the evaluations the recorded run's round ``index`` made (0 where none)."""
        recorded = None if self.script is None else self.script.round(index)
        found = {} if recorded is None else {s.shape: s.evaluations for s in recorded.shapes}
        return {p.name: found.get(p.name, 0) for p in self.points}

    def recorded_configs(self, index: int) -> dict[str, tuple[Config, ...]]:
        """Per shape, the configs the recorded run's round ``index`` measured, in order."""
        recorded = None if self.script is None else self.script.round(index)
        found = (
            {} if recorded is None else {s.shape: tuple(dict(c) for c in s.measured) for s in recorded.shapes}
        )
        return {p.name: found.get(p.name, ()) for p in self.points}

    def follow(self, record: RoundRecord) -> None:
        """Check a replayed round against the recorded one: pipeline, outcome, and the configs
        each shape's search measured, in order. Any difference stops the replay."""
        if self.script is None:
            return
        recorded = self.script.round(record.index)
        if recorded is None:
            raise self.diverged(f"round {record.index} is not in the recording")
        if (record.plan.pipeline, record.status) != (recorded.pipeline, recorded.status):
            raise self.diverged(
                f"round {record.index} is `{record.plan.pipeline}` {record.status}; the recorded run's was "
                f"`{recorded.pipeline}` {recorded.status}"
            )
        log = self.run_dir / f"round-{record.index:02d}" / "log.jsonl"
        measured = measured_configs(list(read_log(log)))
        for shape in recorded.shapes:
            mine = measured.get(shape.shape, [])
            if [dict(c) for c in shape.measured] != mine:
                raise self.diverged(
                    f"round {record.index} measured {mine} at {shape.shape}; the recorded run measured "
                    f"{[dict(c) for c in shape.measured]}"
                )

    def replay_stop_note(self) -> str:
        assert self.script is not None
        run = self.script
        took = "" if run.wall_s is None else f"; it took {run.wall_s:.1f} s"
        budget = "no --budget" if run.budget_s is None else f"a --budget of {run.budget_s:g} s"
        return (
            f"replay: the recorded run stopped after round {len(run.rounds)} ({run.stop_reason}), with "
            f"{budget}{took}. A replay spends no GPU time, so it follows the recorded rounds, and each "
            "round's search stops after the evaluations the recorded one made, rather than a clock"
        )

    #: The least time a round gets (seconds): a round re-checks the originals, searches and
    #: re-measures its winners against them; a thinner slice measures nothing at all (the
    #: search then reports every shape unmeasured, and the round is wasted).
    MIN_ROUND_S = 10.0
    baseline_s = 0.0

    #: Candidate measurements per shape a round needs room for (a search that measures fewer
    #: than a few configs has nothing to choose between).
    ROUND_EVALS = 4
    #: Timings per shape of a round's final check: :data:`ktx.search.final.MIN_PAIRS` pairs of
    #: two timings each (the original and the winner), no verification.
    ROUND_CHECK_TIMINGS = 6
    #: Seconds one candidate's measurement is expected to take, summed over the shapes (None:
    #: the backend gives no account, and the originals' measurement stands for it) ...
    candidates_s: float | None = None
    #: ... and one timing-only measurement (a side of a paired check; None: as a candidate's).
    timings_s: float | None = None

    #: The originals' measurements (the baseline), from which the check's reserve is counted.
    originals: tuple[ShapeOutcome, ...] = ()
    #: The reserve last counted (:meth:`reserve_s`), for the run's note.
    reserve: CheckReserve | None = None

    def reserve_s(self, records: Sequence[RoundRecord] = ()) -> float:
        """Seconds of the budget no round's search may use: the final check, at
        :data:`ktx.search.final.MIN_PAIRS` pairs, of the shapes where an earlier round's search
        found a gain (every shape before any round has searched), and one evaluation's overrun
        (:func:`ktx.agent.budget.check_reserve`), counted again before each round. 0 in a replay,
        which follows the recorded rounds and spends no GPU time.

        Why (session 9's real-code run, 4x H200, 50 s a kernel): 12 found wins in 6 kernels were
        never used, their checks "skipped: -0.8 s left of the time limit": the last round's search
        had used the budget up to its end. Kept for every shape, the reserve cost rounds that found
        wins (benchmarks/realcode/budget_replay.py on that run's timelines: 133 -> 119 rounds, the
        best rounds' checked gains 1.230 -> 1.225); kept for the shapes that won before, none was
        lost and 128 rounds ran (1.229)."""
        if self.script is not None or not self.originals:
            return 0.0
        points = {p.name: p for p in self.points}
        gains: dict[str, float] = {}
        for r in records:
            for s in r.result.shapes if r.result is not None else ():
                if s.original_us and s.best_us:
                    gains[s.shape] = max(gains.get(s.shape, 0.0), s.original_us / s.best_us)
        # a shape won before is priced by its largest gain: a large one needs fewer pairs
        won = {name for name, gain in gains.items() if gain >= 1.0 + self.request.min_gain}
        searched = any(r.result is not None for r in records)
        originals = [
            (points[s.shape], s.original)
            for s in self.originals
            if s.shape in points and (not searched or s.shape in won)
        ]
        costs = getattr(self.evaluator.backend, "original_cost", None)
        # one evaluation measures one shape: the slowest shape's candidate, not their sum
        each = getattr(self.evaluator.backend, "candidate_cost", None)
        each = each if isinstance(each, Mapping) else {}
        slowest = [float(v) for v in each.values() if isinstance(v, int | float)]
        reserve = check_reserve(
            originals,
            self.evaluator.backend,
            costs if isinstance(costs, Mapping) else None,
            max(slowest) if slowest else self.candidates_s,
            gains,
        )
        if self.reserve is None:
            self.notes.append(f"budget: {reserve.text()}")
        self.reserve = reserve
        return reserve.seconds

    def least_search_s(self) -> float:
        """The least search a round is started for beside the reserve: one candidate's
        measurement over the shapes (the backend's account), else a second."""
        return 1.0 if self.candidates_s is None else self.candidates_s

    def min_round_s(self) -> float:
        """What one round needs, at least :attr:`MIN_ROUND_S`: :attr:`ROUND_EVALS` candidate
        measurements per shape at a candidate's expected cost, and a final check of
        :attr:`ROUND_CHECK_TIMINGS` timings per shape at a timing's; without the backend's
        account of a candidate's cost, twice the originals' repeatable measurement, which also
        bounds the count from above: the count only lowers the old rule where the originals'
        verification dominated (a long kernel, cheap to verify and slow to time, keeps the
        rounds the old rule gave it: a round cut short still keeps the original where its check
        does not fit, while a round refused tries nothing).

        Why (issue 23 item 6, llm.c layernorm v1, H200, --budget 78): the originals took 22 s to
        measure without one-off costs, nearly all of it their check (against the float64 Python
        reference, at four shapes and three rounds each), which no candidate repeats (they are
        checked against the original's outputs, on the device); twice that refused every round
        with 42 s left, and ktx kept a kernel 66x slower than llm.c's own."""
        old = 2.0 * self.baseline_s
        if self.candidates_s is None:
            return max(self.MIN_ROUND_S, old)
        timings = self.candidates_s if self.timings_s is None else self.timings_s
        counted = self.ROUND_EVALS * self.candidates_s + self.ROUND_CHECK_TIMINGS * timings
        return max(self.MIN_ROUND_S, min(old, counted))

    def round_need_why(self) -> str:
        """How :meth:`min_round_s` was counted, for the note that refuses a round."""
        if self.candidates_s is None:
            return (
                f"twice the {self.baseline_s:.1f} s the originals' measurement takes without its "
                "one-off costs"
            )
        timings = self.candidates_s if self.timings_s is None else self.timings_s
        if self.min_round_s() >= 2.0 * self.baseline_s > self.MIN_ROUND_S:
            return f"twice the {self.baseline_s:.1f} s the originals' measurement takes"
        return (
            f"{self.ROUND_EVALS} candidate measurements per shape at {self.candidates_s:.2f} s over "
            f"all shapes, and a final check of {self.ROUND_CHECK_TIMINGS} timings per shape at "
            f"{timings:.2f} s"
        )

    def expected_candidates_s(self, name: str = "candidate_cost") -> float | None:
        """A candidate's expected measurement (``name="timing_cost"``: a timing-only one) summed
        over the shapes: the backend's account per shape (the GPU harness's, from the original's
        timing and fixed request cost, :func:`ktx.measure.timeouts.candidate_cost`); None where
        a shape has none (a replay, a model backend)."""
        costs = getattr(self.evaluator.backend, name, None)
        if not isinstance(costs, Mapping) or not costs:
            return None
        known = [float(costs[p.name]) for p in self.points if isinstance(costs.get(p.name), int | float)]
        return sum(known) if len(known) == len(self.points) else None

    def repeatable_originals_s(self, took: float) -> float:
        """The seconds of the originals' measurement a round repeats: the backend's own account
        per shape (the GPU harness's ``original_cost``: each request without the worker's
        warm-up and the Python reference check) where it has one, else all ``took``.

        Why (session 8's probe, H200, --budget 40): the first measurement of a process also
        compiles the original (nvcc, seconds) and waits for the worker's warm-up (8-9 s); twice
        that as the least a round needs left no round any room although a candidate's
        measurement costs a fraction of a second."""
        costs = getattr(self.evaluator.backend, "original_cost", None)
        if not isinstance(costs, Mapping) or not costs:
            return took
        names = {p.name for p in self.points}
        known = [float(v) for k, v in costs.items() if k in names and isinstance(v, int | float)]
        return min(took, sum(known)) if len(known) == len(names) else took

    #: Below this fraction of speed-of-light (median over shapes) the run goes on past
    #: ``--rounds`` and ``--patience`` while the budget lasts and the planner has passes to try.
    #: 0.8, not 0.5: on an H100 (llm.c ladder, 2026-11-25) layernorm stopped on patience at 59%
    #: (median) with half its budget unused, while llm.c's hand-written versions reach about 80%.
    KEEP_GOING_SOL = 0.8

    def keep_going(self, best: _Best, deadline: float | None, index: int) -> bool:
        """Whether round ``index`` runs although the rounds or the patience are spent: the best
        is still under :attr:`KEEP_GOING_SOL` of speed-of-light, a budget is set and left, and
        the run has used fewer than three times its rounds (the planner's own stop ends it
        sooner: it stops once no pass has a site left to try)."""
        if deadline is None or time.monotonic() >= deadline or index > 3 * self.request.rounds:
            return False
        sols = [
            s.effective.sol_us / s.effective_us
            for s in best.shapes
            if s.effective.sol_us is not None and s.effective_us
        ]
        if not sols or statistics.median(sols) >= self.KEEP_GOING_SOL:
            return False
        if not any(n.startswith("keep going:") for n in self.notes):
            self.notes.append(
                f"keep going: the best was at {statistics.median(sols):.0%} of speed-of-light (median) "
                f"after round {index - 1}, so the run went on past the rounds or the patience, "
                "within the budget"
            )
        return True

    def round(
        self,
        index: int,
        outcome: PlanOutcome,
        analysis: Analysis,
        probes: tuple[Probe, ...],
        best: _Best,
        deadline: float | None,
        rounds_left: int,
        search_cap: float | None = None,
    ) -> RoundRecord:
        plan = outcome.plan
        folder = self.run_dir / f"round-{index:02d}"
        base = RoundRecord(index, "stopped", outcome, analysis, probes)
        if plan.stop:
            why = outcome.unanswered or f"the planner has nothing left to try: {plan.rationale}"
            return replace(base, note=why)
        if plan.pipeline == best.plan.pipeline and plan.knob_ranges() == best.plan.knob_ranges():
            return replace(base, status="repeat", note="same pipeline as the best")
        phases = self.clock.round(index)
        began = time.monotonic()
        try:
            template = self.templates(plan.pipeline)
        except Exception as exc:
            phases.template_s = time.monotonic() - began
            what = str(exc) if isinstance(exc, KtxError) else f"{type(exc).__name__} in a pass: {exc}"
            return replace(base, status="template-failed", note=what[:500])
        new = [p for p in plan.names if p not in best.plan.names]
        failures = []
        for name in new:
            mine = [o for o in template.outcomes if o.pass_name == name]
            if not any(isinstance(o, Rewritten) for o in mine):
                failures.append(PassFailure(name, tuple(dict.fromkeys(o.message for o in mine))[:5]))
        sites = tuple(o.to_json() for o in template.outcomes)
        restriction = restrict_knobs(template.knobs, plan, self.catalog)
        knobs = tuple((k.name, k.values) for k in restriction.knobs)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "template.cu").write_text(template.source)
        (folder / "trace.json").write_text(template.trace.dumps())
        _write_json(folder / "plan.json", stamped("plan", outcome.to_json()))
        base = replace(
            base, failures=tuple(failures), sites=sites, knobs=knobs, range_problems=restriction.problems
        )
        if new and len(failures) == len(new):
            phases.template_s = time.monotonic() - began
            names = ", ".join(f.name for f in failures)
            return replace(base, status="template-failed", note=f"{names} rewrote nothing")
        narrowed = restricted(template, KnobSpace(restriction.knobs, template.space.constraints))
        tunable = tunable_for(self.spec, narrowed)
        phases.template_s = time.monotonic() - began
        self.tunables[index] = tunable
        warm: dict[str, Config] = {
            s.shape: dict(s.best_config) for s in best.shapes if s.wins and s.best_config
        }
        round_deadline = None
        if deadline is not None:
            left = max(0.0, deadline - time.monotonic())
            # A share of what is left (round_share: a part per pass added), but never less than
            # a round needs: with a short budget the last rounds are dropped (the loop stops on
            # budget) instead of every round getting a slice too thin to measure anything.
            if left < self.min_round_s() and self.script is None:
                # planning and templating took what the check before the round left: searching
                # now would measure nothing, so the run stops on budget instead
                return replace(
                    base,
                    status="no-time",
                    note=f"{left:.1f} s left after planning and templating, less than one round needs "
                    f"(about {self.min_round_s():.1f} s)",
                )
            share = max(round_share(left, rounds_left, len(new)), self.min_round_s())
            round_deadline = time.monotonic() + min(left, share)
            base = replace(base, share_s=min(left, share))
        if hasattr(self.search, "search_cap") and self.script is None:
            # the search never eats into what the round's final check needs (ktx.agent.budget)
            self.search.search_cap = search_cap
        if hasattr(self.search, "bundle"):
            # a pass with companions: the round's shapes without a warm start begin with the
            # companions on (ktx.agent.search.bundle_steps); a replay enqueues what it recorded
            self.search.bundle = None if self.script is not None else bundle_of(plan, new)
        searching = time.monotonic()
        try:
            trials = self.request.trials_per_round
            if self.script is None:
                result = self.search.search(folder, tunable, warm, round_deadline, trials)
            else:
                result = self.search.search(
                    folder,
                    tunable,
                    warm,
                    round_deadline,
                    trials,
                    self.stop_after(index),
                    self.recorded_configs(index),
                )
        except ReplayDiverged:
            raise
        except KtxError as exc:
            phases.search_s = time.monotonic() - searching
            return replace(base, status="search-failed", note=str(exc)[:500])
        phases.check_s = check_seconds(folder / "log.jsonl")
        phases.search_s = max(0.0, time.monotonic() - searching - phases.check_s)
        phases.evaluations = result.evaluations
        rechecking = time.monotonic()
        result = self.recheck(index, tunable, result, deadline)
        phases.recheck_s = time.monotonic() - rechecking
        spreads = [s.spread for s in result.shapes if s.spread is not None]
        noise = max(self.request.min_gain, 0.5 * statistics.median(spreads) if spreads else 0.0)
        gain = result.geomean_speedup
        improved = gain is not None and gain > best.geomean * (1.0 + noise)
        note = "" if gain is None else f"{gain:.3f}x vs best {best.geomean:.3f}x (noise {noise:.1%})"
        status = "improved" if improved else "no-gain"
        return replace(base, status=status, result=result, noise=noise, note=note)

    def recheck(
        self, index: int, tunable: Tunable, result: RoundResult, deadline: float | None
    ) -> RoundResult:
        """The round's final checks that its time share cut, run at once with the budget left.

        A round gets a share of the budget, and the paired final check of a slow original (the
        llm.c ladder's naive kernels take 0.5-40 ms a launch) may not fit in it: the table then
        keeps the original at that shape although the search found a config many times faster
        (H100, layernorm v1 at B=1: 572.8 µs original, 7.7 µs found, check skipped, so the run
        reported 1.0x there). The round cannot be judged against the best without those checks,
        so they take what they need from the rest of the budget before the next round is planned;
        the checks that ran are kept, not repeated."""
        cut = [s.shape for s in result.shapes if s.paired is not None and s.paired.status == SKIPPED]
        recheck = getattr(self.search, "recheck", None)
        if not cut or deadline is None or not callable(recheck):
            return result
        left = deadline - time.monotonic()
        if left <= 0.0:
            self.notes.append(f"re-check: no budget left for round {index}'s final check at {', '.join(cut)}")
            return result
        try:
            again: RoundResult = recheck(result.folder, tunable, result, deadline)
        except KtxError as exc:
            self.notes.append(f"re-check of round {index} failed: {str(exc)[:300]}")
            return result
        after = {s.shape: s.paired for s in again.shapes}
        told = [f"{name} {c.text() if (c := after.get(name)) is not None else '-'}" for name in cut]
        self.notes.append(
            f"re-check: round {index}'s final check, cut by the round's time share, ran with {left:.0f} s "
            "of the budget left: " + "; ".join(told)
        )
        return again

    def finish(self, best: _Best) -> None:
        """``final/``: the best round's template, trace and tune outputs (nothing if none won)."""
        final = self.run_dir / "final"
        if final.exists():
            shutil.rmtree(final)
        final.mkdir(parents=True)
        if best.round == 0:
            (final / "README").write_text("No round beat the original kernel: keep it as it is.\n")
            return
        folder = self.run_dir / f"round-{best.round:02d}"
        for name in ("template.cu", "trace.json", "plan.json", "dispatch.json", "dispatch.h", "summary.json",
                     "best.json"):  # fmt: skip
            if (folder / name).exists():
                shutil.copy2(folder / name, final / name)
        if (folder / "best").is_dir():
            shutil.copytree(folder / "best", final / "best")


# -- assembly ----------------------------------------------------------------------------------


def make_planner(req: OptimizeRequest, run_dir: Path) -> Planner:
    rules = RulesPlanner()
    if req.planner == "rules":
        return rules
    from ktx.agent.llm import AnswerCache, LLMPlanner, OpenAIChat, api_key_from_env

    model = req.model or os.environ.get("KTX_LLM_MODEL")
    if not model:
        raise KtxError("--planner llm needs a model", None, "give --model NAME (or set KTX_LLM_MODEL)")
    base_url = req.base_url or os.environ.get("OPENAI_BASE_URL")
    client = OpenAIChat(base_url, api_key_from_env(base_url), req.llm_timeout_s)
    cache = AnswerCache(run_dir / "llm_cache.jsonl")
    return LLMPlanner(client, model, rules, cache, req.llm_attempts, fallback_unanswered=req.llm_fallback)


def optimize(
    req: OptimizeRequest,
    *,
    planner: Planner | None = None,
    registry: Registry | None = None,
    search: RoundSearch | None = None,
    backend: Backend | None = None,
    clock: PhaseClock | None = None,
) -> OptimizeResult:
    """Run the loop on one kernel folder (see the module docstring).

    ``backend`` replaces the one ``req.backend`` names (library use and tests: a model of the GPU).
    ``clock``: the phase clock the command started (its spec checks timed as ``load``); the
    budget counts from its start.
    """
    from ktx.search import runner

    clock = clock or PhaseClock()
    req.check()
    with clock.timing("load"):
        spec = load_spec(req.kernel_dir)
    run_dir = (req.out or Path(".ktx") / "optimize" / spec.name).resolve()
    # handed in by the caller (a model of the GPU, a stand-in): asked before the backend opens,
    # for afterwards there always is one (the recording of a real run was marked synthetic)
    given = backend is not None
    with runner.run_lock(run_dir):
        if backend is None:
            with clock.timing("backend"):
                backend, recording, limits = runner.open_backend(req.backend, spec, 0.0)
            warm = getattr(backend, "warm_in_background", None)
            if callable(warm):  # the worker warms up while the facts are read and the original compiles
                warm()
        else:
            recording, limits = None, getattr(backend, "limits", DeviceLimits())
        clock.backend = backend
        try:
            points = runner.select_points(spec, req.shapes)
            script = None
            if recording is not None:
                check_shapes(recording, points)
                if recording.run is not None:
                    backend = RunReplayBackend.of(recording)
                    script = recording.run
            cache = MeasurementCache(run_dir / "cache.jsonl")
            log = RunLog(run_dir / "log.jsonl")
            evaluator = Evaluator(spec, Tunable.original(spec), backend, cache, log, limits)
            notes: list[str] = []
            device_name = ""
            if recording is not None:
                notes.append(f"Backend: replay of a recording, {recording.label}.")
                device_name = recording.device
                if recording.synthetic:
                    notes.append("SYNTHETIC numbers from a model: nothing here was measured on a GPU.")
            ncu = None
            if req.ncu == "on" or (req.ncu == "auto" and recording is None):
                from ktx.agent import ncu as ncu_module

                if ncu_module.ncu_path() is None:
                    if req.ncu == "on":
                        raise KtxError("--ncu on: ncu is not on the PATH", None, "install Nsight Compute")
                    notes.append("ncu: not on the PATH; analysis from timings only")
                else:

                    # under a budget one profile may not run away with it (a hang is killed)
                    share = 0.0 if req.budget_s is None else ncu_module.BUDGET_SHARE * req.budget_s
                    cap = 300.0 if req.budget_s is None else max(2 * ncu_module.PROFILE_S, share)

                    def ncu(shapes: Sequence[str]) -> tuple[Mapping[str, NcuMetrics], list[str]]:
                        return ncu_module.profile_shapes(req.kernel_dir, shapes, spec.kernel, min(300.0, cap))

            chosen = planner or make_planner(req, run_dir)
            rounds = search or TuneSearch(
                spec, backend, recording, limits, points, cache,
                kernel_dir=req.kernel_dir, backend_text=req.backend, seed=req.seed, quiet=req.quiet,
                min_gain=req.min_gain, jobs=search_jobs(req.backend, recording, given),
            )  # fmt: skip
            opt = Optimizer(
                req, spec, chosen, rounds, evaluator, points, device_of(limits, device_name), run_dir,
                registry or default_registry(), notes, ncu, script, recording.path if recording else "",
                clock,
            )  # fmt: skip
            result = opt.run()
            if recording is None:  # what a replay of this run will need (``recording.json``)
                with clock.timing("report"):
                    stand_in = req.backend if req.backend.startswith("harness:") else ""
                    toolkit = f"driver {limits.driver}, runtime {limits.runtime}"
                    made = recording_of_run(
                        run_dir, device=limits.name, toolkit=toolkit,
                        synthetic=given or req.backend != "cupy", stand_in=stand_in,
                    )  # fmt: skip
                    write(made, run_dir / "recording.json")
            phases = clock.record()
            write_phases(run_dir / "optimize.json", phases)
            return replace(result, phases=phases, wall_s=phases.wall_s)
        finally:
            close = getattr(backend, "close", None)
            if callable(close):
                close()


def write_phases(state: Path, phases: PhaseTimings) -> None:
    """The run's final phase timings into its ``optimize.json`` (written before the recording
    was, whose writing they count), with the whole command's wall time."""
    data = json.loads(state.read_text())
    data["phases"] = phases.to_json()
    data["wall_s"] = round(phases.wall_s, 3)
    _write_json(state, data)


def add_report_time(result: OptimizeResult, seconds: float) -> OptimizeResult:
    """``result`` with ``seconds`` more of report (the command's ``report.md``/``.html``, written
    after the run): counted in its phases and its ``optimize.json``, as the process spent them."""
    if result.phases is None:
        return result
    phases = replace(result.phases, report_s=result.phases.report_s + seconds,
                     wall_s=result.phases.wall_s + seconds)  # fmt: skip
    state = result.run_dir / "optimize.json"
    if state.is_file():
        write_phases(state, phases)
    return replace(result, phases=phases, wall_s=phases.wall_s)


def check_shapes(recording: Recording, points: Sequence[ShapePoint]) -> None:
    """A replay answers only at the shapes its recording holds: asked for another, the error is
    the recording's (which shapes it holds), not the spec's."""
    missing = [p.name for p in points if p.name not in recording.shapes]
    if missing:
        raise KtxError(
            f"the recording holds no measurements at {'; '.join(missing)}",
            Location(recording.path or None),
            f"it holds {'; '.join(recording.shapes)}: pass --shapes with those, or measure on a GPU",
        )
    if recording.run is None:
        return
    ran = list(dict.fromkeys(s.shape for r in recording.run.rounds for s in r.shapes))
    if ran and sorted(p.name for p in points) != sorted(ran):
        raise KtxError(
            f"the recorded run searched {'; '.join(ran)}, not {'; '.join(p.name for p in points)}",
            Location(recording.path or None),
            "a replay of a run replays its shapes: leave --shapes out, or give those",
        )


def load_records(run_dir: Path) -> list[dict[str, Any]]:
    """The rounds of a run folder as logged; a damaged line is an error naming ``file:line``
    (only a last line a killed run left unfinished, without its newline, is skipped). The typed
    view is :func:`ktx.records.read_rounds`."""
    path = run_dir / "rounds.jsonl"
    if not path.exists():
        raise KtxError("not a ktx optimize run folder (no rounds.jsonl)", Location(str(run_dir)))
    return [data for _, data in read_jsonl(path, "rounds")]
