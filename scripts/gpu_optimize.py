"""Run ``ktx optimize`` (rules planner) on every suite kernel with two seeds, within a wall budget.

Started by ``scripts/gpu_optimize.sh BUDGET_SECONDS`` on a GPU host. One ``ktx optimize`` process
per (kernel, seed), as many at a time as there are GPUs (each pinned to one through
``CUDA_VISIBLE_DEVICES``); each gets an equal share of what is left of the budget when it starts.
Run folders and logs go to ``$WORK`` (default ``/tmp/ktx-gpu-optimize``: the device tool brings
back only a few files from ``$OUT``); three files go to ``$OUT``:

    runs.tar.gz     every run folder (round logs, studies, templates, dispatch tables); for
                    ``ktx report`` on any machine after ``tar xzf``
    summary.json    per run: passes chosen, rounds, wall time, speedup and SOL per shape;
                    per kernel: whether both seeds chose the same passes and how far their
                    best times lie apart against the timing noise; the Nsight Compute check
    optimize.log    what each run printed

and prints a short table last. Environment: KERNELS (names, default all), SEEDS ("0 1"),
SHAPES (shape set, default "quick"), ROUNDS (4), TRIALS (16 per shape and round), GPUS (all),
BACKEND (cupy; ``replay:FILE`` for a dry run of one kernel on a CPU),
NCU (off: the loop runs without Nsight; a separate one-shape check records whether ncu works).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

RESERVE_S = 25.0  # packing and the summary
MIN_RUN_S = 20.0  # below this a run cannot even measure its baseline: skip it


def gpu_count() -> int:
    if os.environ.get("GPUS"):
        return max(1, int(os.environ["GPUS"]))
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 1
    return max(1, sum(1 for line in out.splitlines() if line.startswith("GPU ")))


def kernels(root: Path) -> list[str]:
    wanted = os.environ.get("KERNELS", "").split()
    found = sorted(p.name for p in (root / "kernels").iterdir() if (p / "ktx.toml").exists())
    return [k for k in found if not wanted or k in wanted]


def ncu_check(root: Path, kernel: str, budget: float) -> dict[str, Any]:
    """Profile one shape of one kernel with ncu (no loop), to record whether the metrics come."""
    sys.path.insert(0, str(root))
    from ktx.agent import ncu
    from ktx.specload import load_spec

    if ncu.ncu_path() is None:
        return {"ran": False, "why": "ncu is not on the PATH"}
    spec = load_spec(root / "kernels" / kernel)
    shape = spec.shape_set("quick" if any(s.name == "quick" for s in spec.shapes) else None).points[0].name
    start = time.monotonic()
    result = ncu.profile(root / "kernels" / kernel, shape, spec.kernel, timeout_s=budget)
    return {
        "ran": True,
        "kernel": kernel,
        "shape": shape,
        "seconds": round(time.monotonic() - start, 1),
        "metrics": None if result.metrics is None else result.metrics.to_json(),
        "error": result.error,
        "command": " ".join(result.command),
    }


def launch(
    root: Path, work: Path, kernel: str, seed: int, gpu: int, budget: float
) -> subprocess.Popen[bytes]:
    run_dir = work / "runs" / f"{kernel}-s{seed}"
    cmd = [
        sys.executable, "-m", "ktx", "optimize", str(root / "kernels" / kernel), "--planner", "rules",
        "--seed", str(seed), "--budget", f"{budget:.0f}", "--out", str(run_dir),
        "--rounds", os.environ.get("ROUNDS", "4"), "--trials-per-round", os.environ.get("TRIALS", "16"),
        "--shapes", os.environ.get("SHAPES", "quick"), "--ncu", os.environ.get("NCU", "off"),
        "--backend", os.environ.get("BACKEND", "cupy"),
    ]  # fmt: skip
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(gpu), PYTHONUNBUFFERED="1")
    log = (work / "logs" / f"{kernel}-s{seed}.log").open("wb")
    return subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)


def run_summary(run_dir: Path, code: int | None, gpu: int, budget: float, wall: float) -> dict[str, Any]:
    state_path = run_dir / "optimize.json"
    row: dict[str, Any] = {"exit": code, "gpu": gpu, "budget_s": round(budget), "wall_s": round(wall, 1)}
    if not state_path.exists():
        return {**row, "status": "no result"}
    state = json.loads(state_path.read_text())
    rounds_path = run_dir / "rounds.jsonl"
    lines = rounds_path.read_text().splitlines() if rounds_path.exists() else []
    rounds = [json.loads(line) for line in lines if line.strip()]
    shapes = state.get("shapes", [])
    sols = [s["sol_fraction"] for s in shapes if s.get("sol_fraction") is not None]
    failures: dict[str, int] = {}
    for r in rounds:
        for k, v in ((r.get("result") or {}).get("failures") or {}).items():
            failures[k] = failures.get(k, 0) + v
    return {
        **row,
        "status": state.get("state"),
        "device": state.get("device", {}).get("name"),
        "pipeline": state.get("pipeline", ""),
        "passes": [p["name"] for p in state.get("plan", {}).get("passes", [])],
        "tried": [r.get("pipeline") for r in rounds],
        "statuses": [r.get("status") for r in rounds],
        "rounds": len(rounds),
        "best_round": state.get("best_round"),
        "stop_reason": state.get("stop_reason"),
        "geomean_speedup": state.get("geomean_speedup"),
        "sol_median": statistics.median(sols) if sols else None,
        "failures": failures,
        "notes": state.get("notes", []),
        "shapes": [
            {
                k: s.get(k)
                for k in (
                    "shape",
                    "metric",
                    "original_us",
                    "effective_us",
                    "speedup",
                    "sol_fraction",
                    "original_sol_fraction",
                    "best_config",
                    "spread",
                )
            }
            for s in shapes
        ],
    }


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two seeds of one kernel: same passes? best times apart by how much, against the noise?"""
    by_a = {s["shape"]: s for s in a.get("shapes", [])}
    diffs = []
    noise = []
    mixed = []  # shapes whose two runs chose different metrics (auto, near 20 us): not comparable
    for s in b.get("shapes", []):
        other = by_a.get(s["shape"])
        if other and other.get("metric") != s.get("metric"):
            mixed.append(s["shape"])
            continue
        if other and other.get("effective_us") and s.get("effective_us"):
            diffs.append(abs(s["effective_us"] - other["effective_us"]) / other["effective_us"])
            noise.append(max(s.get("spread") or 0.0, other.get("spread") or 0.0))
    worst = max(diffs) if diffs else None
    both = "passes" in a and "passes" in b
    return {
        "same_passes": a.get("passes") == b.get("passes") if both else None,
        "max_time_diff": worst,
        "median_time_diff": statistics.median(diffs) if diffs else None,
        "median_noise": statistics.median(noise) if noise else None,
        "metric_differs": mixed,
        "within_noise": None
        if worst is None
        else worst <= max(0.02, 2 * (statistics.median(noise) if noise else 0)),
    }


