"""The GPU part of the real-code benchmark: for every kernel with a finished spec, ``ktx bench``
(does the original run, verified, under ktx's harness?) and then ``ktx optimize --planner rules
--shapes default`` at a fixed budget (does it get faster?); one lane per GPU, as
``scripts/gpu_lanes.sh`` runs its jobs; writes ``results.md`` and ``results.json`` with a row per
kernel: kernel / project / split / ran or blocked (why) / edited lines / silently wrong lines /
dispatched speedup with its interval / pipeline, both splits reported apart.

The GPU host has no network: the sources come from ``benchmarks/realcode/src`` (written by
``fetch.py``; carry that folder, about 2.5 MiB). Usage, on the GPU host, repo root::

    source scripts/gpu_env.sh
    python benchmarks/realcode/run.py --budget 45 --out "$OUT"          # every GPU, 45 s a kernel
    python benchmarks/realcode/run.py --ids ggml__norm_f32 --gpus 1 ...  # some kernels
    python benchmarks/realcode/run.py --resume --out "$OUT" ...          # skip the rows already in
                                                                         # $OUT/results.json

``--deadline S`` stops starting kernels S seconds after the start (a device command is capped at
10 minutes): what did not start is listed as not run. ``--ktx`` names another ktx command (the
tests pass a stand-in). Each ktx command runs in the kernel's folder, so the specs' relative
``-I`` flags reach ``src/``; logs and run folders go under ``--work`` and are packed into
``realcode-runs.tar.gz`` under ``--out``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import queue
import shlex
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from editstat import stat  # noqa: E402
from fetch import SRC, load_manifest  # noqa: E402

BENCH_TIMEOUT_S = 300


@dataclass(frozen=True)
class Result:
    id: str
    project: str
    split: str
    kind: str
    status: str  # "ran" | "blocked: why" | "failed: why" | "not run: why"
    edited: int | None = None
    silent: int | None = None
    speedup: float | None = None  # geometric mean over the shapes of the dispatched speedup
    interval: str = ""  # the paired re-measurement's [95%] per shape, ";"-separated
    pipeline: str = ""
    shapes: int = 0
    wins: int = 0
    gpu: str = ""
    seconds: float = 0.0


def edit_counts(folder: Path) -> tuple[int | None, int | None]:
    diff = folder / "init.diff"
    if not diff.exists():
        return None, None
    s = stat(diff.read_text())
    return s.edited, s.silent


def runnable(kernel: Mapping[str, Any]) -> str:
    """Empty when the kernel has a finished spec to run, else why it is blocked."""
    if kernel.get("blocked"):
        return f"blocked: {kernel['blocked']}"
    if not (HERE / kernel["id"] / "init.diff").exists():
        return "blocked: no spec (ktx init refuses it, see cpu_table.md)"
    return ""


def _tail(path: Path, n: int = 3) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "?"
    return " / ".join(lines[-n:])[:300]


def _geomean(xs: Sequence[float]) -> float | None:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summarize(state: Mapping[str, Any]) -> tuple[float | None, str, str, int, int]:
    """(geomean dispatched speedup, intervals, pipeline, shapes, wins) from optimize.json."""
    shapes = state.get("shapes") or []
    speedups = [s["speedup"] for s in shapes if s.get("speedup")]
    cells = []
    for s in shapes:
        p = s.get("paired") or {}
        iv = p.get("interval")
        if iv:
            cells.append(f"{iv['estimate']:.3f} [{iv['lo']:.3f}, {iv['hi']:.3f}]")
        else:
            cells.append(p.get("status") or "-")
    wins = sum(bool(s.get("wins")) for s in shapes)
    return _geomean(speedups), "; ".join(cells), str(state.get("pipeline") or ""), len(shapes), wins


def run_kernel(kernel: Mapping[str, Any], gpu: str, ktx: Sequence[str], work: Path, budget: float) -> Result:
    folder = HERE / kernel["id"]
    edited, silent = edit_counts(folder)
    base = dict(id=kernel["id"], project=kernel["project"], split=kernel["split"], kind=kernel["kind"],
                edited=edited, silent=silent, gpu=gpu)  # fmt: skip
    why = runnable(kernel)
    if why:
        return Result(**base, status=why)
    out = work / kernel["id"]
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": gpu, "PYTHONUNBUFFERED": "1"}
    t0 = time.monotonic()
    bench = [*ktx, "bench", ".", "--json", str(out / "bench.json")]
    with (out / "bench.log").open("w") as log:
        try:
            rc = subprocess.run(bench, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT,
                                timeout=BENCH_TIMEOUT_S).returncode  # fmt: skip
        except subprocess.TimeoutExpired:
            rc = 124
    if rc != 0:
        return Result(**base, status=f"failed: ktx bench rc={rc}: {_tail(out / 'bench.log')}",
                      seconds=round(time.monotonic() - t0, 1))  # fmt: skip
    opt = [*ktx, "optimize", ".", "--planner", "rules", "--shapes", "default", "--budget", str(int(budget)),
           "--out", str(out / "optimize")]  # fmt: skip
    with (out / "optimize.log").open("w") as log:
        try:
            rc = subprocess.run(opt, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT,
                                timeout=budget + 120).returncode  # fmt: skip
        except subprocess.TimeoutExpired:
            rc = 124
    seconds = round(time.monotonic() - t0, 1)
    try:
        state = json.loads((out / "optimize" / "optimize.json").read_text())
    except (OSError, ValueError):
        return Result(
            **base, status=f"failed: ktx optimize rc={rc}: {_tail(out / 'optimize.log')}", seconds=seconds
        )
    speedup, interval, pipeline, n, wins = summarize(state)
    status = "ran" if rc == 0 else f"ran (optimize rc={rc})"
    return Result(**base, status=status, speedup=speedup, interval=interval, pipeline=pipeline,
                  shapes=n, wins=wins, seconds=seconds)  # fmt: skip


def gpu_ids(n: int | None) -> list[str]:
    if os.environ.get("CUDA_VISIBLE_DEVICES"):
        ids = [g for g in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if g]
    else:
        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60).stdout
            ids = [str(i) for i, ln in enumerate(out.splitlines()) if ln.startswith("GPU")]
        except (OSError, subprocess.SubprocessError):
            ids = []
        ids = ids or ["0"]
    return ids[:n] if n else ids


def table(results: Sequence[Result], header: Sequence[str]) -> str:
    out = [
        *header,
        "Edited and silently wrong lines are the spec's `init.diff`, against `ktx init`'s draft when the "
        "spec was written; today's draft's counts are `cpu_table.md`'s (`cpu_check.py`, CPU only).",
        "",
    ]
    for split in ("main", "heldout"):
        rs = [r for r in results if r.split == split]
        ran = [r for r in rs if r.status.startswith("ran")]
        faster = [r for r in ran if r.wins]
        g = _geomean([r.speedup for r in ran if r.speedup])
        out += [
            f"### {split}: {len(rs)} kernels, {len(ran)} ran, {len(faster)} faster at one shape or more; "
            f"geomean dispatched speedup over those that ran {'-' if g is None else f'{g:.3f}x'}",
            "",
            "| kernel | project | split | ran or blocked (why) | edited lines (first draft) "
            "| silently wrong lines (first draft) | dispatched speedup (geomean) "
            "| interval per shape [95%] | pipeline |",
            "| --- | --- | --- | --- | ---: | ---: | ---: | --- | --- |",
        ]
        for r in rs:
            sp = "-" if r.speedup is None else f"{r.speedup:.3f}x ({r.wins}/{r.shapes} shapes)"
            status = r.status.replace("|", "\\|")
            out.append(
                f"| {r.id.split('__', 1)[1]} | {r.project} | {r.split} | {status} | "
                f"{'-' if r.edited is None else r.edited} | {'-' if r.silent is None else r.silent} | {sp} | "
                f"{r.interval or '-'} | `{r.pipeline or '-'}` |"
            )
        out.append("")
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--ids", nargs="*", default=[], help="kernel ids (default: all)")
    p.add_argument("--split", choices=("main", "heldout"), default=None)
    p.add_argument("--budget", type=float, default=45.0, help="ktx optimize's budget per kernel, seconds")
    p.add_argument("--deadline", type=float, default=540.0, help="start no kernel after this many seconds")
    p.add_argument("--gpus", type=int, default=None, help="lanes (default: every GPU)")
    p.add_argument("--out", type=Path, default=Path("realcode_out"))
    p.add_argument("--work", type=Path, default=None, help="run folders and logs (default OUT/work)")
    p.add_argument("--resume", action="store_true", help="keep the rows of OUT/results.json that ran")
    p.add_argument("--ktx", default=f"{shlex.quote(sys.executable)} -m ktx", help="the ktx command")
    args = p.parse_args(argv)
    if not SRC.is_dir():
        raise SystemExit(f"{SRC}: no sources (run fetch.py where there is network, and carry src/)")
    manifest = load_manifest()
    kernels = [
        k
        for k in manifest["kernels"]
        if (not args.ids or k["id"] in args.ids) and (args.split is None or k["split"] == args.split)
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.work or args.out / "work"
    done: dict[str, Result] = {}
    if args.resume and (args.out / "results.json").exists():
        for d in json.loads((args.out / "results.json").read_text())["results"]:
            if d["status"].startswith(("ran", "blocked")):
                done[d["id"]] = Result(**d)
    start = time.monotonic()
    ktx = shlex.split(args.ktx)
    todo: queue.Queue[Mapping[str, Any]] = queue.Queue()
    # blocked kernels first (instant), then the runnable ones, largest budgets spread over lanes
    for k in sorted((k for k in kernels if k["id"] not in done), key=lambda k: runnable(k) == ""):
        todo.put(k)
    results: dict[str, Result] = dict(done)
    lock = threading.Lock()
    gpus = gpu_ids(args.gpus)
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "gpus": gpus, "budget_s": args.budget, "command": sys.argv}  # fmt: skip
    try:
        meta["device"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=60).stdout.strip().splitlines()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        meta["device"] = ["unknown"]

    def write() -> None:
        rows = [results[k["id"]] for k in kernels if k["id"] in results]
        late = "not run: the deadline came first"
        rows += [
            Result(id=k["id"], project=k["project"], split=k["split"], kind=k["kind"], status=late)
            for k in kernels
            if k["id"] not in results
        ]
        (args.out / "results.json").write_text(
            json.dumps({**meta, "results": [asdict(r) for r in rows]}, indent=1) + "\n"
        )
        device = meta["device"][0] if meta["device"] else "?"
        head = [
            f"# The real-code benchmark on {device} ({meta['date']})",
            "",
            f"`ktx bench`, then `ktx optimize --planner rules --shapes default --budget {args.budget:g}` "
            f"per kernel, {len(gpus)} lane(s). Speedup: what the dispatch table delivers (1.0 where no "
            "config beat the original); interval: the paired re-measurement of the best config against "
            "the original.",
            "",
        ]
        (args.out / "results.md").write_text(table(rows, head))

    def lane(gpu: str) -> None:
        while True:
            try:
                k = todo.get_nowait()
            except queue.Empty:
                return
            if runnable(k) == "" and time.monotonic() - start > args.deadline:
                continue
            print(f"[{time.monotonic() - start:5.0f}s] gpu{gpu}: {k['id']}", flush=True)
            r = run_kernel(k, gpu, ktx, work, args.budget)
            print(f"[{time.monotonic() - start:5.0f}s] gpu{gpu}: {k['id']}: {r.status[:100]} "
                  f"{'' if r.speedup is None else f'{r.speedup:.3f}x'}", flush=True)  # fmt: skip
            with lock:
                results[k["id"]] = r
                write()

    threads = [threading.Thread(target=lane, args=(g,)) for g in gpus]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    write()
    if work.exists():
        with tarfile.open(args.out / "realcode-runs.tar.gz", "w:gz") as tar:
            tar.add(
                work, arcname="work", filter=lambda ti: None if ti.name.endswith((".cubin", "/cache")) else ti
            )
    print((args.out / "results.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
