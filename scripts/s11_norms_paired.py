"""Paired timing (GPU) of what ``ktx optimize`` dispatched for the norms against the hand variants,
each against the original, in one harness per kernel (issue 23's norms goal; session 11, s11-norms).

For kernels/rmsnorm and kernels/fused_add_rmsnorm at the goal shapes (set ``rows``: tokens=1,
d=8192; 1024, 4096; 4096, 4096) the candidates are, most telling first (a spent ``--budget``
skips the rest):

* ``ktx``: the config the optimize run in ``--runs DIR/<kernel>`` dispatched at the shape (its
  ``final/best.json`` and the pipeline of ``final/trace.json``); none where it kept the original;
* the hand one-block-per-row kernels (benchmarks/norms_hand/kernel.cu) at 2, 1 and 4 packs;
* at d = 8192, tokens = 1 only: the hand cluster kernels (benchmarks/norms_hand/cluster.cu:
  one cluster barrier, no block barrier) and ``block-size,cluster-rows,row-registers`` at the same
  cluster / block / packs (CLUSTER x 32 x BLOCK_Y x PACKS x 8 = d): the pass's emitted code beside
  the hand form, in one harness (issue 23 item 3).

Each candidate is verified against the original first (odd sizes where it allows them; the hand
kernels' contract is d % 8 == 0, so theirs are skipped), then timed alternately with the original
(A B A B ..., ``--pairs`` pairs) by the harness's paired request, the one ``ktx optimize``'s final
check uses. Prints and writes (``--out``) a Markdown table of speedups (original / candidate,
geometric mean of the pairs' ratios, 95% interval) in the metric the search uses.

    python3 scripts/s11_norms_paired.py --runs $OUT --out $OUT/paired [--pairs 4] [--budget 60]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from s10_norms_paired import _compare, hand  # noqa: E402

from ktx.measure.gpu import Options  # noqa: E402
from ktx.measure.harness import Harness  # noqa: E402
from ktx.measure.types import Candidate  # noqa: E402
from ktx.pipeline import candidate_from_template, template_for_spec  # noqa: E402
from ktx.specload import load_spec  # noqa: E402

WIDE_PIPE = "block-size,cluster-rows,row-registers"
#: (CLUSTER, BLOCK_Y, PACKS) holding d = 8192 in a cluster's registers, the probe's form first
WIDE = ((8, 4, 1), (4, 8, 1), (8, 2, 2), (2, 16, 1))
FLAGS = ("-std=c++17", "-use_fast_math", "--expt-relaxed-constexpr")


def hand_cluster(kernel: str, packs: int, cluster: int) -> Candidate:
    """The hand cluster kernel as a candidate of the suite kernel's spec."""
    return Candidate(
        source=(ROOT / "benchmarks/norms_hand/cluster.cu").read_text(),
        name_expression=f"{kernel}_cluster_hand<__nv_bfloat16, {packs}, {cluster}>",
        grid=("tokens", str(cluster)),
        block=("32", f"cdiv(d, {256 * packs * cluster})"),
        shared="0",
        flags=FLAGS,
        label=f"hand cluster CLUSTER={cluster} PACKS={packs}",
        constraints=("d % 8 == 0",),
    )


