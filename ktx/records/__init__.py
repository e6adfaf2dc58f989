"""The run records a ``ktx optimize`` run writes and reads back, typed and versioned, in one place.

A run folder is read long after it was written: by ``ktx report``, by a resumed run, and by the
replay of a recording on a machine without a GPU. Those readers used to pick fields out of
untyped dicts with ``.get()``, so a renamed field read as "missing" and a torn line was skipped
without a word. Here each kind of record is a frozen dataclass with ``to_json`` / ``from_json``;
every file carries its kind and schema version (``"schema": "ktx.rounds/1"``), and reading a
version this ktx does not know, or a line that is not JSON, is an error naming ``file:line``.

Records written before versions existed (no ``schema`` key) are read as version 1 of their kind:
that is the documented migration, since version 1 *is* the layout those files had.

The whole-file records (``dispatch.json``, ``trace.json``, ``summary.json``, ``best.json``,
``plan.json``, ``plugins.json``, ``baseline.json``) carry a ``format`` tag and are read through
:mod:`ktx.records.files`.

This module is a leaf: it imports only :mod:`ktx.ir.errors`, so that the report, the replay and the
loop can all use it without import cycles.

>>> s = RecordedShape("tokens=1,d=4096", evaluations=2, measured=({"SPLIT": 4}, {"SPLIT": 2}))
>>> RecordedShape.from_json(s.to_json()) == s
True
>>> check_schema({"schema": "ktx.rounds/9"}, "rounds", Location("r.jsonl", 3, 1))
Traceback (most recent call last):
...
ktx.ir.errors.KtxError: r.jsonl:3:1: ktx.rounds/9 is not a schema this ktx reads (it reads ktx.rounds/1)
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ktx.ir.errors import KtxError, Location

#: The schema version of each kind of record this ktx writes (and the only one it reads).
VERSIONS: Mapping[str, int] = {
    "rounds": 1,  # rounds.jsonl: one RoundLine per line
    "cache": 1,  # cache.jsonl: one measurement per line
    "state": 1,  # optimize.json: the run's request, device and outcome
    "baseline": 1,  # baseline.json: the originals' measurements
    "recorded-run": 1,  # a recording's "run" section: what a faithful replay needs
    "log": 1,  # log.jsonl: one event per line (ktx.search.runlog)
    "llm-cache": 1,  # llm_cache.jsonl: one LLM answer per line, by prompt hash
}


def schema_of(kind: str) -> str:
    """``ktx.<kind>/<version>``: the tag a record of ``kind`` carries."""
    return f"ktx.{kind}/{VERSIONS[kind]}"


def check_schema(data: Mapping[str, Any], kind: str, where: Location) -> None:
    """Raise a clear error unless ``data`` is of a version of ``kind`` this ktx reads.

    No ``schema`` key: a record from before versions, which is version 1 (the migration)."""
    found = data.get("schema")
    if found is None:
        if VERSIONS[kind] == 1:
            return
        raise KtxError(f"a {kind} record without a schema version", where, f"it reads {schema_of(kind)}")
    if found != schema_of(kind):
        raise KtxError(f"{found} is not a schema this ktx reads", where, f"it reads {schema_of(kind)}")


def read_jsonl(path: Path, kind: str, *, torn_tail: bool = True) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each line of a JSON Lines file of ``kind``.

    A line that is not a JSON object, or carries an unknown schema, is an error naming
    ``file:line``. ``torn_tail``: the last line may be cut short by a killed writer (it has no
    newline); it alone is skipped, since the run that was killed never finished writing it."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise KtxError(f"cannot read: {exc.strerror}", Location(str(path))) from None
    lines = raw.split(b"\n")
    last_complete = raw.endswith(b"\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = Location(str(path), number, 1)
        torn = number == len(lines) and not last_complete
        try:
            data = json.loads(line)
        except ValueError as exc:
            if torn and torn_tail:
                return
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise KtxError(
                f"line is not JSON ({why})", where, "the file is damaged: run again, or remove the line"
            ) from None
        if not isinstance(data, dict):
            raise KtxError("line is not a JSON object", where, "the file is damaged: run again")
        check_schema(data, kind, where)
        yield number, data


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` whole or not at all (a temporary file renamed over the old one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str) + "\n")
    os.replace(tmp, path)


def _config(value: Any) -> dict[str, int]:
    if not isinstance(value, Mapping):
        raise ValueError(f"a config must be an object, not {value!r}")
    return {str(k): int(v) for k, v in value.items()}


# -- a recording's "run" section: the replay's script -------------------------------------------


@dataclass(frozen=True)
class RecordedShape:
    """What one round's search did at one shape: how many evaluations it made (its time share
    cut it there, or its trial budget did) and which configs it sent to the GPU, in order."""

    shape: str
    evaluations: int
    measured: tuple[Mapping[str, int], ...] = ()
    #: The paired final check as the round logged it (``PairedCheck.to_dict()``), when it ran.
    paired: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "shape": self.shape,
            "evaluations": self.evaluations,
            "measured": [dict(c) for c in self.measured],
        }
        if self.paired is not None:
            out["paired"] = dict(self.paired)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RecordedShape:
        paired = data.get("paired")
        return cls(
            str(data["shape"]),
            int(data["evaluations"]),
            tuple(_config(c) for c in data.get("measured", ())),
            dict(paired) if isinstance(paired, Mapping) else None,
        )


@dataclass(frozen=True)
class RecordedRound:
    """One round of the recorded run: its pipeline, what became of it, and its searches."""

    index: int
    pipeline: str
    status: str
    geomean_speedup: float | None
    shapes: tuple[RecordedShape, ...] = ()

    def shape(self, name: str) -> RecordedShape | None:
        return next((s for s in self.shapes if s.shape == name), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "round": self.index,
            "pipeline": self.pipeline,
            "status": self.status,
            "geomean_speedup": self.geomean_speedup,
            "shapes": [s.to_json() for s in self.shapes],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RecordedRound:
        gain = data.get("geomean_speedup")
        return cls(
            int(data["round"]),
            str(data["pipeline"]),
            str(data["status"]),
            None if gain is None else float(gain),
            tuple(RecordedShape.from_json(s) for s in data.get("shapes", ())),
        )


@dataclass(frozen=True)
class RecordedRun:
    """What a faithful replay of an ``optimize`` run needs beyond its measurements.

    The real run's rounds ended where its wall-clock budget did; a replay answers in no time, so
    it cannot find that point itself. It follows this script instead: each round's search stops
    after the evaluations the real one made, and the run stops after the recorded rounds, with
    the recorded reason. ``derived_from`` says where the script came from (the recorder, or for
    an older recording the run folder it was derived from afterwards)."""

    budget_s: float | None
    stop_reason: str
    rounds: tuple[RecordedRound, ...]
    derived_from: str = ""
    #: The real run's wall-clock seconds (None: not recorded).
    wall_s: float | None = None
    notes: tuple[str, ...] = field(default=())

    def round(self, index: int) -> RecordedRound | None:
        return next((r for r in self.rounds if r.index == index), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": schema_of("recorded-run"),
            "budget_s": self.budget_s,
            "stop_reason": self.stop_reason,
            "derived_from": self.derived_from,
            "wall_s": self.wall_s,
            "notes": list(self.notes),
            "rounds": [r.to_json() for r in self.rounds],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: Location) -> RecordedRun:
        check_schema(data, "recorded-run", where)
        try:
            budget = data.get("budget_s")
            return cls(
                None if budget is None else float(budget),
                str(data["stop_reason"]),
                tuple(RecordedRound.from_json(r) for r in data["rounds"]),
                str(data.get("derived_from", "")),
                None if data.get("wall_s") is None else float(data["wall_s"]),
                tuple(str(n) for n in data.get("notes", ())),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise KtxError(f"malformed run section of a recording: {exc!r}", where) from None


def measured_configs(events: Sequence[Mapping[str, Any]]) -> dict[str, list[dict[str, int]]]:
    """Per shape, the configs a round's log (``log.jsonl`` events) sent to the backend, in order."""
    out: dict[str, list[dict[str, int]]] = {}
    for e in events:
        if e.get("event") == "measure" and e.get("config"):
            out.setdefault(str(e["shape"]), []).append(_config(e["config"]))
    return out


