"""GPU evidence for issue 23 item 6: where the originals' measurement of llm.c layernorm v1 goes,
and whether ``ktx optimize --budget 78`` now runs a round (it refused every one: "less than one
round needs (about 44.1 s: twice the 22.0 s ...)" with 42 s left).

Part 1 opens a harness on the staged kernel and measures the original at the ladder's shapes,
twice (the second with the Python reference's verdicts cached on disk), printing each request's
wall seconds and the harness's accounts: ``original_cost`` (without one-off costs),
``candidate_cost`` and ``timing_cost`` (what the loop now counts a round with). Part 2 runs the
optimize of the ladder run and prints its stop reason, notes, rounds and phases.

    source scripts/gpu_env.sh   # on the GPU host, .whl and shared/llmc carried
    python3 scripts/gpu_s8_origcost.py --llmc shared/llmc --out "$OUT"
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _ladder_module() -> Any:
    spec = importlib.util.spec_from_file_location("llmc_run", ROOT / "benchmarks/llmc/run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["llmc_run"] = module
    spec.loader.exec_module(module)
    return module


def measure_originals(folder: Path) -> list[dict[str, Any]]:
    from ktx.measure.harness import Harness
    from ktx.specload import load_spec

    spec = load_spec(folder)
    rows: list[dict[str, Any]] = []
    with Harness(spec) as h:
        for attempt in (1, 2):
            for point in spec.shape_set("ladder").points:
                clock = time.monotonic()
                m = h.measure(h.original, point)
                rows.append(
                    {
                        "attempt": attempt,
                        "shape": point.name,
                        "ok": m.ok,
                        "wall_s": round(time.monotonic() - clock, 3),
                        "original_cost_s": h.original_cost.get(point.name),
                        "candidate_cost_s": h.candidate_cost.get(point.name),
                        "timing_cost_s": h.timing_cost.get(point.name),
                        "graph_us": m.graph_us,
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
    return rows


def optimize(folder: Path, out: Path, budget: float) -> dict[str, Any]:
    run = out / "optimize"
    cmd = [sys.executable, "-m", "ktx", "optimize", str(folder), "--planner", "rules", "--shapes", "ladder",
           "--budget", f"{budget:g}", "--out", str(run), "--ncu", "off", "--backend", "cupy",
           "--seed", "0"]  # fmt: skip
    clock = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=budget + 120)
    (out / "optimize.log").write_text(proc.stdout + proc.stderr)
    result = json.loads((run / "optimize.json").read_text())
    return {
        "rc": proc.returncode,
        "wall_s": round(time.monotonic() - clock, 1),
        "stop_reason": result.get("stop_reason"),
        "rounds": len((result.get("phases") or {}).get("rounds", [])),  # optimize.json's "rounds" is a count
        "geomean_speedup": result.get("geomean_speedup"),
        "notes": result.get("notes"),
        "phases": result.get("phases"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llmc", default="shared/llmc")
    parser.add_argument("--out", default="gpu_s8_origcost_out")
    parser.add_argument("--budget", type=float, default=78.0)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ladder = _ladder_module()
    layernorm = next(lad for lad in ladder.LADDERS if lad.name == "layernorm_forward")
    with tempfile.TemporaryDirectory() as tmp:
        folder = ladder.stage(layernorm, layernorm.naive, ladder.llmc_cuda_dir(args.llmc), Path(tmp))
        report = {"originals": measure_originals(folder), "optimize": optimize(folder, out, args.budget)}
    (out / "origcost.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report["optimize"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
