"""The whole-file records of a run folder, versioned: one place says each file's format tag.

``optimize.json`` and ``dispatch.json`` always carried a ``"format": "ktx.<kind>/1"`` tag and
``trace.json`` a ``"version"``; ``summary.json``, ``best.json``, ``plan.json`` and
``plugins.json`` carried none. Every writer now stamps its file through :func:`stamped` and every
reader reads it through :func:`read_record`, so a file of a format this ktx does not know is an
error naming the file, not a dict whose fields quietly read as missing. A file without its tag was
written before the tags existed: it is version 1 of its kind (version 1 *is* the layout those
files had), so old run folders and recordings still load.

The JSON Lines records (``rounds.jsonl``, ``cache.jsonl``, ``log.jsonl``, ``llm_cache.jsonl``)
carry ``"schema"`` on each line instead: see :data:`ktx.records.VERSIONS`.

>>> stamped("plugins", {"plugins": ["p.py"]})
{'format': 'ktx.plugins/1', 'plugins': ['p.py']}
>>> check_format({"format": "ktx.summary/7"}, "summary", Location("s.json"))
Traceback (most recent call last):
...
ktx.ir.errors.KtxError: s.json: ktx.summary/7 is not a format this ktx reads (it reads ktx.summary/1)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ktx.ir.errors import KtxError, Location

#: The version of each whole-file record this ktx writes (and the only one it reads).
FORMATS: Mapping[str, int] = {
    "optimize": 1,  # optimize.json: the run's request, device and outcome (RunState)
    "dispatch": 1,  # dispatch.json: the dispatch table (ktx.search.dispatch.DispatchTable)
    "trace": 1,  # trace.json: the passes' edits (ktx.template.Trace; its tag is "version": 1)
    "summary": 1,  # summary.json: ktx tune's per-shape table (ktx.search.report.Summary)
    "best": 1,  # best.json: shape -> its row and the config the table dispatches there
    "plan": 1,  # plan.json: the round's plan and how the planner got it
    "plugins": 1,  # plugins.json: the pass plugins a run loaded
}

#: The key that carries the tag: ``"format": "ktx.<kind>/<n>"``, except trace.json's older
#: ``"version": <n>`` (kept as it was, since templates outside run folders carry it too).
_INT_VERSION = frozenset({"trace"})


def format_of(kind: str) -> str:
    """``ktx.<kind>/<version>``: the tag a file of ``kind`` carries."""
    return f"ktx.{kind}/{FORMATS[kind]}"


def stamped(kind: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with its format tag first (what a writer writes)."""
    if kind in _INT_VERSION:
        return {"version": FORMATS[kind], **{k: v for k, v in data.items() if k != "version"}}
    return {"format": format_of(kind), **{k: v for k, v in data.items() if k != "format"}}


def check_format(data: Mapping[str, Any], kind: str, where: Location) -> None:
    """Raise a clear error unless ``data`` is of a format of ``kind`` this ktx reads.

    No tag: a file from before tags, which is version 1 (the migration)."""
    if kind in _INT_VERSION:
        found: Any = data.get("version")
        if found is None or found == FORMATS[kind]:
            return
        raise KtxError(
            f"{kind} version {found!r} is not one this ktx reads", where, f"it reads version {FORMATS[kind]}"
        )
    found = data.get("format")
    if found is None and FORMATS[kind] == 1:
        return
    if found != format_of(kind):
        raise KtxError(f"{found} is not a format this ktx reads", where, f"it reads {format_of(kind)}")