def chosen(runs: Path | None, kernel: str) -> tuple[str, dict[str, dict[str, int]]]:
    """The optimize run's pipeline and its dispatched config per shape ({} where none)."""
    if runs is None:
        return "", {}
    final = runs / kernel / "final"
    try:
        pipe = str(json.loads((final / "trace.json").read_text())["pipeline"])
        best = json.loads((final / "best.json").read_text())
    except (OSError, KeyError, ValueError):
        return "", {}
    out: dict[str, dict[str, int]] = {}
    for name, row in best.items():
        if isinstance(row, dict) and isinstance(row.get("dispatch"), dict) and row["dispatch"]:
            out[name] = {str(k): int(v) for k, v in row["dispatch"].items()}
    return pipe, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--runs", type=Path, help="folder of the optimize runs (<kernel>/final/...)")
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--kernels", default="rmsnorm,fused_add_rmsnorm")
    ap.add_argument("--budget", type=float, default=60.0, help="seconds; later candidates are skipped")
    ap.add_argument("--dry", action="store_true", help="no GPU: list each shape's candidates and launches")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    end = time.monotonic() + args.budget
    lines = [
        "| kernel | shape | candidate | metric | orig µs | cand µs | speedup [95%] | regs |",
        "| --- | --- | --- | --- | ---: | ---: | --- | ---: |",
    ]
    record: list[dict[str, object]] = []
    kernels = args.kernels.split(",")
    for kernel in kernels:
        spec = load_spec(ROOT / "kernels" / kernel)
        pipe, picks = chosen(args.runs, kernel)
        wide = template_for_spec(spec, WIDE_PIPE)
        ktx_t = template_for_spec(spec, pipe) if pipe else None
        plan: list[tuple[int, int, Any, Candidate, str]] = []  # (priority, shape, ...)
        for order, point in enumerate(spec.shape_set("rows").points):
            values = point.as_dict()
            if ktx_t is not None and point.name in picks:
                cand = candidate_from_template(spec, ktx_t, picks[point.name])
                label = f"ktx {pipe} " + ",".join(f"{k}={v}" for k, v in picks[point.name].items())
                plan.append((0, order, point, cand, label))
            wide_row = values["tokens"] == 1 and values["d"] == 8192
            # most telling first: the hand one-block form at decode width with the cluster forms,
            # then the hand form at the other shapes, then the other packs and clusters
            ranked: list[tuple[int, Candidate]] = [
                (1 if wide_row else 2, hand(kernel, 2)),
                (4, hand(kernel, 1)),
                (5, hand(kernel, 4)),
            ]
            if wide_row:
                for rank, (c, y, p) in zip((1, 3, 6, 6), WIDE, strict=True):
                    ranked.append((rank, hand_cluster(kernel, p, c)))
                    config = {"CLUSTER": c, "BLOCK_Y": y, "PACKS": p}
                    if wide.space.feasible(config, dict(point.values)):
                        ranked.append((rank, candidate_from_template(spec, wide, config)))
            for rank, cand in ranked:
                label = cand.label if cand.label != "original" else ""
                label = label or f"{WIDE_PIPE} " + ",".join(f"{k}={v}" for k, v in cand.config.items())
                plan.append((rank, order, point, cand, label))
        plan.sort(key=lambda x: (x[0], x[1]))
        # each kernel gets an even share of what is left, so the second is not starved
        share = (end - time.monotonic()) / (len(kernels) - kernels.index(kernel))
        stop = time.monotonic() + share
        if args.dry:
            for rank, _, point, cand, label in plan:
                print(kernel, rank, point.name, label, cand.launch(spec, point))
            continue
        with Harness(spec, options=Options(odd=True)) as harness:
            for _, _, point, cand, label in plan:
                if time.monotonic() > stop:
                    print(f"{kernel} {point.name} {label}: skipped, budget spent", flush=True)
                    continue
                row = {
                    "kernel": kernel,
                    "shape": point.name,
                    **_compare(harness, cand, point, label, args.pairs),
                }
                record.append(row)
                if row["status"] != "ok":
                    lines.append(f"| {kernel} | {point.name} | {label} | - | - | - | {row['status']} | - |")
                else:
                    lines.append(
                        f"| {kernel} | {point.name} | {label} | {row['metric']} | {row['orig_us']:.2f} | "
                        f"{row['cand_us']:.2f} | {row['text']} | {row['registers']} |"
                    )
                print(lines[-1], flush=True)
    if args.dry:
        return 0
    (args.out / "paired.md").write_text("\n".join(lines) + "\n")
    (args.out / "paired.json").write_text(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