def pack(work: Path, out: Path) -> None:
    """runs.tar.gz under 15 MiB: drop what the report needs least when it is larger."""
    runs = work / "runs"
    studies = ("study.db", "study.jsonl")
    drops = [(), ("log.jsonl",), ("log.jsonl", "cache.jsonl"), ("log.jsonl", "cache.jsonl", *studies)]
    for drop in drops:
        target = out / "runs.tar.gz"
        with tarfile.open(target, "w:gz") as tar:
            for path in sorted(runs.rglob("*")):
                if path.is_file() and path.name not in drop and not path.name.endswith(".lock"):
                    tar.add(path, arcname=str(path.relative_to(work)))
        if target.stat().st_size < 15 * 2**20:
            return
    print(f"warning: runs.tar.gz is {target.stat().st_size / 2**20:.1f} MiB even without logs and studies")


def table(summary: dict[str, Any]) -> str:
    lines = [
        f"{'kernel':26} {'seed':>4} {'passes':34} {'rnd':>3} {'geomean':>8} {'SOL med':>7} {'wall s':>6}"
        "  same/within-noise",
    ]
    for kernel, info in summary["kernels"].items():
        for seed, run in info["runs"].items():
            g = run.get("geomean_speedup")
            sol = run.get("sol_median")
            cmp = info.get("seeds") or {}
            tag = ""
            if seed == list(info["runs"])[-1] and cmp:
                diff = cmp.get("max_time_diff")
                same = cmp.get("same_passes")
                tag = f"{'-' if same is None else 'same' if same else 'DIFFERENT'}/" + (
                    "-"
                    if diff is None
                    else f"{'yes' if cmp.get('within_noise') else 'NO'} ({100 * diff:.1f}%)"
                )
            lines.append(
                f"{kernel:26} {seed:>4} {(run.get('pipeline') or run.get('status') or '-')[:34]:34} "
                f"{run.get('rounds', 0):>3} {'-' if g is None else f'{g:.3f}x':>8} "
                f"{'-' if sol is None else f'{100 * sol:.0f}%':>7} {run.get('wall_s', 0):>6.0f}  {tag}"
            )
    geo = summary.get("geomean_over_kernels")
    lines.append(f"geomean speedup over kernels (first seed): {'-' if geo is None else f'{geo:.3f}x'}; "
                 f"wall {summary['wall_s']:.0f} s of {summary['budget_s']:.0f} s budget")  # fmt: skip
    return "\n".join(lines)


