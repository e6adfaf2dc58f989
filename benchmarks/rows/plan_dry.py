"""What the rules planner proposes for the row kernels, without a GPU (issue 23, item 4).

For each kernel folder (a ``ktx.toml`` beside its source) the planner is asked round after round,
as ``ktx optimize --planner rules`` asks it, with the kernel's real facts and the passes' real
probes (each pass is run on the current pipeline, so a refusal names its construct and line). Only
the shapes' numbers are MODELLED, not measured: Little's law on a H200-like device (132 SMs,
4000 GB/s, 0.8 µs of memory latency, 16 bytes in flight per thread, 2 µs of launch floor), which
is enough to tell latency-bound, under-filled launches (one row at decode) from memory-bound ones.
Each proposed pass is assumed to be kept (the optimistic chain), so the print shows the order in
which the planner would try the row passes if each one won; a real run drops a pass that loses.

Why a script and not the loop with a fake backend: the loop's rounds compile every candidate with
nvcc, minutes per kernel on a shared CPU, while the planner only needs facts, probes and the bound.

    .venv/bin/python benchmarks/rows/plan_dry.py                 # the issue's row kernels
    .venv/bin/python benchmarks/rows/plan_dry.py kernels/rmsnorm --rounds 4 --json out.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ktx.ir import parse
from ktx.ir.errors import KtxError

from ktx.agent.analysis import Analysis, Device, analyze, kernel_facts
from ktx.agent.catalog import Catalog
from ktx.agent.loop import _Templates, error_budget, probe_passes
from ktx.agent.plan import Plan
from ktx.agent.planner import PlanContext, RoundSummary
from ktx.agent.rules import RulesPlanner
from ktx.measure.types import Measurement, Resources, Status, Timing
from ktx.registry import default_registry
from ktx.spec import ShapePoint, Spec
from ktx.specload import load_spec

ROOT = Path(__file__).resolve().parents[2]

#: The issue's row kernels: the suite's norms, llm.c's softmax and layernorm (shared/llmc), and
#: the real-code row kernels (benchmarks/realcode, sources fetched into its src/).
KERNELS: tuple[str, ...] = (
    "kernels/rmsnorm",
    "kernels/fused_add_rmsnorm",
    "benchmarks/llmc/softmax_forward/v1",
    "benchmarks/llmc/layernorm_forward/v1",
    "benchmarks/realcode/apex__cuApplyRMSNorm",
    "benchmarks/realcode/apex__cuApplyLayerNorm",
    "benchmarks/realcode/deepspeed__pre_rms_norm",
    "benchmarks/realcode/ggml__soft_max_f32",
    "benchmarks/realcode/ggml__norm_f32",
    "benchmarks/realcode/exllamav2__rms_norm_kernel",
    "benchmarks/realcode/flashinfer__RMSNormKernel",
    "benchmarks/realcode/flashinfer__FusedAddRMSNormKernel",
)

#: The passes issue 23 is about: their verdict is printed every round, proposed or not.
ROW_PASSES = ("row-owner", "online", "row-registers", "cluster-rows")

SMS = 132
PEAK_B_PER_US = 4.0e6  # 4000 GB/s
LATENCY_US = 0.8
INFLIGHT_B_PER_THREAD = 16
FLOOR_US = 2.0
DEVICE = Device("MODELLED H200-like device (plan_dry.py)", SMS, PEAK_B_PER_US / 1e3)


def modelled(spec: Spec, point: ShapePoint) -> Measurement:
    """One shape's MODELLED measurement of the original (see the module docstring)."""
    values = spec.point_values(point)
    env = spec.env(point)
    nbytes = spec.bytes_moved(env)
    blocks, threads = math.prod(values.grid), math.prod(values.block)
    per_sm = max(1, min(32, 2048 // max(1, threads)))
    resident = min(blocks, SMS * per_sm) * threads
    bandwidth = min(PEAK_B_PER_US, resident * INFLIGHT_B_PER_THREAD / LATENCY_US)
    us = FLOOR_US + nbytes / bandwidth
    t = Timing(us, us, us, us, us, us, 1)
    occupancy = min(1.0, per_sm * threads / 2048)
    res = Resources(32, 0, values.shared, 0, 1024, threads, per_sm, occupancy, "warps")
    sol = nbytes / PEAK_B_PER_US
    return Measurement(
        kernel=spec.name, shape=point.name, config={}, status=Status.OK, single=t, graph=t,
        resources=res, grid=values.grid, block=values.block, bytes=nbytes,
        flops=spec.flops_done(env), sol_us=sol, sol_fraction=sol / us,
    )  # fmt: skip


@dataclass(frozen=True)
class RoundView:
    """One planning round of the dry run: what was proposed and each row pass's verdict."""

    round: int
    pipeline: str
    proposed: str
    rationale: str
    row_verdicts: tuple[tuple[str, str, str], ...]  # (pass, verdict, reason or probe text)

    def to_json(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "pipeline": self.pipeline,
            "proposed": self.proposed,
            "rationale": self.rationale,
            "row_passes": [{"pass": p, "verdict": v, "why": w} for p, v, w in self.row_verdicts],
        }


def staged(folder: Path, scratch: Path) -> Path:
    """``folder`` itself, or for an llm.c ladder spec (benchmarks/llmc/NAME/VERSION) the folder
    benchmarks/llmc/run.py stages: the spec beside the unmodified llm.c file (shared/llmc)."""
    if folder.parent.parent.name != "llmc" or not (folder / "ktx.toml").is_file():
        return folder
    import importlib.util

    spec = importlib.util.spec_from_file_location("llmc_run", folder.parent.parent / "run.py")
    assert spec is not None and spec.loader is not None
    run = importlib.util.module_from_spec(spec)
    sys.modules["llmc_run"] = run
    spec.loader.exec_module(run)
    ladder = next(lad for lad in run.LADDERS if lad.name == folder.parent.name)
    return Path(run.stage(ladder, folder.name, run.llmc_cuda_dir(ROOT / "shared" / "llmc"), scratch))


def dry_run(folder: Path, rounds: int = 5, shapes: str | None = None) -> tuple[Analysis, list[RoundView]]:
    """The planner's rounds on ``folder`` with modelled numbers, each proposal assumed kept."""
    with tempfile.TemporaryDirectory() as scratch:
        return _dry_run(staged(folder, Path(scratch)), rounds, shapes)


def _dry_run(folder: Path, rounds: int, shapes: str | None) -> tuple[Analysis, list[RoundView]]:
    spec = load_spec(folder)
    registry = default_registry()
    catalog = Catalog.from_registry(registry)
    templates = _Templates(spec, registry)
    facts = kernel_facts(parse(spec.source_text(), str(spec.folder / spec.source)), spec.kernel)
    tolerance, fast_budget = error_budget(spec)
    points = spec.shape_set(shapes).points
    pairs = [(modelled(spec, p), "graph") for p in points]
    analysis = analyze(
        spec.name, "", facts, pairs, DEVICE, flags=spec.flags, tolerance=tolerance,
        fast_math_budget=fast_budget,
    )  # fmt: skip
    planner = RulesPlanner()
    current = Plan((), "the original kernel")
    history: list[RoundSummary] = []
    views: list[RoundView] = []
    for index in range(1, rounds + 1):
        probes = probe_passes(spec, current, catalog, registry, templates)
        context = PlanContext(
            spec.name, index, rounds - index, analysis, catalog, current, tuple(history), probes
        )
        verdicts = {n: (v, r) for n, v, r in planner.candidates(context)}
        rows = []
        for name in ROW_PASSES:
            verdict, reason = verdicts.get(name, ("does not fire", ""))
            probe = context.probe(name)
            if not reason and probe is not None:
                reason = probe.text()
            rows.append((name, verdict, reason))
        plan = planner.plan(context).plan
        added = "" if plan.stop else ",".join(n for n in plan.names if n not in current.names)
        views.append(RoundView(index, current.pipeline, added, plan.rationale, tuple(rows)))
        if plan.stop:
            break
        history.append(
            RoundSummary(index, plan.pipeline, "rules", plan.rationale, "improved", 1.0 + 0.1 * index)
        )
        current = plan
    return analysis, views


def _cut(text: str, width: int) -> str:
    """``text`` within ``width``: its head and its tail (a refusal's construct and line come last)."""
    if len(text) <= width:
        return text
    return f"{text[: width // 3]} ... {text[-(width - width // 3 - 5) :]}"


def report(folder: Path, analysis: Analysis, views: list[RoundView], width: int = 400) -> str:
    lines = [f"== {folder} ({analysis.kernel}): {analysis.bound}-bound (modelled)"]
    if analysis.facts.online_pairs:
        lines.append(f"   online pairs: {'; '.join(analysis.facts.online_pairs)}")
    if analysis.facts.online_refusals:
        lines.append(f"   online refusals: {_cut('; '.join(analysis.facts.online_refusals), width)}")
    if analysis.facts.row_keep:
        lines.append(f"   row keep: {', '.join(analysis.facts.row_keep)}")
    for v in views:
        head = f"   round {v.round} on `{v.pipeline or '(original)'}`: "
        lines.append(head + (f"propose {v.proposed}" if v.proposed else f"STOP: {_cut(v.rationale, width)}"))
        for name, verdict, why in v.row_verdicts:
            lines.append(f"      {name}: {verdict}{(' - ' + _cut(why, width)) if why else ''}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="*", help="kernel folders (default: the issue's row kernels)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shapes", default=None, help="shape set (default: the spec's)")
    ap.add_argument("--json", default="", help="write the rounds here")
    args = ap.parse_args(argv)
    folders = [Path(f) for f in args.folders] or [Path(k) for k in KERNELS]
    out: dict[str, Any] = {}
    for folder in folders:
        try:
            analysis, views = dry_run(
                folder if folder.is_absolute() else ROOT / folder, args.rounds, args.shapes
            )
        except (KtxError, OSError) as exc:
            print(f"== {folder}: cannot load ({str(exc).splitlines()[0][:300]})")
            out[str(folder)] = {"error": str(exc)[:300]}
            continue
        print(report(folder, analysis, views), flush=True)
        out[str(folder)] = {"bound": analysis.bound, "rounds": [v.to_json() for v in views]}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
