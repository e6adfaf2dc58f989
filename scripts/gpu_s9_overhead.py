"""GPU twin of scripts/overhead.py (issue 23 item 6): where one evaluation's seconds go on a GPU,
and what the first request's one-off cost is made of.

Part ``first``: llm.c layernorm v1 at B=1 (session 8: the worker's first request cost 12.6 s
beyond the Python reference, the same request 0.43 s once measured). A fresh compile and verdict
cache, ``KTX_COST_DETAIL=1`` (the worker books its steps apart: module load, input draws, the
reference's outputs, the guarded run, the comparison, the timing arena), and every worker
request and compile wait timed on the harness side: opening the harness (the worker's start,
CUDA, the copy bandwidth), the warm-up, the compile, then the original at B=1 twice and at B=8.

Part ``tune``: ``ktx tune`` of act_and_mul_scalar at tokens=16,d=4096 (a kernel of a few µs)
through scripts/overhead.py's accounting with the CuPy backend: compile, worker start, the
request outside the worker's own account, the worker's account (and its steps), storage,
sampler, the rest; per evaluation, against the goal 0.2 s + 30x the kernel's time.

    source scripts/gpu_env.sh   # on the GPU host, .whl and shared/llmc carried
    python3 scripts/gpu_s9_overhead.py --llmc shared/llmc --out "$OUT" [--parts first,tune]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))


def _ladder_module() -> Any:
    spec = importlib.util.spec_from_file_location("llmc_run", ROOT / "benchmarks/llmc/run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["llmc_run"] = module
    spec.loader.exec_module(module)
    return module


def first_request(llmc: str, out: Path) -> dict[str, Any]:
    import overhead  # scripts/overhead.py

    from ktx.measure.harness import Harness
    from ktx.specload import load_spec

    ladder = _ladder_module()
    layernorm = next(lad for lad in ladder.LADDERS if lad.name == "layernorm_forward")
    events: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = ladder.stage(layernorm, layernorm.naive, ladder.llmc_cuda_dir(llmc), Path(tmp))
        spec = load_spec(folder)
        overhead.LEDGER = overhead.Ledger()
        ledger = overhead.LEDGER
        clock = time.monotonic()
        with Harness(spec) as h:
            opened = time.monotonic()
            h.device()
            events.append({"step": "harness + device (worker start, CUDA, bandwidth)",
                           "s": round(time.monotonic() - opened, 3)})  # fmt: skip
            for attempt, shape in ((1, "B=1,T=1024,C=768"), (2, "B=1,T=1024,C=768"), (1, "B=8,T=1024,C=768")):
                before = len(ledger.requests)
                compile_before = ledger.seconds.get("compile", 0.0)
                began = time.monotonic()
                with ledger.part("measure"):
                    m = h.measure(h.original, shape)
                row = {
                    "step": f"measure original {shape} (attempt {attempt})",
                    "ok": m.ok,
                    "s": round(time.monotonic() - began, 3),
                    "compile_wait_s": round(ledger.seconds.get("compile", 0.0) - compile_before, 3),
                    "requests": ledger.requests[before:],
                    "graph_us": m.graph_us,
                }
                events.append(row)
                print(json.dumps(row), flush=True)
        events.append({"step": "total", "s": round(time.monotonic() - clock, 3)})
    (out / "first_request.json").write_text(json.dumps(events, indent=1))
    return {"events": events}


def tune(out: Path, trials: int, time_limit: float, backend: str = "cupy") -> dict[str, Any]:
    import overhead

    args = argparse.Namespace(
        kernel=str(ROOT / "kernels" / "act_and_mul_scalar"), passes="block-size,split{max=8}",
        shape="tokens=16,d=4096", trials=trials, sampler="tpe", kernel_us=3.0, storage=None,
        backend=backend, time_limit=time_limit,
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        result = overhead.run(args, Path(tmp) / "run", Path(os.environ["KTX_CACHE_DIR"]))
        summary = json.loads((Path(tmp) / "run" / "summary.json").read_text())
    original_us = next((r.get("original_us") for r in summary.get("shapes", [])), None) or 0.0
    text = overhead.table(f"act_and_mul_scalar tokens=16,d=4096 ({backend})", result, float(original_us))
    print(text, flush=True)
    (out / "tune.md").write_text(text + "\n")
    (out / "tune.json").write_text(json.dumps({**result, "original_us": original_us}, indent=1))
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llmc", default="shared/llmc")
    parser.add_argument("--out", type=Path, default=Path("gpu_s9_overhead_out"))
    parser.add_argument("--parts", default="first,tune")
    parser.add_argument("--trials", type=int, default=24)
    parser.add_argument("--time-limit", type=float, default=75.0)
    parser.add_argument("--backend", default="cupy", help="cupy; stand-in checks the plumbing on a CPU")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ["KTX_COST_DETAIL"] = "1"  # the worker processes inherit it
    parts = set(args.parts.split(","))
    import overhead

    overhead.instrument(overhead._Proxy())  # type: ignore[arg-type]  # once: the patches stay
    if "first" in parts:
        if Path(args.llmc).is_dir():
            first_request(args.llmc, args.out)
        else:
            print(f"first: skipped, no llm.c sources at {args.llmc}", flush=True)
    if "tune" in parts:
        tune(args.out, args.trials, args.time_limit, args.backend)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
