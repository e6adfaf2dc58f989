"""The measure of ``ktx init`` on the benchmark: how much of its draft a person had to change.

A kernel's ``init.diff`` is ``diff -u`` from the draft ``ktx init`` wrote to the ``ktx.toml``
finished by hand. Two numbers come from it:

* **edited lines**: per block of changed lines, the larger of the lines taken out and the lines
  put in (a line replaced is one edit, not two), not counting comment lines: deleting a
  ``# TODO`` or adding a ``# why`` note changes nothing the spec says;
* **silently wrong lines**: draft lines that had to change although the draft did not flag them,
  i.e. a removed line that is neither a placeholder (``"[TODO]"``, ``"TODO"``) nor a line right
  after a ``# TODO`` comment. These are the lines that make a draft dangerous: it would run,
  wrongly, if the person trusted it.

The draft's lines around each change are in the diff's context (three lines), so the line
before a removed one is always known without the draft itself.
"""

from __future__ import annotations

import collections
import difflib
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class EditStat:
    edited: int
    silent: int
    silent_lines: tuple[str, ...]


def _is_comment(line: str) -> bool:
    return line.strip().startswith("#") or not line.strip()


def _flagged(line: str, previous: str | None) -> bool:
    return "TODO" in line or (previous is not None and previous.lstrip().startswith("# TODO"))


def stat(diff_text: str) -> EditStat:
    """Edited and silently wrong lines of a unified diff from draft to finished spec."""
    edited = 0
    silent: list[str] = []
    minus = plus = 0
    previous: str | None = None  # the draft's line before the current one (context or removed)

    def close() -> None:
        nonlocal edited, minus, plus
        edited += max(minus, plus)
        minus = plus = 0

    for raw in diff_text.splitlines():
        if raw.startswith(("---", "+++")):
            continue
        if raw.startswith("@@"):
            close()
            previous = None
            continue
        tag, line = raw[:1], raw[1:]
        if tag == "-":
            if not _is_comment(line):
                minus += 1
                if not _flagged(line, previous):
                    silent.append(line)
            previous = line
        elif tag == "+":
            if not _is_comment(line):
                plus += 1
        else:
            close()
            previous = line
    close()
    return EditStat(edited, len(silent), tuple(silent))


def unified(draft: str, final: str, draft_label: str, final_label: str = "ktx.toml") -> str:
    """``diff -u`` from ``draft`` to ``final`` (three lines of context), as ``init.diff`` holds."""
    lines = difflib.unified_diff(
        draft.splitlines(keepends=True), final.splitlines(keepends=True), draft_label, final_label
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def unapply(final: str, diff_text: str) -> str:
    """The draft that ``diff_text`` turned into ``final`` (the diff read backwards): so the draft
    need not be committed, and a later ``ktx init`` can be compared with the one measured."""
    out: list[str] = []
    src = final.splitlines(keepends=True)
    at = 0  # next unread line of final
    hunk: list[str] = []
    hunks: list[tuple[int, list[str]]] = []
    for raw in diff_text.splitlines(keepends=True):
        if raw.startswith(("---", "+++")) and not hunk and not hunks:
            continue
        if raw.startswith("@@"):
            new_start = int(raw.split("+")[1].split(",")[0].split(" ")[0])
            hunk = []
            hunks.append((new_start, hunk))
        elif hunks:
            hunk.append(raw)
    for new_start, body in hunks:
        start = max(new_start - 1, 0)
        out.extend(src[at:start])
        at = start
        for raw in body:
            tag, line = raw[:1], raw[1:]
            if tag == "-":
                out.append(line)
            elif tag == "+":
                at += 1
            elif tag == "\\":
                continue
            else:
                out.append(line)
                at += 1
    out.extend(src[at:])
    return "".join(out)


#: ``[[args]]``/``[[buffers]]`` keys that are a class of their own; any other key of such a
#: table is counted under its own name (``order``, ``low``, ``name`` of a new table).
_ARG_KEYS = ("dtype", "shape", "role", "value", "dist", "type")


def _sections(text: str) -> list[str]:
    """The TOML table each line of ``text`` is in (``[vars]``, ``[[args]]``, ...)."""
    out, current = [], ""
    for line in text.splitlines():
        if re.fullmatch(r"\[\[?[\w.]+\]\]?", line.strip()):
            current = line.strip()
        out.append(current)
    return out


def line_class(line: str, section: str) -> str:
    """What an edited spec line says: an argument's ``dtype``/``shape``/``role``/``value``/
    ``dist``, a struct's ``fields``, a ``[vars]`` entry, the shape points, the launch,
    ``template_args``, the compile ``flags``, or ``other: KEY``."""
    key = line.split("=", 1)[0].strip()
    if key.startswith("fields"):
        return "fields"
    if section == "[vars]":
        return "vars"
    if section == "[shapes]":
        return "shape points"
    if key in ("grid", "block", "shared"):
        return "launch"
    if key in _ARG_KEYS or key in ("template_args", "flags"):
        return key
    return f"other: {key[:24]}"


def edit_classes(diff_text: str, draft: str, final: str) -> collections.Counter[str]:
    """The edited lines of ``diff_text`` (from ``draft`` to ``final``) by :func:`line_class`,
    counted as :func:`stat` counts them: per block, the lines put in, then any taken out beyond
    them (a replaced line is classed by what it became)."""
    dsec, fsec = _sections(draft), _sections(final)
    counts: collections.Counter[str] = collections.Counter()
    minus: list[str] = []
    plus: list[str] = []

    def close() -> None:
        for i in range(max(len(minus), len(plus))):
            counts[plus[i] if i < len(plus) else minus[i]] += 1
        minus.clear()
        plus.clear()

    a = b = 0
    for raw in diff_text.splitlines():
        if raw.startswith(("---", "+++")):
            continue
        m = re.match(r"@@ -(\d+)(?:,\d+)? \+(\d+)", raw)
        if m is not None:
            close()
            a, b = int(m.group(1)) - 1, int(m.group(2)) - 1
            continue
        tag, line = raw[:1], raw[1:]
        if tag == "-":
            if not _is_comment(line):
                minus.append(line_class(line, dsec[a] if a < len(dsec) else ""))
            a += 1
        elif tag == "+":
            if not _is_comment(line):
                plus.append(line_class(line, fsec[b] if b < len(fsec) else ""))
            b += 1
        elif tag == " ":
            close()
            a += 1
            b += 1
    close()
    return counts