# -- the optimize run folder: rounds.jsonl and optimize.json -------------------------------------


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class ShapeRecord:
    """One shape after a round or at the end of a run (``ShapeOutcome.to_json()``): the
    original, the best found, what the dispatch table delivers, and the paired final check."""

    shape: str
    metric: str
    original_us: float | None
    best_us: float | None
    effective_us: float | None
    speedup: float | None
    wins: bool
    sol_fraction: float | None = None
    original_sol_fraction: float | None = None
    best_config: Mapping[str, int] | None = None
    spread: float | None = None
    paired: Mapping[str, Any] | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ShapeRecord:
        config = data.get("best_config")
        paired = data.get("paired")
        return cls(
            str(data["shape"]),
            str(data.get("metric", "")),
            _opt_float(data.get("original_us")),
            _opt_float(data.get("best_us")),
            _opt_float(data.get("effective_us")),
            _opt_float(data.get("speedup")),
            bool(data.get("wins", False)),
            _opt_float(data.get("sol_fraction")),
            _opt_float(data.get("original_sol_fraction")),
            None if config is None else _config(config),
            _opt_float(data.get("spread")),
            dict(paired) if isinstance(paired, Mapping) else None,
        )


@dataclass(frozen=True)
class RoundSearchRecord:
    """A round's search as logged (``RoundResult.to_json()``)."""

    shapes: tuple[ShapeRecord, ...]
    failures: Mapping[str, int]
    evaluations: int
    trials: int
    wall_s: float
    geomean_speedup: float | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RoundSearchRecord:
        return cls(
            tuple(ShapeRecord.from_json(s) for s in data.get("shapes", ())),
            {str(k): int(v) for k, v in dict(data.get("failures") or {}).items()},
            int(data.get("evaluations") or 0),
            int(data.get("trials") or 0),
            float(data.get("wall_s") or 0.0),
            _opt_float(data.get("geomean_speedup")),
        )


