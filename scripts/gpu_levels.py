#!/usr/bin/env python3
"""Why does the same kernel sit at one of two levels across processes? A diagnostic (issue 12).

    source scripts/gpu_env.sh && python3 scripts/gpu_levels.py --out "$OUT"    # about 2-3 min

Issue 12 saw silu_and_mul at tokens=64, d=4096 measure 2.80 µs (graph) throughout one process
and 2.45 µs throughout another (1x4096: 2.03 vs 2.38 µs), and the first measurement of a
process differ from later ones. Candidate causes: where the buffers sit (allocation offsets,
which L2 partition / DRAM channel their lines hash to), the clocks (SM and memory clocks ramping
or throttling), and the CUDA graph's input rotation (how many input sets a graph cycles through).

Each of ``--procs`` fresh processes (default 8) times the original silu kernel at each
``--shapes`` point in the same order:

1. ``cold``: the default placement and rotation, before any warm-up (the process's first timing);
2. a warm-up (:func:`ktx.measure.warmup.warm_up`), then ``warm``: the same again;
3. ``offset=K``: a pad of K bytes allocated first, so the buffers start elsewhere;
4. ``sets=N``: the graph rotates over N input sets (1, 2, 8, and the harness's 2x-L2 default);
5. ``fresh-buffers``: new buffers from a fresh memory pool, default placement;
6. ``warm-end``: the default again, last, for drift inside the process.

With each timing go the buffers' device addresses (and their offsets modulo 2 MiB and 64 KiB),
and the SM / memory clocks, pstate, temperature, power and throttle reasons from NVML (CuPy's
binding, else ``nvidia-smi``), read right after the timing. The parent writes
``OUT/gpu_levels.json`` (every row) and ``OUT/gpu_levels.txt``: per variant, the graph medians
of every process, their spread, and the correlation of the median with the clocks and with
the address offsets, so the level can be blamed on what moves with it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def nvml_state() -> dict[str, Any]:
    """Clocks and power state now (NVML through CuPy, else nvidia-smi)."""
    try:
        from cupy_backends.cuda.libs import nvml

        nvml.nvmlInit()
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
        dev = nvml.nvmlDeviceGetHandleByIndex(int(visible) if visible.isdigit() else 0)
        state: dict[str, Any] = {
            "sm_mhz": int(nvml.nvmlDeviceGetClockInfo(dev, 1)),
            "mem_mhz": int(nvml.nvmlDeviceGetClockInfo(dev, 2)),
        }
        for key, call in (
            ("pstate", "nvmlDeviceGetPerformanceState"),
            ("temp_c", "nvmlDeviceGetTemperature"),
            ("power_mw", "nvmlDeviceGetPowerUsage"),
            ("throttle", "nvmlDeviceGetCurrentClocksThrottleReasons"),
        ):
            fn = getattr(nvml, call, None)
            if fn is None:
                continue
            with contextlib.suppress(Exception):
                state[key] = int(fn(dev, 0) if key == "temp_c" else fn(dev))
        return state
    except Exception:
        pass
    try:
        text = subprocess.run(
            ["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,pstate,temperature.gpu,power.draw",
             "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=10, check=False,
        ).stdout.strip().splitlines()[0]  # fmt: skip
        sm, mem, pstate, temp, power = (x.strip() for x in text.split(","))
        return {"sm_mhz": int(sm), "mem_mhz": int(mem), "pstate": pstate, "temp_c": temp, "power_w": power}
    except Exception as exc:
        return {"error": str(exc)}


def child(shapes: Sequence[str], index: int) -> list[dict[str, Any]]:
    import cupy as cp

    from ktx.measure import gpu
    from ktx.measure.compile import CompileRequest, compile_kernel
    from ktx.measure.types import original_candidate
    from ktx.measure.verify import seeded_inputs
    from ktx.measure.warmup import warm_up
    from ktx.specload import load_spec

    spec = load_spec(ROOT / "kernels" / "silu_and_mul")
    limits = gpu.device_limits(measure_bandwidth=False)
    cand = original_candidate(spec)
    rows: list[dict[str, Any]] = []
    stream = cp.cuda.Stream(non_blocking=True)

    def bind(point_name: str) -> Any:
        point = spec.find_point(point_name)
        from ktx.ir.expr import expand

        name = expand(cand.name_expression, cand.env(spec, point))
        source = spec.compile_source(cand.source)
        req = CompileRequest(source, name, tuple(cand.flags), limits.cc, spec.include_dirs)
        result = compile_kernel(req)
        return point, gpu._bind(spec, cand, point, {name: result.to_dict()}, limits)

    def timing(point: Any, bound: Any, nsets: int | None, pad: int) -> dict[str, Any]:
        env = spec.env(point)
        padding = cp.empty(pad, dtype=cp.uint8) if pad else None
        with stream:
            base = seeded_inputs(spec, point, 1234, 0, cp)
            set_bytes = sum(int(v.nbytes) for v in base.values())
            default_sets = max(1, min(4096, math.ceil(2 * limits.l2_bytes / set_bytes)))
            n = default_sets if nsets is None else nsets
            sets = [gpu._args(spec, env, base)]
            arrays = [base]
            for _ in range(n - 1):
                copy = {k: v.copy() for k, v in base.items()}
                arrays.append(copy)
                sets.append(gpu._args(spec, env, copy))
            launches = max(100, n)
            stream.begin_capture()
            for i in range(launches):
                bound(sets[i % n], stream)
            graph = stream.end_capture()
            graph.launch(stream)
            stream.synchronize()
            samples = []
            for _ in range(20):
                s, e = cp.cuda.Event(), cp.cuda.Event()
                s.record(stream)
                graph.launch(stream)
                e.record(stream)
                e.synchronize()
                samples.append(cp.cuda.get_elapsed_time(s, e) * 1e3 / launches)
            singles = []
            for _ in range(50):
                s, e = cp.cuda.Event(), cp.cuda.Event()
                s.record(stream)
                bound(sets[0], stream)
                e.record(stream)
                e.synchronize()
                singles.append(cp.cuda.get_elapsed_time(s, e) * 1e3)
        ptrs = {k: int(v.data.ptr) for k, v in base.items()}
        del padding, graph, sets, arrays
        return {
            "graph_us": statistics.median(samples), "graph_min_us": min(samples),
            "single_us": statistics.median(singles), "sets": n, "launches": launches, "pad": pad,
            "ptrs": ptrs, "ptr_mod_2m": {k: p % (2 << 20) for k, p in ptrs.items()},
            "ptr_mod_64k": {k: p % (64 << 10) for k, p in ptrs.items()}, "clocks": nvml_state(),
        }  # fmt: skip

    bound_points = [bind(s) for s in shapes]
    order = 0

    def record(variant: str, point: Any, bound: Any, nsets: int | None = None, pad: int = 0) -> None:
        nonlocal order
        row = timing(point, bound, nsets, pad)
        row.update(process=index, pid=os.getpid(), shape=point.name, variant=variant, order=order)
        order += 1
        rows.append(row)

    for point, bound in bound_points:
        record("cold", point, bound)
    warm = warm_up(limits.sm_count)
    for point, bound in bound_points:
        record("warm", point, bound)
        for pad in (4 << 10, 1 << 20, 33 << 20, 257 << 20):
            record(f"offset={pad}", point, bound, pad=pad)
        for nsets in (1, 2, 8):
            record(f"sets={nsets}", point, bound, nsets=nsets)
        cp.get_default_memory_pool().free_all_blocks()
        record("fresh-buffers", point, bound)
    for point, bound in bound_points:
        record("warm-end", point, bound)
    for row in rows:
        row["warm_up"] = warm.to_dict()
    return rows


def correlation(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sx = math.sqrt(sum((x - mx) ** 2 for x in xs))
    sy = math.sqrt(sum((y - my) ** 2 for y in ys))
    return sxy / (sx * sy)


def summary(rows: list[dict[str, Any]]) -> str:
    lines = []
    for shape in dict.fromkeys(r["shape"] for r in rows):
        lines.append(f"== {shape}: graph µs per process (single µs in brackets)")
        for variant in dict.fromkeys(r["variant"] for r in rows):
            sel = [r for r in rows if r["shape"] == shape and r["variant"] == variant]
            values = [r["graph_us"] for r in sel]
            if not values:
                continue
            spread = (max(values) - min(values)) / min(values)
            cells = " ".join(f"{r['graph_us']:.3f}[{r['single_us']:.2f}]" for r in sel)
            lines.append(f"  {variant:>18}: spread {spread:6.1%}  {cells}")
        warm = [r for r in rows if r["shape"] == shape and r["variant"] != "cold"]
        times = [r["graph_us"] for r in warm]
        for label, get in (
            ("sm_mhz", lambda r: r["clocks"].get("sm_mhz")),
            ("mem_mhz", lambda r: r["clocks"].get("mem_mhz")),
            ("out ptr mod 2M", lambda r: r["ptr_mod_2m"].get("out")),
            ("input ptr mod 2M", lambda r: r["ptr_mod_2m"].get("input")),
            ("input ptr mod 64K", lambda r: r["ptr_mod_64k"].get("input")),
            ("sets", lambda r: r["sets"]),
        ):
            xs = [get(r) for r in warm]
            pairs = [(float(x), t) for x, t in zip(xs, times, strict=True) if isinstance(x, int | float)]
            c = correlation([p[0] for p in pairs], [p[1] for p in pairs])
            lines.append(f"  correlation of graph time with {label}: {'n/a' if c is None else f'{c:+.2f}'}")
        per_process = {}
        for r in warm:
            per_process.setdefault(r["process"], []).append(r["graph_us"])
        levels = sorted(statistics.median(v) for v in per_process.values())
        lines.append("  per-process medians (all warm variants): " + " ".join(f"{v:.3f}" for v in levels))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--shapes", default="tokens=64,d=4096;tokens=1,d=4096")
    ap.add_argument("--child", type=int, default=-1, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    shapes = [s for s in args.shapes.split(";") if s]
    if args.child >= 0:
        json.dump(child(shapes, args.child), sys.stdout, default=str)
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    errors = []
    start = time.time()
    for index in range(args.procs):
        done = subprocess.run(
            [sys.executable, __file__, "--child", str(index), "--shapes", args.shapes],
            capture_output=True, text=True, check=False, timeout=300,
        )  # fmt: skip
        if done.returncode != 0:
            errors.append(f"process {index}: exit {done.returncode}: {done.stderr[-2000:]}")
            continue
        rows += json.loads(done.stdout.strip().splitlines()[-1])
        print(f"process {index} done ({time.time() - start:.0f} s)", flush=True)
    text = summary(rows) if rows else "no rows"
    (out / "gpu_levels.json").write_text(json.dumps({"rows": rows, "errors": errors}, indent=1, default=str))
    (out / "gpu_levels.txt").write_text(text + ("\n\nerrors:\n" + "\n".join(errors) if errors else "") + "\n")
    print(text)
    return 1 if errors and not rows else 0


if __name__ == "__main__":
    sys.exit(main())