def main() -> int:
    budget = float(sys.argv[1]) if len(sys.argv) > 1 else 540.0
    root = Path(__file__).resolve().parents[1]
    out = Path(os.environ.get("OUT") or root / "gpu_optimize_out").resolve()
    work = Path(os.environ.get("WORK") or "/tmp/ktx-gpu-optimize").resolve()
    out.mkdir(parents=True, exist_ok=True)
    (work / "runs").mkdir(parents=True, exist_ok=True)
    (work / "logs").mkdir(exist_ok=True)
    start = time.monotonic()
    deadline = start + budget - RESERVE_S
    seeds = [int(s) for s in os.environ.get("SEEDS", "0 1").split()]
    names = kernels(root)
    lanes = gpu_count()
    summary: dict[str, Any] = {
        "budget_s": budget,
        "gpus": lanes,
        "seeds": seeds,
        "kernels": {},
        "settings": {k: os.environ.get(k) for k in ("SHAPES", "ROUNDS", "TRIALS", "NCU")},
    }
    ncu_budget = min(90.0, 0.1 * budget)
    if os.environ.get("NCU_CHECK", "1") != "0" and names:
        summary["ncu_check"] = ncu_check(
            root, "silu_and_mul" if "silu_and_mul" in names else names[0], ncu_budget
        )
    queue = [(k, s) for s in seeds for k in names]  # every kernel once before any second seed
    running: dict[int, tuple[subprocess.Popen[bytes], str, int, float, float]] = {}
    results: dict[tuple[str, int], dict[str, Any]] = {}
    while queue or running:
        for gpu in range(lanes):
            if gpu in running or not queue:
                continue
            left = deadline - time.monotonic()
            share = left / max(1, math.ceil(len(queue) / lanes))
            while share < MIN_RUN_S and len(queue) > 1:  # too little for all: drop from the end
                dropped = queue.pop()  # (second seeds go first: every kernel keeps one run longest)
                results[dropped] = {"status": "skipped: budget too small", "wall_s": 0.0}
                share = left / max(1, math.ceil(len(queue) / lanes))
            kernel, seed = queue.pop(0)
            if share < MIN_RUN_S:
                results[(kernel, seed)] = {"status": "skipped: budget spent", "wall_s": 0.0}
                continue
            running[gpu] = (
                launch(root, work, kernel, seed, gpu, share),
                kernel,
                seed,
                share,
                time.monotonic(),
            )
            print(
                f"[{time.monotonic() - start:6.0f}s] gpu {gpu}: {kernel} seed {seed}, budget {share:.0f} s",
                flush=True,
            )
        for gpu, (proc, kernel, seed, share, began) in list(running.items()):
            code = proc.poll()
            if code is None and time.monotonic() > began + share + 60:
                proc.kill()  # over its budget by a minute: the in-flight measurement hung
                code = proc.wait()
            if code is None:
                continue
            del running[gpu]
            wall = time.monotonic() - began
            results[(kernel, seed)] = run_summary(work / "runs" / f"{kernel}-s{seed}", code, gpu, share, wall)
            print(
                f"[{time.monotonic() - start:6.0f}s] done {kernel} seed {seed}: exit {code}, {wall:.0f} s",
                flush=True,
            )
        time.sleep(0.5)
    firsts = []
    for kernel in names:
        runs = {str(s): results.get((kernel, s), {"status": "not run"}) for s in seeds}
        info: dict[str, Any] = {"runs": runs}
        if len(seeds) >= 2:
            info["seeds"] = compare(runs[str(seeds[0])], runs[str(seeds[1])])
        summary["kernels"][kernel] = info
        g = runs[str(seeds[0])].get("geomean_speedup")
        if g:
            firsts.append(g)
    summary["geomean_over_kernels"] = math.exp(sum(map(math.log, firsts)) / len(firsts)) if firsts else None
    summary["wall_s"] = time.monotonic() - start
    with (out / "optimize.log").open("w") as log:
        for path in sorted((work / "logs").glob("*.log")):
            log.write(f"==> {path.stem}\n{path.read_text(errors='replace')}\n")
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    pack(work, out)
    print(table(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
