"""Session 10, s10-ladder: ktx configs against hand-written kernels, verified, then timed in pairs.

``run.py`` (the llm.c ladder) times the hand-written versions with ``ktx bench`` and ktx's result
with ``ktx optimize``: two processes, two moments of the GPU. Here both sides of a cell run in
one worker of one harness (the naive kernel's spec: its arguments, shapes and Python
reference): each candidate is first verified against the reference (one round, no odd sizes:
the hand kernels need C % 8 == 0; ktx's configs were verified with odd sizes in their runs),
then the two are timed alternately, A B A B ... (:meth:`Harness.measure_paired`, ``PAIRS``
pairs), and the ratio A / B (time, so below 1 means A is faster) gets its 95% interval
(:func:`ktx.search.paired.ratio_interval`) in the single-launch metric (L2 flushed; what the
ladder uses for these cells, the naive kernels running over 20 µs) and in the graph metric.

Cells (in order of value; each skipped once the deadline is near):

* llm.c layernorm, fused_residual and encoder (B=1): ktx's session-9 config, and the config the
  new search steps reach first (``ktx.agent.search.sweep_new_knobs``), against the best hand
  version and block size of session 9's ladder at that shape;
* merge_attn_states: the hand variant (``benchmarks/merge_hand``, PACKS 1 and 2, 256 threads)
  against the suite kernel, and the traffic probe (not a merge: timed unverified, the floor for
  those bytes) against it.

    python scripts/gpu_s10_ladder.py --llmc shared/llmc --out DIR [--deadline-s 200] [--dry-run]

``--dry-run`` builds every candidate (templates instantiated, launches resolved at every shape)
and compiles none: the CPU check that the script's configs exist in today's passes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PAIRS = 7


@dataclass(frozen=True)
class Side:
    """One side of a pair: a ktx config of the spec's kernel, a hand kernel, or another source."""

    label: str
    pipeline: str = ""  # ktx: the pass pipeline ("" with no source: the spec's own kernel)
    config: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # per shape
    hand: str = ""  # llm.c hand version ("v4"), staged beside the naive one
    bs: Mapping[str, int] = field(default_factory=dict)  # the hand version's block size per shape
    source: str = ""  # a .cu file (repo-relative) with ``name``
    name: str = ""
    grid: tuple[str, ...] = ()
    block: tuple[str, ...] = ()
    verify: bool = True


@dataclass(frozen=True)
class Cell:
    kernel: str  # llm.c ladder name, or a kernels/ folder
    shapes: tuple[str, ...]
    a: Side
    b: Side


LN, FR, EN = "layernorm_forward", "fused_residual_forward", "encoder_forward"
B1, B8, B32 = "B=1,T=1024,C=768", "B=8,T=1024,C=768", "B=32,T=1024,C=768"
LADDER = (B1, B8, B32)


def per_shape(**configs: Mapping[str, int]) -> dict[str, Mapping[str, int]]:
    names = {"b1": B1, "b8": B8, "b32": B32}
    return {names[k]: v for k, v in configs.items()}


# Session 9's ladder (results/session9_h200x4_2026-11-28, call 2): ktx's dispatched configs and
# the best hand version and block size at each shape.
LN_S9 = Side("ktx s9 row-owner", "row-owner", per_shape(
    b1={"THREADS_PER_ROW": 256}, b8={"THREADS_PER_ROW": 32}, b32={"THREADS_PER_ROW": 32}))  # fmt: skip
LN_VEC = Side("ktx row-owner,vectorize VEC 4", "row-owner,vectorize{tie=true,peel=true}", per_shape(
    b1={"THREADS_PER_ROW": 256, "VEC_LOOPS": 4}, b8={"THREADS_PER_ROW": 32, "VEC_LOOPS": 4},
    b32={"THREADS_PER_ROW": 32, "VEC_LOOPS": 4}))  # fmt: skip