def read_record(path: Path, kind: str) -> dict[str, Any]:
    """The JSON object in ``path``, checked to be of a format of ``kind`` this ktx reads, with
    its tag removed (so a mapping such as best.json's holds only its entries).

    Unreadable, not JSON, not an object, or an unknown format: an error naming the file."""
    where = Location(str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise KtxError(f"cannot read: {exc.strerror}", where) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KtxError(
            f"not JSON ({exc.msg})",
            Location(str(path), exc.lineno, exc.colno),
            "the file is damaged: run again",
        ) from None
    if not isinstance(data, dict):
        raise KtxError(
            f"not a {kind} record (expected a JSON object)", where, "the file is damaged: run again"
        )
    check_format(data, kind, where)
    data.pop("version" if kind in _INT_VERSION else "format", None)
    return data


def write_record(path: Path, kind: str, data: Mapping[str, Any], *, indent: int | None = 1) -> None:
    """Write ``data`` stamped with its format tag (plain write: these files are written once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(stamped(kind, data), indent=indent, default=str) + "\n", encoding="utf-8")


# -- typed views of the files the report and the tour read ------------------------------------


@dataclass(frozen=True)
class PlannedPass:
    """One pass of a plan, with the planner's reason."""

    name: str
    why: str


@dataclass(frozen=True)
class PlanRecord:
    """``plan.json`` (``PlanOutcome.to_json()`` in :mod:`ktx.agent.plan`), as its readers see it:
    who planned, the pipeline and each pass's reason. The rest (attempts, usage) stays in
    ``detail``: it is shown, never computed with."""

    planner: str
    pipeline: str
    passes: tuple[PlannedPass, ...]
    detail: Mapping[str, Any]

    @classmethod
    def read(cls, path: Path) -> PlanRecord:
        data = read_record(path, "plan")
        plan = data.get("plan")
        if not isinstance(plan, Mapping):
            raise KtxError("plan.json has no plan object", Location(str(path)), "run ktx optimize again")
        try:
            passes = tuple(PlannedPass(str(p["name"]), str(p.get("why", ""))) for p in plan.get("passes", ()))
        except (KeyError, TypeError, AttributeError) as exc:
            raise KtxError(f"malformed plan.json ({exc!r})", Location(str(path))) from None
        return cls(str(plan.get("planner", "")), str(plan.get("pipeline", "")), passes, data)


@dataclass(frozen=True)
class PluginsRecord:
    """``plugins.json``: the pass plugins (files or modules) a run loaded, so a resume, a worker
    or a replay loads them too."""

    plugins: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return stamped("plugins", {"plugins": list(self.plugins)})

    @classmethod
    def read(cls, path: Path) -> PluginsRecord:
        data = read_record(path, "plugins")
        plugins = data.get("plugins")
        if not isinstance(plugins, list) or not all(isinstance(p, str) for p in plugins):
            raise KtxError('plugin record must be {"plugins": [...]}', Location(str(path)))
        return cls(tuple(plugins))


@dataclass(frozen=True)
class BaselineShape:
    """One shape's original measurement: the metric the run compares by, and the measurement as
    ``Measurement.to_dict()`` wrote it (typed by :mod:`ktx.measure.types`, above this leaf)."""

    shape: str
    metric: str
    measurement: Mapping[str, Any]


@dataclass(frozen=True)
class BaselineRecord:
    """``baseline.json``: the original kernel's measurements per shape, with the Nsight metrics
    and the kernel's facts (shown, never computed with). Its tag is ``"schema"``, as the loop
    wrote it from the start (:data:`ktx.records.VERSIONS`)."""

    kernel: str
    shapes: tuple[BaselineShape, ...]
    ncu: Mapping[str, Any]
    facts: Mapping[str, Any]

    @classmethod
    def read(cls, path: Path) -> BaselineRecord:
        from ktx.records import check_schema

        where = Location(str(path))
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise KtxError(f"unreadable baseline: {exc}", where, "run ktx optimize again") from None
        if not isinstance(data, dict):
            raise KtxError("baseline.json is not a JSON object", where, "run ktx optimize again")
        check_schema(data, "baseline", where)
        try:
            shapes = tuple(
                BaselineShape(str(s["measurement"]["shape"]), str(s["metric"]), dict(s["measurement"]))
                for s in data["shapes"]
            )
            return cls(
                str(data["kernel"]), shapes, dict(data.get("ncu") or {}), dict(data.get("facts") or {})
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise KtxError(f"malformed baseline.json ({exc!r})", where, "run ktx optimize again") from None
