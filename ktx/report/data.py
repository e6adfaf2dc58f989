"""Reading a ``ktx optimize`` run folder into what the report shows.

Everything comes from the files the loop wrote (``optimize.json``, ``rounds.jsonl``,
``baseline.json``, ``original.cu``, ``final/``, the rounds' ``study.jsonl``), so a report can be
made on any machine, long after the run, without the GPU or the passes that produced it.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ktx.ir.errors import KtxError, Location

from ktx.records import RoundLine, RunState, ShapeRecord, read_rounds
from ktx.records.files import read_record, stamped

if TYPE_CHECKING:
    from ktx.search.dispatch import DispatchTable
    from ktx.template import Trace


@dataclass(frozen=True)
class ShapeRow:
    """One shape of the final result."""

    shape: str
    metric: str
    original_us: float | None
    final_us: float | None
    speedup: float | None
    original_sol: float | None
    final_sol: float | None
    config: Mapping[str, int] | None
    #: The paired final check (``ktx.search.paired``): "1.083 [1.061, 1.106]", "1.000 (identical
    #: code)", "not re-measured", or "" for runs from before the check existed.
    remeasured: str = ""


@dataclass(frozen=True)
class RoundRow:
    """One round, as the report tells it."""

    index: int
    planner: str
    pipeline: str
    rationale: str
    status: str
    geomean: float | None
    best_after: float | None
    failures: tuple[tuple[str, tuple[str, ...]], ...]  # passes that did not apply, with reasons
    search_failures: Mapping[str, int]
    evaluations: int
    tokens: int
    attempts: int
    fallback: str
    note: str
    shapes: Mapping[str, float | None]  # shape -> the round's effective time


@dataclass(frozen=True)
class RunData:
    run_dir: Path
    kernel: str
    state: RunState
    rounds: tuple[RoundRow, ...]
    shapes: tuple[ShapeRow, ...]
    original: str
    source_rel: str
    template: str | None
    trace: Trace | None
    dispatch_header: str | None
    dispatch: DispatchTable | None
    variants: tuple[str, ...]
    importance: Mapping[str, float] = field(default_factory=dict)
    importance_note: str = ""

    @property
    def best_round(self) -> int:
        return self.state.best_round

    @property
    def pipeline(self) -> str:
        return self.state.pipeline

    @property
    def geomean(self) -> float | None:
        return self.state.geomean_speedup

    @property
    def notes(self) -> tuple[str, ...]:
        return self.state.notes

    @property
    def failures(self) -> dict[str, int]:
        """Failures by type over all rounds (search failures, and passes that did not apply)."""
        total: dict[str, int] = {}
        for r in self.rounds:
            for kind, count in r.search_failures.items():
                total[kind] = total.get(kind, 0) + int(count)
            if r.failures:
                total["pass did not apply"] = total.get("pass did not apply", 0) + len(r.failures)
            if r.status == "template-failed" and not r.failures:
                total["template failed"] = total.get("template failed", 0) + 1
        return dict(sorted(total.items(), key=lambda kv: (-kv[1], kv[0])))


def _read_json(path: Path) -> Any:
    from ktx.commands._checks import read_json

    return read_json(path, "the run folder is damaged: run ktx optimize again")


def _rounds(run_dir: Path) -> tuple[RoundLine, ...]:
    """The run's rounds (:func:`ktx.records.read_rounds`: a damaged line is an error naming it)."""
    path = run_dir / "rounds.jsonl"
    return read_rounds(path) if path.exists() else ()


def _round_row(r: RoundLine) -> RoundRow:
    result = r.result
    return RoundRow(
        index=r.index,
        planner=r.planner,
        pipeline=r.pipeline,
        rationale=r.rationale,
        status=r.status,
        geomean=r.geomean_speedup,
        best_after=r.best_after,
        failures=r.failures,
        search_failures={} if result is None else dict(result.failures),
        evaluations=0 if result is None else result.evaluations,
        tokens=r.tokens,
        attempts=r.plan_attempts,
        fallback=r.plan_fallback,
        note=r.note,
        shapes={} if result is None else {s.shape: s.effective_us for s in result.shapes},
    )


def _shape_row(s: ShapeRecord) -> ShapeRow:
    return ShapeRow(
        s.shape,
        s.metric,
        s.original_us,
        s.effective_us,
        s.speedup,
        s.original_sol_fraction,
        s.sol_fraction,
        s.best_config if s.wins else None,
        _remeasured(s.paired),
    )


def _remeasured(data: Any) -> str:
    """The final check's speedup and 95% interval, as the tune summary quotes it."""
    if not isinstance(data, Mapping):
        return ""
    from ktx.search.paired import PairedCheck

    try:
        return PairedCheck.from_dict(data).text()
    except (KeyError, TypeError, ValueError):
        return ""


_PARAM = re.compile(r"^log2\((.+)\)$|^(.+)\[i\]$")


def knob_of(param: str) -> str:
    """The knob behind an Optuna param name (``log2(BLOCK_X)`` and ``NAME[i]`` are encodings)."""
    m = _PARAM.match(param)
    if not m:
        return param
    return m.group(1) or m.group(2)


