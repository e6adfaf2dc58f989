"""Replay a real-code run's timelines through the old and the new budget split, on CPU.

Session 9's real-code run (4x H200, ``ktx optimize --budget 50`` a kernel) found 12 wins in 6
kernels that its table never used: their paired final checks were skipped for want of time. This
script takes each kernel's recorded timeline (``optimize/round-*/log.jsonl``: when each search
evaluation ended and what it measured, each check's estimate and real cost; ``optimize.json``: the
phases before and between the searches) and plays it on a modelled clock under two policies:

* ``old``: the loop as session 9 ran it: a round's share is an equal part of what is left; the
  search keeps back at most 35% of the share for the round's check; a cut check is re-run with
  the rest of the budget only when a second or more is left;
* ``new``: :mod:`ktx.agent.budget`: the last round's final check of every shape is kept back from
  every round's search (MIN_PAIRS per shape at the recorded per-pair estimate x
  :data:`ktx.agent.budget.CHECK_ERROR`, plus the longest evaluation seen so far), and a cut check
  is re-run with whatever is left.

What the model keeps and what it cannot know (say so where the numbers are quoted):

* evaluations happen in the recorded order and take their recorded wall time (compile waits
  included); an evaluation that starts before the search's deadline completes, later ones are
  dropped; a round never finds a config it did not find in the recording;
* a check of ``n`` pairs takes the request's 0.2 s and ``n`` times the shape's recorded real seconds
  per pair (from ``paired_cost``; else its estimate x 1.19, the run's median error) and is killed
  (skipped) past ``max(1, left + grace, 1.5 x its estimate)``, as ktx.search.final does;
* no round the recording did not run is invented: a policy that leaves time over stops there.

Run: ``python benchmarks/realcode/budget_replay.py RUNS`` (a ``realcode-work`` folder, or the
``realcode_runs.tar.gz`` of ``results/session9_h200x4_2026-11-28/``). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import tarfile
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ktx.agent.budget import CHECK_ERROR
from ktx.measure.cost import PAIRED_REQUEST_S
from ktx.search.final import (
    CHECK_SLACK,
    FLOOR_PAIRS,
    LARGE_GAIN,
    MAX_RESERVE,
    MIN_PAIRS,
    WRITE_S,
    check_grace,
)
from ktx.search.paired import PAIRS

#: The real-code run's settings (scripts/gpu_calls.sh realcode): ``--budget 50``, the CLI's
#: six rounds, ``--min-gain 0.02``.
BUDGET_S = 50.0
ROUNDS = 6
MIN_GAIN = 0.02
#: A search gain at least this large that no check confirmed is a lost win (why.py's rule).
LOST_GAIN = 1.05
#: A check's real seconds over its estimate where a shape's real cost was never recorded
#: (session 9's median over 149 checks).
MEDIAN_ERROR = 1.19
MIN_ROUND_S = 10.0
#: Seconds a killed worker's restart costs where the run recorded none (session 9: 2-3 s).
RESTART_S = 2.0

_NEEDS = re.compile(r"needs about ([\d.]+) s with (\d+) pairs \(([\d.]+) s with (\d+)\)")


@dataclass(frozen=True)
class Eval:
    end_s: float  # seconds after the search's start when this evaluation ended
    took_s: float
    shape: str
    us: float | None  # the shape's metric time, None: failed


@dataclass(frozen=True)
class Round:
    index: int
    before_s: float  # planning, templating and preparing: round start to the search's start
    evals: tuple[Eval, ...]
    original_us: Mapping[str, float]
    cached_best: Mapping[str, float]  # a best no evaluation of the round measured (the cache, a warm start)
    status: str


@dataclass
class Kernel:
    name: str
    start_s: float  # load, backend, originals: the run's start to round 1's planning
    rounds: list[Round]
    est_pair: dict[str, float]  # per shape: the estimated seconds of one check pair
    real_pair: dict[str, float]  # per shape: the real seconds of one pair, where a check ran
    stop: str
    min_round_s: float = MIN_ROUND_S
    #: A candidate's measurement over all shapes (the run's own account), None: not recorded.
    candidates_s: float | None = None
    #: A killed worker's restart, paid by the next check (the run's recorded ``start_s``).
    restart_s: float = RESTART_S
    #: Whether the worker was killed (by a check past its timeout) and must restart first.
    dead: bool = False


@dataclass
class Outcome:
    rounds: int = 0
    search_s: float = 0.0
    lost: list[tuple[int, str, float, str]] = field(default_factory=list)
    checked: int = 0
    end_s: float = 0.0
    #: The table's value if every check confirmed its search gain: the best round's geomean over
    #: its shapes, a shape counted at its search gain where its check ran, else 1.0.
    dispatched: float = 1.0


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.strip():
                yield json.loads(line)


def _metric_us(event: Mapping[str, Any], metric: str) -> float | None:
    if event.get("status") != "ok":
        return None
    value = event.get("graph_us") if metric == "graph" else event.get("single_us")
    return float(value) if isinstance(value, int | float) and value > 0 else None


def load_kernel(folder: Path) -> Kernel | None:
    """One kernel's run folder (``<kernel>/optimize``) as the model needs it; None without rounds."""
    data = json.loads((folder / "optimize.json").read_text()) if (folder / "optimize.json").is_file() else {}
    phases = data.get("phases") or {}
    records = list(_lines(folder / "rounds.jsonl"))
    if not records:
        return None
    base = json.loads((folder / "baseline.json").read_text())
    metric = {s["measurement"]["shape"]: s["metric"] for s in base["shapes"]}
    start = sum(float(phases.get(k) or 0.0) for k in ("load_s", "backend_s", "originals_s", "ncu_s"))
    per_round = {int(r["round"]): r for r in phases.get("rounds") or ()}
    est: dict[str, list[float]] = {}
    real: dict[str, list[float]] = {}
    starts: list[float] = []
    rounds: list[Round] = []
    for rec in records:
        index = int(rec["round"])
        events = list(_lines(folder / f"round-{index:02d}" / "log.jsonl"))
        result = rec.get("result") or {}
        shapes = result.get("shapes") or ()
        original = {s["shape"]: float(s["original_us"]) for s in shapes if s.get("original_us")}
        ph = per_round.get(index) or {}
        before = float(ph.get("plan_s") or 0.0) + float(ph.get("template_s") or 0.0)
        budget_at = next((e["t"] for e in events if e.get("event") == "time_budget"), None)
        evals: list[Eval] = []
        last = budget_at
        search_end = None
        for e in events:
            kind = e.get("event")
            if kind == "measure" and budget_at is not None and search_end is None:
                evals.append(
                    Eval(
                        e["t"] - budget_at,
                        e["t"] - last,
                        e["shape"],
                        _metric_us(e, metric.get(e["shape"], "graph")),
                    )
                )
                last = e["t"]
            elif kind == "paired" and search_end is None:
                search_end = e["t"]
            if kind == "paired" and (m := _NEEDS.search(str(e.get("reason") or ""))):
                a, n, b, full = float(m[1]), int(m[2]), float(m[3]), int(m[4])
                if full > n:
                    est.setdefault(e["shape"], []).append((b - a) / (full - n))
            if kind == "paired_cost" and e.get("pairs"):
                pairs = float(e["pairs"])
                if float(e.get("start_s") or 0.0) > 0:
                    starts.append(float(e["start_s"]))
                spent = float(e["spent_s"]) - float(e.get("start_s") or 0.0) - PAIRED_REQUEST_S
                guess = float(e["expected_s"]) - float(e.get("start_s") or 0.0) - PAIRED_REQUEST_S
                real.setdefault(e["shape"], []).append(max(0.0, spent) / pairs)
                est.setdefault(e["shape"], []).append(max(0.0, guess) / pairs)
        spent = sum(float(e["spent_s"]) for e in events if e.get("event") == "paired_cost")
        last_end = evals[-1].end_s if evals else 0.0
        # what the recorded round spent besides planning, searching and checking (preparing the
        # round's originals, collecting, writing, opening a re-check): paid before the search here
        before += max(0.0, float(rec.get("wall_s") or 0.0) - before - last_end - spent)
        cached = {  # a best within 2% of none of the round's measurements came from elsewhere
            s["shape"]: float(s["best_us"])
            for s in shapes
            if s.get("best_us")
            and not any(
                ev.us and ev.shape == s["shape"] and abs(ev.us / float(s["best_us"]) - 1) < 0.02
                for ev in evals
            )
        }
        if rec.get("status") == "stopped" or result == {}:
            rounds.append(Round(index, before, (), original, {}, str(rec.get("status"))))
            continue
        rounds.append(Round(index, before, tuple(evals), original, cached, str(rec.get("status"))))
    note = next((n for n in data.get("notes") or () if "less than one round needs (about" in n), "")
    m = re.search(r"less than one round needs \(about ([\d.]+) s", note)
    c = re.search(r"candidate measurements per shape at ([\d.]+) s", note)
    return Kernel(
        folder.parent.name,
        start,
        rounds,
        {k: max(v) for k, v in est.items()},
        {k: statistics.median(v) for k, v in real.items()},
        str(data.get("stop_reason") or ""),
        float(m[1]) if m else MIN_ROUND_S,
        float(c[1]) if c else None,
        statistics.median(starts) if starts else RESTART_S,
    )


