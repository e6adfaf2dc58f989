"""Helpers for pass tests: run a pipeline on a snippet, read remarks, diff lines."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

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


def build_for_sm90(jobs: list[tuple[str, Any, Path, str]]) -> list[tuple[str, bool, str]]:
    """Each job ``(name, spec, folder, source)`` compiled by nvcc for sm_90 with ``ptxas -v``,
    two at a time: ``(name, ok, log)`` per job, in order."""
    from concurrent.futures import ThreadPoolExecutor

    from ktx.measure.compile import CompileRequest, compile_kernel

    def build(job: tuple[str, Any, Path, str]) -> tuple[str, bool, str]:
        name, spec, folder, source = job
        flags = (*spec.flags, "-Xptxas", "-v")
        result = compile_kernel(CompileRequest(source, spec.kernel, flags, "90", (str(folder),), "nvcc"))
        return name, result.ok, result.log

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(build, jobs))


def assert_built_without_spills(results: list[tuple[str, bool, str]]) -> None:
    """Every build of :func:`build_for_sm90` succeeded and spilled no registers."""
    failed = [f"{name}:\n{log[-1500:]}" for name, ok, log in results if not ok]
    assert not failed, "\n".join(failed)
    spills = [name for name, _, log in results if re.search(r"[1-9]\d* bytes spill stores", log)]
    assert not spills, spills
