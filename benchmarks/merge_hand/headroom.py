"""merge_attn_states' headroom from numbers a CPU can compute: bytes, waves, bandwidth, launch.

Reads the suite kernel's H200 times (``ktx tune``'s summary, session 2: the original timed at
all 15 shapes of ``default``, graph and single launch) and prints, per shape, the bytes the
kernel must move, the time those bytes take at the copy bandwidth ktx measured on that device,
the launch floor, and the largest speedup any kernel with the same inputs and outputs could
reach: ``graph / (floor + bytes / bandwidth)``. The bandwidth is recovered from the summary's
own speed-of-light fraction (``sol_fraction = bytes / bandwidth / time``), so the bound uses
the device's measured copy rate, not the datasheet's.

    python benchmarks/merge_hand/headroom.py [summary.json]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SUMMARY = ROOT / "results" / "session2_h200x4_2026-11-21" / "tune_merge_attn_states.json"
#: An empty kernel's time per launch inside a CUDA graph on an H200 (issue 23's measurement).
GRAPH_FLOOR_US = 0.53
SMS = 132  # H200
THREADS_PER_SM = 2048
BLOCK = 128  # the suite's launch


def shape_bytes(tokens: int, heads: int, head_dim: int) -> int:
    """Two bf16 value tensors read and one written; two fp32 LSE vectors read and one written."""
    values = tokens * heads * head_dim
    return 3 * values * 2 + 3 * heads * tokens * 4


def parse(shape: str) -> dict[str, int]:
    return {k: int(v) for k, v in (part.split("=") for part in shape.split(","))}


def rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for r in summary["shapes"]:
        s = parse(r["shape"])
        nbytes = shape_bytes(s["tokens"], s["heads"], s["head_dim"])
        graph = r["original_graph_us"]
        sol_us = r["original_sol_fraction"] * r["original_us"]  # bytes / bandwidth, in µs
        blocks = -(-s["tokens"] * s["heads"] * (s["head_dim"] // 8) // BLOCK)
        waves = blocks / (SMS * THREADS_PER_SM // BLOCK)
        out.append({
            "shape": r["shape"], "bytes": nbytes, "bandwidth_gbs": nbytes / sol_us / 1e3, "sol_us": sol_us,
            "graph_us": graph, "single_us": r["original_single_us"], "waves": waves,
            "bound": graph / (GRAPH_FLOOR_US + sol_us), "tuned": r["speedup"],
        })  # fmt: skip
    return out


def markdown(table: list[dict[str, Any]], device: str) -> str:
    lines = [
        f"Device: {device}. Floor: {GRAPH_FLOOR_US} µs an empty kernel takes in a graph.",
        "",
        "| shape | MB moved | waves (128-thread blocks) | bytes / copy BW µs | graph µs | "
        "graph − floor µs | achieved GB/s | largest speedup possible | ktx tune (session 2) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in table:
        busy = r["graph_us"] - GRAPH_FLOOR_US
        lines.append(
            f"| {r['shape']} | {r['bytes'] / 1e6:.1f} | {r['waves']:.2f} | {r['sol_us']:.2f} | "
            f"{r['graph_us']:.2f} | {busy:.2f} | {r['bytes'] / busy / 1e3:.0f} | {r['bound']:.2f}x | "
            f"{r['tuned']:.3f}x |"
        )
    bw = sum(r["bandwidth_gbs"] for r in table) / len(table)
    lines += ["", f"Copy bandwidth (from the summary's speed-of-light fractions): {bw:.0f} GB/s."]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else SUMMARY
    data = json.loads(path.read_text())
    summary = data.get("summary", data)
    print(markdown(rows(summary), summary.get("device", "?")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
