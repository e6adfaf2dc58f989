"""Helpers for pass tests: run a pipeline on a snippet, read remarks, diff lines."""

from __future__ import annotations

import difflib
from pathlib import Path

from ktx.pipeline import run
from ktx.template import Template

ROOT = Path(__file__).resolve().parents[2]
SUITE = sorted((ROOT / "kernels").glob("*/kernel.cu"))


def apply(source: str, pipeline: str, **kwargs: object) -> Template:
    return run(source, pipeline, **kwargs)  # type: ignore[arg-type]


def remarks(t: Template, status: str | None = None) -> list[str]:
    """``site: message`` for each outcome (of one status)."""
    return [f"{o.site}: {o.message}" for o in t.outcomes if status is None or o.status == status]


def changed(before: str, after: str) -> list[str]:
    """The ``-``/``+`` lines of a diff, stripped of the header, for before->after assertions."""
    lines = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
    return [line for line in lines if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def code(t: Template) -> str:
    """The template without its knob header."""
    start = t.source.find("// ktx:knobs begin")
    if start < 0:
        return t.source
    end = t.source.find("\n", t.source.find("// ktx:knobs end")) + 1
    return t.source[:start] + t.source[end:]


def suite_source(name: str) -> str:
    return (ROOT / "kernels" / name / "kernel.cu").read_text()
