"""Errors a user can act on.

Every error that reaches the command line is a :class:`KtxError`: it carries the file, line and
column it is about and a hint saying what to do, so that the CLI can print one line and exit 2
without a traceback (``--debug`` shows the traceback).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    """A place in a file: 1-based line and column, as editors show them."""

    path: str | None
    line: int = 0
    col: int = 0

    def __str__(self) -> str:
        path = self.path or "<input>"
        if self.line <= 0:
            return path
        return f"{path}:{self.line}:{self.col}"


class KtxError(Exception):
    """An error caused by the user's input, reported as ``file:line:col: message (hint)``."""

    def __init__(self, message: str, location: Location | None = None, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.location = location
        self.hint = hint

    def __str__(self) -> str:
        text = self.message
        if self.location is not None:
            text = f"{self.location}: {text}"
        if self.hint:
            text = f"{text} ({self.hint})"
        return text


class NoGpuError(KtxError):
    """Raised by commands that must run kernels when no CUDA device (or CuPy) is usable."""
