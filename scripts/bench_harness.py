#!/usr/bin/env python3
"""Measure the measurement harness itself on a GPU (issue 12's targets); writes JSON.

    source scripts/gpu_env.sh && python3 scripts/bench_harness.py --out "$OUT"

Parts (``--parts``, comma-separated; all by default):

* ``originals``: verify and time the original at each of the kernel's default shapes (21 for
  silu_and_mul) in one fresh harness: seconds per shape, compile seconds apart. Target: under
  20 s in all. Then the same again: the Python reference's verdicts now come from the disk cache.
* ``candidate``: at ``--big`` (tokens=4096,d=14336), verify and time distinct candidates of the
  pipeline (compiled beforehand) and identical-code candidates: seconds each. Target: under 1 s
  after the first.
* ``throughput``: per shape, verified candidates per second with ``--jobs`` (1 and 12): trials
  in flight compile while the GPU measures one at a time, as ``ktx tune --jobs N`` does
  (compiles included). Goal: at least 5 per second at every shape.

Results go to ``OUT/bench_harness.json``, rewritten after each part (a cut-short run keeps what
it measured). ``KTX_CACHE_DIR`` is a fresh folder unless ``--keep-cache``: compiles and the
reference verdicts start cold, as on a new machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ktx.measure.harness import Harness as _Harness  # noqa: E402
from ktx.measure.protocol import DEFAULT_HANDLER  # noqa: E402
from ktx.measure.types import Candidate, Measurement  # noqa: E402
from ktx.spec import ShapePoint, Spec  # noqa: E402
from ktx.specload import load_spec  # noqa: E402

HANDLER = [DEFAULT_HANDLER]


def Harness(spec: Spec) -> _Harness:
    return _Harness(spec, handler=HANDLER[0])


def row(m: Measurement, seconds: float) -> dict[str, Any]:
    return {
        "shape": m.shape,
        "config": dict(m.config),
        "status": m.status.value,
        "message": m.message[:300],
        "seconds": round(seconds, 4),
        "graph_us": m.graph_us,
        "single_us": m.single_us,
    }


def compile_all(h: Harness, jobs: Sequence[tuple[Candidate, ShapePoint]]) -> float:
    start = time.perf_counter()
    for cand, point in jobs:
        h.prefetch(cand, point)
    for cand, point in jobs:
        h._modules(cand, point)
        if h._reference_for(cand) == "original":
            h._modules(h.original, point)
    return time.perf_counter() - start


def originals(spec: Spec, result: dict[str, Any]) -> None:
    points = spec.shape_set().points
    with Harness(spec) as h:
        device = h.device()
        result["device"] = device.name
        compile_s = compile_all(h, [(h.original, p) for p in points])
        for label in ("cold", "verdicts cached"):
            rows = []
            start = time.perf_counter()
            for p in points:
                t = time.perf_counter()
                m = h.measure(h.original, p)
                rows.append(row(m, time.perf_counter() - t))
            total = time.perf_counter() - start
            result.setdefault("originals", {})[label] = {
                "total_s": round(total, 3), "compile_s": round(compile_s, 3), "shapes": rows,
                "target": "under 20 s", "met": total < 20,
            }  # fmt: skip
            print(f"originals ({label}): {total:.1f} s for {len(points)} shapes", flush=True)
            compile_s = 0.0


def tunable_configs(spec: Spec, pipeline: str, point: ShapePoint, count: int, skip: int = 0) -> list[Any]:
    from ktx.search.tunable import load_tunable

    tunable = load_tunable(spec, pipeline)
    feasible = tunable.space.feasible_configs(spec.env(point))
    default = tunable.space.default()
    chosen = [c for c in feasible if c != default][skip : skip + count]
    return [tunable.candidate(c) for c in chosen]


def candidate(spec: Spec, pipeline: str, big: str, count: int, result: dict[str, Any]) -> None:
    point = spec.find_point(big)
    with Harness(spec) as h:
        cands = tunable_configs(spec, pipeline, point, count)
        same = [replace(h.original, config={"SAME": i}, label=f"identical {i}") for i in range(count)]
        compile_s = compile_all(h, [(c, point) for c in [h.original, *cands, *same]])
        t = time.perf_counter()
        first = h.measure(h.original, point)
        rows = {"original": [row(first, time.perf_counter() - t)], "pipeline": [], "identical": []}
        for key, group in (("pipeline", cands), ("identical", same)):
            for c in group:
                t = time.perf_counter()
                m = h.measure(c, point)
                rows[key].append(row(m, time.perf_counter() - t))
        after = [r["seconds"] for key in ("pipeline", "identical") for r in rows[key][1:]]
        worst = max(after) if after else None
        result["candidate"] = {
            "shape": big, "pipeline": pipeline, "compile_s": round(compile_s, 3), "rows": rows,
            "max_after_first_s": worst, "target": "under 1 s after the first",
            "met": worst is not None and worst < 1.0,
        }  # fmt: skip
        print(f"candidate at {big}: at most {worst} s after the first", flush=True)


def throughput(
    spec: Spec, pipeline: str, jobs_list: Sequence[int], per_shape: int, shapes: Sequence[str],
    deadline: float, result: dict[str, Any], save: Any,
) -> None:  # fmt: skip
    points = [spec.find_point(s) for s in shapes] if shapes else list(spec.shape_set().points)
    out: dict[str, Any] = result.setdefault("throughput", {"per_shape": per_shape, "runs": []})
    with Harness(spec) as h:
        gpu = threading.Lock()
        for point in points:
            h.measure(h.original, point)  # the reference, and the timeout's basis
            for index, jobs in enumerate(jobs_list):
                if time.monotonic() > deadline:
                    out["cut_short"] = True
                    return
                cands = tunable_configs(spec, pipeline, point, per_shape, skip=index * per_shape)

                def one(c: Candidate, p: ShapePoint = point) -> Measurement:
                    h.prefetch(c, p)
                    with gpu:
                        return h.measure(c, p)

                start = time.perf_counter()
                with ThreadPoolExecutor(max_workers=jobs) as pool:
                    measured = list(pool.map(one, cands))
                seconds = time.perf_counter() - start
                ok = sum(1 for m in measured if m.ok)
                rate = len(measured) / seconds if seconds > 0 else 0.0
                out["runs"].append({
                    "shape": point.name, "jobs": jobs, "candidates": len(measured), "ok": ok,
                    "seconds": round(seconds, 3), "per_second": round(rate, 2),
                    "statuses": sorted({m.status.value for m in measured}),
                })  # fmt: skip
                line = f"throughput {point.name} jobs={jobs}: {rate:.2f}/s, {ok}/{len(measured)} ok"
                print(line, flush=True)
            save()
    rates = [r["per_second"] for r in out["runs"]]
    out["min_per_second"] = min(rates) if rates else None
    out["goal"] = "at least 5 per second at every shape"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--kernel", default="silu_and_mul")
    ap.add_argument("--pipeline", default="expose,block-size,unroll,split")
    ap.add_argument("--parts", default="originals,candidate,throughput")
    ap.add_argument("--big", default="tokens=4096,d=14336")
    ap.add_argument("--candidates", type=int, default=6)
    ap.add_argument("--jobs", default="1,12")
    ap.add_argument("--per-shape", type=int, default=6)
    ap.add_argument("--shapes", default="", help="shape names separated by ; (default: the default set)")
    ap.add_argument("--budget", type=float, default=420.0, help="seconds; throughput stops after")
    ap.add_argument("--keep-cache", action="store_true")
    ap.add_argument("--handler", default=DEFAULT_HANDLER, help="worker handler (a stand-in: CPU smoke run)")
    args = ap.parse_args(argv)
    HANDLER[0] = args.handler
    deadline = time.monotonic() + args.budget
    if not args.keep_cache:
        os.environ["KTX_CACHE_DIR"] = tempfile.mkdtemp(prefix="ktx-bench-cache-")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    spec = load_spec(ROOT / "kernels" / args.kernel)
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    result: dict[str, Any] = {"kernel": spec.name, "started": started, "handler": HANDLER[0]}

    def save() -> None:
        (out / "bench_harness.json").write_text(json.dumps(result, indent=1, default=str))

    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    status = 0
    for part in parts:
        try:
            if part == "originals":
                originals(spec, result)
            elif part == "candidate":
                candidate(spec, args.pipeline, args.big, args.candidates, result)
            elif part == "throughput":
                jobs = [int(j) for j in args.jobs.split(",")]
                shapes = [s for s in args.shapes.split(";") if s] if args.shapes else []
                throughput(spec, args.pipeline, jobs, args.per_shape, shapes, deadline, result, save)
            else:
                raise SystemExit(f"unknown part {part!r}")
        except Exception as exc:  # keep the other parts' results
            result.setdefault("errors", []).append(f"{part}: {type(exc).__name__}: {exc}")
            print(f"{part} failed: {exc}", file=sys.stderr, flush=True)
            status = 1
        save()
    return status


if __name__ == "__main__":
    sys.exit(main())
