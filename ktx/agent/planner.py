"""The planner interface: what a planner is told, and what it gives back.

A planner is any object with ``name`` and ``plan(context) -> PlanOutcome``. Two ship with
ktx: :class:`ktx.agent.rules.RulesPlanner` (deterministic, no network, the default) and
:class:`ktx.agent.llm.LLMPlanner` (a language model behind an OpenAI-compatible endpoint, which
falls back to the rules when it cannot produce a valid plan). The context is plain data, the
same for both, so that a run's log holds exactly what each decision was based on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ktx.agent.analysis import Analysis
from ktx.agent.catalog import Catalog
from ktx.agent.plan import Plan, PlanCheck


@dataclass(frozen=True)
class Probe:
    """What one pass does to the kernel now (added alone to the best pipeline, not measured).

    ``rewritten`` counts the sites it changed; ``knobs`` are the knobs it would expose with their
    domains; ``skipped`` holds its reasons for the sites it left alone; ``error`` says why the
    pipeline could not be built at all (a conflict, a missing launch mapping).
    """

    name: str
    rewritten: int = 0
    knobs: tuple[tuple[str, tuple[int, ...]], ...] = ()
    skipped: tuple[str, ...] = ()
    error: str = ""

    @property
    def applies(self) -> bool:
        return not self.error and self.rewritten > 0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "rewritten": self.rewritten,
            "knobs": {k: list(v) for k, v in self.knobs},
            "skipped": list(self.skipped),
            "error": self.error,
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Probe:
        return Probe(
            str(data["name"]),
            int(data.get("rewritten", 0)),
            tuple((str(k), tuple(int(x) for x in v)) for k, v in dict(data.get("knobs", {})).items()),
            tuple(str(s) for s in data.get("skipped", [])),
            str(data.get("error", "")),
        )

    def text(self) -> str:
        if self.error:
            return f"{self.name}: cannot apply: {self.error}"
        if not self.rewritten:
            why = "; ".join(dict.fromkeys(self.skipped)) or "no sites"
            return f"{self.name}: no site to rewrite ({why})"
        knobs = ", ".join(f"{k} in {{{', '.join(map(str, v))}}}" for k, v in self.knobs) or "no knobs"
        return f"{self.name}: rewrites {self.rewritten} site(s), exposes {knobs}"


@dataclass(frozen=True)
class PassFailure:
    """A pass of a plan that did not apply (its preconditions failed at every site), and why."""

    name: str
    reasons: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "reasons": list(self.reasons)}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> PassFailure:
        return PassFailure(str(data["name"]), tuple(str(r) for r in data.get("reasons", [])))


@dataclass(frozen=True)
class RoundSummary:
    """An earlier round, as later planning rounds see it."""

    index: int
    pipeline: str
    planner: str
    rationale: str
    status: str  # improved | no-gain | template-failed | search-failed | stopped
    geomean_speedup: float | None = None  # best times of this round vs the original
    best_geomean_speedup: float | None = None  # best of all rounds after this one
    failures: tuple[PassFailure, ...] = ()
    knobs: tuple[tuple[str, tuple[int, ...]], ...] = ()
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "pipeline": self.pipeline,
            "planner": self.planner,
            "rationale": self.rationale,
            "status": self.status,
            "geomean_speedup": self.geomean_speedup,
            "best_geomean_speedup": self.best_geomean_speedup,
            "failures": [f.to_json() for f in self.failures],
            "knobs": {k: list(v) for k, v in self.knobs},
            "note": self.note,
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> RoundSummary:
        return RoundSummary(
            int(data["index"]),
            str(data["pipeline"]),
            str(data.get("planner", "")),
            str(data.get("rationale", "")),
            str(data["status"]),
            data.get("geomean_speedup"),
            data.get("best_geomean_speedup"),
            tuple(PassFailure.from_json(f) for f in data.get("failures", [])),
            tuple((str(k), tuple(int(x) for x in v)) for k, v in dict(data.get("knobs", {})).items()),
            str(data.get("note", "")),
        )

    def text(self) -> str:
        speed = "-" if self.geomean_speedup is None else f"{self.geomean_speedup:.3f}x"
        pipeline = self.pipeline or "(original)"
        line = f"round {self.index}: `{pipeline}` ({self.planner}) -> {self.status}, {speed}"
        for f in self.failures:
            line += f"; {f.name} did not apply: {'; '.join(f.reasons) or 'no sites'}"
        if self.note:
            line += f"; {self.note}"
        return line


@dataclass(frozen=True)
class PlanContext:
    """Everything a planner may base a decision on."""

    kernel: str
    round: int
    rounds_left: int
    analysis: Analysis
    catalog: Catalog
    current: Plan  # the best pipeline so far (empty: the original)
    history: tuple[RoundSummary, ...] = ()
    probes: tuple[Probe, ...] = ()
    check: PlanCheck | None = field(default=None, compare=False)

    def probe(self, name: str) -> Probe | None:
        return next((p for p in self.probes if p.name == name), None)

    def tried(self) -> frozenset[str]:
        """Passes that some earlier round added to the pipeline."""
        return frozenset(n for r in self.history for n in _names(r.pipeline))

    def to_json(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "round": self.round,
            "rounds_left": self.rounds_left,
            "analysis": self.analysis.to_json(),
            "current": self.current.to_json(),
            "history": [h.to_json() for h in self.history],
            "probes": [p.to_json() for p in self.probes],
        }


def _names(pipeline: str) -> list[str]:
    out: list[str] = []
    depth = 0
    name = ""
    for ch in pipeline:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif depth == 0:
            if ch == ",":
                out.append(name.strip())
                name = ""
            else:
                name += ch
    if name.strip():
        out.append(name.strip())
    return out


@dataclass(frozen=True)
class Usage:
    """Tokens spent on a planning step (zero for the rules planner)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0
    cache_hits: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.requests + other.requests,
            self.cache_hits + other.cache_hits,
        )

    def to_json(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "requests": self.requests,
            "cache_hits": self.cache_hits,
        }


