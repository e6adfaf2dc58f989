"""Compare samplers on a recorded exhaustive space: evaluations to reach within 2% of the optimum.

    .venv/bin/python scripts/compare_samplers.py KERNEL_DIR RECORDING.json --shape tokens=1,d=4096 \
        [--samplers tpe,random,grid] [--seeds 20] [--tolerance 0.02] [--json OUT.json]

On a space recorded by ``scripts/record_space.py`` (issue 12):

    .venv/bin/python scripts/compare_samplers.py kernels/act_and_mul_scalar space.json \
        --shape tokens=16,d=4096 --fractions 0.01,0.05,0.1 --json compare.json

``--fractions`` gives the checkpoints as fractions of the feasible space (best / optimum after 1%,
5%, 10% of it) and, unless ``--budget`` is given, the budget: the largest of them. Each cell of
the table is the mean over seeds; a ``*`` marks a mean outside uniform random sampling's 95% band
(the central 95% of random's seeds at that checkpoint), i.e. a sampler that differs from luck.

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

from ktx.ir.errors import KtxError

from ktx.search import synthetic
from ktx.search.compare import CHECKPOINTS, SamplerResult, compare, fraction_checkpoints, markdown, optimum
from ktx.search.recording import Recording, write
from ktx.spec import ShapePoint
from ktx.specload import load_spec


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
    p.add_argument("--fractions", default="", help="checkpoints as fractions of the space: 0.01,0.05,0.1")
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
    checkpoints: tuple[int, ...] = CHECKPOINTS
    budget = args.budget
    if args.fractions:
        feasible = optimum(recording, args.shape, args.metric).feasible
        checkpoints = fraction_checkpoints([float(f) for f in args.fractions.split(",")], feasible)
        budget = budget or max(checkpoints)
    results: list[SamplerResult] = []
    skipped: list[str] = []
    for sampler in samplers:  # one at a time: a sampler whose package is missing is left out
        try:
            best, found = compare(
                spec,
                recording,
                args.shape,
                [sampler],
                args.seeds,
                budget,
                args.tolerance,
                args.metric,
                checkpoints,
            )
        except KtxError as exc:
            skipped.append(f"{sampler} ({exc.message})")
            continue
        results += found
    if not results:
        p.error("no sampler could run: " + "; ".join(skipped))
    wall = time.monotonic() - start
    print(f"Recording: {recording.label}")
    if skipped:
        print("Left out: " + "; ".join(skipped))
    print(markdown(best, results, args.tolerance, checkpoints))
    random_result = next((r for r in results if r.sampler == "random"), None)
    if random_result is not None:
        print("\nAgainst random sampling's 95% band (mean fraction of the optimum; * outside the band):\n")
        print(band_table(results, random_result, checkpoints, args.fractions))
    print(f"\n{args.seeds} seeds per sampler, {wall:.1f} s on the CPU.")
    if args.json:
        out = {
            "recording": recording.path,
            "synthetic": recording.synthetic,
            "label": recording.label,
            "shape": args.shape,
            "tolerance": args.tolerance,
            "optimum": best.__dict__,
            "checkpoints": list(checkpoints),
            "fractions": args.fractions,
            "budget": budget,
            "results": [
                {
                    "sampler": r.sampler,
                    "seeds": r.seeds,
                    "reached": r.reached,
                    "evals_to_reach": list(r.evals),
                    "mean_to_reach": r.mean_to_reach,
                    "median_to_reach": r.median_to_reach,
                    "mean_fraction_at": dict(zip(map(str, checkpoints), r.fractions, strict=True)),
                    "band_at": {str(n): r.band(i) for i, n in enumerate(checkpoints)},
                }
                for r in results
            ],
            "wall_s": wall,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


def band_table(
    results: list[SamplerResult], random_result: SamplerResult, checkpoints: tuple[int, ...], fractions: str
) -> str:
    """Each sampler's mean fraction at each checkpoint, starred where it lies outside random's band."""
    names = fractions.split(",") if fractions else [str(n) for n in checkpoints]
    head = [
        f"@{n} ({f}{' of the space' if fractions else ''})" for n, f in zip(checkpoints, names, strict=True)
    ]
    lines = ["| sampler | " + " | ".join(head) + " |", "| --- |" + " ---: |" * len(head)]
    for r in results:
        cells = []
        for i, value in enumerate(r.fractions):
            band = random_result.band(i)
            outside = band is not None and r is not random_result and not band[0] <= value <= band[1]
            cells.append(f"{value:.3f}{'*' if outside else ''}")
        lines.append(f"| {r.sampler} | " + " | ".join(cells) + " |")
    bands = [random_result.band(i) for i in range(len(checkpoints))]
    lines.append(
        "| random's 95% band | "
        + " | ".join("-" if b is None else f"{b[0]:.3f}-{b[1]:.3f}" for b in bands)
        + " |"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
