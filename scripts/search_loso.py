"""Leave-one-kernel-out check of the cost model's settings over exhaustive recordings.

    .venv/bin/python scripts/search_loso.py RECORDING [RECORDING ...] [--caps none,0.75,0.5,0.25]
        [--startups 6]
        [--seeds 20] [--trials 50] [--json OUT.json]

A setting of the cost model (:data:`ktx.search.costmodel.CAP`, the quantile at which the fit caps
log time) chosen on the very spaces it is then scored on proves nothing about a kernel it has not
seen. Here each kernel's recording is held out in turn: the setting is chosen on the other
kernels' spaces alone (the smallest mean of log2(median evaluations to 0.98 / the goal's mark)),
then scored on the held-out one. Every space's row gives the uncapped model ("before"), the
setting its fold chose, and that setting's score ("after"), 20 seeds each.

This replays :func:`ktx.search.costmodel.choose` itself over each shape's recorded configs, one
shape at a time, without Optuna or the warm start from other shapes (``scripts/search_replay.py``
runs ``ktx tune``'s whole path; use it for the final numbers of the setting chosen here). A
recorded config that failed is a failed evaluation, as in a tune. ``--resources`` adds what ptxas
said of each config (registers, occupancy) to the model's features: what compiling before
choosing would buy.

Exit status: 0, or 2 with one line for a recording that cannot be read.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a file from anywhere: the repository's ktx, not an installed one
    sys.path.insert(0, str(ROOT))

from ktx.ir.errors import KtxError, Location  # noqa: E402

from ktx.measure.types import Measurement, config_key  # noqa: E402
from ktx.search.compare import optimum  # noqa: E402
from ktx.search.costmodel import STARTUP, Pool, choose, quadratic  # noqa: E402
from ktx.search.evaluate import objective_time  # noqa: E402
from ktx.search.recording import Recording  # noqa: E402
from ktx.search.tunebench import evaluations_to_fraction, fraction_at, goal_mark, quartiles  # noqa: E402
from ktx.spec import ShapePoint  # noqa: E402

#: Session 10's cost model (no cap, 6 spread picks before the first fit): the "before" column.
BEFORE: tuple[float | None, int] = (None, 6)


@dataclass(frozen=True)
class Problem:
    """One shape of one recording: the pool the model chooses from and each config's time."""

    kernel: str
    shape: str
    pool: Pool
    times: tuple[float | None, ...]  # per pool config: the objective time, None where it failed
    optimum_us: float
    feasible: int

    @property
    def mark(self) -> int:
        return goal_mark(self.feasible)


def load(path: Path) -> tuple[dict[str, Any], Recording]:
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        data = json.loads(raw)
    except (OSError, ValueError) as exc:
        raise KtxError(f"cannot read the recording: {exc}", Location(str(path))) from None
    if not isinstance(data, dict):
        raise KtxError("not a ktx recording", Location(str(path)))
    return data, Recording.from_dict(data, str(path))


def with_resources(pool: Pool, tuned: Sequence[Measurement]) -> Pool:
    """``pool`` with two more features per config: log2 of its registers per thread and its
    occupancy, as ptxas and the occupancy calculator gave them when it was recorded. A tune knows
    them only after compiling a config; this asks what the model would gain from compiling first.
    """
    by_key = {config_key(m.config): m for m in tuned}
    extra = []
    for key in pool.keys:
        r = by_key[key].resources
        extra.append([math.log2(max(1, r.registers)), r.occupancy] if r is not None else [0.0, 0.0])
    e = np.array(extra, dtype=float)
    span = e.max(axis=0) - e.min(axis=0)
    e = (e - e.min(axis=0)) / np.where(span > 0, span, 1.0)
    raw = np.hstack([pool.raw, e])
    return Pool(pool.configs, pool.keys, raw, quadratic(raw))


def problems(path: Path, resources: bool = False) -> list[Problem]:
    """Every complete shape of the recording (``stats.exhaustive_shapes``, else every shape with
    the original's measurement); ``resources``: see :func:`with_resources`."""
    data, recording = load(path)
    stats = data.get("stats")
    complete = stats.get("exhaustive_shapes") if isinstance(stats, dict) else None
    shapes = [str(s) for s in complete] if isinstance(complete, list) else list(recording.shapes)
    launches = recording.launches()
    out = []
    for shape in shapes:
        if recording.get(shape, {}) is None:
            continue
        best = optimum(recording, shape)
        tuned = [m for m in recording.at(shape) if m.config]
        env = ShapePoint.from_name(shape).as_dict()
        pool = Pool.build(
            recording.space,
            [dict(m.config) for m in tuned],
            env,
            lambda c, s=shape: launches.get((s, config_key(c))),
        )
        if resources:
            pool = with_resources(pool, tuned)
        by_key = {config_key(m.config): m for m in tuned}
        kept = (by_key[k] for k in pool.keys)
        times = tuple(objective_time(m, best.metric) if m.ok else None for m in kept)
        out.append(Problem(recording.kernel, shape, pool, times, best.time_us, best.feasible))
    return out


