"""Record one exhaustive knob space on a GPU: every feasible config at 1-2 shapes, verified and timed.

    source scripts/gpu_env.sh
    python3 scripts/record_space.py --out "$OUT/space.json"          # ~2,300 configs, 2 shapes

The default space is act_and_mul_scalar's under
``vectorize,block-size{min=64},split{max=32},unroll{loops=L0,max=4},cache-hints{stores=false}``:
VEC_L0 (4) x BLOCK_X (6) x SPLIT (6) x UNROLL_L0 (4) x CACHE_LD_INPUT (4) = 2,304 configs with
five interacting knobs (vector width, block size and split set the parallelism together; unroll
and the cache policy change what each thread keeps in flight). The recorded 140-config silu
space was too small and flat to tell samplers apart (issue 12).

Measurements are lighter than a tune's: one verification round, no odd-size variants, few timed
launches (``--runs``, ``--replays``); the graph time is the objective the samplers are compared
on. Compiles run on ``--jobs`` CPU processes while the GPU measures, and the configs are measured
shape after shape, so a run cut by ``--limit-s`` still holds the first shape's whole space
(``stats.exhaustive_shapes`` names the complete ones). The recording is written every ``--save``
measurements and at the end; ``"exhaustive": true`` only when every feasible config was measured.

``--dry-run`` prints the space (knobs, size, feasible configs per shape) without a GPU;
``--backend harness:FILE.py:FUNCTION`` swaps the GPU worker for a CPU stand-in (tests).
Then compare ktx's samplers on it: ``scripts/compare_samplers.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from ktx.measure.types import Measurement, config_key
from ktx.search.evaluate import cacheable
from ktx.search.recording import FORMAT, write
from ktx.search.tunable import load_tunable
from ktx.spec import ShapePoint
from ktx.specload import load_spec

ROOT = Path(__file__).resolve().parent.parent
KERNEL = "kernels/act_and_mul_scalar"
PASSES = "vectorize,block-size{min=64},split{max=32},unroll{loops=L0,max=4},cache-hints{stores=false}"
SHAPES = "tokens=16,d=4096;tokens=4096,d=4096"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kernel_dir", nargs="?", default=KERNEL)
    p.add_argument("--passes", default=PASSES)
    p.add_argument("--shapes", default=SHAPES, help="';'-separated shapes (default: %(default)s)")
    p.add_argument("--out", type=Path, default=Path("space.json"))
    p.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 1), help="compile processes")
    p.add_argument("--limit-s", type=float, default=330.0, help="stop measuring after this many seconds")
    p.add_argument("--runs", type=int, default=10, help="single-launch timings per candidate")
    p.add_argument("--replays", type=int, default=5, help="graph replays per batch (20 launches each)")
    p.add_argument("--save", type=int, default=250, help="write the recording every N measurements")
    p.add_argument("--max-configs", type=int, default=None, help="measure only the first N configs")
    p.add_argument("--backend", default="cupy", help="cupy, or harness:FILE.py:FUNCTION (a CPU stand-in)")
    p.add_argument("--dry-run", action="store_true", help="print the space and exit (no GPU)")
    p.add_argument(
        "--configs",
        default=None,
        help="measure only these configs: a JSON list of objects, or @FILE holding one (a needle check)",
    )
    p.add_argument(
        "--repeat", type=int, default=1, help="measure everything this many times, in rounds (a needle check)"
    )
    return p.parse_args(argv)


def chosen_configs(text: str) -> list[dict[str, int]]:
    """``--configs``: a JSON list of config objects, or ``@FILE`` holding one.

    >>> chosen_configs('[{"B": 128}, {"B": 256, "V": 2}]')
    [{'B': 128}, {'B': 256, 'V': 2}]
    """
    raw = Path(text[1:]).read_text() if text.startswith("@") else text
    data = json.loads(raw)
    if not isinstance(data, list) or not all(isinstance(c, dict) for c in data):
        raise SystemExit('--configs: a JSON list of objects such as [{"BLOCK_X": 128}] is expected')
    return [{str(k): int(v) for k, v in c.items()} for c in data]


def job_order(
    points: list[ShapePoint], per_point: dict[str, list[dict[str, int]]], repeat: int = 1
) -> list[tuple[dict[str, int], ShapePoint]]:
    """(config, shape) in measuring order: shape after shape, the original ({}) first at each;
    with ``repeat`` > 1 the whole list again in rounds, so that a drift of the GPU's state over
    time touches every config alike rather than one (a needle check re-measures the few best
    configs of a recording to see whether the best was the config or the moment).

    >>> a, b = ShapePoint.from_name("n=1"), ShapePoint.from_name("n=2")
    >>> jobs = job_order([a, b], {"n=1": [{"B": 1}], "n=2": [{"B": 1}]}, 2)
    >>> " ".join(f"{p.name}:{c.get('B', 'original')}" for c, p in jobs)
    'n=1:original n=1:1 n=2:original n=2:1 n=1:original n=1:1 n=2:original n=2:1'
    """
    one = [job for p in points for job in [({}, p), *((c, p) for c in per_point[p.name])]]
    return one * max(1, repeat)


def recording(
    spec_name: str, pipeline: str, space: Any, device: Any, options: Any, found: list[dict[str, Any]],
    exhaustive: bool, stats: dict[str, Any], stand_in: str, kernel_dir: str = "",
) -> dict[str, Any]:  # fmt: skip
    """The ``ktx.recording/1`` document the replay backend reads. ``kernel_dir``: the kernel's
    folder, relative to the repository where it lies inside it, so that
    ``scripts/search_replay.py RECORDING`` finds the spec without being told."""
    return {
        "format": FORMAT,
        "kernel": spec_name,
        **({"kernel_dir": kernel_dir} if kernel_dir else {}),
        "synthetic": bool(stand_in),
        **({"stand_in": stand_in} if stand_in else {}),
        "method": f"scripts/record_space.py ({pipeline}); exhaustive={exhaustive}; options: {options}",
        "device": device.name,
        "toolkit": f"driver {device.driver}, runtime {device.runtime}",
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "pipeline": pipeline,
        "exhaustive": exhaustive,
        "stats": stats,
        "space": {"knobs": space.describe(), "constraints": [c.text for c in space.constraints]},
        "measurements": found,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spec = load_spec(args.kernel_dir)
    tunable = load_tunable(spec, args.passes)
    space = tunable.space
    points = [ShapePoint.from_name(s.strip()) for s in args.shapes.split(";") if s.strip()]
    # Each shape's own feasible configs: a replay's search proposes every config feasible at its
    # shape, and one missing from the recording would come back as a failure it never was.
    per_point = {p.name: [c for c in space.configs() if not space.violations(c, spec.env(p))] for p in points}
    configs = [c for c in per_point[points[0].name] if all(c in per_point[p.name] for p in points)]
    print(f"{spec.name}: {tunable.pipeline}")
    print(f"knobs: {', '.join(f'{k.name} {list(k.values)}' for k in space.knobs)}")
    print(f"space: {space.size()} configs, {len(configs)} feasible at every shape of {args.shapes}")
    print("feasible per shape: " + "; ".join(f"{name} {len(cs)}" for name, cs in per_point.items()))
    subset = args.max_configs is not None or args.configs is not None or args.repeat > 1
    if args.configs is not None:
        wanted = [space.normalize(c) for c in chosen_configs(args.configs)]
        per_point = {name: [c for c in wanted if c in cs] for name, cs in per_point.items()}
        print("chosen per shape: " + "; ".join(f"{name} {len(cs)}" for name, cs in per_point.items()))
    if args.dry_run:
        return 0
    if args.max_configs is not None:
        per_point = {name: cs[: args.max_configs] for name, cs in per_point.items()}

    from ktx.measure.gpu import Options
    from ktx.measure.harness import Harness
    from ktx.measure.protocol import DEFAULT_HANDLER

    stand_in = "" if args.backend == "cupy" else args.backend
    handler = DEFAULT_HANDLER if not stand_in else stand_in.removeprefix("harness:")
    options = Options(rounds=1, odd=False, warmup=3, min_runs=args.runs, max_runs=args.runs,
                      graph_launches=20, graph_replays=args.replays, max_batches=2)  # fmt: skip
    start = time.monotonic()
    found: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    with Harness(spec, options=options, compile_workers=args.jobs, handler=handler) as harness:
        device = harness.device()
        candidates = {config_key(c): tunable.candidate(c) for cs in per_point.values() for c in cs}
        original = tunable.candidate({})
        jobs = [
            (candidates[config_key(c)] if c else original, p)
            for c, p in job_order(points, per_point, args.repeat)
        ]
        total = len(jobs)
        cut = False
        first_at: float | None = None

        def stats() -> dict[str, Any]:
            wall = time.monotonic() - start
            measured = len(found)
            since = None if first_at is None else max(1e-9, time.monotonic() - first_at)
            steady = None if since is None else round((measured - 1) / since, 2)
            per_shape = {p.name: sum(1 for m in found if m["shape"] == p.name) for p in points}
            complete = [] if subset else [n for n, k in per_shape.items() if k == len(per_point[n]) + 1]
            return {"measured": measured, "jobs": total, "wall_s": round(wall, 1), "statuses": dict(counts),
                    "per_shape": per_shape, "exhaustive_shapes": complete,
                    "per_s_after_first_original": steady}  # fmt: skip

        def save(exhaustive: bool) -> None:
            write(recording(spec.name, tunable.pipeline, space, device, options, found, exhaustive, stats(),
                            stand_in, repo_relative(args.kernel_dir)), args.out)  # fmt: skip

        previous = signal.signal(signal.SIGTERM, _terminated)
        print(f"measuring {total} jobs (SIGTERM ends the run and writes what was measured)", flush=True)
        try:
            for i, m in enumerate(harness.measure_many(jobs), start=1):
                counts[m.status.value] = counts.get(m.status.value, 0) + 1
                if not cacheable(m):
                    # says nothing about the config (a compile process that died, a failed
                    # reference): not recorded, so its shape is not claimed complete
                    counts["not_recorded"] = counts.get("not_recorded", 0) + 1
                    continue
                found.append(m.to_dict())
                if i == 1:
                    first_at = time.monotonic()
                if i % args.save == 0:
                    save(False)
                    print(json.dumps(stats()), flush=True)
                if time.monotonic() - start > args.limit_s and i < total:
                    cut = True
                    print(f"--limit-s {args.limit_s:g} reached after {i} of {total} measurements", flush=True)
                    break
        except Terminated:
            # an outer `timeout` (the GPU scripts') ended the run: keep what was measured
            cut = True
            print(f"terminated after {len(found)} of {total} measurements", flush=True)
        finally:
            signal.signal(signal.SIGTERM, previous)
        save(not cut and not subset)
    final = stats()
    print(json.dumps(final))
    best = _best(found, points)
    for name, (us, config) in best.items():
        print(f"{name}: optimum {us:.3f} µs (graph) at {config}")
    print(f"wrote {args.out}")
    return 0


class Terminated(BaseException):
    """SIGTERM arrived (an outer ``timeout``): the loop stops and the recording is written."""


def _terminated(signum: int, frame: object) -> None:
    raise Terminated(signum)


def repo_relative(kernel_dir: str) -> str:
    """``kernel_dir`` relative to the repository when it lies inside it, else absolute.

    >>> repo_relative(str(ROOT / "kernels" / "rmsnorm"))
    'kernels/rmsnorm'
    """
    path = Path(kernel_dir).resolve()
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def _best(found: list[dict[str, Any]], points: list[ShapePoint]) -> dict[str, tuple[float, str]]:
    out: dict[str, tuple[float, str]] = {}
    for data in found:
        m = Measurement.from_dict(data)
        if m.ok and m.config and m.graph_us is not None:
            current = out.get(m.shape)
            if current is None or m.graph_us < current[0]:
                out[m.shape] = (m.graph_us, config_key(m.config))
    return {p.name: out[p.name] for p in points if p.name in out}


if __name__ == "__main__":
    sys.exit(main())
