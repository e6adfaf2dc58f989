"""Headline numbers of a ``cpu_table.json``, per split: the medians and totals the README quotes.

``python benchmarks/realcode/summary.py [cpu_table.json]``. A spec is *CPU-ready* when
``ktx init`` drafted it, ``ktx init --check`` says ready and ktx builds the original from it;
"today" counts the edit from today's draft to the finished spec (what a person would change now).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any


def summary(rows: list[dict[str, Any]], split: str) -> dict[str, Any]:
    mine = [r for r in rows if r["split"] == split]
    specs = [r for r in mine if r.get("edited") is not None]
    now = [r for r in specs if r.get("edited_now") is not None]
    ready = [
        r for r in specs
        if "TODOs" in r["init"] and str(r.get("check", "")).startswith("ready") and r.get("ktx_build") == "ok"
    ]  # fmt: skip
    return {
        "kernels": len(mine),
        "specs": len(specs),
        "cpu_ready": len(ready),
        "edited_median": statistics.median(r["edited"] for r in specs) if specs else None,
        "edited_median_today": statistics.median(r["edited_now"] for r in now) if now else None,
        "silent": sum(r["silent"] for r in specs),
        "silent_today": sum(r["silent_now"] for r in now),
    }


def main() -> int:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("cpu_table.json")
    rows = json.loads(path.read_text())
    for split in ("main", "heldout"):
        print(split, json.dumps(summary(rows, split)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
