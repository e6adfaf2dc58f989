"""``ktx bench DIR``: time every kernel of a suite at every shape of a shape set.

For each kernel folder under DIR (or DIR itself) and each shape, the original kernel is
verified and timed (single launch and in a CUDA graph) and set against speed-of-light (bytes
per call over the measured copy bandwidth). Needs a GPU; without one it exits with status 2.
"""

from __future__ import annotations

import argparse
import sys

from ktx.ir.errors import KtxError, Location

from ktx.commands._checks import check_number, load_checked_spec, output_file
from ktx.commands._measure_common import (
    add_measure_options,
    configured_candidate,
    options,
    parse_config,
    pct,
    print_notes,
    print_table,
    provenance,
    status_cell,
    us,
)
from ktx.commands._original import failure_line, warn_tolerances
from ktx.measure.harness import Harness, ReferenceChoice
from ktx.measure.protocol import Supervisor
from ktx.measure.replay import save_results
from ktx.measure.types import Measurement
from ktx.registry import add_plugin_option, load_plugins
from ktx.spec import find_specs


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("bench", help="time the original kernels of a suite on the GPU")
    p.add_argument("dir", metavar="DIR", help="a kernel folder, or a folder of kernel folders")
    p.add_argument("--shapes", metavar="NAME", help="shape set to run (default: each spec's default)")
    p.add_argument("--kernel", action="append", default=[], metavar="NAME", help="only these kernels")
    add_measure_options(p)
    add_plugin_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    load_plugins(args.plugin)
    check_number("--timeout", args.timeout, 0, above=True, hint="seconds per measurement, e.g. 180")
    if args.json:
        output_file(args.json, "--json")
    folders = find_specs(args.dir)
    if args.kernel:
        folders = [f for f in folders if f.name in set(args.kernel)]
    if not folders:
        hint = "give a kernel folder, or a folder of them; ktx init FILE.cu drafts a ktx.toml"
        raise KtxError("no kernel folders with a ktx.toml found", Location(args.dir), hint)
    config = parse_config(args.config)
    specs = [load_checked_spec(f) for f in folders]
    plan = []
    for spec in specs:
        points = spec.shape_set(args.shapes).points if args.shapes else spec.shape_set().points
        plan.append((spec, points, configured_candidate(spec, args.passes, config)))
    for spec in specs:  # after every check of the input: an error line comes first
        warn_tolerances(spec)
    total = sum(len(points) * (2 if cand else 1) for _, points, cand in plan)

    results: list[Measurement] = []
    rows: list[list[str]] = []
    meta: dict[str, object] = {}
    with Supervisor() as supervisor, Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        transient=True, console=Console(stderr=True),
    ) as progress:  # fmt: skip
        task = progress.add_task("bench", total=total)
        for spec, points, cand in plan:
            # A bench times originals: by default each checks itself (catching races and unwritten
            # outputs) with one round per odd variant; the Python references are the tests' job.
            opts = options(args, spec, odd_rounds=1)
            reference: ReferenceChoice = args.reference or "original"
            with Harness(
                spec, reference=reference, options=opts, timeout_s=args.timeout, supervisor=supervisor
            ) as harness:
                if not meta:
                    meta = provenance(harness, opts)
                jobs = [(harness.original, p) for p in points]
                if cand is not None:
                    jobs += [(cand, p) for p in points]
                by_shape: dict[str, dict[str, Measurement]] = {}
                for (job_cand, point), m in zip(jobs, harness.measure_many(jobs), strict=True):
                    progress.update(task, advance=1, description=f"{spec.name} {point.name}")
                    results.append(m)
                    by_shape.setdefault(point.name, {})["cfg" if job_cand is cand else "orig"] = m
                for point in points:
                    orig = by_shape[point.name]["orig"]
                    tuned = by_shape[point.name].get("cfg")
                    rows.append([
                        spec.name, point.name, status_cell(orig), us(orig.single_us), us(orig.graph_us),
                        "-" if tuned is None else (us(tuned.time_us) if tuned.ok else str(tuned.status)),
                        pct(orig.sol_fraction), us(orig.sol_us), f"{orig.bytes or 0:,}",
                        "-" if orig.bandwidth_gbs is None else f"{orig.bandwidth_gbs:.0f}",
                    ])  # fmt: skip
    print_table(
        f"ktx bench on {meta.get('device', '?')} (times per launch)",
        ["kernel", "shape", "status", "single µs", "graph µs", "config µs", "SoL", "SoL µs", "bytes", "GB/s"],
        rows,
    )
    print_notes(results)
    if args.json:
        save_results(args.json, results, {"kind": "bench", **meta})
        print(f"wrote {len(results)} measurements to {args.json}", file=sys.stderr)
    failed = [m for m in results if not m.ok]
    by_name = {s.name: s for s in specs}
    for m in failed:
        if not m.config and m.kernel in by_name:  # the original itself
            print(f"ktx: error: {failure_line(by_name[m.kernel], m)}", file=sys.stderr)
        else:
            print(f"{m.kernel} {m.shape}: {m.status}: {m.message}", file=sys.stderr)
    return 1 if failed else 0
