"""What a tune leaves behind: best configs, sources, dispatch table, held-out check, summary.

Everything is rebuilt from the studies (plus the template, for sources), so any worker of a
distributed run, or a later ``ktx tune`` on a finished run, writes the same files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ktx.measure.types import Measurement
from ktx.records.files import stamped
from ktx.search.dispatch import DispatchTable
from ktx.search.engine import StudyStats, geomean, speedup_geomeans
from ktx.search.evaluate import objective_time, timing_spread
from ktx.search.paired import PairedCheck
from ktx.search.runoff import Runoff
from ktx.search.tunable import Tunable
from ktx.spec import ShapePoint


@dataclass(frozen=True)
class ShapeResult:
    """One shape's outcome. ``best`` is None when no candidate succeeded."""

    point: ShapePoint
    metric: str
    sampler: str
    original: Measurement
    best_config: Mapping[str, int] | None
    best: Measurement | None
    stats: StudyStats
    study: str
    skipped: bool = False  # the time limit ran out before the original was measured here

    @property
    def original_us(self) -> float | None:
        return objective_time(self.original, self.metric)

    @property
    def best_us(self) -> float | None:
        return None if self.best is None else objective_time(self.best, self.metric)

    @property
    def speedup(self) -> float | None:
        o, b = self.original_us, self.best_us
        return None if o is None or b is None else o / b

    @property
    def noise(self) -> float:
        """The larger relative spread (p90 - p10) / median of the original's and the best's
        objective timings: a gain below it is not told apart from noise."""
        spreads = [timing_spread(self.original, self.metric)]
        if self.best is not None:
            spreads.append(timing_spread(self.best, self.metric))
        return max((s for s in spreads if s is not None), default=0.0)

    def row(self) -> dict[str, Any]:
        best = self.best
        return {
            "shape": self.point.name,
            "metric": self.metric,
            "original_us": self.original_us,
            "best_us": self.best_us,
            "speedup": self.speedup,
            "sol_fraction": None if best is None else _sol(best, self.metric),
            "original_sol_fraction": _sol(self.original, self.metric),
            "trials": self.stats.trials,
            "evaluations": self.stats.evaluations,
            "refused": self.stats.refused,
            "noise": self.noise,
            "failures": dict(self.stats.failures),
            "sampler": self.sampler,
            "best_config": None if self.best_config is None else dict(self.best_config),
            "best_single_us": None if best is None else best.single_us,
            "best_graph_us": None if best is None else best.graph_us,
            "original_single_us": self.original.single_us,
            "original_graph_us": self.original.graph_us,
            "study": self.study,
        }


def _sol(m: Measurement, metric: str) -> float | None:
    """Fraction of speed-of-light at the objective's time."""
    t = objective_time(m, metric)
    if m.sol_us is None or t is None:
        return m.sol_fraction
    return m.sol_us / t


@dataclass(frozen=True)
class HoldoutRow:
    point: ShapePoint
    metric: str
    original: Measurement
    chosen_config: Mapping[str, int] | None
    chosen: Measurement | None

    @property
    def ratio(self) -> float | None:
        """original / chosen time: above 1 the table helps, below 1 it hurts."""
        if self.chosen_config is None:
            return 1.0
        o = objective_time(self.original, self.metric)
        c = None if self.chosen is None else objective_time(self.chosen, self.metric)
        return None if o is None or c is None else o / c

    def row(self) -> dict[str, Any]:
        return {
            "shape": self.point.name,
            "metric": self.metric,
            "original_us": objective_time(self.original, self.metric),
            "chosen": None if self.chosen_config is None else dict(self.chosen_config),
            "chosen_us": None if self.chosen is None else objective_time(self.chosen, self.metric),
            "chosen_status": None if self.chosen is None else self.chosen.status.value,
            "speedup": self.ratio,
        }


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _failures(f: Mapping[str, int], refused: int) -> str:
    parts = [f"{k} {v}" for k, v in sorted(f.items())]
    if refused:
        parts.append(f"refused {refused}")
    return ", ".join(parts) or "-"