def knob_importance(round_dir: Path) -> tuple[dict[str, float], str]:
    """PED-ANOVA importance of each knob (Optuna's default evaluator: no scikit-learn needed),
    averaged over the shapes' studies of a round's folder (``study.jsonl`` or ``study.db``); or
    why there is none."""
    import optuna

    from ktx.search.study import run_folder_storage

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = run_folder_storage(round_dir)
    if storage is None:
        return {}, "no study in the best round"
    totals: dict[str, list[float]] = {}
    used = 0
    for summary in optuna.get_all_study_summaries(storage, include_best_trial=False):
        study = optuna.load_study(study_name=summary.study_name, storage=storage)
        done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
        if len(done) < 3 or not any(t.params for t in done):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                found = optuna.importance.get_param_importances(
                    study, evaluator=optuna.importance.PedAnovaImportanceEvaluator()
                )
        except (RuntimeError, ValueError, ImportError, ZeroDivisionError):
            continue
        used += 1
        for param, value in found.items():
            totals.setdefault(knob_of(param), []).append(float(value))
    if not totals:
        return {}, "too few completed trials with varying knobs to rank them"
    mean = {k: sum(v) / used for k, v in totals.items()}
    ranked = dict(sorted(mean.items(), key=lambda kv: (-kv[1], kv[0])))
    return ranked, f"PED-ANOVA (Optuna), mean over {used} shape stud{'y' if used == 1 else 'ies'}"


def load_run(run_dir: Path) -> RunData:
    """Read a run folder; a folder that is not one fails with a located error."""
    state_path = run_dir / "optimize.json"
    if not state_path.exists():
        raise KtxError(
            "not a ktx optimize run folder (no optimize.json)",
            Location(str(run_dir)),
            "give the --out of ktx optimize",
        )
    data = _read_json(state_path)
    if not isinstance(data, dict):
        raise KtxError(
            "optimize.json is not a JSON object", Location(str(state_path)), "run ktx optimize again"
        )
    state = RunState.from_json(data, Location(str(state_path)))
    rounds = tuple(_round_row(r) for r in _rounds(run_dir))
    original_path = run_dir / "original.cu"
    if original_path.exists():
        original = original_path.read_text(encoding="utf-8", errors="surrogateescape")
    elif state.source and Path(state.source).exists():
        original = Path(state.source).read_text(encoding="utf-8", errors="surrogateescape")
    else:
        original = ""
    final = run_dir / "final"

    def text(name: str) -> str | None:
        p = final / name
        return p.read_text(encoding="utf-8", errors="surrogateescape") if p.exists() else None

    trace = read_trace(final / "trace.json") if (final / "trace.json").exists() else None
    dispatch = read_dispatch(final / "dispatch.json") if (final / "dispatch.json").exists() else None
    variants = tuple(
        p.read_text(encoding="utf-8", errors="surrogateescape")
        for p in sorted((final / "best").glob("variant_*.cu"), key=lambda p: int(p.stem.split("_")[1]))
    ) if (final / "best").is_dir() else ()  # fmt: skip
    best = state.best_round
    importance: dict[str, float] = {}
    note = "no round beat the original"
    if best:
        importance, note = knob_importance(run_dir / f"round-{best:02d}")
    return RunData(
        run_dir=run_dir,
        kernel=state.kernel,
        state=state,
        rounds=rounds,
        shapes=tuple(_shape_row(s) for s in state.shapes),
        original=original,
        source_rel=state.source_rel or Path(state.source or "kernel.cu").name,
        template=text("template.cu"),
        trace=trace,
        dispatch_header=text("dispatch.h"),
        dispatch=dispatch,
        variants=variants,
        importance=importance,
        importance_note=note,
    )


#: Knobs that trade precision for speed (``fast-math``'s ``FAST_MATH``, or ``FAST_MATH_<x>``).
FAST_MATH_KNOBS = ("FAST_MATH",)


def fast_math_on(config: Mapping[str, int] | None) -> dict[str, int]:
    """The fast-math knobs ``config`` switches on (empty: the original math)."""
    return {
        k: int(v)
        for k, v in (config or {}).items()
        if int(v) and any(k == n or k.startswith(n + "_") for n in FAST_MATH_KNOBS)
    }


def read_trace(path: Path) -> Trace:
    """``trace.json`` through its versioned reader (an unknown version names the file)."""
    from ktx.template import Trace

    data = read_record(path, "trace")
    try:
        return Trace.from_json(stamped("trace", data))  # checked above: the version this ktx reads
    except (KtxError, KeyError, TypeError, ValueError) as exc:
        raise KtxError(
            f"malformed trace.json ({exc})", Location(str(path)), "run ktx optimize again"
        ) from None


def read_dispatch(path: Path) -> DispatchTable:
    """``dispatch.json`` through its versioned reader (an unknown format names the file)."""
    from ktx.search.dispatch import DispatchTable

    data = read_record(path, "dispatch")
    try:
        return DispatchTable.from_dict(data)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise KtxError(f"malformed dispatch.json ({exc!r})", Location(str(path)), "run again") from None


def dispatched_config(dispatch: DispatchTable | None, shape: str) -> dict[str, int] | None:
    """The config the dispatch table (``dispatch.json``) runs at ``shape``; None: the original."""
    if dispatch is None:
        return None
    from ktx.spec import ShapePoint

    try:
        return dispatch.select(ShapePoint.from_name(shape).as_dict())
    except (KtxError, KeyError, TypeError, ValueError, IndexError):
        return None


def dispatched_fast_math(dispatch: DispatchTable | None) -> list[str]:
    """Where the dispatch table runs a config with fast math on: the tuned shapes of each such
    rule, with the knobs (``tokens=1,d=4096 (FAST_MATH=1)``)."""
    if dispatch is None:
        return []
    variants = dispatch.variants
    out: list[str] = []
    for rule in dispatch.rules:
        if rule.variant is None or not 0 <= rule.variant < len(variants):
            continue
        on = fast_math_on(variants[rule.variant])
        if on:
            where = ", ".join(str(m) for m in rule.measured_at) or "a bucket"
            out.append(f"{where} ({', '.join(f'{k}={v}' for k, v in on.items())})")
    return out


def finite(values: Sequence[float | None]) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]
