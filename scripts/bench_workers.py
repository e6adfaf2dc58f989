"""How ``ktx tune --workers N`` scales, on a CPU (issue 23 item 7).

On 4 GPUs a 200 s tune over 21 shapes made 400 measurements against 138 with one worker (2.9x,
where 4x is the limit). This runs the same comparison without a GPU: ``ktx tune`` on the replay
backend over a SYNTHETIC recording of ``--shapes`` shapes, each measurement sleeping
``--measure-s`` seconds (the replay's throttle, standing in for GPU time), with the same
``--time-limit`` for every worker count. Evaluations (backend calls: measurements of configs,
originals and held-out checks) are counted per process from the run's ``log.jsonl``
(:func:`scripts.issue23_timeline.timeline`), and the ratio to one worker's is set against the
ideal, N.

The workers are real processes on the real clock, so their start-up counts, as it does on GPUs;
on a loaded two-core host it dominates (each worker took 20-45 s to its first measurement there
at load 8-13, so the ratio there says little). The load-proof comparison is
``tests/search/test_workers.py`` (per-thread virtual clocks), the real one
``scripts/gpu_issue23_workers.sh``.

Usage: python scripts/bench_workers.py [--workers 1,2,4] [--shapes 21] [--measure-s 0.25]
       [--time-limit 30] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from issue23_timeline import timeline  # noqa: E402

from ktx.search import synthetic  # noqa: E402
from ktx.search.recording import write  # noqa: E402

KERNEL = ROOT / "kernels" / "silu_and_mul"


#: The issue's 21 shapes (act_and_mul_scalar's and silu_and_mul's default set), and the
#: held-out midpoints ``--holdout auto`` picks between them (the recording must hold those too).
TOKENS = (1, 4, 16, 64, 256, 1024, 4096)
DS = (4096, 11008, 14336)
MIDS = (2, 8, 32, 128, 512, 2048)


def shapes(count: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The first ``count`` of the 21 shapes (d-major), and their held-out midpoints."""
    tuned = [(t, d) for d in DS for t in TOKENS][:count]
    held = [(m, d) for d in DS for m in MIDS if (m // 2, d) in tuned or (m * 2, d) in tuned]
    return tuned, held


def tune(
    recording: Path, out: Path, points: list[tuple[int, int]], workers: int, args: argparse.Namespace
) -> dict[str, Any]:
    """One ``ktx tune`` run; its timeline, with the command's wall time."""
    names = ";".join(synthetic.shape_name(t, d) for t, d in points)
    cmd = [
        sys.executable, "-m", "ktx", "tune", str(KERNEL), "--backend", f"replay:{recording}",
        "--shapes", names, "--trials", "1000", "--sampler", "random", "--seed", "1",
        "--throttle", str(args.measure_s), "--time-limit", str(args.time_limit),
        "--workers", str(workers), "--holdout", args.holdout, "--out", str(out), "--quiet",
    ]  # fmt: skip
    start = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"ktx tune --workers {workers} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    line = timeline(out)
    line["command_wall_s"] = round(wall, 2)
    return line


def row(workers: int, line: dict[str, Any], base: int | None) -> dict[str, Any]:
    per = line["per_process"]
    main = sum(v["measured"] for k, v in per.items() if k.startswith("main"))
    firsts = [v for v in line["workers_first_measure_s"].values() if v is not None]
    ratio = None if not base else line["measured"] / base
    return {
        "workers": workers,
        "evaluations": line["measured"],
        "ratio": None if ratio is None else round(ratio, 3),
        "of_ideal": None if ratio is None else round(ratio / workers, 3),
        "main_measured": main,
        "main_after_workers": line["main_measured_after_workers"],
        "first_worker_measure_s": min(firsts) if firsts else None,
        "last_worker_measure_s": line["workers_last_measure_s"],
        "wall_s": line["command_wall_s"],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", default="1,2,4", help="worker counts, comma-separated (1 first: the base)")
    p.add_argument("--shapes", type=int, default=21)
    p.add_argument("--measure-s", type=float, default=0.25, help="seconds each measurement sleeps")
    p.add_argument("--time-limit", type=float, default=30.0)
    p.add_argument("--holdout", default="auto")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--keep", type=Path, default=None, help="keep the run folders here")
    args = p.parse_args()
    counts = [int(x) for x in args.workers.split(",")]
    points, held = shapes(args.shapes)
    rows = []
    with tempfile.TemporaryDirectory(prefix="ktx-bench-workers-") as scratch:
        tmp = args.keep or Path(scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        recording = write(synthetic.recording([*points, *held], kernel="silu_and_mul"), tmp / "rec.json")
        base = None
        for n in counts:
            line = tune(recording, tmp / f"w{n}", points, n, args)
            if n == 1:
                base = int(line["measured"])
            rows.append(row(n, line, base))
    print(
        f"SYNTHETIC replay, {args.shapes} shapes, {args.measure_s} s a measurement, {args.time_limit} s limit"
    )
    keys = list(rows[0])
    print(" | ".join(keys))
    for r in rows:
        print(" | ".join("-" if r[k] is None else str(r[k]) for k in keys))
    if args.json is not None:
        args.json.write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
