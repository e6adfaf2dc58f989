"""Where a ``ktx optimize`` run's wall time went, phase by phase (``optimize.json``'s ``phases``).

Why (issue 23 item 6, issue 22): session 7's real-code runs were given ``--budget 20`` and stopped
on budget before round 1 after 27 s, although measuring the two originals took 0.4 s. Nothing in
the run folder said where the rest went, so the budget looked spent on measuring. A run now
records, typed and versioned, the seconds of each phase: loading the spec and its static checks,
opening the backend, measuring the originals, Nsight Compute, and per round the planning (probes
and planner), templating, searching and the paired final check (and its re-check), then the
report. Compiles run in CPU processes beside the measuring, so their seconds overlap the phases;
they are counted apart, per compiler (NVRTC, nvcc, nvcc after NVRTC failed, the disk cache).

The summary prints :meth:`PhaseTimings.line`, one line.

>>> p = PhaseTimings(load_s=1.0, backend_s=2.0, originals_s=0.5, ncu_s=20.0, report_s=0.1, wall_s=24.0)
>>> p.line()
'time 24.0 s: load 1.0 s, backend 2.0 s, originals 0.5 s, ncu 20.0 s, report 0.1 s, other 0.4 s'
>>> PhaseTimings.from_json(p.to_json()) == p
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ktx.ir.errors import KtxError, Location

#: The tag ``optimize.json``'s ``phases`` object carries (its schema version).
PHASES_SCHEMA = "ktx.phases/1"


def _f(value: Any) -> float:
    return float(value or 0.0)


@dataclass(frozen=True)
class CompileCount:
    """The compiles of one kind a run asked for: how many and their seconds (in the compile
    processes, so they overlap the measuring). ``kind``: ``nvrtc``, ``nvcc``, ``nvcc after
    NVRTC ...`` (NVRTC tried first and failed: its seconds are included), ``cached`` (the disk
    cache answered) or ``failed``."""

    kind: str
    count: int
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "count": self.count, "seconds": round(self.seconds, 3)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CompileCount:
        return cls(str(data["kind"]), int(data["count"]), _f(data.get("seconds")))


@dataclass(frozen=True)
class RoundPhases:
    """One round's seconds: planning (the probes of every pass and the planner), templating,
    searching (with the round's outputs), the paired final check, and its re-check with the
    budget left (0 where none ran); ``evaluations``: what the search sent to the backend."""

    round: int
    plan_s: float = 0.0
    template_s: float = 0.0
    search_s: float = 0.0
    check_s: float = 0.0
    recheck_s: float = 0.0
    evaluations: int = 0

    @property
    def total_s(self) -> float:
        return self.plan_s + self.template_s + self.search_s + self.check_s + self.recheck_s

    def to_json(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "plan_s": round(self.plan_s, 3),
            "template_s": round(self.template_s, 3),
            "search_s": round(self.search_s, 3),
            "check_s": round(self.check_s, 3),
            "recheck_s": round(self.recheck_s, 3),
            "evaluations": self.evaluations,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RoundPhases:
        return cls(
            int(data["round"]),
            _f(data.get("plan_s")),
            _f(data.get("template_s")),
            _f(data.get("search_s")),
            _f(data.get("check_s")),
            _f(data.get("recheck_s")),
            int(data.get("evaluations") or 0),
        )


@dataclass(frozen=True)
class PhaseTimings:
    """A run's wall time by phase. ``wall_s`` is the whole command from before the spec was
    loaded; what no phase claims is :attr:`other_s`."""

    load_s: float = 0.0
    backend_s: float = 0.0
    originals_s: float = 0.0
    ncu_s: float = 0.0
    rounds: tuple[RoundPhases, ...] = ()
    report_s: float = 0.0
    wall_s: float = 0.0
    compiles: tuple[CompileCount, ...] = field(default=())

    @property
    def claimed_s(self) -> float:
        fixed = self.load_s + self.backend_s + self.originals_s + self.ncu_s + self.report_s
        return fixed + sum(r.total_s for r in self.rounds)

    @property
    def other_s(self) -> float:
        return max(0.0, self.wall_s - self.claimed_s)

    def line(self) -> str:
        """One line for the summary: the fixed phases, the rounds' phases summed, the compiles."""
        parts = [f"load {self.load_s:.1f} s", f"backend {self.backend_s:.1f} s",
                 f"originals {self.originals_s:.1f} s"]  # fmt: skip
        if self.ncu_s:
            parts.append(f"ncu {self.ncu_s:.1f} s")
        if self.rounds:
            rs = self.rounds
            evals = sum(r.evaluations for r in rs)
            search = sum(r.search_s for r in rs)
            each = f", {search / evals:.2f} s an evaluation" if evals else ""
            parts.append(
                f"{len(rs)} round(s): plan {sum(r.plan_s for r in rs):.1f} s, "
                f"template {sum(r.template_s for r in rs):.1f} s, search {search:.1f} s "
                f"({evals} evaluations{each}), final check {sum(r.check_s + r.recheck_s for r in rs):.1f} s"
            )
        parts.append(f"report {self.report_s:.1f} s")
        parts.append(f"other {self.other_s:.1f} s")
        text = f"time {self.wall_s:.1f} s: " + ", ".join(parts)
        if self.compiles:
            made = "; ".join(f"{c.count} {c.kind} {c.seconds:.1f} s" for c in self.compiles)
            text += f"; compiles (beside the measuring): {made}"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": PHASES_SCHEMA,
            "wall_s": round(self.wall_s, 3),
            "load_s": round(self.load_s, 3),
            "backend_s": round(self.backend_s, 3),
            "originals_s": round(self.originals_s, 3),
            "ncu_s": round(self.ncu_s, 3),
            "rounds": [r.to_json() for r in self.rounds],
            "report_s": round(self.report_s, 3),
            "other_s": round(self.other_s, 3),
            "compiles": [c.to_json() for c in self.compiles],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: Location | None = None) -> PhaseTimings:
        found = data.get("schema")
        if found != PHASES_SCHEMA:
            raise KtxError(f"phases of schema {found!r} are not what this ktx reads", where,
                           f"it reads {PHASES_SCHEMA}")  # fmt: skip
        try:
            return cls(
                load_s=_f(data.get("load_s")),
                backend_s=_f(data.get("backend_s")),
                originals_s=_f(data.get("originals_s")),
                ncu_s=_f(data.get("ncu_s")),
                rounds=tuple(RoundPhases.from_json(r) for r in data.get("rounds") or ()),
                report_s=_f(data.get("report_s")),
                wall_s=_f(data.get("wall_s")),
                compiles=tuple(CompileCount.from_json(c) for c in data.get("compiles") or ()),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise KtxError(f"malformed phases ({exc})", where, "run ktx optimize again") from None


def compile_counts(results: Sequence[Mapping[str, Any]]) -> tuple[CompileCount, ...]:
    """Compile results (``CompileResult.to_dict()``) counted by kind, in a fixed order."""
    counts: dict[str, tuple[int, float]] = {}
    for r in results:
        if not r.get("ok"):
            kind = "failed"
        elif r.get("cached"):
            kind = "cached"
        elif r.get("fallback"):
            kind = f"nvcc after {r['fallback']}"
        else:
            kind = str(r.get("compiler") or "?").split(" ")[0]
        n, s = counts.get(kind, (0, 0.0))
        counts[kind] = (n + 1, s + _f(r.get("seconds")))
    return tuple(CompileCount(k, n, s) for k, (n, s) in sorted(counts.items()))