@dataclass(frozen=True)
class Attempt:
    """One question to a model: where the answer came from and what was wrong with it."""

    number: int
    prompt_hash: str
    source: str  # http | cache | error
    ok: bool
    error: str = ""
    seconds: float = 0.0
    usage: Usage = Usage()

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "prompt_hash": self.prompt_hash,
            "source": self.source,
            "ok": self.ok,
            "error": self.error,
            "seconds": round(self.seconds, 3),
            "usage": self.usage.to_json(),
        }


@dataclass(frozen=True)
class PlanOutcome:
    """A plan with how it was reached: attempts (LLM), tokens, and a fallback reason if any.

    ``unanswered`` says why a model planner got no answer at all this round (HTTP errors,
    timeouts, a refused connection): then the plan is a stop, or, where the user allowed it, the
    fallback's plan. The command line reports it on the console and in its exit status, so a
    dead endpoint is never a quiet run of another planner."""

    plan: Plan
    attempts: tuple[Attempt, ...] = ()
    usage: Usage = Usage()
    fallback: str = ""
    unanswered: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "plan": self.plan.to_json(),
            "attempts": [a.to_json() for a in self.attempts],
            "usage": self.usage.to_json(),
            "fallback": self.fallback,
            "unanswered": self.unanswered,
        }


class Planner(Protocol):
    """Chooses the next round's pipeline. Implementations must never execute what they plan."""

    @property
    def name(self) -> str: ...

    def plan(self, context: PlanContext) -> PlanOutcome: ...


def checked(plan: Plan, context: PlanContext) -> Sequence[str]:
    """Problems the context's deeper check finds in ``plan`` (none without a check)."""
    return () if context.check is None else tuple(context.check(plan))
