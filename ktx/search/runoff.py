"""The runoff: a shape's few best configs re-measured paired against the search's best.

A search measures each config once, at its own moment of the worker process, and keeps the one
whose single measurement was fastest. Between close configs that choice is partly the moment's:
on kernels/rmsnorm at tokens=1, d=8192 (H200, session 10) the search kept ``BLOCK_Y=8,PACKS=4``
(1.085x over the original in a paired harness) although it had also measured
``BLOCK_Y=16,PACKS=2``, 1.120x in the same harness. Searching longer does not fix that (issue 23
item 6: at a narrow optimum no sampler beats random), measuring the few best again under the same
conditions does.

So before the final check, each shape's best measured configs within :data:`WINDOW` of the
search's best (at most :data:`TOP`, the search's best among them) are timed against that best,
alternately (A B A B ..., :data:`PAIRS` pairs, one request each to one worker, timing only:
every entrant was verified when the search measured it). Each challenger gets the geometric mean
of its pairs' ratios (the search's best's time over the challenger's) and its 95% interval; the
challenger with the largest ratio, where it is :data:`SWITCH` or more above 1, is dispatched
instead (ties stay with the search's best), and the final check then pairs *that* config with
the original, with fresh pairs (the runoff's pairs choose, they do not also quote the speedup,
which would carry the choice's luck into the number).

The runoff also says how narrow the optimum is, from paired numbers rather than the search's
single ones: how many entrants lie within :data:`NEAR` of the winner (:meth:`Runoff.sentence`).

The search may also never have measured the config that wins: at rmsnorm's tokens=1, d=8192 round
1 measured 5 of its 28 configs (the time share of a 100 s budget) and ``BLOCK_Y=16,PACKS=2`` was
not among them. So the runoff first measures (verified, as the search would) up to
:data:`DIAGONAL` unmeasured *diagonal* neighbours of the search's best: two power-of-two knobs
traded at the same product, one doubled and one halved (``BLOCK_Y=8,PACKS=4`` ->
``BLOCK_Y=16,PACKS=2``; threads against work a thread, the trade most launch knobs make). They
enter the field by their measured time like any config the search measured.

Cheap: a handful of timings per entrant (0.2-0.4 s a pair for the norms' few-µs kernels), and it
runs only where the time left covers it after the final checks' own estimate.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ktx.measure.cost import PAIRED_REQUEST_S
from ktx.measure.gpu import Options
from ktx.measure.types import config_key
from ktx.search.evaluate import Evaluator
from ktx.search.final import Shortlist, pair_estimate
from ktx.search.paired import FAILED, IDENTICAL, MEASURED, SKIPPED, Interval, from_pairs, same_code
from ktx.search.space import Space
from ktx.spec import ShapePoint

#: The most configs a runoff takes (the search's best included).
TOP = 3

#: A config whose search time is more than this share slower than the search's best stays out.
WINDOW = 0.15

#: Pairs each challenger is timed in against the search's best: the runoff chooses by the
#: estimate (the final check, with its own pairs, decides whether the choice beats the original),
#: so two pairs, the fewest that give one, keep it to a few timings an entrant.
PAIRS = 2

#: Entrants within this share of the winner (by the paired ratios) are its company.
NEAR = 0.02

#: The most unmeasured diagonal neighbours of the search's best measured before the runoff.
DIAGONAL = 2

#: A challenger replaces the search's best only when its paired estimate is at least this much
#: faster: between configs that time alike the choice would be a coin toss on two pairs, and the
#: search's best stays (the final check decides it against the original either way).
SWITCH = 0.01


class Pace:
    """The longest request (a diagonal measurement, a heat) the runoffs of a finalize have made,
    in wall seconds: each next step, and each final check still to come, is priced at least that
    (an estimate counted from launches missed a worker's fixed cost per request and let runoffs
    eat the final checks' time; the replay's 2 s a request in tests/search/test_workers.py)."""

    def __init__(self) -> None:
        self.request_s = 0.0

    def note(self, started: float) -> None:
        self.request_s = max(self.request_s, time.monotonic() - started)

    def at_least(self, seconds: float) -> float:
        return max(seconds, self.request_s)


@dataclass(frozen=True)
class Entrant:
    """A config the search measured: its objective time there and its per-launch time (the
    single-launch median, for the cost estimate; None where unknown)."""

    config: Mapping[str, int]
    search_us: float
    launch_us: float | None = None


@dataclass(frozen=True)
class Heat:
    """One challenger against the search's best: ``interval`` is best's time / challenger's
    (above 1: the challenger is faster), None unless ``status`` is measured."""

    config: Mapping[str, int]
    search_us: float
    status: str
    interval: Interval | None = None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": dict(self.config),
            "search_us": self.search_us,
            "status": self.status,
            "interval": None if self.interval is None else self.interval.to_dict(),
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Heat:
        iv = data.get("interval")
        return cls(
            {str(k): int(v) for k, v in dict(data["config"]).items()},
            float(data["search_us"]),
            str(data["status"]),
            None if not isinstance(iv, Mapping) else Interval.from_dict(iv),
            str(data.get("reason", "")),
        )


@dataclass(frozen=True)
class Runoff:
    """A shape's runoff: the search's best (``incumbent``), each challenger's heat, the config
    dispatched (``chosen``), and ``skipped`` (why no heat ran, where none did)."""

    shape: str
    metric: str
    incumbent: Mapping[str, int]
    incumbent_us: float
    heats: tuple[Heat, ...] = field(default=())
    chosen: Mapping[str, int] | None = None
    skipped: str = ""
    #: The diagonal neighbours the runoff measured itself (config key -> the measurement's
    #: dict): the study has no trial of them, so the winner's measurement is kept here.
    measured: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def winner(self) -> Mapping[str, int]:
        return self.incumbent if self.chosen is None else self.chosen

    @property
    def changed(self) -> bool:
        return self.chosen is not None and config_key(self.chosen) != config_key(self.incumbent)

    @property
    def gain_over_incumbent(self) -> float:
        """The winner's paired ratio over the search's best (1.0 where the best stays)."""
        if not self.changed:
            return 1.0
        heat = next(h for h in self.heats if config_key(h.config) == config_key(self.winner))
        return 1.0 if heat.interval is None else heat.interval.estimate

    def company(self, near: float = NEAR) -> tuple[int, int]:
        """(entrants within ``near`` of the winner, the winner included; entrants measured)."""
        measured = [h for h in self.heats if h.status == MEASURED and h.interval is not None]
        top = self.gain_over_incumbent
        ratios = [1.0] + [h.interval.estimate for h in measured if h.interval is not None]
        return sum(1 for r in ratios if r >= top / (1.0 + near)), len(ratios)

    def sentence(self) -> str:
        """What the runoff found, for the summary's notes.

        >>> iv = Interval(1.032, 1.030, 1.034, 3)
        >>> r = Runoff("t=1", "graph", {"Y": 8}, 2.48, (Heat({"Y": 16}, 2.52, MEASURED, iv),
        ...     Heat({"Y": 32}, 2.55, MEASURED, Interval(0.95, 0.94, 0.96, 3))), {"Y": 16})
        >>> print(r.sentence().replace("; ", ";\\n").replace(": Y=16", ":\\nY=16"))
        t=1: runoff of the 3 best configs, each paired against the search's best (Y=8, 2.480 µs):
        Y=16 1.032 [1.030, 1.034], Y=32 0.950 [0.940, 0.960];
        dispatched Y=16 (1.032x faster than the search's best);
        1 of 3 within 2% of it: a narrow optimum
        """
        if self.skipped:
            return f"{self.shape}: no runoff ({self.skipped})"
        cells = ", ".join(
            f"{_cfg(h.config)} {h.interval.text() if h.interval is not None else h.status}"
            for h in self.heats
        )
        head = (
            f"{self.shape}: runoff of the {len(self.heats) + 1} best configs, each paired against the "
            f"search's best ({_cfg(self.incumbent)}, {self.incumbent_us:.3f} µs): {cells}; "
        )
        if self.changed:
            gain = self.gain_over_incumbent
            pick = f"dispatched {_cfg(self.winner)} ({gain:.3f}x faster than the search's best)"
        else:
            pick = "the search's best stays"
        near, total = self.company()
        breadth = "a narrow optimum" if near <= 1 else f"{near} configs share the optimum"
        return f"{head}{pick}; {near} of {total} within {NEAR:.0%} of it: {breadth}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "shape": self.shape,
            "metric": self.metric,
            "incumbent": dict(self.incumbent),
            "incumbent_us": self.incumbent_us,
            "heats": [h.to_dict() for h in self.heats],
            "chosen": None if self.chosen is None else dict(self.chosen),
            "skipped": self.skipped,
            "measured": {k: dict(v) for k, v in self.measured.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Runoff:
        chosen = data.get("chosen")
        return cls(
            str(data["shape"]),
            str(data["metric"]),
            {str(k): int(v) for k, v in dict(data["incumbent"]).items()},
            float(data["incumbent_us"]),
            tuple(Heat.from_dict(h) for h in data.get("heats", ())),
            None if chosen is None else {str(k): int(v) for k, v in dict(chosen).items()},
            str(data.get("skipped", "")),
            {str(k): dict(v) for k, v in dict(data.get("measured") or {}).items()},
        )


def _cfg(config: Mapping[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in config.items()) or "original"


def entrants(
    ranked: Sequence[Entrant], top: int = TOP, window: float = WINDOW, lead: Mapping[str, int] | None = None
) -> list[Entrant]:
    """The runoff's field from the search's measured configs, fastest first: at most ``top``
    distinct configs within ``window`` of the fastest; ``lead`` (the search's best, where a
    diagonal neighbour measured faster) goes first all the same: the heats are against it.

    >>> e = [Entrant({"A": 1}, 2.0), Entrant({"A": 2}, 2.1), Entrant({"A": 1}, 2.2), Entrant({"A": 3}, 2.5)]
    >>> [dict(x.config) for x in entrants(e)], [dict(x.config) for x in entrants(e, lead={"A": 2})]
    ([{'A': 1}, {'A': 2}], [{'A': 2}, {'A': 1}])
    """
    ordered = sorted(ranked, key=lambda e: e.search_us)
    out: list[Entrant] = []
    seen: set[str] = set()
    for e in ordered:
        key = config_key(e.config)
        if key in seen or e.search_us > ordered[0].search_us * (1.0 + window):
            continue
        seen.add(key)
        out.append(e)
        if len(out) >= top:
            break
    if lead is not None:
        want = config_key(lead)
        first = next((e for e in ordered if config_key(e.config) == want), None)
        if first is not None:
            out = [first, *[e for e in out if config_key(e.config) != want][: top - 1]]
    return out


def diagonal(config: Mapping[str, int], space: Space, limit: int = DIAGONAL) -> list[dict[str, int]]:
    """Up to ``limit`` configs that trade two of ``config``'s power-of-two knobs (both above 1
    or the one halved at least 2) at the same product: one doubled, one halved, both values in
    their domains, the rest unchanged. Knobs in the space's order; 0 (a knob's "as written")
    takes no part.

    >>> from ktx.search.space import Knob, Space
    >>> sp = Space((Knob("BLOCK_Y", (0, 1, 2, 4, 8, 16, 32), 0), Knob("PACKS", (0, 1, 2, 4), 0)), ())
    >>> diagonal({"BLOCK_Y": 8, "PACKS": 4}, sp), diagonal({"BLOCK_Y": 8, "PACKS": 2}, sp)
    ([{'BLOCK_Y': 16, 'PACKS': 2}], [{'BLOCK_Y': 16, 'PACKS': 1}, {'BLOCK_Y': 4, 'PACKS': 4}])
    """

    def pow2(v: int) -> bool:
        return v > 0 and v & (v - 1) == 0

    knobs = [k for k in space.knobs if pow2(int(config.get(k.name, k.default)))]
    out: list[dict[str, int]] = []
    for up in knobs:
        for down in knobs:
            if up.name == down.name:
                continue
            a, b = int(config.get(up.name, up.default)), int(config.get(down.name, down.default))
            if 2 * a in up.values and b >= 2 and b // 2 in down.values:
                out.append({**dict(config), up.name: 2 * a, down.name: b // 2})
    return out[:limit]


def fill_diagonal(
    evaluator: Evaluator,
    point: ShapePoint,
    metric: str,
    ranked: Sequence[Entrant],
    deadline: float | None = None,
    each_s: float = 1.0,
    after_s: float = 0.0,
    pace: Pace | None = None,
) -> tuple[list[Entrant], dict[str, dict[str, Any]]]:
    """``ranked`` (the search's measured configs) with the best's unmeasured diagonal neighbours
    (:func:`diagonal`) measured and added, and their measurements by config key. Each is
    measured only where ``each_s`` (a verified measurement's expected seconds) and ``after_s``
    still fit before ``deadline``. A run replay (``has_measurement``) measures only the neighbours
    its recorded run measured (the recording answers them); a backend that cannot pair, none."""
    backend = evaluator.backend
    recorded = getattr(backend, "has_measurement", None)  # a run replay: what its run measured
    if not ranked or not (callable(recorded) or callable(getattr(backend, "measure_paired", None))):
        return list(ranked), {}
    best = min(ranked, key=lambda e: e.search_us)
    seen = {config_key(e.config) for e in ranked}
    out = list(ranked)
    found: dict[str, dict[str, Any]] = {}
    for config in diagonal(evaluator.space.normalize(dict(best.config)), evaluator.space):
        key = config_key(config)
        if key in seen or (callable(recorded) and not recorded(point.name, config)):
            continue
        seen.add(key)
        pace = pace or Pace()
        if deadline is not None and deadline - time.monotonic() - after_s < pace.at_least(each_s):
            break
        began = time.monotonic()
        ev = evaluator.evaluate(config, point, deadline=deadline)
        pace.note(began)
        us = ev.time(metric)
        if ev.measurement is None or us is None:
            continue
        m = ev.measurement
        launch = m.single_us if m.single_us else m.graph_us
        out.append(Entrant(dict(ev.config), us, launch))
        found[config_key(ev.config)] = m.to_dict()
    return out, found


#: The most of a search's time limit kept for the runoffs, over the final checks' own reserve:
#: a runoff decides between configs the search already measured, so it is worth more than the
#: search's last few evaluations, yet never more than this share of them.
RUNOFF_SHARE = 0.15


def reserve_s(pair_s: float | None) -> float:
    """Seconds to keep free after a shape's search for its runoff, from one check pair's
    seconds at the shape (:func:`ktx.search.final.pair_estimate`; 0 where unknown): the heats
    of :data:`TOP` - 1 challengers and :data:`DIAGONAL` verified measurements, each priced at
    two timings.

    >>> round(reserve_s(0.3), 2), reserve_s(None)
    (2.2, 0.0)
    """
    if not pair_s:
        return 0.0
    return (TOP - 1) * (PAIRED_REQUEST_S + PAIRS * pair_s) + DIAGONAL * pair_s


def with_runoffs(checks_s: float, runoffs_s: float, time_limit: float) -> float:
    """The seconds a search keeps free: the final checks' reserve (already capped by
    :data:`ktx.search.final.MAX_RESERVE`) plus the runoffs', the latter at most
    :data:`RUNOFF_SHARE` of the limit. Added on top of the capped checks, not under one cap:
    under a single cap a short round's checks left the runoffs nothing (session 11, the norms
    at 76 s: "no runoff (it needs about 2.3 s, 0.7 s were left)" in every round).

    >>> with_runoffs(8.75, 6.6, 25.0), with_runoffs(2.0, 1.0, 25.0), with_runoffs(2.0, 0.0, 25.0)
    (12.5, 3.0, 2.0)
    """
    return checks_s + min(runoffs_s, RUNOFF_SHARE * time_limit)


def cost_s(
    field_: Sequence[Entrant], point: ShapePoint, set_bytes: int | None, backend: object, options: Options,
    pairs: int = PAIRS,
) -> float:  # fmt: skip
    """Seconds a runoff of ``field_`` is expected to take: one paired request per challenger."""
    best = field_[0]
    total = 0.0
    for e in field_[1:]:
        item = Shortlist(point, "graph", None, None, best.launch_us, e.launch_us, set_bytes)
        pair = pair_estimate(item, backend, options)
        total += PAIRED_REQUEST_S + pairs * (pair if pair is not None else 1.0)
    return total


def run_runoff(
    evaluator: Evaluator,
    point: ShapePoint,
    metric: str,
    field_: Sequence[Entrant],
    deadline: float | None = None,
    set_bytes: int | None = None,
    after_s: float = 0.0,
    pairs: int = PAIRS,
    log: Callable[[Runoff], None] | None = None,
    pace: Pace | None = None,
) -> Runoff | None:
    """Time each challenger of ``field_`` (the search's best first) against the search's best
    and choose; None where there is no challenger. ``after_s``: seconds that must stay free
    before ``deadline`` for what follows (the final checks): the runoff runs only where its own
    estimate fits in front of them, else it is recorded as skipped.

    A replay of a recorded run re-measures nothing: it takes the config the recorded run checked
    (``has_check`` of the replay backend), the search's best where that was it."""
    if len(field_) < 2:
        return None
    backend = evaluator.backend
    incumbent = field_[0]
    base = Runoff(point.name, metric, dict(incumbent.config), incumbent.search_us)
    has_check = getattr(backend, "has_check", None)
    if callable(has_check):
        pick = next((e for e in field_ if has_check(point.name, dict(e.config))), incumbent)
        replayed = tuple(Heat(dict(e.config), e.search_us, SKIPPED, reason="replay") for e in field_[1:])
        if pick is incumbent:  # as the recorded run went before runoffs existed: nothing to say
            return None
        out = replace(
            base, heats=replayed, chosen=dict(pick.config), skipped="a replay: the recorded run's choice"
        )
        if log is not None:
            log(out)
        return out
    paired = getattr(backend, "measure_paired", None)
    if not callable(paired) or getattr(backend, "recorded_check", None) is not None:
        return None
    found = getattr(backend, "options", None)
    options = found if isinstance(found, Options) else Options()
    pace = pace or Pace()
    need = cost_s(field_, point, set_bytes, backend, options, pairs)
    need = max(need, (len(field_) - 1) * pace.request_s)
    if deadline is not None and deadline - time.monotonic() - after_s < need:
        left = deadline - time.monotonic() - after_s
        why = f"it needs about {need:.1f} s, {max(0.0, left):.1f} s were left before the final checks"
        out = replace(base, skipped=why)
        if log is not None:
            log(out)
        return out
    space = evaluator.space
    first = evaluator.tunable.candidate(space.normalize(dict(incumbent.config)))
    heats: list[Heat] = []
    kept: list[Any] = [first]
    for e in field_[1:]:
        cand = evaluator.tunable.candidate(space.normalize(dict(e.config)))
        if any(same_code(k, cand, evaluator.spec, point) for k in kept):
            heats.append(Heat(dict(e.config), e.search_us, IDENTICAL, reason="an earlier entrant's code"))
            continue
        kept.append(cand)
        if deadline is not None and deadline - time.monotonic() - after_s < pace.request_s:
            heats.append(Heat(dict(e.config), e.search_us, SKIPPED, reason="the time limit"))
            continue
        began = time.monotonic()
        with evaluator._gpu:  # the backend measures one thing at a time
            measured = list(paired(first, cand, point, pairs, None))
        pace.note(began)
        check = from_pairs(point.name, metric, dict(e.config), measured)
        if check.status != MEASURED or check.interval is None:
            heats.append(Heat(dict(e.config), e.search_us, FAILED, reason=check.reason[:200]))
            continue
        heats.append(Heat(dict(e.config), e.search_us, MEASURED, check.interval))
    faster = [h for h in heats if h.interval is not None and h.interval.estimate >= 1.0 + SWITCH]
    chosen = max(faster, key=lambda h: h.interval.estimate if h.interval else 0.0) if faster else None
    winner = incumbent.config if chosen is None else chosen.config
    out = replace(base, heats=tuple(heats), chosen=dict(winner))
    if log is not None:
        log(out)
    return out