@dataclass(frozen=True)
class RoundLine:
    """One line of ``rounds.jsonl`` (``RoundRecord.to_json()`` in :mod:`ktx.agent.loop`), as its
    readers see it: the report, the replay's recorder and the tests.

    The analysis, probes, template sites and plan are kept as the JSON their own modules write
    (``detail``): they are shown, never computed with, and typing them twice would let the two
    copies drift."""

    index: int
    status: str
    pipeline: str
    planner: str
    rationale: str
    geomean_speedup: float | None
    best_after: float | None
    note: str
    failures: tuple[tuple[str, tuple[str, ...]], ...]
    result: RoundSearchRecord | None
    tokens: int
    plan_attempts: int
    plan_fallback: str
    noise: float = 0.0
    wall_s: float = 0.0
    share_s: float | None = None
    detail: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RoundLine:
        plan = data.get("plan") or {}
        result = data.get("result")
        usage = data.get("usage") or {}
        return cls(
            index=int(data["round"]),
            status=str(data["status"]),
            pipeline=str(data.get("pipeline", "")),
            planner=str(data.get("planner", "")),
            rationale=str(data.get("rationale", "")),
            geomean_speedup=_opt_float(data.get("geomean_speedup")),
            best_after=_opt_float(data.get("best_after")),
            note=str(data.get("note", "")),
            failures=tuple(
                (str(f["name"]), tuple(str(x) for x in f.get("reasons", ())))
                for f in data.get("failures", ())
            ),
            result=RoundSearchRecord.from_json(result) if isinstance(result, Mapping) else None,
            tokens=int(usage.get("total_tokens") or 0),
            plan_attempts=len(plan.get("attempts", ())),
            plan_fallback=str(plan.get("fallback", "")),
            noise=float(data.get("noise") or 0.0),
            wall_s=float(data.get("wall_s") or 0.0),
            share_s=_opt_float(data.get("share_s")),
            detail={
                k: data[k]
                for k in ("plan", "analysis", "probes", "sites", "knobs", "range_problems")
                if k in data
            },
        )


def read_rounds(path: Path) -> tuple[RoundLine, ...]:
    """The rounds of ``rounds.jsonl``; a damaged line is an error naming ``file:line``."""
    out = []
    for number, data in read_jsonl(path, "rounds"):
        try:
            out.append(RoundLine.from_json(data))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise KtxError(
                f"not a round record ({type(exc).__name__}: {exc})",
                Location(str(path), number, 1),
                "the file is damaged: run ktx optimize again",
            ) from None
    return tuple(out)


