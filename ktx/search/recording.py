"""Recorded spaces and the replay backend that answers from them.

A recording is what a GPU run leaves behind for CPU work later: measurements of one kernel at
many (config, shape) points, plus the knob space they were taken over, so that a search can be
replayed on any machine, deterministically (Kernel Tuner's "simulation mode"). The JSON of
``ktx bench --json`` (or ``ktx run --json``) loads too: its measurements, no knob space. Format
(``ktx.recording/1``, one JSON object)::

    {"format": "ktx.recording/1", "kernel": "silu_and_mul",
     "synthetic": false, "method": "how the numbers were taken", "device": "...", "toolkit": "...",
     "space": {"knobs": [{"name", "values", "default", "condition"?}], "constraints": ["..."]},
     "measurements": [Measurement.to_dict(), ...]}     # config {} is the original kernel

``synthetic: true`` marks numbers that come from a model (:mod:`ktx.search.synthetic`) or from a
CPU stand-in for the GPU worker (then ``stand_in`` names it, e.g. ``harness:tests/fake.py:handle``);
reports made from such a recording say so on every table.

The recording of a whole ``ktx optimize`` run (:func:`recording_of_run`, written as
``recording.json`` at the end of every run that measured) also holds ``"run"``: the run's budget,
rounds, per-round searches (evaluations and configs per shape, paired final checks) and stop
reason (:class:`ktx.records.RecordedRun`). A replay follows it (:class:`RunReplayBackend`): it
answers only what the recording measured, and a question it cannot answer is an error
(:class:`ReplayDiverged`), never a made-up failure.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ktx.ir.errors import KtxError, Location

from ktx.measure.replay import ReplayBackend
from ktx.measure.types import Candidate, Measurement, Status, config_key
from ktx.records import (
    RecordedRound,
    RecordedRun,
    RecordedShape,
    RunState,
    measured_configs,
    read_rounds,
)
from ktx.search.paired import PairedCheck
from ktx.search.space import Config, Space
from ktx.spec import ShapePoint

FORMAT = "ktx.recording/1"


@dataclass(frozen=True)
class Recording:
    """A loaded recording: lookups by (shape name, config)."""

    kernel: str
    space: Space
    synthetic: bool
    method: str
    device: str
    toolkit: str
    digest: str
    path: str = ""
    pipeline: str | None = None  # the pass pipeline the configs are of (None: not recorded)
    stand_in: str = ""  # the stand-in backend that produced the numbers ('' when measured or modelled)
    #: The recorded ``optimize`` run a replay follows (None: measurements only).
    run: RecordedRun | None = None
    date: str = ""
    measurements: tuple[Measurement, ...] = field(default=(), repr=False)
    _index: Mapping[tuple[str, str], Measurement] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str = "") -> Recording:
        where = Location(path or None)
        # ``ktx bench --json`` / ``ktx run --json`` write measurements with their provenance and
        # no format tag (:func:`ktx.measure.replay.save_results`): a recording without a space.
        saved = "format" not in data and isinstance(data.get("measurements"), list)
        if data.get("format") != FORMAT and not saved:
            raise KtxError(
                f"not a ktx recording (format {data.get('format')!r})",
                where,
                f"expected {FORMAT}, or the JSON of ktx bench --json",
            )
        try:
            space_data = data.get("space") or {}
            space = Space.from_description(space_data.get("knobs", ()), space_data.get("constraints", ()))
            measurements = tuple(Measurement.from_dict(row) for row in data["measurements"])
            index = {(m.shape, config_key(m.config)): m for m in measurements}
        except (KeyError, TypeError, ValueError) as exc:
            raise KtxError(f"malformed recording: {exc}", where) from None
        run_data = data.get("run")
        run = RecordedRun.from_json(run_data, where) if isinstance(run_data, Mapping) else None
        blob = json.dumps(data, sort_keys=True).encode()
        kernels = {m.kernel for m in measurements}
        return cls(
            kernel=str(data.get("kernel") or (kernels.pop() if len(kernels) == 1 else "")),
            space=space,
            synthetic=bool(data.get("synthetic", False)) or bool(data.get("stand_in")),
            stand_in=str(data.get("stand_in") or ""),
            pipeline=None if data.get("pipeline") is None else str(data["pipeline"]),
            method=f"ktx {data.get('kind', 'bench')} --json" if saved else str(data.get("method", "")),
            device=str(data.get("device", "")),
            toolkit=str(data.get("toolkit") or data.get("driver") or ""),
            digest=hashlib.sha256(blob).hexdigest()[:16],
            path=path,
            run=run,
            date=str(data.get("date") or ""),
            measurements=measurements,
            _index=index,
        )

    @classmethod
    def load(cls, path: str | Path) -> Recording:
        p = Path(path)
        try:
            data = json.loads(p.read_text())
        except OSError as exc:
            raise KtxError(f"cannot read recording: {exc.strerror}", Location(str(p))) from None
        except ValueError as exc:
            raise KtxError(f"recording is not JSON: {exc}", Location(str(p))) from None
        return cls.from_dict(data, str(p))

    def only(self, kernel: str) -> Recording:
        """The measurements of ``kernel`` alone (a ``ktx bench --json`` may hold several kernels)."""
        kept = tuple(m for m in self.measurements if m.kernel == kernel)
        index = {(m.shape, config_key(m.config)): m for m in kept}
        return replace(self, kernel=kernel, measurements=kept, _index=index)

    @property
    def kernels(self) -> tuple[str, ...]:
        return tuple(sorted({m.kernel for m in self.measurements}))

    def get(self, shape: str, config: Config) -> Measurement | None:
        return self._index.get((shape, config_key(config)))

    @property
    def shapes(self) -> tuple[str, ...]:
        return tuple(sorted({s for s, _ in self._index}))

    def at(self, shape: str) -> Iterator[Measurement]:
        """Every recorded measurement at ``shape`` (the original included)."""
        for (s, _), m in self._index.items():
            if s == shape:
                yield m

    def launches(self) -> dict[tuple[str, str], tuple[tuple[int, ...], tuple[int, ...]]]:
        """(shape, config key) -> (grid, block) of every recorded candidate with a launch: what the
        template's launch mapping gave, which the cost model reads before a config is replayed."""
        return {
            (s, key): (tuple(m.grid), tuple(m.block))
            for (s, key), m in self._index.items()
            if m.config and m.grid and m.block
        }

    @property
    def label(self) -> str:
        if self.stand_in:
            kind = f"STAND-IN ({self.stand_in}, not measured on a GPU)"
        else:
            kind = "SYNTHETIC (modelled, not measured)" if self.synthetic else "recorded"
        return f"{kind}: {self.method or 'no method given'} on {self.device or 'unknown device'}"


