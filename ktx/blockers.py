"""What keeps a drafted spec from running: the ``TODO`` placeholder and the blockers found.

The vocabulary ``ktx init`` (:mod:`ktx.draft`, which writes ``# TODO:`` lines) and
``ktx init --check`` (:mod:`ktx.check`, which lists what blocks a run) share. It lives apart
from both so that the drafter may run the check without the check importing the drafter.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ktx.ir.errors import KtxError

#: The placeholder a draft writes where it cannot tell a value; the spec loader refuses it, so a
#: draft with TODOs never runs by accident.
TODO = "TODO"


@dataclass(frozen=True)
class Blocker:
    """One thing that keeps a drafted spec from running: a TODO line, or the loader's error."""

    line: int
    message: str


def todo_blocker(exc: KtxError) -> str | None:
    """The one line to print when a spec fails on a placeholder ``ktx init`` left: the TODO
    comment above it (what is missing, where ktx looked) instead of "unknown name 'TODO'"."""
    loc = exc.location
    if loc is None or not loc.path or not loc.path.endswith(".toml") or TODO not in exc.message:
        return None
    try:
        lines = Path(loc.path).read_text().splitlines()
    except OSError:
        return None
    for i in range(min(loc.line, len(lines)) - 1, max(loc.line - 4, 0) - 1, -1):
        line = lines[i].lstrip()
        if line.startswith(f"# {TODO}:"):
            what = line.split(f"{TODO}:", 1)[1].strip()
            folder = Path(loc.path).parent
            return (
                f"{loc.path}:{loc.line}: a TODO left by ktx init blocks the run: {what} "
                f"(replace the placeholder; ktx init --check {folder} lists them all)"
            )
    return None