def _pair_est(k: Kernel, shape: str) -> float:
    if shape in k.est_pair:
        return k.est_pair[shape]
    return max(k.est_pair.values(), default=1.0)


def _pair_real(k: Kernel, shape: str) -> float:
    return k.real_pair.get(shape, MEDIAN_ERROR * _pair_est(k, shape))


#: The reserve's pairs per shape and error factor (:mod:`ktx.agent.budget`'s; settable to compare).
RESERVE_PAIRS = MIN_PAIRS
RESERVE_ERROR = CHECK_ERROR
#: The policies: session 9's loop, the reserve for every shape, the reserve for the shapes an
#: earlier round made faster (what ktx.agent.loop does).
POLICIES = ("old", "all", "new")


def new_reserve(k: Kernel, longest_eval_s: float, won: set[str] | None = None) -> float:
    """:func:`ktx.agent.budget.check_reserve` on the recorded estimates: MIN_PAIRS pairs per shape
    (both sides at the shape's largest recorded per-pair estimate) x CHECK_ERROR, the longest
    evaluation seen so far, and writing."""
    shapes = {s for r in k.rounds for s in r.original_us}
    if won is not None:
        shapes = won
    per = sum(RESERVE_ERROR * (PAIRED_REQUEST_S + RESERVE_PAIRS * _pair_est(k, s)) for s in shapes)
    return per + longest_eval_s + WRITE_S