@dataclass(frozen=True)
class Summary:
    kernel: str
    results: tuple[ShapeResult, ...]
    holdout: tuple[HoldoutRow, ...] = ()
    wall_s: float = 0.0
    notes: tuple[str, ...] = field(default=())
    device: str = ""
    dispatched: frozenset[str] = frozenset()  # shapes where the table runs the best config
    #: The paired final check per shape (:mod:`ktx.search.paired`); where it re-measured, its
    #: speedup is the one quoted, and the dispatched geomean stands on it.
    paired: Mapping[str, PairedCheck] = field(default_factory=dict)
    #: The runoff per shape (:mod:`ktx.search.runoff`): the few best configs timed paired
    #: against the search's best before the final check, and the one dispatched.
    runoffs: Mapping[str, Runoff] = field(default_factory=dict)

    def confirmed_us(self, r: ShapeResult) -> float | None:
        """The best config's time as the final check puts it: original / re-measured speedup
        (the search's own number where the check did not re-measure)."""
        check = self.paired.get(r.point.name)
        speedup = None if check is None else check.speedup
        o = r.original_us
        return r.best_us if speedup is None or o is None else o / speedup

    def _geomeans(self) -> tuple[float | None, float | None]:
        search = speedup_geomeans([(r.original_us, r.best_us, False) for r in self.results])[0]
        dispatched = speedup_geomeans(
            [(r.original_us, self.confirmed_us(r), r.point.name in self.dispatched) for r in self.results]
        )[1]
        return search, dispatched

    def row(self, r: ShapeResult) -> dict[str, Any]:
        """A shape's row with its final check: ``speedup`` is the re-measured one where there is
        one (``search_speedup`` keeps the search's single measurement)."""
        row = r.row()
        check = self.paired.get(r.point.name)
        row["search_speedup"] = row["speedup"]
        if check is not None:
            iv = check.interval
            row["paired"] = check.to_dict()
            row["speedup_interval"] = None if iv is None else [iv.lo, iv.hi]
            if check.speedup is not None:
                row["speedup"] = check.speedup
        row["dispatched"] = r.point.name in self.dispatched
        runoff = self.runoffs.get(r.point.name)
        if runoff is not None:
            row["runoff"] = runoff.to_dict()
        return row

    @property
    def geomean_speedup(self) -> float | None:
        """Search geomean: best found / original at every shape, losers included."""
        return self._geomeans()[0]

    @property
    def dispatched_geomean_speedup(self) -> float | None:
        """What the dispatch table delivers: the original where it keeps it (>= 1.0 per shape)."""
        return self._geomeans()[1]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "device": self.device,
            "notes": list(self.notes),
            "wall_s": round(self.wall_s, 3),
            "geomean_speedup": self.geomean_speedup,
            "search_geomean_speedup": self.geomean_speedup,
            "dispatched_geomean_speedup": self.dispatched_geomean_speedup,
            "shapes": [self.row(r) for r in self.results],
            "holdout": [h.row() for h in self.holdout],
            "holdout_geomean_speedup": geomean([h.ratio for h in self.holdout if h.ratio is not None]),
        }

    def markdown(self) -> str:
        lines = [f"# ktx tune: {self.kernel}", ""]
        if self.device:
            lines += [f"Device: {self.device}.", ""]
        lines += [f"> {note}" for note in self.notes]
        if self.notes:
            lines.append("")
        lines += [
            "| shape | metric | original µs | best µs | search speedup | re-measured [95%] | table | SOL "
            "| trials | evaluated | failures |",
            "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- |",
        ]
        for r in self.results:
            row = r.row()
            check = self.paired.get(r.point.name)
            table = "best" if r.point.name in self.dispatched else "original"
            lines.append(
                f"| {row['shape']} | {row['metric']} | {_fmt(row['original_us'], '.2f')} | "
                f"{_fmt(row['best_us'], '.2f')} | {_fmt(row['speedup'], '.3f')} | "
                f"{'-' if check is None else check.text()} | {table} | "
                f"{_fmt(row['sol_fraction'], '.1%')} | {row['trials']} | {row['evaluations']} | "
                f"{_failures(r.stats.failures, r.stats.refused)} |"
            )
        g, d = self._geomeans()
        lines += [
            "",
            f"Search geomean (best found / original): {_fmt(g, '.3f')} over {len(self.results)} shapes.",
            f"Dispatched geomean (what the table delivers, >= 1.0 per shape): {_fmt(d, '.3f')} "
            f"(re-measured where the final check ran); wall time {self.wall_s:.1f} s.",
            "",
        ]
        if self.paired:
            lines += [
                "Re-measured: each shape's best config and the original timed again alternately in one "
                "worker process; the speedup is the geometric mean of the paired ratios, with its 95% "
                "interval. The table uses a config only where that interval lies above 1 + min-gain.",
                "",
            ]
        if self.holdout:
            lines += [
                "## Held-out shapes (not used for tuning): the dispatch table's choice vs. the original",
                "",
                "| shape | original µs | chosen µs | speedup | chosen |",
                "| --- | ---: | ---: | ---: | --- |",
            ]
            for h in self.holdout:
                row = h.row()
                chosen = (
                    "original" if row["chosen"] is None else json.dumps(row["chosen"], separators=(",", ":"))
                )
                cells = [row["shape"], _fmt(row["original_us"], ".2f"), _fmt(row["chosen_us"], ".2f")]
                cells += [_fmt(row["speedup"], ".3f"), chosen]
                lines.append("| " + " | ".join(cells) + " |")
            hg = geomean([h.ratio for h in self.holdout if h.ratio is not None])
            lines += ["", f"Held-out geometric-mean speedup: {_fmt(hg, '.3f')}.", ""]
        return "\n".join(lines)


