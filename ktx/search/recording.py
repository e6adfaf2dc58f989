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
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ktx.errors import KtxError, Location
from ktx.measure.replay import ReplayBackend
from ktx.measure.types import Candidate, Measurement, Status, config_key
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


def write(data: Mapping[str, Any], path: str | Path) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    return p
