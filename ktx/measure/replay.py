"""Answering measurements from a recording: the CPU-only backend for search experiments.

A recording is the JSON that ``ktx bench --json`` and :func:`save_results` write: some metadata
and a list of :class:`~ktx.measure.types.Measurement` dicts. Measurements are keyed by
(kernel, knob assignment, shape name); a question the recording cannot answer is an error,
never a guess.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ktx.ir.errors import KtxError, Location

from ktx.measure.types import Candidate, Measurement, config_key
from ktx.spec import ShapePoint

#: How the source of a candidate that only stands for a recorded config begins (a search over a
#: recording's own knob space): such a candidate has no source of its own to compare.
REPLAYED = "// replayed from recording"


class ReplayBackend:
    """Implements :class:`~ktx.measure.backend.Backend` from recorded measurements."""

    def __init__(self, records: Iterable[Measurement], kernel: str | None = None, source: str = "") -> None:
        self.kernel = kernel
        self.source = source
        self._table: dict[tuple[str, str], Measurement] = {}
        for m in records:
            if kernel is not None and m.kernel != kernel:
                continue
            self._table[(config_key(m.config), m.shape)] = m
        self.calls = 0

    @classmethod
    def from_file(cls, path: str | Path, kernel: str | None = None) -> ReplayBackend:
        p = Path(path)
        try:
            data = json.loads(p.read_text())
        except (OSError, ValueError) as exc:
            raise KtxError(f"cannot read recording: {exc}", Location(str(p))) from None
        items = data.get("measurements", []) if isinstance(data, dict) else data
        try:
            records = [Measurement.from_dict(item) for item in items]
        except (KeyError, TypeError, ValueError) as exc:
            raise KtxError(f"not a recording of measurements: {exc}", Location(str(p))) from None
        return cls(records, kernel, str(p))

    def __len__(self) -> int:
        return len(self._table)

    def configs(self) -> list[Mapping[str, int]]:
        seen: dict[str, Mapping[str, int]] = {}
        for m in self._table.values():
            seen.setdefault(config_key(m.config), m.config)
        return list(seen.values())

    def holds(self, config: Mapping[str, int], shape: str) -> bool:
        """Whether the recording has a measurement of ``config`` at ``shape`` (no call counted)."""
        return (config_key(config), shape) in self._table

    def measure(self, candidate: Candidate, shape: ShapePoint) -> Measurement:
        self.calls += 1
        key = (candidate.config_key, shape.name)
        found = self._table.get(key)
        if found is None:
            raise KtxError(
                f"no recorded measurement for config {key[0]} at shape {key[1]}",
                Location(self.source) if self.source else None,
                f"the recording holds {len(self._table)} measurements",
            )
        if found.digest and not candidate.source.startswith(REPLAYED) and found.digest != candidate.digest:
            raise KtxError(
                f"the recording measured another kernel for config {key[0]} at shape {key[1]} "
                f"(digest {found.digest}, this candidate {candidate.digest})",
                Location(self.source) if self.source else None,
                "the template's instantiated source, launch or flags changed since the recording",
            )
        return found


def save_results(path: str | Path, measurements: Iterable[Measurement], meta: Mapping[str, Any]) -> None:
    """Write measurements with their provenance (device, date, toolchain, method)."""
    data = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        **meta,
        "measurements": [m.to_dict() for m in measurements],
    }
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(data, indent=1, default=str) + "\n")
