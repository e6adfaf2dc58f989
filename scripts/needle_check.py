"""Is a recording's narrow optimum the config or the moment? Pick the configs to re-measure, then read
the re-measure.

    python3 scripts/needle_check.py pick RECORDING SHAPE [--top 6] > configs.json
    python3 scripts/record_space.py KERNEL --passes P --shapes SHAPE --configs @configs.json --repeat 5 \\
        --out again.json
    python3 scripts/needle_check.py report RECORDING again.json SHAPE

On the shared act_and_mul_scalar recording (H200) the optimum at tokens=16 is 1.715 µs, and 2 of
2,304 configs lie within 2% of it (issue 23's "needle"). Each of the three fastest there is 13-15%
faster than the median of its siblings that differ from it only in the unroll factor and the
load cache policy (knobs that cannot matter much to a loop that runs at most once a thread), and
no config measured just before or after it was fast: the signature of a lucky measurement, not
of a config. Issue 23 asks to re-measure the few best rather than search longer; this is that
re-measure, with the plateau's configs beside them for scale. ``pick`` takes the ``--top`` best
configs, ``--neighbours`` one-knob neighbours of each of the 3 best, and ``--plateau`` more at
spread ranks below them; ``report`` prints, per config, its
recorded time and its re-measured median, min and max over the rounds, ranked by the median.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ktx.measure.types import Measurement, config_key  # noqa: E402
from ktx.search.evaluate import choose_metric, objective_time  # noqa: E402


def load(path: Path) -> list[Measurement]:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return [Measurement.from_dict(m) for m in json.loads(raw)["measurements"]]


def metric_at(measurements: Sequence[Measurement], shape: str) -> str:
    original = next(m for m in measurements if m.shape == shape and not m.config)
    return choose_metric("auto", original)


def ranked(measurements: Sequence[Measurement], shape: str, metric: str) -> list[tuple[float, Measurement]]:
    """(time, measurement) of every successful tuned config at ``shape``, fastest first."""
    timed = [
        (t, m)
        for m in measurements
        if m.shape == shape and m.config and m.ok and (t := objective_time(m, metric)) is not None
    ]
    return sorted(timed, key=lambda pair: pair[0])


def pick(
    measurements: Sequence[Measurement], shape: str, top: int, plateau: int, neighbours: int = 0
) -> list[dict[str, int]]:
    """The ``top`` fastest configs; for each of the 3 fastest, its ``neighbours`` fastest one-knob
    neighbours (a needle's own family: if they re-measure as fast as it, the needle was the
    config, else the moment); then ``plateau`` more at ranks spread geometrically below the top
    (2x, 4x, ... its count), so that the re-measure shows the top against the plateau."""
    order = ranked(measurements, shape, metric_at(measurements, shape))
    chosen = [dict(m.config) for _, m in order[:top]]
    for _, best in order[:3]:
        near = [dict(m.config) for _, m in order if one_knob_apart(m.config, best.config)]
        chosen += [c for c in near if c not in chosen][:neighbours]
    rank = top
    for _ in range(plateau):
        rank *= 2
        if rank - 1 < len(order) and (config := dict(order[rank - 1][1].config)) not in chosen:
            chosen.append(config)
    return chosen


def one_knob_apart(a: Mapping[str, int], b: Mapping[str, int]) -> bool:
    """Whether two configs differ in exactly one knob.

    >>> one_knob_apart({"A": 1, "B": 2}, {"A": 1, "B": 4}), one_knob_apart({"A": 1}, {"A": 1})
    (True, False)
    """
    return sum(a.get(k) != b.get(k) for k in set(a) | set(b)) == 1


def report(recorded: Sequence[Measurement], again: Sequence[Measurement], shape: str) -> list[dict[str, Any]]:
    """One row per re-measured config: recorded time, the re-measured times' median, min, max and
    count, fastest median first (the original's row has an empty config)."""
    metric = metric_at(recorded, shape)
    first = {config_key(m.config): objective_time(m, metric) for m in recorded if m.shape == shape and m.ok}
    runs: dict[str, list[float]] = {}
    configs: dict[str, dict[str, int]] = {}
    for m in again:
        t = objective_time(m, metric) if m.shape == shape and m.ok else None
        if t is not None:
            key = config_key(m.config)
            runs.setdefault(key, []).append(t)
            configs[key] = dict(m.config)
    rows = [
        {
            "config": configs[key],
            "recorded_us": first.get(key),
            "median_us": statistics.median(ts),
            "min_us": min(ts),
            "max_us": max(ts),
            "rounds": len(ts),
        }
        for key, ts in runs.items()
    ]
    return sorted(rows, key=lambda r: float(r["median_us"]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("pick")
    a.add_argument("recording", type=Path)
    a.add_argument("shape")
    a.add_argument("--top", type=int, default=6)
    a.add_argument("--plateau", type=int, default=4)
    a.add_argument("--neighbours", type=int, default=2, help="one-knob neighbours of each of the 3 best")
    b = sub.add_parser("report")
    b.add_argument("recording", type=Path)
    b.add_argument("again", type=Path)
    b.add_argument("shape")
    b.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    if args.cmd == "pick":
        print(json.dumps(pick(load(args.recording), args.shape, args.top, args.plateau, args.neighbours)))
        return 0
    rows = report(load(args.recording), load(args.again), args.shape)
    print("| config | recorded µs | re-measured median µs | min | max | rounds |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        rec = "-" if r["recorded_us"] is None else f"{r['recorded_us']:.3f}"
        name = config_key(r["config"]) or "original"
        spread = f"{r['min_us']:.3f} | {r['max_us']:.3f}"
        print(f"| {name} | {rec} | {r['median_us']:.3f} | {spread} | {r['rounds']} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
