"""A crash-safe cache of measurements, so a config is measured once per device and toolkit.

TPE suggests the same config again and again once it has found a good region, a grid over
conditional knobs collapses several points onto one kernel, and a run killed between measuring
and recording resumes by asking for the same config: all of these are answered here, at no GPU
cost. The key hashes what makes a measurement what it is: the instantiated source, the name
expression, the launch mapping, the flags, the knob values (they can enter launch expressions
without changing the source), the shape, the backend's fingerprint (device, toolkit, harness
options) and the spec's verification and accounting context (tolerances, reference, verify
rounds/seed/odd shapes, argument dtypes/shapes/distributions, bytes and flops expressions).

The file is JSON Lines, appended and flushed one measurement at a time: a SIGKILL loses at most
the line being written, and a torn last line is skipped on load. Several processes on one
machine may append to the same file (each line is one ``write`` in append mode).

>>> cache = MeasurementCache(None)
>>> cache.get("k") is None
True
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ktx.ir.errors import Location

from ktx.measure.types import Candidate, Measurement
from ktx.records import check_schema, schema_of
from ktx.search.runlog import append_line, end_torn_line


def cache_key(candidate: Candidate, shape: str, fingerprint: str, context: str = "") -> str:
    """sha256 over the candidate's defining fields (its label excluded), the shape, the backend
    (device, toolkit, harness options) and ``context``: the spec's verification and accounting
    (:func:`ktx.search.tunable.spec_context`), which change what a measurement says."""
    data = candidate.to_dict()
    data.pop("label", None)
    blob = json.dumps(
        {"candidate": data, "shape": shape, "device": fingerprint, "context": context}, sort_keys=True
    )
    return hashlib.sha256(blob.encode()).hexdigest()


class MeasurementCache:
    """Key -> :class:`Measurement`, in memory and (when ``path`` is given) in a JSONL file."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._entries: dict[str, Measurement] = {}
        self._offset = 0
        self._lines = 0  # lines read so far (a located error names the line)
        if path is not None and path.exists():
            end_torn_line(path)
            self._refresh()

    def _refresh(self) -> None:
        """Read what was appended since the last read (by this or another process)."""
        if self.path is None or not self.path.exists() or self.path.stat().st_size <= self._offset:
            return
        with self.path.open("rb") as handle:
            handle.seek(self._offset)
            data = handle.read()
        end = data.rfind(b"\n") + 1  # a line still being written is read next time
        self._offset += end
        for line in data[:end].split(b"\n")[:-1]:
            self._lines += 1
            try:
                row = json.loads(line)
            except ValueError:
                continue  # a torn line from a killed writer (ended by end_torn_line)
            if isinstance(row, dict) and row.get("schema") not in (None, schema_of("cache")):
                check_schema(row, "cache", Location(str(self.path), self._lines, 1))
            try:
                self._entries[str(row["key"])] = Measurement.from_dict(row["measurement"])
            except (KeyError, TypeError, ValueError):
                continue

    def __len__(self) -> int:
        return len(self._entries)

    def measurements(self) -> list[Measurement]:
        """Every measurement held (what a recording of the run keeps)."""
        with self._lock:
            self._refresh()
            return list(self._entries.values())

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def get(self, key: str) -> Measurement | None:
        """The cached measurement; on a miss, first look at what other processes appended."""
        with self._lock:
            if key not in self._entries:
                self._refresh()
            return self._entries.get(key)

    def put(self, key: str, measurement: Measurement, extra: Mapping[str, Any] | None = None) -> None:
        """Remember and append; ``extra`` (e.g. the config) goes into the line for readers."""
        with self._lock:
            self._entries[key] = measurement
            if self.path is None:
                return
            row = {"schema": schema_of("cache"), "key": key, **(extra or {})}
            row["measurement"] = measurement.to_dict()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            append_line(self.path, json.dumps(row, separators=(",", ":")) + "\n")
