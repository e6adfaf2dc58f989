"""Evaluations to 0.98 of the exhaustive optimum for ``ktx tune``'s search, replayed over recordings.

    .venv/bin/python scripts/search_replay.py RECORDING [RECORDING ...] [--kernel-dir DIR]
        [--shapes 'tokens=16,d=4096;...'] [--methods after,random,...] [--seeds 20] [--trials 50]
        [--json OUT.json]

One command scores any recording ``scripts/record_space.py`` wrote (``.json`` or ``.json.gz``),
held-out ones included: the kernel's folder is the one the recording names (``kernel_dir``, written
by ``record_space.py``), else ``kernels/<kernel>``, else ``--kernel-dir``; the shapes are those the
recording holds completely (``stats.exhaustive_shapes``), else every recorded shape. Each row says
whether the goal of issue 23 holds there: the median seed reaches ``--fraction`` of the optimum
within 1% of the space (at least 10 evaluations). The older form ``search_replay.py KERNEL_DIR
RECORDING`` still works.

Methods (``ktx.search.tunebench.Method``):

* ``after``: today's default, ``ktx tune`` as it runs (``--sampler auto``: the cost model; warm
  starts from shapes near in work, one at a time, dropped once one is slow);
* ``before``: session 7's default: TPE, warm start from shapes within 4x work, every seed taken;
* ``tpe``: TPE with today's warm-start rules;
* ``random``: uniform sampling, the yardstick;
* ``tpe-far`` / ``tpe-far-drop`` / ``after-far``: the warm start from any tuned shape (no work
  limit), to show what the drop rule buys where a seed misleads;
* ``after-warm1`` / ``after-cold``: the default with one warm-start config per neighbour shape
  instead of three, or none: what the warm start costs where a neighbour's best is not this
  shape's (FlashInfer RMSNorm at batch 4096, d 4096 after batch 1024, d 8192).

Exit status: 0, or 2 with one line for a recording or kernel folder that cannot be read.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a file from anywhere: the repository's ktx, not an installed one
    sys.path.insert(0, str(ROOT))

from ktx.ir.errors import KtxError, Location  # noqa: E402

from ktx.search.recording import Recording  # noqa: E402
from ktx.search.tunebench import Method, as_json, bench, markdown  # noqa: E402
from ktx.specload import load_spec  # noqa: E402

METHODS = {
    "before": Method("before (tpe, warm <=4x, no drop)", sampler="tpe", warm_drop=False),
    "after": Method("after (auto = cost model, drop)", sampler="auto"),
    "tpe": Method("tpe, warm <=4x, drop", sampler="tpe"),
    "random": Method("random", sampler="random"),
    "tpe-far": Method(
        "tpe, warm from any shape, no drop", sampler="tpe", warm_drop=False, max_work_ratio=math.inf
    ),
    "tpe-far-drop": Method("tpe, warm from any shape, drop", sampler="tpe", max_work_ratio=math.inf),
    "after-far": Method("cost model, warm from any shape, drop", sampler="auto", max_work_ratio=math.inf),
    "after-warm1": Method("cost model, one warm seed per neighbour, drop", sampler="auto", warm_start=1),
    "after-cold": Method("cost model, no warm start", sampler="auto", warm_start=0),
}


def read_recording(path: Path) -> tuple[dict[str, Any], Recording]:
    """The recording's raw document (for the fields :class:`Recording` does not keep) and the
    recording itself; ``.gz`` files are read as they are."""
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        data = json.loads(raw)
    except OSError as exc:
        raise KtxError(f"cannot read the recording: {exc.strerror or exc}", Location(str(path))) from None
    except ValueError as exc:
        raise KtxError(f"the recording is not JSON: {exc}", Location(str(path))) from None
    if not isinstance(data, dict):
        raise KtxError("not a ktx recording", Location(str(path)), "a JSON object is expected")
    return data, Recording.from_dict(data, str(path))


def kernel_dir_for(data: dict[str, Any], recording: Recording, path: Path, given: str | None) -> Path:
    """The kernel folder whose spec the replay needs: ``--kernel-dir``, else the one the recording
    names (relative to the repository, or to the recording's folder), else ``kernels/<kernel>``."""
    if given:
        return Path(given)
    named = data.get("kernel_dir")
    candidates = []
    if isinstance(named, str) and named:
        candidates += [ROOT / named, path.parent / named, Path(named)]
    candidates.append(ROOT / "kernels" / recording.kernel)
    for c in candidates:
        if (c / "ktx.toml").is_file():
            return c
    raise KtxError(
        f"no kernel folder found for {recording.kernel!r} (looked at {', '.join(map(str, candidates))})",
        Location(str(path)),
        "give --kernel-dir",
    )


def shapes_for(data: dict[str, Any], recording: Recording, given: str) -> list[str]:
    """``given`` (';'-separated), else the shapes the recording holds completely, else all of them;
    only shapes with the original's measurement (the metric and the drop rule read it)."""
    if given:
        return [s for s in given.split(";") if s]
    stats = data.get("stats")
    complete = stats.get("exhaustive_shapes") if isinstance(stats, dict) else None
    # a recording that names its complete shapes is taken at its word, none included (a needle
    # check's re-measure of a few configs is no space); older ones hold every shape they have
    shapes = [str(s) for s in complete] if isinstance(complete, list) else list(recording.shapes)
    return [s for s in shapes if recording.get(s, {}) is not None]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("paths", nargs="+", help="recordings (an older first argument: the kernel folder)")
    p.add_argument("--kernel-dir", default=None, help="the kernel folder (default: the recording's)")
    p.add_argument("--shapes", default="", help="';'-separated shapes (default: every complete shape)")
    p.add_argument("--methods", default="after,random")
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--trials", type=int, default=50, help="evaluation budget per shape")
    p.add_argument("--fraction", type=float, default=0.98)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    first = Path(args.paths[0])
    if len(args.paths) > 1 and first.is_dir() and (first / "ktx.toml").is_file() and not args.kernel_dir:
        args.kernel_dir, args.paths = str(first), args.paths[1:]
    unknown = [m for m in args.methods.split(",") if m and m not in METHODS]
    if unknown:
        p.error(f"unknown method {unknown[0]!r} (known: {', '.join(METHODS)})")
    return args


def score(path: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Replay every method over the seeds on one recording; print its table."""
    data, recording = read_recording(path)
    kernel_dir = kernel_dir_for(data, recording, path, args.kernel_dir)
    spec = load_spec(kernel_dir)
    shapes = shapes_for(data, recording, args.shapes)
    if not shapes:
        raise KtxError(
            "no complete shape with the original's measurement to replay",
            Location(str(path)),
            "give --shapes",
        )
    names = [m for m in args.methods.split(",") if m]
    start = time.monotonic()
    outcomes = bench(spec, recording, shapes, [METHODS[m] for m in names], range(args.seeds), args.trials,
                     args.fraction)  # fmt: skip
    wall = time.monotonic() - start
    print(f"\n## {recording.kernel} ({path})\n\nRecording: {recording.label} ({recording.date})")
    print(f"Pipeline: {recording.pipeline}; kernel folder {kernel_dir}\n")
    print(markdown(outcomes, args.fraction))
    mine = [o for o in outcomes if o.method == METHODS["after"].name]
    if mine:
        met = sum(o.goal_met for o in mine)
        print(
            f"\nGoal (median seed within 1% of the space, default path): met at {met} of {len(mine)} shapes."
        )
    print(f"{args.seeds} seeds, budget {args.trials} evaluations per shape, {wall:.0f} s on the CPU.")
    return {
        "recording": str(path),
        "kernel": recording.kernel,
        "kernel_dir": str(kernel_dir),
        "label": recording.label,
        "pipeline": recording.pipeline,
        "methods": {k: METHODS[k].__dict__ for k in names},
        "outcomes": as_json(outcomes),
        "wall_s": wall,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results = []
    for path in args.paths:
        try:
            results.append(score(Path(path), args))
        except KtxError as exc:
            print(exc, file=sys.stderr)
            return 2
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        doc = {"fraction": args.fraction, "seeds": args.seeds, "trials": args.trials, "recordings": results}
        if len(results) == 1:  # the shape of the earlier single-recording files
            doc.update(results[0])
        args.json.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