def curve(
    problem: Problem, seed: int, trials: int, cap: float | None, startup: int = STARTUP
) -> list[float | None]:
    """One search of ``trials`` evaluations: each evaluation's time (None: a failure)."""
    measured: dict[str, float] = {}
    excluded: set[str] = set()
    out: list[float | None] = []
    for n in range(trials):
        rng = np.random.default_rng((seed, n))
        pick = choose(problem.pool, measured, excluded, rng, startup=startup, cap=cap)
        if pick is None:
            break
        key, time = problem.pool.keys[pick], problem.times[pick]
        if time is None or time <= 0:
            excluded.add(key)
        else:
            measured[key] = math.log(time)
        out.append(time)
    return out


@dataclass(frozen=True)
class Score:
    evals: tuple[int | None, ...]
    at_mark: tuple[float, ...]

    @property
    def median(self) -> float:
        return quartiles(self.evals)[1]


def score(problem: Problem, cap: float | None, seeds: int, trials: int, startup: int = STARTUP) -> Score:
    evals, marks = [], []
    for seed in range(seeds):
        c = curve(problem, seed, trials, cap, startup)
        evals.append(evaluations_to_fraction(c, problem.optimum_us, 0.98))
        marks.append(fraction_at(c, problem.optimum_us, problem.mark))
    return Score(tuple(evals), tuple(marks))


def loss(scores: Sequence[tuple[Problem, Score]], trials: int) -> float:
    """Mean over shapes of log2(median evaluations / mark); a median past the budget counts as
    one more than the budget (the search's only knowledge of "never").

    >>> loss([], 50)
    0.0
    """
    if not scores:
        return 0.0
    return statistics.fmean(math.log2(min(s.median, trials + 1) / p.mark) for p, s in scores)


def parse_cap(text: str) -> float | None:
    return None if text == "none" else float(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--caps", default="none,0.75,0.5,0.25")
    ap.add_argument("--startups", default=str(STARTUP), help="spread picks before the first fit")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument(
        "--resources", action="store_true", help="add each config's recorded registers and occupancy"
    )
    args = ap.parse_args(argv)
    caps = [parse_cap(c) for c in args.caps.split(",") if c]
    startups = [int(s) for s in args.startups.split(",") if s]
    # every (cap, startup); session 10's model first: the "before" column
    settings = [BEFORE] + [(c, n) for c in caps for n in startups if (c, n) != BEFORE]
    try:
        probs = [p for path in args.paths for p in problems(path, args.resources)]
    except KtxError as exc:
        print(exc, file=sys.stderr)
        return 2
    table = {
        (p.kernel, p.shape, setting): score(p, setting[0], args.seeds, args.trials, setting[1])
        for p in probs
        for setting in settings
    }
    kernels = sorted({p.kernel for p in probs})
    rows = []
    print("| kernel | shape | space | mark | before: median | before: fraction at mark "
          "| fold's (cap, startup) | after: median | after: fraction at mark | goal |")  # fmt: skip
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for kernel in kernels:
        train = [p for p in probs if p.kernel != kernel]

        def fold_loss(c: tuple[float | None, int], train: list[Problem] = train) -> tuple[float, int]:
            return loss([(p, table[(p.kernel, p.shape, c)]) for p in train], args.trials), settings.index(c)

        chosen = min(settings, key=fold_loss)
        for p in (p for p in probs if p.kernel == kernel):
            before, after = table[(p.kernel, p.shape, settings[0])], table[(p.kernel, p.shape, chosen)]

            def med(s: Score) -> str:
                return "never" if math.isinf(s.median) else f"{s.median:g}"

            met = after.median <= p.mark
            print(f"| {kernel} | {p.shape} | {p.feasible} | {p.mark} | {med(before)} "
                  f"| {statistics.median(before.at_mark):.3f} | {chosen} | {med(after)} "
                  f"| {statistics.median(after.at_mark):.3f} | {'met' if met else 'not met'} |")  # fmt: skip
            rows.append({"kernel": kernel, "shape": p.shape, "feasible": p.feasible, "mark": p.mark,
                         "chosen_cap": chosen[0], "chosen_startup": chosen[1], "before": before.__dict__,
                         "after": after.__dict__, "goal_met": met})  # fmt: skip
    print(f"\n{args.seeds} seeds, {args.trials} evaluations; (cap, startup) tried: {settings}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        every = [{"kernel": k, "shape": s, "cap": c[0], "startup": c[1], "evals": list(v.evals),
                  "at_mark": list(v.at_mark)} for (k, s, c), v in table.items()]  # fmt: skip
        doc = {"seeds": args.seeds, "trials": args.trials, "rows": rows, "every": every}
        args.json.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