def least_search_s(k: Kernel) -> float:
    """ktx.agent.loop.Optimizer.least_search_s: one candidate's measurement, else a second."""
    return k.candidates_s if k.candidates_s is not None else 1.0


def check(
    k: Kernel, now: float, deadline: float, limit: float, gains: Mapping[str, float], todo: Sequence[str]
) -> tuple[float, dict[str, str]]:
    """ktx.search.final.final_check on the model's clock: the shapes in ``todo`` by gain, largest
    first; returns the clock after them and each shape's status (measured or skipped)."""
    out: dict[str, str] = {}
    grace = check_grace(limit)
    for shape in sorted(todo, key=lambda s: -gains[s]):
        per = _pair_est(k, shape)
        floor = FLOOR_PAIRS if gains[shape] >= LARGE_GAIN else MIN_PAIRS
        start = k.restart_s if k.dead else 0.0  # a killed worker restarts first
        left = deadline - now - start
        n = min(PAIRS, int(max(0.0, left - PAIRED_REQUEST_S) / max(per, 1e-9)))
        if n < min(PAIRS, floor):
            out[shape] = "skipped"
            continue
        guess = per * n + PAIRED_REQUEST_S
        now += start
        k.dead = False
        timeout = max(1.0, left + grace, CHECK_SLACK * guess)
        took = PAIRED_REQUEST_S + n * _pair_real(k, shape)
        if took > timeout:
            now += timeout
            k.dead = True
            out[shape] = "skipped"  # killed: cut by the time limit
        else:
            now += took
            out[shape] = "measured"
    return now, out


