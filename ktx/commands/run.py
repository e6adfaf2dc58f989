"""``ktx run KERNEL_DIR``: verify and time one configuration against the original kernel.

Without ``--passes``/``--config`` the original kernel itself is verified (against the Python
reference when the spec has one, else against a second run of itself) and timed. Needs a GPU;
without one it fails with exit status 2 and says so. ``--sanitize`` runs the config once under
compute-sanitizer's memcheck and racecheck instead (:mod:`ktx.measure.sanitize`).
"""

from __future__ import annotations

import argparse
import sys

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
from ktx.measure.harness import Harness
from ktx.measure.replay import save_results
from ktx.measure.sanitize import sanitize
from ktx.measure.types import Measurement, config_key, original_candidate
from ktx.registry import add_plugin_option, load_plugins


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("run", help="verify and time one configuration of a kernel on the GPU")
    p.add_argument("kernel_dir", metavar="KERNEL_DIR", help="a folder with kernel.cu and ktx.toml")
    p.add_argument("--shape", metavar="NAME", help="a shape set (its first shape) or NAME=VALUE,...")
    p.add_argument(
        "--sanitize",
        action="store_true",
        help="run the config once under compute-sanitizer (memcheck and racecheck) instead of timing it",
    )
    add_measure_options(p)
    add_plugin_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    load_plugins(args.plugin)
    check_number("--timeout", args.timeout, 0, above=True, hint="seconds per measurement, e.g. 180")
    if args.json:
        output_file(args.json, "--json")
    config = parse_config(args.config)
    spec = load_checked_spec(args.kernel_dir)
    candidate = configured_candidate(spec, args.passes, config)
    point = spec.find_point(args.shape) if args.shape else spec.shape_set().points[0]
    warn_tolerances(spec)  # after every check of the input: an error line comes first
    if args.sanitize:  # ktx.measure.sanitize: exit 2 when compute-sanitizer is missing
        code, block = sanitize(spec, candidate or original_candidate(spec), point, max(args.timeout, 300.0))
        print(block)
        return code
    opts = options(args, spec)
    with Harness(spec, reference=args.reference or "auto", options=opts, timeout_s=args.timeout) as harness:
        meta = provenance(harness, opts)
        results: list[Measurement] = [harness.measure(harness.original, point)]
        if candidate is not None:
            results.append(harness.measure(candidate, point))
    rows = []
    for m in results:
        r = m.resources
        rows.append([
            m.label or config_key(m.config),
            status_cell(m), us(m.single_us), us(m.graph_us), pct(m.sol_fraction),
            f"{m.bytes or 0:,}", "-" if r is None else str(r.registers),
            "-" if r is None else pct(r.occupancy),
            "-" if m.max_abs_err is None else f"{m.max_abs_err:.3g}",
        ])  # fmt: skip
    print_table(
        f"{spec.name} @ {point.name} on {meta['device']}",
        ["config", "status", "single µs", "graph µs", "SoL", "bytes", "regs", "occupancy", "max err"],
        rows,
    )
    print_notes(results)
    if args.json:
        save_results(args.json, results, {"kernel": spec.name, "shape": point.name, **meta})
    failed = [m for m in results if not m.ok]
    for m in failed:
        if m is results[0]:
            print(f"ktx: error: {failure_line(spec, m)}", file=sys.stderr)
        else:
            print(f"{m.label or dict(m.config)}: {m.status}: {m.message}", file=sys.stderr)
    return 1 if failed else 0
