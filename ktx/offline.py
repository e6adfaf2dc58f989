"""The main job anywhere: ``ktx optimize`` measures on a GPU and, without one, replays a recording.

A first user on a laptop should see the whole loop (plan, template, search, dispatch table,
report) rather than an error about CUDA. ``--backend auto`` (the default) picks the GPU when
CuPy sees one; otherwise it answers from a recording committed with the kernel
(``KERNEL_DIR/recorded/optimize/*.json``: every measurement of a real ``ktx optimize`` run) and
takes that run's settings (shapes, rounds, trials, seed), the only ones the recording can
answer. Numbers that were not measured here must never pass for ones that were, so every line
printed is stamped with the recording's device and date (:meth:`Offline.stamp`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ktx.ir.errors import KtxError, Location, NoGpuError

#: Where a kernel folder keeps the recordings of whole ``ktx optimize`` runs.
RECORDED = Path("recorded") / "optimize"
#: Request fields a recording may fix (the run it was made from).
SETTINGS = ("shapes", "rounds", "trials_per_round", "seed", "ncu", "planner", "patience", "min_gain")


@dataclass(frozen=True)
class Offline:
    """A replayed run: the recording, its device and date, the settings it was made with."""

    recording: Path
    device: str
    date: str
    settings: Mapping[str, Any] = field(default_factory=dict)

    @property
    def backend(self) -> str:
        return f"replay:{self.recording}"

    @property
    def tag(self) -> str:
        return f"[REPLAY of {self.device}, {self.date}; no GPU here]"

    def stamp(self, text: str) -> str:
        """Every line of ``text`` prefixed with :attr:`tag` (blank lines too: nothing unmarked)."""
        return "\n".join(f"{self.tag} {line}".rstrip() for line in text.splitlines())


def gpu_available() -> bool:
    """Whether CuPy is installed and sees a CUDA device (no error escapes: then there is none)."""
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount()) > 0
    except Exception:
        return False


def committed_recording(kernel_dir: Path) -> Path | None:
    """The newest recording of a whole optimize run committed with the kernel, if any."""
    found = sorted((kernel_dir / RECORDED).glob("*.json"))
    return found[-1] if found else None


def resolve(backend: str, kernel_dir: Path) -> tuple[str, Offline | None]:
    """``auto`` -> ``cupy`` on a GPU, else the committed recording; other backends unchanged."""
    if backend != "auto":
        return backend, None
    if gpu_available():
        return "cupy", None
    path = committed_recording(kernel_dir)
    if path is None:
        raise NoGpuError(
            "no CUDA GPU here (CuPy sees none) and no recording to replay",
            Location(str(kernel_dir / RECORDED)),
            "run on a GPU host with ktx[cuda13], or pass --backend replay:FILE",
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise KtxError(f"unreadable recording: {exc}", Location(str(path))) from None
    settings = data.get("request") if isinstance(data.get("request"), dict) else {}
    offline = Offline(
        path,
        str(data.get("device") or "unknown device"),
        str(data.get("date") or "undated"),
        {k: v for k, v in settings.items() if k in SETTINGS},
    )
    return offline.backend, offline


def tour(run_dir: Path) -> list[str]:
    """After the tables: the template's knobs, the dispatch table's rules and the report files."""
    lines: list[str] = []
    final = run_dir / "final"
    plan_file = final / "plan.json"
    if plan_file.is_file():
        from ktx.records.files import PlanRecord

        plan = PlanRecord.read(plan_file)
        lines.append(f"plan ({plan.planner or '?'}): `{plan.pipeline}`")
        lines += [f"  {p.name}: {p.why}" for p in plan.passes]
    template = final / "template.cu"
    if template.is_file():
        text = template.read_text(encoding="utf-8").splitlines()
        knobs = [line.strip() for line in text if line.lstrip().startswith("#define KTX_")]
        lines.append(f"template: {template} ({len(knobs)} knob(s))")
        lines += [f"  {k}" for k in knobs]
    dispatch = final / "dispatch.json"
    if dispatch.is_file():
        from ktx.report.data import read_dispatch

        table = read_dispatch(dispatch)
        variants = table.variants
        lines.append(f"dispatch table: {dispatch} (C++: {final / 'dispatch.h'})")
        for rule in table.rules:
            v = rule.variant
            config: Any = dict(variants[v]) if v is not None and 0 <= v < len(variants) else "original"
            when = ", ".join(f"{k}={x}" for k, x in rule.fixed) or "any shape"
            lines.append(f"  {when}: {config}")
    else:
        lines.append("dispatch table: none (no round beat the original; the original is kept)")
    try:
        from ktx.report import make_report

        files = make_report(run_dir)
        lines.append(f"report: {files.markdown} and {files.html}")
        if files.patch is not None:
            lines.append(f"patch: {files.patch}")
    except KtxError as exc:
        lines.append(f"report: not written: {exc} (then: ktx report {run_dir})")
    return lines