class RecordingBackend:
    """The replay backend: :class:`ktx.measure.replay.ReplayBackend` over a recording, except
    that a (shape, config) the recording lacks comes back as a ``crash`` measurement saying so,
    which the search counts as one more failure instead of stopping.
    """

    def __init__(self, recording: Recording, throttle_s: float = 0.0) -> None:
        self.recording = recording
        self.throttle_s = throttle_s
        self.fingerprint = f"replay:{recording.digest}:{recording.device}:{recording.toolkit}"
        self._replay = ReplayBackend(recording.measurements, None, recording.path)

    @property
    def calls(self) -> int:
        return self._replay.calls

    def measure(self, candidate: Candidate, shape: ShapePoint) -> Measurement:
        if self.throttle_s > 0:  # stands in for GPU time in tests that kill a run mid-way
            time.sleep(self.throttle_s)
        try:
            return self._replay.measure(candidate, shape)
        except KtxError:
            return Measurement(
                kernel=self.recording.kernel,
                shape=shape.name,
                config=dict(candidate.config),
                status=Status.CRASH,
                message="not in the recording",
                label=candidate.label,
            )

    def close(self) -> None:
        return None


class ReplayDiverged(KtxError):
    """The replay of a recorded run asked for what the run never measured, or went another way
    (another round outcome, another candidate, another stop). Its numbers would no longer be
    the recording's, so the replay stops instead of inventing them."""


class RunReplayBackend(RecordingBackend):
    """The replay of a recorded ``optimize`` run (a recording with a ``run`` section).

    Unlike :class:`RecordingBackend`, a (shape, config) the recording lacks is an error
    (:class:`ReplayDiverged`): the replay follows the run's script, so a miss means it went
    another way. The run's paired final checks are answered from the recording too
    (:class:`PairedReplayBackend`; a run from before the paired check has none, and its replay
    re-measures nothing either)."""

    def __init__(self, recording: Recording, throttle_s: float = 0.0) -> None:
        super().__init__(recording, throttle_s)
        assert recording.run is not None
        self.run = recording.run

    @classmethod
    def of(cls, recording: Recording) -> RunReplayBackend:
        """The backend that replays ``recording``'s run, paired checks included where it has them."""
        assert recording.run is not None
        checked = any(s.paired is not None for r in recording.run.rounds for s in r.shapes)
        return PairedReplayBackend(recording) if checked else cls(recording)

    def has_measurement(self, shape: str, config: Mapping[str, int]) -> bool:
        """Whether the recorded run measured ``config`` at ``shape``: the runoff's diagonal
        neighbours (:func:`ktx.search.runoff.fill_diagonal`) are measured in a replay only then."""
        return self._replay.holds(config, shape)

    def measure(self, candidate: Candidate, shape: ShapePoint) -> Measurement:
        try:
            return self._replay.measure(candidate, shape)
        except KtxError as exc:
            raise ReplayDiverged(
                f"the replay asked for config {candidate.config_key} at {shape.name}, which the "
                f"recorded run never measured ({exc.message})",
                Location(self.recording.path),
                "the search or the passes changed since the recording; record the run again on a GPU",
            ) from None


