"""Paired timing (GPU) of the norms' best row-registers configs and the hand variants against the
original kernel, in one harness per kernel (issue 23's norms goal; session 10, s10-norms).

For kernels/rmsnorm and kernels/fused_add_rmsnorm at the goal shapes (set ``rows``: tokens=1,
d=8192; 1024, 4096; 4096, 4096) every candidate is first verified against the original (with the
spec's odd-size variants where the candidate allows them), then timed alternately with the
original (A B A B ..., ``--pairs`` pairs, graph and single launch) by the harness's paired
request, the same one ``ktx optimize``'s final check uses. Candidates: ``block-size,row-registers``
at the configs that hold a row of 4096 / 8192 in 1-4 packs a thread, and the hand kernels of
benchmarks/norms_hand at 1/2/4 packs (as candidates of the suite kernel's own spec: same
arguments, their own launch; d % 8 == 0 is their contract, so their odd variants are skipped).
Prints a Markdown table of speedups (original / candidate, geometric mean of the pairs' ratios,
95% interval) in the metric the search uses (graph where the original is short), and writes it
with every pair's times to ``--out``.

    python3 scripts/s10_norms_paired.py --out $OUT/paired [--pairs 15] [--kernels rmsnorm,...]
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

from ktx.ir.expr import expand  # noqa: E402

from ktx.measure.gpu import Options  # noqa: E402
from ktx.measure.harness import Harness  # noqa: E402
from ktx.measure.types import Candidate  # noqa: E402
from ktx.pipeline import candidate_from_template, template_for_spec  # noqa: E402
from ktx.search.paired import ratio_interval  # noqa: E402
from ktx.specload import load_spec  # noqa: E402

PIPE = "block-size,row-registers"
#: the hand kernel's forms first (2 / 4 packs hold a row of 4096 at 256 / 128 threads, of 8192 at
#: 512 / 256), then one pack a thread: what the budget cuts is the least telling
CONFIGS = ({"BLOCK_Y": 8, "PACKS": 2}, {"BLOCK_Y": 4, "PACKS": 4}, {"BLOCK_Y": 16, "PACKS": 2},
           {"BLOCK_Y": 8, "PACKS": 4}, {"BLOCK_Y": 32, "PACKS": 1}, {"BLOCK_Y": 16, "PACKS": 1})  # fmt: skip


def hand(kernel: str, packs: int) -> Candidate:
    """The hand kernel as a candidate of the suite kernel's spec."""
    return Candidate(
        source=(ROOT / "benchmarks/norms_hand/kernel.cu").read_text(),
        name_expression=f"{kernel}_rows_hand<__nv_bfloat16, {packs}>",
        grid=("tokens",),
        block=("32", f"cdiv(d, {256 * packs})"),
        shared="0",
        flags=("-std=c++17", "-use_fast_math", "--expt-relaxed-constexpr"),
        label=f"hand PACKS={packs}",
        constraints=("d % 8 == 0",),
    )


def _median(values: list[float]) -> float:
    v = sorted(values)
    return v[len(v) // 2] if v else float("nan")


_ORIGINAL: dict[tuple[str, str], object] = {}


def _compare(harness: Harness, cand: Candidate, point: object, label: str, pairs: int) -> dict[str, object]:
    """Verify ``cand`` against the original at ``point``, then time the two alternately."""
    key = (harness.spec.name, str(getattr(point, "name", point)))
    if key not in _ORIGINAL:  # the original measured once a shape: it sets the metric
        _ORIGINAL[key] = harness.measure(harness.original, point)  # type: ignore[arg-type]
    orig: Any = _ORIGINAL[key]
    m = harness.measure(cand, point)  # type: ignore[arg-type]
    row: dict[str, object] = {"candidate": label, "status": m.status.value}
    if not m.ok:
        row["message"] = m.message[:300]
        return row
    metric = "graph" if orig.graph_us is not None and orig.graph_us < 50 else "single"

    def us(x: object) -> float | None:
        return getattr(x, "graph_us" if metric == "graph" else "single_us")  # type: ignore[no-any-return]

    got = harness.measure_paired(harness.original, cand, point, pairs)  # type: ignore[arg-type]
    times = [(us(a), us(b)) for a, b in got if a.ok and b.ok]
    clean = [(a, b) for a, b in times if a and b]
    iv = ratio_interval([a / b for a, b in clean])
    row.update(
        metric=metric,
        orig_us=_median([a for a, _ in clean]),
        cand_us=_median([b for _, b in clean]),
        interval=None if iv is None else iv.to_dict(),
        text="-" if iv is None else iv.text(),
        registers=m.resources.registers if m.resources else None,
        pairs=clean,
    )
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--pairs", type=int, default=15)
    ap.add_argument("--kernels", default="rmsnorm,fused_add_rmsnorm")
    ap.add_argument("--budget", type=float, default=200.0, help="seconds; later candidates are skipped")
    ap.add_argument("--dry", action="store_true", help="no GPU: list each candidate's launch per shape")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    end = time.monotonic() + args.budget
    lines = [
        "| kernel | shape | candidate | metric | orig µs | cand µs | speedup [95%] | regs |",
        "| --- | --- | --- | --- | ---: | ---: | --- | ---: |",
    ]
    record: list[dict[str, object]] = []
    for kernel in args.kernels.split(","):
        spec = load_spec(ROOT / "kernels" / kernel)
        t = template_for_spec(spec, PIPE)
        cands = [candidate_from_template(spec, t, c) for c in CONFIGS] + [hand(kernel, p) for p in (1, 2, 4)]
        if args.dry:
            for point in spec.shape_set("rows").points:
                for cand in cands:
                    ok = not cand.config or t.space.feasible(dict(cand.config), dict(point.values))
                    name = expand(cand.name_expression, cand.env(spec, point))
                    print(
                        kernel,
                        point.name,
                        name,
                        dict(cand.config),
                        cand.launch(spec, point) if ok else "infeasible",
                    )
            continue
        with Harness(spec, options=Options(odd=True)) as harness:
            for point in spec.shape_set("rows").points:
                for cand in cands:
                    label = cand.label or f"{PIPE} " + ",".join(f"{k}={v}" for k, v in cand.config.items())
                    if cand.config and not t.space.feasible(dict(cand.config), dict(point.values)):
                        continue
                    if time.monotonic() > end:
                        print(f"{kernel} {point.name} {label}: skipped, budget spent", flush=True)
                        continue
                    row = {
                        "kernel": kernel,
                        "shape": point.name,
                        **_compare(harness, cand, point, label, args.pairs),
                    }
                    record.append(row)
                    if row["status"] != "ok":
                        lines.append(
                            f"| {kernel} | {point.name} | {label} | - | - | - | {row['status']} | - |"
                        )
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
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
