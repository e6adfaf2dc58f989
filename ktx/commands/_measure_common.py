"""Shared by ``ktx run`` and ``ktx bench``: results metadata, tables, compiler notes, pass pipelines."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import platform
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from ktx.ir.errors import KtxError

from ktx.measure.gpu import Options
from ktx.measure.harness import Harness
from ktx.measure.types import Candidate, Measurement
from ktx.spec import Spec


def add_measure_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", metavar="FILE", help="write the measurements (and provenance) as JSON")
    p.add_argument("--timeout", type=float, default=180.0, metavar="S", help="seconds per measurement")
    p.add_argument("--rounds", type=int, default=None, metavar="N", help="verification rounds (>= 3)")
    p.add_argument("--no-odd", action="store_true", help="skip the odd-size verification shapes")
    p.add_argument(
        "--reference",
        choices=("auto", "original", "python", "none"),
        default=None,
        help="verify against: the original kernel, the spec's Python reference, or nothing",
    )
    p.add_argument("--passes", metavar="PIPELINE", help="pass pipeline, e.g. 'vectorize{width=8}'")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="knob value (repeat)")


def parse_config(items: Sequence[str]) -> dict[str, int]:
    config: dict[str, int] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise KtxError(f"--config {item!r}: expected KEY=VALUE", None, "e.g. --config VEC=8")
        try:
            number = int(value)
        except ValueError:
            hint = "knob values are integers; ktx apply --knobs lists each knob's values"
            raise KtxError(f"--config {item!r}: value must be an integer", None, hint) from None
        if key.strip() in config:
            name = key.strip()
            raise KtxError(
                f"--config {name} is given twice ({name}={config[name]} and {name}={number})",
                None,
                "give each knob once",
            )
        config[key.strip()] = number
    return config


def configured_candidate(spec: Spec, passes: str | None, config: Mapping[str, int]) -> Candidate | None:
    """The candidate ``--passes``/``--config`` describe (``ktx.pipeline.candidate``)."""
    if passes is None and not config:
        return None
    from ktx.pipeline import candidate

    return candidate(spec, passes or "", dict(config))


def options(args: argparse.Namespace, spec: Spec, odd_rounds: int = 0) -> Options:
    rounds = args.rounds if args.rounds is not None else spec.verify.rounds
    if rounds < 3:
        raise KtxError(f"--rounds {rounds}: at least 3 rounds are needed", None, "give --rounds 3 or more")
    return Options(rounds=rounds, odd=not args.no_odd, odd_rounds=odd_rounds)


def provenance(harness: Harness, opts: Options) -> dict[str, Any]:
    """Where and how the numbers were taken: enough to judge or reproduce them."""
    limits = harness.device()
    versions: dict[str, str] = {"python": platform.python_version()}
    for name in ("cupy", "numpy"):
        mod = sys.modules.get(name)
        if mod is None and importlib.util.find_spec(name) is not None:
            mod = importlib.import_module(name)
        versions[name] = getattr(mod, "__version__", "?") if mod is not None else "absent"
    return {
        "device": limits.name,
        "device_limits": limits.to_dict(),
        "driver": limits.driver,
        "toolkit": limits.runtime,
        "versions": versions,
        "host": platform.node(),
        "command": " ".join(sys.argv),
        "method": {
            "verification": f"{opts.rounds} rounds of fresh seeded inputs per shape, odd-size variants "
            f"{'on' if opts.odd else 'off'}, outputs poisoned (NaN / 0xFF) before each run, "
            "inout copied fresh",
            "single": f"CUDA events around one launch, L2 flushed (2x L2 write) before each, "
            f"median of {opts.min_runs}..{opts.max_runs} runs after {opts.warmup} warm-ups",
            "graph": f"CUDA graph of >= {opts.graph_launches} launches over input sets rotated so that "
            f"together they exceed 2x L2, {opts.graph_replays} replays, time per launch",
            "speed_of_light": "bytes per call / device-to-device copy bandwidth (read + write)",
            "options": asdict(opts),
        },
    }


def us(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def status_cell(m: Measurement) -> str:
    if m.ok:
        return "ok"
    first = m.message.strip().splitlines()[0] if m.message.strip() else ""
    return f"{m.status}: {first[:70]}"


def print_table(title: str, columns: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for i, col in enumerate(columns):
        table.add_column(col, justify="left" if i < 2 else "right", overflow="fold")
    for row in rows:
        table.add_row(*row)
    Console(width=160).print(table)


def compiler_notes(results: Sequence[Measurement]) -> list[str]:
    """One line per compiler that was not the plain first choice: NVRTC without some of the
    spec's flags (``nvrtc (dropped ...)``) or nvcc after NVRTC failed (``nvcc (why)``).

    ``ktx.measure.compile`` records both in ``Resources.compiler``; a plain ``nvrtc`` or
    ``nvcc`` needs no note. Measurements that never reached the GPU carry no compiler."""
    by_compiler: dict[str, list[Measurement]] = {}
    for m in results:
        compiler = m.resources.compiler if m.resources is not None else ""
        if compiler and compiler not in ("nvrtc", "nvcc"):
            by_compiler.setdefault(compiler, []).append(m)
    notes = []
    for compiler, hits in by_compiler.items():
        kernels = ", ".join(dict.fromkeys(m.kernel for m in hits))
        where = f"{len(hits)} of {len(results)} measurements ({kernels})"
        if compiler.startswith("nvrtc (dropped"):
            flags = compiler[len("nvrtc (dropped") :].strip(" )")
            notes.append(
                f"note: {where} were compiled by NVRTC without the spec flags {flags}, which it "
                "rejects (install nvcc to compile with them)"
            )
        else:
            notes.append(f"note: {where} were compiled by the fallback compiler: {compiler}")
    return notes


def print_notes(results: Sequence[Measurement]) -> None:
    for line in compiler_notes(results):
        print(line)