class PairedReplayBackend(RunReplayBackend):
    """A run replay that also answers the run's paired final checks: each is the check the
    run logged (measured, failed or cut by its clock), handed back as it was, in the order the
    run made them (:func:`ktx.search.final.final_check` asks ``recorded_check``)."""

    def __init__(self, recording: Recording, throttle_s: float = 0.0) -> None:
        super().__init__(recording, throttle_s)
        self._checks: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        for r in self.run.rounds:
            for s in r.shapes:
                if s.paired is not None and s.paired.get("config") is not None:
                    key = (s.shape, config_key(s.paired["config"]))
                    self._checks.setdefault(key, []).append(s.paired)

    def has_check(self, shape: str, config: Mapping[str, int]) -> bool:
        """Whether the recorded run checked ``config`` at ``shape`` (a check still to hand back):
        the runoff (:mod:`ktx.search.runoff`) replays the run's choice by it."""
        return bool(self._checks.get((shape, config_key(config))))

    def recorded_check(self, shape: str, config: Mapping[str, int]) -> PairedCheck:
        queue = self._checks.get((shape, config_key(config)))
        if not queue:
            raise ReplayDiverged(
                f"the replay checks config {config_key(config)} at {shape}; the recorded run did not",
                Location(self.recording.path),
                "record the run again on a GPU",
            )
        return PairedCheck.from_dict(queue.pop(0))


def recording_of_run(
    run_dir: Path, *, device: str, toolkit: str, synthetic: bool, stand_in: str = "", date: str = ""
) -> dict[str, Any]:
    """The ``ktx.recording/1`` document of an ``optimize`` run folder: every measurement its
    cache holds and the run itself (budget, rounds, each round's searches and final checks, stop
    reason), so that a replay on a CPU can follow it round for round.

    Works on folders of older ktx versions too (the committed recording of silu_and_mul's run
    got its ``run`` section this way, from the run folder in ``results/session2``)."""
    state_path = run_dir / "optimize.json"
    state_data = json.loads(state_path.read_text(encoding="utf-8"))
    typed = RunState.from_json(state_data, Location(str(state_path)))
    request = typed.request
    from ktx.search.cache import MeasurementCache
    from ktx.search.runlog import read_log

    measurements = [m.to_dict() for m in MeasurementCache(run_dir / "cache.jsonl").measurements()]
    rounds = []
    logged = run_dir / "rounds.jsonl"  # absent when no round started (the budget ran out first)
    for line in read_rounds(logged) if logged.exists() else ():
        log = run_dir / f"round-{line.index:02d}" / "log.jsonl"
        events = list(read_log(log))  # a line a killed worker tore is skipped, as the run did
        measured = measured_configs(events)
        done = {
            str(e["shape"]): int(e.get("evaluations", 0)) for e in events if e.get("event") == "shape_done"
        }
        paired = {s.shape: s.paired for s in (line.result.shapes if line.result else ())}
        names = list(dict.fromkeys([*done, *measured, *paired]))
        shapes = tuple(
            RecordedShape(name, done.get(name, 0), tuple(measured.get(name, ())), paired.get(name) or None)
            for name in names
        )
        rounds.append(RecordedRound(line.index, line.pipeline, line.status, line.geomean_speedup, shapes))
    budget = request.get("budget_s")
    run = RecordedRun(
        None if budget is None else float(budget),
        typed.stop_reason,
        tuple(rounds),
        f"the run folder {run_dir.name}: optimize.json, rounds.jsonl, round-NN/log.jsonl",
        wall_s=typed.wall_s if state_data.get("wall_s") is not None else None,
    )
    settings = {k: request[k] for k in ("shapes", "rounds", "trials_per_round", "seed", "ncu", "planner",
                                        "patience", "min_gain", "budget_s") if k in request}  # fmt: skip
    return {
        "format": FORMAT,
        "kernel": typed.kernel,
        "synthetic": synthetic,
        **({"stand_in": stand_in} if stand_in else {}),
        "method": f"ktx optimize ({request.get('planner', 'rules')} planner): every measurement of the run",
        "device": device,
        "toolkit": toolkit,
        "date": date or time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "request": settings,
        "space": {"knobs": [], "constraints": []},
        "run": run.to_json(),
        "measurements": measurements,
    }


def write(data: Mapping[str, Any], path: str | Path) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    return p
