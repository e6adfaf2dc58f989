"""Byte-range edits on the original source, applied atomically with a reparse check.

Passes never print trees: they replace byte ranges of the input, so comments, macros and
formatting they did not touch survive and diffs stay small. An :class:`EditSet` refuses
overlapping edits when they are added (two passes fighting over the same bytes is a bug
to surface, not to resolve silently), and :func:`apply` reparses the result and rolls back
any site whose edits introduce a syntax error that was not there before.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from ktx.ir.errors import KtxError, Location
from ktx.ir.language import parse_tree
from ktx.ir.module import Module, error_nodes
from ktx.ir.source import Span


class EditError(KtxError):
    """Edits that cannot be applied: overlapping, out of range, or breaking the syntax."""


@dataclass(frozen=True)
class Edit:
    """Replace ``source[start:end]`` with ``text``; ``start == end`` inserts.

    ``pass_name`` and ``site`` say who asked for the edit, for messages and the trace.
    """

    start: int
    end: int
    text: str
    pass_name: str = ""
    site: str = ""

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.end:
            raise ValueError(f"bad edit range [{self.start}, {self.end})")

    def overlaps(self, other: Edit) -> bool:
        if self.start == self.end or other.start == other.end:
            # An insertion conflicts only with a replacement that strictly contains its point.
            point, rng = (self, other) if self.start == self.end else (other, self)
            if point.start == point.end and rng.start == rng.end:
                return False
            return rng.start < point.start < rng.end
        return self.start < other.end and other.start < self.end

    def to_json(self) -> dict[str, object]:
        return {
            "start": self.start,
            "end": self.end,
            "text": self.text,
            "pass": self.pass_name,
            "site": self.site,
        }

    @staticmethod
    def from_json(data: dict[str, object]) -> Edit:
        return Edit(
            int(str(data["start"])),
            int(str(data["end"])),
            str(data["text"]),
            str(data.get("pass", "")),
            str(data.get("site", "")),
        )


@dataclass
class EditSet:
    """Edits over one module's original bytes. Adding an overlapping edit raises."""

    module: Module
    edits: list[Edit] = field(default_factory=list)

    def __iter__(self) -> Iterator[Edit]:
        return iter(self.edits)

    def __len__(self) -> int:
        return len(self.edits)

    def add(self, edit: Edit) -> None:
        if edit.end > len(self.module.source):
            raise EditError(f"edit [{edit.start}, {edit.end}) is past the end of the source")
        for other in self.edits:
            if edit.overlaps(other):
                line, col = self.module.lines.line_col(edit.start)
                raise EditError(
                    f"edit by {edit.pass_name or '?'} at {edit.site or '?'} overlaps an edit by "
                    f"{other.pass_name or '?'} at {other.site or '?'}",
                    Location(self.module.path, line, col),
                    "two rewrites touch the same bytes; order or split the passes",
                )
        self.edits.append(edit)

    def replace(self, span: Span, text: str, pass_name: str = "", site: str = "") -> None:
        self.add(Edit(span.start, span.end, text, pass_name, site))

    def insert(self, offset: int, text: str, pass_name: str = "", site: str = "") -> None:
        self.add(Edit(offset, offset, text, pass_name, site))

    def extend(self, edits: Iterable[Edit]) -> None:
        for e in edits:
            self.add(e)


def splice(source: bytes, edits: Iterable[Edit]) -> bytes:
    """Apply non-overlapping edits to ``source``; insertions at one point keep their order."""
    ordered = sorted(enumerate(edits), key=lambda ie: (ie[1].start, ie[1].end, ie[0]))
    out: list[bytes] = []
    pos = 0
    for _, e in ordered:
        out.append(source[pos : e.start])
        out.append(e.text.encode("utf-8"))
        pos = max(pos, e.end)
    out.append(source[pos:])
    return b"".join(out)