def write_outputs(
    folder: Path,
    summary: Summary,
    table: DispatchTable,
    tunable: Tunable,
    raw_table: DispatchTable | None = None,
) -> list[Path]:
    """best.json, best/variant_N.cu, dispatch.{json,h}, holdout.json, summary.{md,json}."""
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    best_dir = folder / "best"
    best_dir.mkdir(exist_ok=True)
    variant_files: dict[int, str] = {}
    for i, config in enumerate(table.variants):
        path = best_dir / f"variant_{i}.cu"
        header = "// ktx tune: " + ", ".join(f"{k}={v}" for k, v in config.items()) + "\n"
        path.write_text(header + tunable.candidate(config).source)
        variant_files[i] = str(path.relative_to(folder))
        written.append(path)
    best: dict[str, Any] = {}
    for r in summary.results:
        entry = summary.row(r)
        chosen = table.select(r.point.as_dict())
        entry["dispatch"] = "original" if chosen is None else chosen
        best[r.point.name] = entry
    for kind, data in (("best", best), ("summary", summary.to_dict())):
        path = folder / f"{kind}.json"
        path.write_text(json.dumps(stamped(kind, data), indent=1) + "\n")
        written.append(path)
    if summary.holdout:
        path = folder / "holdout.json"
        data = {
            "note": "shapes not used for tuning, measured with the table as tuned (before exact repairs)",
            "rows": [h.row() for h in summary.holdout],
            "repaired": raw_table is not None and raw_table.rules != table.rules,
        }
        path.write_text(json.dumps(data, indent=1) + "\n")
        written.append(path)
    for name, text in (("dispatch.json", table.to_json()), ("dispatch.h", table.to_header())):
        path = folder / name
        path.write_text(text)
        written.append(path)
    path = folder / "summary.md"
    path.write_text(summary.markdown())
    written.append(path)
    return written
