"""The report's plots, drawn with matplotlib's object API (no pyplot state, no display needed).

Each function returns PNG bytes, or None when there is nothing to draw (a run with no rounds
has no per-round plot). PNG metadata is stripped of the software version so that the same run
gives the same bytes.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence

from ktx.ir.errors import KtxError

from ktx.report.data import RunData, finite

STATUS_COLOURS = {
    "improved": "#2e7d32",
    "no-gain": "#9e9e9e",
    "template-failed": "#c62828",
    "search-failed": "#c62828",
    "repeat": "#bdbdbd",
    "stopped": "#bdbdbd",
    "no-time": "#bdbdbd",
}


def _figure(width: float = 7.0, height: float = 3.4) -> object:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise KtxError("ktx report needs matplotlib", None, "pip install 'ktx[report]'") from None
    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _png(fig: object) -> bytes:
    from matplotlib.figure import Figure

    assert isinstance(fig, Figure)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _short(shape: str) -> str:
    return shape.replace("tokens=", "t=").replace(",", " ")


def rounds_plot(run: RunData) -> bytes | None:
    """Geometric-mean speedup per round (bars by status, best so far as a line) and each shape's
    time per round (the round's best at that shape, round 0 the original)."""
    from matplotlib.figure import Figure

    if not run.rounds:
        return None
    fig = _figure(9.0, 3.6)
    assert isinstance(fig, Figure)
    left, right = fig.subplots(1, 2)
    xs = [0] + [r.index for r in run.rounds]
    geos = [1.0] + [r.geomean if r.geomean is not None else 0.0 for r in run.rounds]
    colours = ["#1565c0"] + [STATUS_COLOURS.get(r.status, "#9e9e9e") for r in run.rounds]
    left.bar(xs, geos, color=colours)
    best = [1.0] + [r.best_after if r.best_after is not None else 1.0 for r in run.rounds]
    left.step(xs, best, where="mid", color="black", linewidth=1.2, label="best so far")
    left.axhline(1.0, color="#555", linewidth=0.6, linestyle=":")
    left.set_xlabel("round (0 = original)")
    left.set_ylabel("geomean speedup vs original")
    left.set_title("Speedup per round (green: improved)")
    left.set_xticks(xs)
    left.legend(loc="lower right", fontsize=8)
    originals = {s.shape: s.original_us for s in run.shapes}
    for shape, orig in originals.items():
        ys = [orig] + [r.shapes.get(shape) for r in run.rounds]
        pts = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None and math.isfinite(y)]
        if pts:
            right.plot(
                [p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, label=_short(shape)
            )
    right.set_yscale("log")
    right.set_xlabel("round")
    right.set_ylabel("time (µs, log)")
    right.set_title("Best time per round, per shape")
    right.set_xticks(xs)
    if len(originals) <= 12:
        right.legend(fontsize=6, ncol=2)
    return _png(fig)


def _bars(labels: Sequence[str], series: Mapping[str, Sequence[float | None]], title: str, ylabel: str,
          line: float | None = None, percent: bool = False) -> bytes | None:  # fmt: skip
    from matplotlib.figure import Figure

    if not labels or not any(finite(list(v)) for v in series.values()):
        return None
    fig = _figure(max(6.0, 0.55 * len(labels) + 2), 3.6)
    assert isinstance(fig, Figure)
    ax = fig.subplots()
    n = len(series)
    width = 0.8 / n
    for i, (name, values) in enumerate(series.items()):
        xs = [j + (i - (n - 1) / 2) * width for j in range(len(labels))]
        ys = [0.0 if v is None or not math.isfinite(v) else (100 * v if percent else v) for v in values]
        ax.bar(xs, ys, width=width, label=name)
    if line is not None:
        ax.axhline(line, color="#555", linewidth=0.8, linestyle=":")
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels([_short(s) for s in labels], rotation=45, ha="right", fontsize=7)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if n > 1:
        ax.legend(fontsize=8)
    return _png(fig)


def speedup_plot(run: RunData) -> bytes | None:
    return _bars(
        [s.shape for s in run.shapes],
        {"speedup": [s.speedup for s in run.shapes]},
        "Speedup per shape against the original",
        "original / tuned time",
        line=1.0,
    )


def sol_plot(run: RunData) -> bytes | None:
    return _bars(
        [s.shape for s in run.shapes],
        {"original": [s.original_sol for s in run.shapes], "tuned": [s.final_sol for s in run.shapes]},
        "Fraction of speed-of-light per shape",
        "% of speed-of-light",
        line=100.0,
        percent=True,
    )


def importance_plot(run: RunData) -> bytes | None:
    from matplotlib.figure import Figure

    if not run.importance:
        return None
    names = list(run.importance)[::-1]
    fig = _figure(6.0, 0.35 * len(names) + 1.4)
    assert isinstance(fig, Figure)
    ax = fig.subplots()
    ax.barh(names, [run.importance[n] for n in names], color="#6a1b9a")
    ax.set_xlabel("importance (share of the objective's variance)")
    ax.set_title(f"Knob importance, round {run.best_round}")
    return _png(fig)


def failures_plot(run: RunData) -> bytes | None:
    from matplotlib.figure import Figure

    failures = run.failures
    if not failures:
        return None
    names = list(failures)[::-1]
    fig = _figure(6.0, 0.35 * len(names) + 1.4)
    assert isinstance(fig, Figure)
    ax = fig.subplots()
    ax.barh(names, [failures[n] for n in names], color="#c62828")
    ax.set_xlabel("count over all rounds")
    ax.set_title("Failures by type")
    return _png(fig)


#: (file stem, title, drawer) in report order.
PLOTS = (
    ("rounds", "Best time per round", rounds_plot),
    ("speedup", "Speedup per shape", speedup_plot),
    ("sol", "Fraction of speed-of-light per shape", sol_plot),
    ("importance", "Knob importance", importance_plot),
    ("failures", "Failures by type", failures_plot),
)
