"""``ktx tune KERNEL_DIR``: search the knobs of a kernel's template on the GPU (or a recording).

Each shape of the chosen sets gets its own Optuna study; the results become the best config per
shape, its source, a dispatch table (JSON and a C++ header) checked on held-out shapes, a run log
and a summary table, all in ``--out`` (default ``.ktx/runs/<kernel>/``). Running the same command
again continues the run. See ``docs/search.md``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ktx.ir.errors import KtxError

from ktx.commands._checks import check_number, load_checked_spec, output_folder
from ktx.commands._original import report_failed_originals, warn_tolerances
from ktx.registry import add_plugin_option, run_plugins
from ktx.search.evaluate import METRICS
from ktx.search.runner import TuneRequest, select_points
from ktx.search.study import SAMPLERS
from ktx.search.workers import run_tune


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("tune", help="search a kernel's knobs per shape; write configs and a dispatch table")
    p.add_argument("kernel_dir", metavar="KERNEL_DIR", help="a folder with kernel.cu and ktx.toml")
    p.add_argument("--passes", metavar="PIPELINE", default="", help="pass pipeline exposing the knobs")
    p.add_argument(
        "--shapes",
        metavar="NAMES",
        default="",
        help="shape sets (quick,default) or shapes (tokens=1,d=4096); ';' separates items",
    )
    p.add_argument("--trials", type=int, default=100, metavar="N", help="evaluations per shape (default 100)")
    p.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="S",
        help="seconds for the whole run: baselines, search, final check, held-out check and outputs "
        "(time for the checks is reserved up front; the outputs are always written)",
    )
    p.add_argument(
        "--sampler",
        choices=SAMPLERS,
        default="auto",
        help="auto: grid if the space fits the budget, else tpe",
    )
    p.add_argument(
        "--seed", type=int, default=None, metavar="N", help="sampler seed (repeatable with --jobs 1)"
    )
    p.add_argument(
        "--storage", metavar="URL", default=None,
        help="Optuna RDB URL or journal:PATH (default: a journal file in --out)",
    )  # fmt: skip
    p.add_argument("--workers", type=int, default=1, metavar="N", help="worker processes on the same studies")
    p.add_argument("--backend", default="cupy", metavar="cupy|replay:FILE", help="GPU harness or a recording")
    p.add_argument(
        "--out", type=Path, default=None, metavar="DIR", help="run folder (default .ktx/runs/KERNEL)"
    )
    p.add_argument(
        "--metric", choices=METRICS, default="auto", help="auto: graph time under 20 µs, else single"
    )
    p.add_argument("--joint", action="store_true", help="one config for all shapes (geometric mean)")
    p.add_argument("--holdout", default="auto", metavar="auto|none|SETS", help="shapes to check the table on")
    p.add_argument(
        "--jobs", type=int, default=1, metavar="N", help="trials in flight per worker (compiles overlap)"
    )
    p.add_argument(
        "--warm-start", type=int, default=3, metavar="K", help="configs taken from each neighbour shape"
    )
    p.add_argument(
        "--min-occupancy", type=float, default=0.0, metavar="F", help="refuse configs below this occupancy"
    )
    p.add_argument(
        "--max-spills", type=int, default=None, metavar="BYTES", help="refuse more local memory per thread"
    )
    p.add_argument(
        "--min-gain",
        type=float,
        default=None,
        metavar="F",
        help="the table uses a config only where the 95%% interval of its re-measured speedup (paired "
        "with the original) lies above 1 + F (default 0.01; where nothing can be re-measured, as on "
        "replay: the measured spread (p90-p10)/median of the two timings, at least 0.01)",
    )
    p.add_argument("--bucket", default=None, metavar="VAR", help="dispatch bucket variable (default: tokens)")
    p.add_argument("--study", default="", metavar="NAME", help="study name prefix (default: the kernel)")
    p.add_argument("--quiet", action="store_true", help="no progress display")
    add_plugin_option(p)
    p.add_argument("--worker-index", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--throttle", type=float, default=0.0, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def parse_shapes(text: str) -> tuple[str, ...]:
    """``quick,default`` (set names) or ``tokens=1,d=4096`` (one shape); ``;`` separates items."""
    out: list[str] = []
    for item in text.split(";"):
        item = item.strip()
        if "=" in item:
            out.append(item)
        else:
            out += [s.strip() for s in item.split(",") if s.strip()]
    return tuple(out)


def check_options(args: argparse.Namespace) -> None:
    """Every numeric option in its meaningful range, before anything is measured."""
    if args.trials < 1:
        raise KtxError(f"--trials {args.trials}: need at least 1")
    check_number("--time-limit", args.time_limit, 0, above=True, hint="seconds for the whole run, e.g. 600")
    check_number("--workers", args.workers, 1)
    check_number("--jobs", args.jobs, 1)
    check_number("--warm-start", args.warm_start, 0, hint="0 switches warm starts off")
    check_number("--min-occupancy", args.min_occupancy, 0, high=1, hint="a fraction, e.g. 0.25")
    check_number("--max-spills", args.max_spills, 0, hint="bytes of local memory per thread, e.g. 0")
    check_number("--min-gain", args.min_gain, 0, hint="a fraction: 0.01 asks for 1% above the original")
    check_number("--seed", args.seed, 0, hint="e.g. --seed 0")


def run(args: argparse.Namespace) -> int:
    check_options(args)
    if args.out is not None:
        output_folder(args.out, "--out")
    spec = load_checked_spec(args.kernel_dir)
    select_points(spec, parse_shapes(args.shapes))  # a bad shape is refused before any warning
    warn_tolerances(spec)
    run_dir = args.out or Path(".ktx") / "runs" / spec.name
    run_plugins(args.plugin, run_dir, args.backend)
    request = TuneRequest(
        kernel_dir=Path(args.kernel_dir),
        passes=args.passes,
        shapes=parse_shapes(args.shapes),
        trials=args.trials,
        time_limit=args.time_limit,
        sampler=args.sampler,
        seed=args.seed,
        storage=args.storage,
        workers=args.workers,
        backend=args.backend,
        out=args.out,
        metric=args.metric,
        joint=args.joint,
        holdout=args.holdout,
        jobs=args.jobs,
        warm_start=args.warm_start,
        min_occupancy=args.min_occupancy,
        max_spills=args.max_spills,
        min_gain=args.min_gain,
        bucket_var=args.bucket,
        study=args.study,
        quiet=args.quiet,
        worker_index=args.worker_index,
        throttle=args.throttle,
    )
    summary = run_tune(request)
    if summary is not None:
        print(summary.markdown())
        if report_failed_originals(spec, [r.original for r in summary.results if not r.skipped]):
            return 1
    return 0
