"""Headline numbers of a ``cpu_table.json``, per split: the medians and totals the README quotes.

``python benchmarks/realcode/summary.py [cpu_table.json]``. A spec is *CPU-ready* when
``ktx init`` drafted it, ``ktx init --check`` says ready and ktx builds the original from it;
"today" counts the edit from today's draft to the finished spec (what a person would change
now); ``--kinds`` adds today's silently wrong lines by kind.
"""

from __future__ import annotations

import collections
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


def today_kinds(rows: list[dict[str, Any]], split: str) -> dict[str, int]:
    """Today's silently wrong lines by what they are: the edit from today's draft (cached by
    cpu_check.py for this ktx) to each finished spec."""
    sys.path.insert(0, str(Path(__file__).parent))
    import cpu_check
    from editstat import stat, unified
    from fetch import load_manifest

    kernels = {k["id"]: k for k in load_manifest()["kernels"]}
    version = cpu_check.ktx_version()
    cache = Path.home() / ".cache" / "ktx-realcode"
    kinds: collections.Counter[str] = collections.Counter()
    for r in rows:
        if r["split"] != split or r.get("edited_now") is None:
            continue
        got = cpu_check.cached_draft(kernels[r["id"]], cache, version)
        final = (Path(__file__).parent / r["id"] / "ktx.toml").read_text()
        kinds.update(cpu_check.silent_kind(ln) for ln in stat(unified(got.text, final, "draft")).silent_lines)
    return dict(kinds.most_common())


def main() -> int:
    args = [a for a in sys.argv[1:] if a != "--kinds"]
    path = Path(args[0]) if args else Path(__file__).with_name("cpu_table.json")
    rows = json.loads(path.read_text())
    for split in ("main", "heldout"):
        print(split, json.dumps(summary(rows, split)))
        if "--kinds" in sys.argv:
            print("  today's silently wrong lines:", json.dumps(today_kinds(rows, split)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