LN_HAND_BEST = {B1: ("v5", 256), B8: ("v3", 1024), B32: ("v4", 512)}
FR_S9 = Side("ktx s9 row-owner,vectorize", "row-owner,vectorize{tie=true,peel=true}", per_shape(
    b1={"THREADS_PER_ROW": 128, "VEC_LOOPS": 4}, b8={"THREADS_PER_ROW": 32, "VEC_LOOPS": 8},
    b32={"THREADS_PER_ROW": 32, "VEC_LOOPS": 8}))  # fmt: skip
FR_ONLINE = Side("ktx row-owner,online,vectorize", "row-owner,online,vectorize{tie=true,peel=true}",
                 per_shape(
    b1={"THREADS_PER_ROW": 128, "ONLINE": 1, "VEC_LOOPS": 4},
    b8={"THREADS_PER_ROW": 32, "ONLINE": 1, "VEC_LOOPS": 8},
    b32={"THREADS_PER_ROW": 32, "ONLINE": 1, "VEC_LOOPS": 8}))  # fmt: skip
FR_HAND = Side("hand", hand="v4", bs={B1: 256, B8: 512, B32: 256})
EN_S9 = Side("ktx s9 row-owner,vectorize", "row-owner,vectorize{tie=true,peel=true}",
             per_shape(b1={"THREADS_PER_ROW": 128, "VEC_LOOPS": 4}))  # fmt: skip
EN_V8 = Side("ktx row-owner,vectorize 128x8", "row-owner,vectorize{tie=true,peel=true}",
             per_shape(b1={"THREADS_PER_ROW": 128, "VEC_LOOPS": 8}))  # fmt: skip
EN_HAND = Side("hand", hand="v3", bs={B1: 512})

MERGE = "kernels/merge_attn_states"
MERGE_SHAPES = tuple(
    f"tokens={t},heads={h},head_dim={d}" for t in (256, 1536) for h, d in ((32, 128), (64, 128), (32, 256))
)
MERGE_GRID = "cdiv(tokens * heads * (head_dim // 8), {n})"
ORIGINAL = Side("original")


def hand_merge(packs: int) -> Side:
    return Side(
        f"hand PACKS={packs}", source="benchmarks/merge_hand/kernel.cu",
        name=f"merge_attn_states_hand<{packs}>",
        grid=(MERGE_GRID.format(n=256 * packs),), block=("256",),
    )  # fmt: skip


PROBE = Side(
    "traffic probe (not a merge, unverified)", source="benchmarks/merge_hand/kernel.cu",
    name="merge_traffic_probe", grid=(MERGE_GRID.format(n=128),), block=("128",), verify=False,
)  # fmt: skip


LN_RR = Side("ktx row-owner,row-registers (row in registers)", "row-owner,row-registers", per_shape(
    b1={"THREADS_PER_ROW": 256, "PACKS": 4}, b8={"THREADS_PER_ROW": 32, "PACKS": 32},
    b32={"THREADS_PER_ROW": 32, "PACKS": 32}))  # fmt: skip


def cells() -> list[Cell]:
    """In order of value (the deadline skips the tail; consecutive cells of one kernel share a
    harness): the ladder cells above 1.05 in session 9, the merge hand variant and its probe,
    then the rest."""

    def ln(side: Side) -> list[Cell]:
        return [Cell(LN, (s,), side, Side("hand", hand=v, bs={s: bs})) for s, (v, bs) in LN_HAND_BEST.items()]

    return [
        *ln(LN_S9),
        *ln(LN_VEC),
        Cell(FR, LADDER, FR_S9, FR_HAND),
        Cell(MERGE, MERGE_SHAPES, hand_merge(2), ORIGINAL),
        Cell(MERGE, MERGE_SHAPES, PROBE, ORIGINAL),
        Cell(FR, LADDER, FR_ONLINE, FR_HAND),
        *ln(LN_RR),
        Cell(EN, (B1,), EN_S9, EN_HAND),
        Cell(EN, (B1,), EN_V8, EN_HAND),
        Cell(MERGE, MERGE_SHAPES, hand_merge(1), ORIGINAL),
    ]


