"""Run vectorize on every kernel of the held-out corpus (``manifest.json``) and write the table:
per kernel, applied (with the compile check of its widest config for sm_90), refused (each
refusal's construct and line, as ktx printed it) or silent (no site and no remark).

Why per kernel: issue 22's goal is counted in kernels (">= 35 of 115") and asks that every
refusal name its construct and line; an aggregate hides a silent kernel. The sweeping itself is
``scripts/sweep_corpus.py``'s (in process, per-case time limit, nvcc with the project's includes,
the original compiled too so that a rewrite is judged only where its original builds).

    python benchmarks/vheld/fetch.py                      # the sources, once
    python benchmarks/vheld/sweep.py                      # writes table.md and table.json here
    python benchmarks/vheld/sweep.py --no-compile --out /tmp/vheld
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "scripts"))

import sweep_corpus  # noqa: E402

PIPELINE = "vectorize"


def names_a_line(raw: str) -> bool:
    """Whether a printed refusal says where: its ``site:line:`` prefix with a line other than 0
    (the sweep's form of ``ktx apply``'s ``file:line: remark``), or a ``line N`` in its text."""
    return bool(re.match(r"[^:]*:[1-9]\d*:", raw) or re.search(r"\bline [1-9]", raw))


def kernel_rows(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for c in cases:
        if c["pipeline"] != PIPELINE:
            continue
        status = c["status"]
        if status == "applied" and c.get("compile") == "failed":
            status = "applied, does not build"
        rows.append(
            {
                "project": c["project"],
                "file": c["file"],
                "kernel": c["kernel"],
                "status": status,
                "knobs": list(c["knobs"]),
                "compile": c.get("compile", ""),
                "remarks": list(c["raw"]),
                "located": all(names_a_line(r) for r in c["raw"]) if c["raw"] else False,
            }
        )
    return rows


def markdown(rows: list[dict[str, Any]], commit: str, compiled: bool) -> str:
    n = collections.Counter(r["status"] for r in rows)
    refused = [r for r in rows if r["status"] == "refused"]
    unlocated = [r for r in refused if not r["located"]]
    out = [
        f"# vectorize on the held-out corpus (ktx {commit})",
        "",
        "Three projects ktx was not developed against (`manifest.json`: FasterTransformer, LightSeq, "
        "CTranslate2 at pinned commits). Made by `python benchmarks/vheld/sweep.py`; compile check "
        f"(sm_90, widest config, only where the original builds): {'on' if compiled else 'off'}.",
        "",
        f"**{len(rows)} kernels: applied {n['applied']}, refused {n['refused']}, silent {n['silent']}, "
        f"applied but does not build {n['applied, does not build']}, rolled back {n['rolled back']}, "
        f"crashed {n['crashed']}.** Refusals that do not name a line: {len(unlocated)}.",
        "",
        "| project | applied / kernels |",
        "|---|---:|",
    ]
    for proj in sorted({r["project"] for r in rows}):
        mine = [r for r in rows if r["project"] == proj]
        out.append(f"| {proj} | {sum(r['status'] == 'applied' for r in mine)} / {len(mine)} |")
    out += [
        "",
        "| file | kernel | status | knobs / compile | remarks (site: reason) |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        remarks = "<br>".join(x.replace("|", "/").replace("\n", " ")[:220] for x in r["remarks"][:4])
        what = ", ".join(r["knobs"]) + (f" ({r['compile']})" if r["compile"] else "")
        out.append(
            f"| {r['file'].rsplit('/', 1)[-1]} | `{r['kernel']}` | {r['status']} | {what} | {remarks} |"
        )
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", type=Path, default=HERE / "src")
    p.add_argument("--manifest", type=Path, default=HERE / "manifest.json")
    p.add_argument("--out", type=Path, default=HERE / "table", help="writes OUT.md and OUT.json")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--timeout", type=float, default=60.0)
    args = p.parse_args(argv)
    raw = Path(tempfile.mkdtemp(prefix="ktx-vheld-")) / "sweep"
    sweep_args = ["--manifest", str(args.manifest), "--corpus", str(args.corpus), "--pipeline", PIPELINE,
                  "--jobs", str(args.jobs), "--timeout", str(args.timeout), "--out", str(raw)]  # fmt: skip
    if args.no_compile:
        sweep_args.append("--no-compile")
    sweep_corpus.main(sweep_args)
    data = json.loads(raw.with_suffix(".json").read_text())
    rows = kernel_rows(data["cases"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(
        json.dumps({"ktx": data["ktx"], "kernels": rows}, indent=1) + "\n"
    )
    args.out.with_suffix(".md").write_text(markdown(rows, data["ktx"], data["compile"]))
    n = collections.Counter(r["status"] for r in rows)
    print(f"{len(rows)} kernels: " + ", ".join(f"{k} {v}" for k, v in sorted(n.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
