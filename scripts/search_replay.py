"""Evaluations to 0.98 of the exhaustive optimum for ``ktx tune``'s search, replayed over a recording.

    .venv/bin/python scripts/search_replay.py KERNEL_DIR RECORDING [--shapes 'tokens=16,d=4096;...']
        [--methods before,after,...] [--seeds 20] [--trials 100] [--json OUT.json]

Methods (``ktx.search.tunebench.Method``):

* ``before``: session 7's default: TPE, warm start from shapes within 4x work, every seed taken;
* ``after``: today's default (``--sampler auto``: the cost model; seeds dropped once one is slow);
* ``random``: uniform sampling, the yardstick;
* ``tpe-far`` / ``after-far``: the warm start from any tuned shape (no work limit), without and
  with the drop rule and the cost model, to show what the drop rule buys where a seed misleads.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from ktx.search.recording import Recording
from ktx.search.tunebench import Method, as_json, bench, markdown
from ktx.specload import load_spec

METHODS = {
    "before": Method("before (tpe, warm <=4x, no drop)", sampler="tpe", warm_drop=False),
    "after": Method("after (auto = cost model, drop)", sampler="auto"),
    "random": Method("random", sampler="random"),
    "tpe-far": Method(
        "tpe, warm from any shape, no drop", sampler="tpe", warm_drop=False, max_work_ratio=math.inf
    ),
    "tpe-far-drop": Method("tpe, warm from any shape, drop", sampler="tpe", max_work_ratio=math.inf),
    "after-far": Method("cost model, warm from any shape, drop", sampler="auto", max_work_ratio=math.inf),
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kernel_dir")
    p.add_argument("recording")
    p.add_argument("--shapes", default="", help="';'-separated shapes (default: every shape recorded)")
    p.add_argument("--methods", default="before,after,random")
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--trials", type=int, default=100, help="evaluation budget per shape (ktx tune's default)")
    p.add_argument("--fraction", type=float, default=0.98)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    spec = load_spec(args.kernel_dir)
    recording = Recording.load(args.recording)
    shapes = [s for s in args.shapes.split(";") if s] or list(recording.shapes)
    methods = [METHODS[m] for m in args.methods.split(",") if m]
    start = time.monotonic()
    outcomes = bench(spec, recording, shapes, methods, range(args.seeds), args.trials, args.fraction)
    wall = time.monotonic() - start
    print(f"Recording: {recording.label} ({recording.date})")
    print(markdown(outcomes, args.fraction))
    print(f"\n{args.seeds} seeds, budget {args.trials} evaluations per shape, {wall:.0f} s on the CPU.")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "recording": args.recording,
            "label": recording.label,
            "fraction": args.fraction,
            "seeds": args.seeds,
            "trials": args.trials,
            "methods": {k: METHODS[k].__dict__ for k in args.methods.split(",") if k},
            "outcomes": as_json(outcomes),
            "wall_s": wall,
        }
        args.json.write_text(json.dumps(data, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
