"""The live progress line: evaluations, failures by type, best time, speedup over the original.

On a terminal it is a rich progress bar redrawn in place; elsewhere (logs, CI) a plain line is
printed when a shape finishes, so output stays readable in files.
"""

from __future__ import annotations

import sys
import threading
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from ktx.search.engine import StudyStats


def describe(stats: StudyStats, original_us: float | None) -> str:
    parts = [f"trials {stats.trials}"]
    fails = ", ".join(f"{k} {v}" for k, v in sorted(stats.failures.items()))
    if stats.refused:
        fails = f"{fails}, refused {stats.refused}" if fails else f"refused {stats.refused}"
    parts.append(f"failures: {fails or 'none'}")
    if stats.best_value is not None:
        best = f"best {stats.best_value:.2f} µs"
        if original_us:
            best += f" (x{original_us / stats.best_value:.2f} vs original {original_us:.2f} µs)"
        parts.append(best)
    return " | ".join(parts)


class Display:
    """One task per shape; ``enabled=False`` prints nothing at all."""

    def __init__(self, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.live = enabled and self.stream.isatty()
        self._lock = threading.Lock()
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._last = ""
        if self.live:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(),
                console=Console(file=self.stream),
                transient=False,
            )
            self._progress.start()

    def start(self, name: str, budget: int) -> None:
        with self._lock:
            if self._progress is not None:
                self._task = self._progress.add_task(name, total=budget, info="")
            self._name = name

    def update(self, stats: StudyStats, original_us: float | None) -> None:
        with self._lock:
            self._last = describe(stats, original_us)
            if self._progress is not None and self._task is not None:
                self._progress.update(self._task, completed=stats.evaluations, info=self._last)

    def finish(self) -> None:
        with self._lock:
            if self.enabled and not self.live and self._last:
                print(f"{self._name}: {self._last}", file=self.stream, flush=True)
            self._last = ""

    def message(self, text: str) -> None:
        if not self.enabled:
            return
        if self._progress is not None:
            self._progress.console.print(text)
        else:
            print(text, file=self.stream, flush=True)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