@dataclass(frozen=True)
class UsageRecord:
    """The LLM planner's use over a run (``Usage.to_json()`` in :mod:`ktx.agent.planner`)."""

    total_tokens: int = 0
    requests: int = 0
    cache_hits: int = 0

    @classmethod
    def from_json(cls, data: Any) -> UsageRecord:
        d = data if isinstance(data, Mapping) else {}
        return cls(
            int(d.get("total_tokens") or 0), int(d.get("requests") or 0), int(d.get("cache_hits") or 0)
        )


@dataclass(frozen=True)
class FastMathRecord:
    """Where the run used fast math: the spec's flags, the pass, the best configs' shapes."""

    spec_flags: bool = False
    pass_in_pipeline: bool = False
    chosen_at: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, data: Any) -> FastMathRecord:
        d = data if isinstance(data, Mapping) else {}
        return cls(
            bool(d.get("spec_flags")),
            bool(d.get("pass_in_pipeline")),
            tuple(str(c) for c in d.get("chosen_at") or ()),
        )


@dataclass(frozen=True)
class DeviceRecord:
    """The device a run measured on, as the report names it."""

    name: str = "?"
    sm_count: int | None = None
    copy_bandwidth_gbs: float = 0.0

    @classmethod
    def from_json(cls, data: Any) -> DeviceRecord:
        d = data if isinstance(data, Mapping) else {}
        sms = d.get("sm_count")
        return cls(
            str(d.get("name") or "?"),
            None if sms is None else int(sms),
            float(d.get("copy_bandwidth_gbs") or 0.0),
        )


#: The format tag of ``optimize.json`` (its schema version).
STATE_FORMAT = "ktx.optimize/1"


@dataclass(frozen=True)
class RunState:
    """``optimize.json``: the request, the device and the outcome, rewritten after each round."""

    state: str
    kernel: str
    best_round: int
    pipeline: str
    geomean_speedup: float | None
    shapes: tuple[ShapeRecord, ...]
    stop_reason: str
    notes: tuple[str, ...]
    source: str
    source_rel: str
    wall_s: float
    rounds: int
    request: Mapping[str, Any] = field(default_factory=dict)
    device: Mapping[str, Any] = field(default_factory=dict)
    usage: UsageRecord = UsageRecord()
    fast_math: FastMathRecord = FastMathRecord()
    #: The planner (``rules`` or ``llm``) and the LLM's model ("" for none), from the request.
    planner: str = "rules"
    model: str = ""
    device_info: DeviceRecord = DeviceRecord()
    #: The whole file, for what the report shows as it is (usage, fast-math use, tolerance).
    data: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: Location) -> RunState:
        if data.get("format") != STATE_FORMAT:
            raise KtxError(
                f"optimize.json is of format {data.get('format')!r}, not {STATE_FORMAT}",
                where,
                "give the --out of ktx optimize, or run it again",
            )
        try:
            return cls(
                state=str(data.get("state", "")),
                kernel=str(data.get("kernel", "")),
                best_round=int(data.get("best_round") or 0),
                pipeline=str(data.get("pipeline", "")),
                geomean_speedup=_opt_float(data.get("geomean_speedup")),
                shapes=tuple(ShapeRecord.from_json(s) for s in data.get("shapes", ())),
                stop_reason=str(data.get("stop_reason", "")),
                notes=tuple(str(n) for n in data.get("notes", ())),
                source=str(data.get("source", "")),
                source_rel=str(data.get("source_rel", "")),
                wall_s=float(data.get("wall_s") or 0.0),
                rounds=int(data.get("rounds") or 0),
                request=dict(data.get("request") or {}),
                device=dict(data.get("device") or {}),
                usage=UsageRecord.from_json(data.get("usage")),
                fast_math=FastMathRecord.from_json(data.get("fast_math")),
                planner=str((data.get("request") or {}).get("planner") or "rules"),
                model=str((data.get("request") or {}).get("model") or ""),
                device_info=DeviceRecord.from_json(data.get("device")),
                data=dict(data),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise KtxError(f"malformed optimize.json ({exc})", where, "run ktx optimize again") from None