def simulate(k: Kernel, policy: str, budget: float = BUDGET_S) -> Outcome:
    out = Outcome()
    k.dead = False
    now = k.start_s
    deadline = budget
    longest = 0.0
    won: set[str] = set()
    for i, r in enumerate(k.rounds):
        evidence = won if i > 0 and policy == "new" else None
        kept = 0.0 if policy == "old" else new_reserve(k, longest, evidence)
        if now >= deadline or deadline - now < k.min_round_s or deadline - kept - now < least_search_s(k):
            break
        now += r.before_s
        if not r.evals and not r.cached_best:
            out.rounds += 1
            continue
        left = max(0.0, deadline - now)
        rounds_left = max(2, ROUNDS - (i + 1) + 1)
        share = min(left, max(left / rounds_left, k.min_round_s))
        round_deadline = now + share
        # the search's own reserve (ktx.search.runner.search_until): the round's check at all
        # PAIRS, at most MAX_RESERVE of the share
        full = sum(PAIRED_REQUEST_S + PAIRS * _pair_est(k, s) for s in r.original_us) + WRITE_S
        search_deadline = min(round_deadline - min(MAX_RESERVE * share, full), deadline - kept)
        best: dict[str, float] = dict(r.cached_best)
        began = now
        for ev in r.evals:
            if began + ev.end_s - ev.took_s >= search_deadline:
                break  # started after the search's deadline: not run
            now = began + ev.end_s
            longest = max(longest, ev.took_s)
            if ev.us is not None:
                best[ev.shape] = min(best.get(ev.shape, ev.us), ev.us)
        out.search_s += now - began
        out.rounds += 1
        gains = {s: r.original_us[s] / best[s] for s in best if s in r.original_us}
        todo = [s for s, g in gains.items() if g >= 1.0 + MIN_GAIN]
        won |= set(todo)
        now, status = check(k, now, round_deadline, share, gains, todo)
        cut = [s for s in todo if status[s] == "skipped"]
        least = 1.0 if policy == "old" else 0.0
        if cut and deadline - now > least:
            now, again = check(k, now, deadline, deadline - now, gains, cut)
            status.update(again)
        out.checked += sum(1 for s in status.values() if s == "measured")
        kept = [gains[s] if status.get(s) == "measured" else 1.0 for s in r.original_us]
        if kept:
            out.dispatched = max(out.dispatched, math.exp(sum(math.log(g) for g in kept) / len(kept)))
        out.lost += [
            (r.index, s, gains[s], st)
            for s, st in status.items()
            if st != "measured" and gains[s] >= LOST_GAIN
        ]
    out.end_s = now
    return out


def kernels(path: Path) -> Iterator[Kernel]:
    if path.is_file():
        with tempfile.TemporaryDirectory() as tmp:
            with tarfile.open(path) as tar:
                tar.extractall(tmp, filter="data")
            yield from kernels(Path(tmp))
        return
    for folder in sorted(path.rglob("optimize.json")):
        k = load_kernel(folder.parent)
        if k is not None:
            yield k


def table(path: Path, budget: float = BUDGET_S) -> str:
    """The Markdown report: totals per policy, then the kernels where the policies differ."""
    found = list(kernels(path))
    res = {k.name: {p: simulate(k, p, budget) for p in POLICIES} for k in found}

    def total(p: str) -> str:
        outs = [r[p] for r in res.values()]
        value = math.exp(statistics.fmean([math.log(o.dispatched) for o in outs] or [0.0]))
        return (
            f"| {p} | {sum(len(o.lost) for o in outs)} | {sum(o.checked for o in outs)} | "
            f"{sum(o.rounds for o in outs)} | {sum(o.search_s for o in outs):.0f} | {value:.4f} |"
        )

    lines = [
        f"{len(found)} kernels, --budget {budget:g} s each, modelled from the recorded timelines.",
        "",
        f"| policy | lost wins (search >= {LOST_GAIN}x, check skipped) | checks measured | rounds | "
        "search s | geomean of the best round's checked gains |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        *(total(p) for p in POLICIES),
        "",
        "| kernel (where the policies differ) | rounds old/all/new | checked gains old/all/new "
        "| lost old | lost new |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, r in res.items():
        if len({(o.rounds, round(o.dispatched, 4), len(o.lost)) for o in r.values()}) == 1:
            continue
        lost = {p: "; ".join(f"r{x[0]} {x[1]} {x[2]:.2f}x" for x in o.lost) or "-" for p, o in r.items()}
        rounds = "/".join(str(r[p].rounds) for p in POLICIES)
        gains = "/".join(f"{r[p].dispatched:.3f}" for p in POLICIES)
        lines.append(f"| {name} | {rounds} | {gains} | {lost['old']} | {lost['new']} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", type=Path, help="a realcode-work folder or realcode_runs.tar.gz")
    ap.add_argument("--budget", type=float, default=BUDGET_S)
    args = ap.parse_args(argv)
    sys.stdout.write(table(args.runs, args.budget))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
