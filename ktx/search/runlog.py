"""The run log: one JSON object per line, one line per event, flushed as it happens.

It is the audit trail of a run (what was measured, when, by which worker, with what result),
and the evidence that a resumed run measured nothing twice: every backend call writes one
``measure`` event with its cache key. Lines are appended with a single ``write`` each, so
several workers on one machine may share the file and a killed run leaves whole lines.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ktx.ir.errors import Location

from ktx.records import check_schema, schema_of


def end_torn_line(path: Path) -> None:
    """Terminate a last line a killed writer left unfinished, so the next one starts clean."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb+") as handle:
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) != b"\n":
            handle.write(b"\n")


def append_line(path: Path, line: str) -> None:
    """One ``write`` in append mode: whole lines even with several writing processes."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


class RunLog:
    """Append-only JSONL; ``path=None`` keeps events in memory only (library use, tests)."""

    def __init__(self, path: Path | None, worker: str = "main") -> None:
        self.path = path
        self.worker = worker
        self._lock = threading.Lock()
        self.events: list[dict[str, Any]] = []
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            end_torn_line(path)

    def write(self, event: str, **data: Any) -> None:
        row = {"t": round(time.time(), 3), "event": event, "worker": self.worker, **data}
        with self._lock:
            if self.path is None:
                self.events.append(row)
                return
            line = {"schema": schema_of("log"), **row}  # each line says its version (ktx.records)
            append_line(self.path, json.dumps(line, separators=(",", ":"), default=str) + "\n")


def read_log(path: Path) -> Iterator[dict[str, Any]]:
    """Events of a log file (its ``schema`` tag removed), skipping a line a killed worker tore.

    A line of a log version this ktx does not know is an error naming ``file:line``; a line
    with no tag was written before versions, and is version 1."""
    if not path.exists():
        return
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if not isinstance(event, dict):
                continue
            check_schema(event, "log", Location(str(path), number, 1))
            event.pop("schema", None)
            yield event