def _new_errors(before: Module, after_source: bytes, edits: list[Edit]) -> list[int]:
    """Offsets (in the new text) of syntax errors that the edits introduced."""
    after = before.with_source(after_source)
    old = {(n.start_byte, n.type) for n in error_nodes(before.tree.root_node)}
    ordered = sorted(edits, key=lambda e: (e.start, e.end))
    fresh: list[int] = []
    for node in error_nodes(after.tree.root_node):
        mapped = map_back(node.start_byte, ordered)
        if mapped is None or (mapped, node.type) not in old:
            fresh.append(node.start_byte)
    # A #define body is opaque text to the tree; launches indexed inside one can be edited,
    # so the bodies the edits touch are parsed on their own and compared too.
    touched = {
        m.name
        for m in before.macros
        for e in edits
        if (m.span.start < e.end and e.start < m.span.end) or m.span.start < e.start < m.span.end
    }
    if touched:
        was, now = _macro_errors(before, touched), _macro_errors(after, touched)
        for macro in after.macros:
            if macro.name in touched and now.get(macro.name, 0) > was.get(macro.name, 0):
                fresh.append(macro.span.start)
    return fresh


def _macro_errors(module: Module, names: set[str]) -> dict[str, int]:
    """Syntax errors in the bodies of the named macros, each parsed as a function body."""
    counts: dict[str, int] = {}
    for macro in module.macros:
        if macro.name in names and macro.value_span is not None:
            body = module.source[macro.value_span.start : macro.value_span.end]
            tree = parse_tree(b"void _(){\n" + body + b"\n;}\n")
            counts[macro.name] = counts.get(macro.name, 0) + len(error_nodes(tree.root_node))
    return counts


def map_back(offset: int, ordered: list[Edit]) -> int | None:
    """Map an offset in the edited text to the original, or None if it lies in new text.

    ``ordered`` are the edits that produced the text, sorted by position.
    """
    delta = 0
    for e in ordered:
        new_start = e.start + delta
        new_end = new_start + len(e.text.encode("utf-8"))
        if offset < new_start:
            break
        if offset < new_end:
            return None
        delta += len(e.text.encode("utf-8")) - (e.end - e.start)
    return offset - delta


@dataclass(frozen=True)
class Applied:
    """The result of :func:`apply`: the new module and the sites rolled back, with why."""

    module: Module
    applied: tuple[Edit, ...]
    rolled_back: tuple[tuple[str, str], ...]
    """``(site, message)`` for each site whose edits broke the syntax and were dropped."""


def apply(edit_set: EditSet, *, rollback: bool = True) -> Applied:
    """Apply an edit set and reparse.

    Edits are grouped by ``(pass, site)``. If the result has a syntax error that was not in
    the input, each group is tried alone and the groups that cause one are dropped
    (``rollback=True``) or reported as an :class:`EditError` (``rollback=False``).
    """
    module = edit_set.module
    edits = list(edit_set.edits)
    if not edits:
        return Applied(module, (), ())
    new_source = splice(module.source, edits)
    if not _new_errors(module, new_source, edits):
        return Applied(module.with_source(new_source), tuple(edits), ())
    groups: dict[tuple[str, str], list[Edit]] = {}
    for e in edits:
        groups.setdefault((e.pass_name, e.site), []).append(e)
    kept: list[Edit] = []
    dropped: list[tuple[str, str]] = []
    for (pass_name, site), group in groups.items():
        trial = kept + group
        errors = _new_errors(module, splice(module.source, trial), trial)
        if not errors:
            kept = trial
            continue
        line, col = module.lines.line_col(group[0].start)
        message = (
            f"pass {pass_name or '?'} at {site or '?'} (line {line}) produced code that does not "
            f"parse; its edits were rolled back"
        )
        if not rollback:
            raise EditError(message, Location(module.path, line, col), "report this pass bug")
        dropped.append((site, message))
    result = module.with_source(splice(module.source, kept)) if kept else module
    return Applied(result, tuple(kept), tuple(dropped))
