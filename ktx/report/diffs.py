"""Diffs: what each pass changed, and the patch a person applies to their tree.

The per-pass diffs replay the final template's trace on the original source one step at a
time, so each diff shows exactly the edits of one pass on the code *as that pass saw it*.

The patch (``git apply`` / ``patch -p1``) changes the kernel file and adds the dispatch header.
When the dispatch table holds a single tuned variant, the kernel file becomes that variant's
plain CUDA (no macros left); with several variants it becomes the template, whose guarded
``KTX_`` macro header keeps the original behaviour by default and whose variants are built with
``-DKTX_NAME=value`` as the header's table says.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from ktx.ir.edits import splice

from ktx.template import Step

_TUNE_COMMENT = "// ktx tune: "


@dataclass(frozen=True)
class PassDiff:
    pass_name: str
    invocation: str
    reason: str
    diff: str
    outcomes: tuple[str, ...]


def unified(before: str, after: str, a: str, b: str, context: int = 3) -> str:
    """``diff -u`` text; a last line without a newline gets the marker ``patch`` expects."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), a, b, n=context
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def pass_diffs(original: str, trace: Mapping[str, Any]) -> list[PassDiff]:
    """One diff per traced step (the knob header included), in pipeline order."""
    current = original.encode("utf-8", "surrogateescape")
    out: list[PassDiff] = []
    for raw in trace.get("steps", []):
        step = Step.from_json(raw)
        after = splice(current, step.edits)
        before_text = current.decode("utf-8", "surrogateescape")
        after_text = after.decode("utf-8", "surrogateescape")
        name = step.pass_name if step.pass_name != "ktx" else "knob header"
        diff = unified(before_text, after_text, "before", f"after {name}")
        outcomes = tuple(f"{o.site} (line {o.line}): {o.status}: {o.message}" for o in step.outcomes)
        out.append(PassDiff(name, step.invocation, step.reason, diff, outcomes))
        current = after
    return out


def tuned_source(template: str | None, variants: tuple[str, ...]) -> tuple[str | None, str]:
    """The kernel file's new text and what it is: one variant's CUDA, or the template."""
    if len(variants) == 1:
        text = variants[0]
        if text.startswith(_TUNE_COMMENT):
            text = text.split("\n", 1)[1] if "\n" in text else ""
        return text, "the single tuned variant, as plain CUDA"
    if template is not None:
        return template, "the template (KTX_ macros default to the original; variants via -D, see the header)"
    return None, "no tuned source"


def patch(original: str, source_rel: str, tuned: str | None, header: str | None, header_name: str) -> str:
    """A unified diff (``a/``/``b/`` paths, ``patch -p1``) of the kernel file and the new header."""
    parts: list[str] = []
    path = PurePosixPath(source_rel)
    if tuned is not None and tuned != original:
        parts.append(unified(original, tuned, f"a/{path}", f"b/{path}"))
    if header is not None:
        target = path.parent / header_name
        body = unified("", header, "/dev/null", f"b/{target}")
        parts.append(body)
    return "".join(parts)
