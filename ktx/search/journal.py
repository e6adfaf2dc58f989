"""A one-process Optuna study kept in memory, every change appended to a journal file for resume.

Why not SQLite: a modelled ``ktx optimize`` spent about 45% of its CPU in Optuna's RDB storage
(47 SQL statements a trial, each an SQLAlchemy round trip), 84 ms a trial against 10 ms in
memory on the session-9 host (scripts/overhead.py). Why not Optuna's own ``JournalFileBackend``:
it takes a file lock and ``fsync``\\ s every record (33 ms a trial), and re-reads the file for
changes other processes made. A run folder's default study has one writer (the run lock
guarantees it; ``--workers N`` and ``--storage URL`` keep the RDB storage), so this backend holds
the records in a list, answers reads from it, and appends each record to the file with a flush
and no ``fsync``: a killed process loses nothing the operating system was handed (the same
promise as SQLite's WAL with ``synchronous=NORMAL``), only a power cut could.

The file is Optuna's journal format (one JSON record a line), so
``optuna.storages.JournalStorage(JournalFileBackend(path))`` and ``optuna-dashboard path`` read it.
A record cut short by a kill (no final newline) is dropped when the file is opened again.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from ktx.ir.errors import KtxError, Location
from optuna.storages.journal import BaseJournalBackend, JournalStorage


class AppendOnlyJournal(BaseJournalBackend):
    """Optuna journal records in memory, appended to ``path`` as they are written.

    ``writable=False`` reads a journal another process may be writing (``ktx report`` during a
    run): the file is neither cut nor appended to, and a last line still being written is
    left out."""

    def __init__(self, path: Path, writable: bool = True) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._logs: list[dict[str, Any]] = _read(path, repair=writable)
        self._file: TextIO | None = None
        if writable:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("a", encoding="utf-8")

    def read_logs(self, log_number_from: int) -> Iterator[dict[str, Any]]:
        with self._lock:
            new = self._logs[log_number_from:]
        yield from new

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        text = "".join(json.dumps(log, separators=(",", ":")) + "\n" for log in logs)
        with self._lock:
            if self._file is None:
                raise KtxError(f"{self.path}: the study journal was opened to read only")
            self._file.write(text)
            self._file.flush()  # handed to the OS: survives a SIGKILL of this process
            self._logs.extend(logs)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()


def _read(path: Path, repair: bool = True) -> list[dict[str, Any]]:
    """The records of an existing journal; a last line without its newline (a kill in the middle
    of a write) is left out, and (``repair``) cut off the file, so that the next record starts on
    a line of its own."""
    if not path.exists():
        return []
    data = path.read_bytes()
    whole = data.rfind(b"\n") + 1
    if repair and whole < len(data):
        with path.open("r+b") as f:
            f.truncate(whole)
    logs: list[dict[str, Any]] = []
    for number, line in enumerate(data[:whole].splitlines(), 1):
        if not line.strip():
            continue
        try:
            logs.append(json.loads(line))
        except ValueError as exc:
            raise KtxError(
                f"the study journal is damaged ({exc})",
                Location(str(path), number, 1),
                "remove the file to start the search afresh (the measurement cache keeps what was measured)",
            ) from None
    return logs


def journal_storage(path: Path, writable: bool = True) -> JournalStorage:
    """An Optuna storage over :class:`AppendOnlyJournal` (one writing process only)."""
    return JournalStorage(AppendOnlyJournal(path, writable))