def _llmc_run() -> Any:
    spec = importlib.util.spec_from_file_location("llmc_run", ROOT / "benchmarks" / "llmc" / "run.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["llmc_run"] = mod
    spec.loader.exec_module(mod)
    return mod


class Stage:
    """The llm.c kernel folders, staged as run.py stages them (the naive and the hand versions)."""

    def __init__(self, llmc: Path | None, root: Path) -> None:
        self.llmc = llmc
        self.root = root
        self.folders: dict[tuple[str, str], Path] = {}

    def folder(self, kernel: str, version: str | None = None) -> Path:
        if kernel.startswith("kernels/"):
            return ROOT / kernel
        run = _llmc_run()
        ladder = next(lad for lad in run.LADDERS if lad.name == kernel)
        version = version or ladder.naive
        key = (kernel, version)
        if key not in self.folders:
            if self.llmc is None:
                raise SystemExit("error: --llmc is needed for the llm.c cells (shared/llmc)")
            self.folders[key] = run.stage(ladder, version, run.llmc_cuda_dir(self.llmc), self.root)
        return self.folders[key]


def candidate(side: Side, spec: Any, point: Any, stage: Stage, kernel: str) -> Any:
    """The side's :class:`Candidate` at ``point`` under ``spec`` (the naive kernel's)."""
    from ktx.measure.types import original_candidate
    from ktx.search.tunable import load_tunable
    from ktx.specload import load_spec

    if side.pipeline:
        return load_tunable(spec, side.pipeline).candidate(dict(side.config[point.name]))
    if side.hand:
        hand = original_candidate(load_spec(stage.folder(kernel, side.hand)))
        bs = str(side.bs[point.name])
        sub: Callable[[str], str] = lambda e: re.sub(r"\bbs\b", bs, e)  # noqa: E731
        return replace(
            hand, grid=tuple(map(sub, hand.grid)), block=tuple(map(sub, hand.block)), shared=sub(hand.shared),
            label=f"{side.hand} bs={bs}",
        )  # fmt: skip
    if side.source:
        return replace(
            original_candidate(spec), source=(ROOT / side.source).read_text(), name_expression=side.name,
            grid=side.grid, block=side.block, label=side.label,
        )  # fmt: skip
    return original_candidate(spec)


def _times(m: Any) -> dict[str, float | None]:
    return {"single_us": m.single_us, "graph_us": m.graph_us}


def run_cell(cell: Cell, harness: Any, stage: Stage, out: list[dict[str, Any]], deadline: float) -> None:
    from ktx.search.paired import ratio_interval

    spec = harness.spec
    for name in cell.shapes:
        if time.monotonic() > deadline:
            out.append(
                {"kernel": cell.kernel, "shape": name, "a": cell.a.label, "status": "skipped: deadline"}
            )
            continue
        point = spec.find_point(name)
        a = candidate(cell.a, spec, point, stage, cell.kernel)
        b = candidate(cell.b, spec, point, stage, cell.kernel)
        row: dict[str, Any] = {"kernel": cell.kernel, "shape": name, "a": a.label or cell.a.label,
                               "b": b.label or cell.b.label}  # fmt: skip
        checks = {}
        for tag, side, cand in (("a", cell.a, a), ("b", cell.b, b)):
            if side.verify:
                m = harness.measure(cand, point)
                checks[tag] = m.status.value if hasattr(m.status, "value") else str(m.status)
                row[f"{tag}_measured"] = _times(m)
                if not m.ok:
                    row[f"{tag}_message"] = (m.message or "")[:300]
            else:
                checks[tag] = "not verified (probe)"
        row["verify"] = checks
        if any(v not in ("ok", "not verified (probe)") for v in checks.values()):
            row["status"] = "failed verification"
            out.append(row)
            continue
        pairs = harness.measure_paired(a, b, point, PAIRS)
        for metric in ("single_us", "graph_us"):
            ratios, at, bt = [], [], []
            for ma, mb in pairs:
                ta, tb = getattr(ma, metric), getattr(mb, metric)
                if ta and tb:
                    ratios.append(ta / tb)
                    at.append(ta)
                    bt.append(tb)
            iv = ratio_interval(ratios)
            row[metric.replace("_us", "")] = {
                "a_us": statistics.median(at) if at else None, "b_us": statistics.median(bt) if bt else None,
                "a_over_b": None if iv is None else iv.to_dict(),
            }  # fmt: skip
        row["status"] = "measured"
        out.append(row)


def markdown(rows: Sequence[Mapping[str, Any]], device: str) -> str:
    lines = [
        f"Device: {device}. A / B: time ratio (below 1: A faster), geometric mean of {PAIRS} pairs "
        "timed alternately in one worker, [95% interval].",
        "",
        "| kernel | shape | A | B | single A µs | single B µs | single A / B | graph A / B | status |",
        "| --- | --- | --- | --- | ---: | ---: | --- | --- | --- |",
    ]

    def iv(d: Mapping[str, Any] | None) -> str:
        r = (d or {}).get("a_over_b")
        return "-" if not r else f"{r['estimate']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}]"

    def us(d: Mapping[str, Any] | None, k: str) -> str:
        v = (d or {}).get(k)
        return "-" if v is None else f"{v:.2f}"

    for r in rows:
        s = r.get("single")
        lines.append(
            f"| {r['kernel']} | {r['shape']} | {r.get('a', '')} | {r.get('b', '')} | {us(s, 'a_us')} | "
            f"{us(s, 'b_us')} | {iv(s)} | {iv(r.get('graph'))} | {r.get('status', '')} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--llmc", type=Path, default=None, help="llm.c checkout (shared/llmc)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--deadline-s", type=float, default=200.0)
    p.add_argument("--dry-run", action="store_true", help="build every candidate, compile and run none")
    p.add_argument("--only", default="", help="run only the cells whose kernel contains this text")
    p.add_argument("--handler", default=None, help=argparse.SUPPRESS)  # the tests' stand-in GPU
    args = p.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from ktx.measure.gpu import Options
    from ktx.measure.harness import Harness
    from ktx.measure.protocol import DEFAULT_HANDLER
    from ktx.specload import load_spec

    args.out.mkdir(parents=True, exist_ok=True)
    stage = Stage(args.llmc, args.out / "stage")
    deadline = time.monotonic() + args.deadline_s
    todo = [c for c in cells() if args.only in c.kernel]
    runs: list[tuple[str, list[Cell]]] = []  # consecutive cells of one kernel share a harness
    for c in todo:
        if runs and runs[-1][0] == c.kernel:
            runs[-1][1].append(c)
        else:
            runs.append((c.kernel, [c]))
    rows: list[dict[str, Any]] = []
    device = "?"
    for kernel, group in runs:
        spec = load_spec(stage.folder(kernel))
        if args.dry_run:
            for c in group:
                for name in c.shapes:
                    point = spec.find_point(name)
                    for side in (c.a, c.b):
                        cand = candidate(side, spec, point, stage, kernel)
                        launch = cand.launch(spec, point)
                        rows.append({"kernel": kernel, "shape": name, "side": side.label,
                                     "name": cand.name_expression, "launch": str(launch)})  # fmt: skip
            continue
        if time.monotonic() > deadline:
            rows += [{"kernel": kernel, "shape": s, "a": c.a.label, "status": "skipped: deadline"}
                     for c in group for s in c.shapes]  # fmt: skip
            continue
        opts = Options(rounds=1, odd=False)
        with Harness(
            spec, reference="auto", options=opts, handler=args.handler or DEFAULT_HANDLER
        ) as harness:
            device = harness.device().name
            for c in group:
                try:
                    run_cell(c, harness, stage, rows, deadline)
                except Exception as exc:  # one cell's failure must not lose the others
                    why = f"error: {type(exc).__name__}: {exc}"[:300]
                    rows.append({"kernel": kernel, "shape": ",".join(c.shapes), "a": c.a.label,
                                 "b": c.b.label, "status": why})  # fmt: skip
                (args.out / "paired.json").write_text(json.dumps({"device": device, "rows": rows}, indent=1))
                (args.out / "paired.md").write_text(markdown(rows, device) + "\n")
    if args.dry_run:
        print(json.dumps(rows, indent=1))
        return 0
    print(markdown(rows, device))
    return 0 if all(r.get("status") == "measured" for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
