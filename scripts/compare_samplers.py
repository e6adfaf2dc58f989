"""Compare samplers on a recorded exhaustive space: evaluations to reach within 2% of the optimum.

    .venv/bin/python scripts/compare_samplers.py KERNEL_DIR RECORDING.json --shape tokens=1,d=4096 \
        [--samplers tpe,random,grid] [--seeds 20] [--tolerance 0.02] [--json OUT.json]

Without RECORDING (``--synthetic``) it builds the SYNTHETIC recording of ktx.search.synthetic
(an analytic model, not measurements) for the shape and says so in the output.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from ktx.search import synthetic
from ktx.search.compare import CHECKPOINTS, compare, markdown
from ktx.search.recording import Recording, write
from ktx.spec import ShapePoint, load_spec


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kernel_dir")
    p.add_argument("recording", nargs="?", help="a ktx recording holding the exhaustive space")
    p.add_argument("--synthetic", action="store_true", help="use the synthetic model (not measurements)")
    p.add_argument("--shape", required=True)
    p.add_argument("--samplers", default="tpe,random,grid")
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--budget", type=int, default=None, help="default: the number of feasible configs")
    p.add_argument("--tolerance", type=float, default=0.02)
    p.add_argument("--metric", default="auto", choices=("auto", "graph", "single"))
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    spec = load_spec(args.kernel_dir)
    if args.synthetic:
        point = ShapePoint.from_name(args.shape).as_dict()
        data = synthetic.recording([(point["tokens"], point["d"])], kernel=spec.name)
        path = Path(tempfile.mkdtemp()) / "synthetic.json"
        write(data, path)
        recording = Recording.load(path)
    elif args.recording:
        recording = Recording.load(args.recording)
    else:
        p.error("give RECORDING or --synthetic")
    start = time.monotonic()
    samplers = [s for s in args.samplers.split(",") if s]
    best, results = compare(
        spec, recording, args.shape, samplers, args.seeds, args.budget, args.tolerance, args.metric
    )
    wall = time.monotonic() - start
    print(f"Recording: {recording.label}")
    print(markdown(best, results, args.tolerance, CHECKPOINTS))
    print(f"\n{args.seeds} seeds per sampler, {wall:.1f} s on the CPU.")
    if args.json:
        out = {
            "recording": recording.path,
            "synthetic": recording.synthetic,
            "label": recording.label,
            "shape": args.shape,
            "tolerance": args.tolerance,
            "optimum": best.__dict__,
            "checkpoints": list(CHECKPOINTS),
            "results": [
                {
                    "sampler": r.sampler,
                    "seeds": r.seeds,
                    "reached": r.reached,
                    "evals_to_reach": list(r.evals),
                    "mean_to_reach": r.mean_to_reach,
                    "median_to_reach": r.median_to_reach,
                    "mean_fraction_at": dict(zip(map(str, CHECKPOINTS), r.fractions, strict=True)),
                }
                for r in results
            ],
            "wall_s": wall,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
