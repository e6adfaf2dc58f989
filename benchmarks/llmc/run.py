"""The llm.c ladder: ``ktx optimize`` from llm.c's naive kernels against its hand-written ones.

llm.c's ``dev/cuda/*.cu`` files each hold a naive first kernel and the hand-optimized versions
that followed. For every kernel this script

1. stages each version in a temporary kernel folder: the **unmodified** llm.c file and
   ``common.h``, the version's ``ktx.toml``, the kernel's ``reference.py`` and two small headers
   (``stubs/``) that declare the cuBLAS names ``common.h``'s host code uses (``nvcc -cubin``
   parses host code, links nothing, and the hosts may lack the cuBLAS headers);
2. runs ``ktx optimize`` (rules planner) from the naive version on the ``ladder`` shapes, within
   its share of ``--budget``;
3. runs ``ktx bench`` on the hand-written versions, each at every block size of its spec's
   ``bs`` axis (llm.c's own benchmark sweeps block sizes too), self-checked;
4. writes a row per shape: naive µs, ktx µs, the best hand-written µs (version, block size) and
   ktx / hand, all in the metric ``ktx optimize`` chose at that shape (the graph time when the
   naive kernel runs under 20 µs, else one launch), to ``results.json`` (with device and date)
   and ``results.md``, after every kernel, so a row survives the death of later ones.

Usage (repo root, GPU host)::

    python benchmarks/llmc/run.py --llmc shared/llmc --budget 420 --out "$OUT"

``--kernels`` selects kernels; ``--ktx`` names another ktx command (the tests pass a stand-in).
Run folders and logs go to ``--work`` and are packed into ``llmc-runs.tar.gz`` under ``--out``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Ladder:
    """One llm.c kernel: its file, the naive version ktx starts from, the hand-written ones, and
    its weight in the budget (the naive softmax alone takes tens of ms per launch)."""

    name: str
    naive: str
    hand: tuple[str, ...]
    weight: float


LADDERS: tuple[Ladder, ...] = (
    Ladder("gelu_forward", "v1", ("v2",), 1.0),
    Ladder("residual_forward", "v1", ("v2",), 1.0),
    Ladder("encoder_forward", "v1", ("v2", "v3"), 1.0),
    Ladder("layernorm_forward", "v1", ("v3", "v4", "v5"), 1.5),
    Ladder("fused_residual_forward", "v2", ("v4", "v5"), 1.5),
    Ladder("crossentropy_forward", "v1", (), 0.8),
    Ladder("softmax_forward", "v1", ("v7", "online8"), 2.5),  # last: the slowest and riskiest
)

HAND_SHARE = 0.35  # of each kernel's time: the hand-written benches (the rest is ktx optimize's)
MIN_OPTIMIZE_S = 20.0
GRACE_S = 45.0  # past --budget before everything still running is killed (the hard deadline)


def llmc_cuda_dir(path: str | Path) -> Path:
    """The folder holding llm.c's ``dev/cuda`` files: ``path`` itself or ``path/dev/cuda``."""
    p = Path(path)
    for cand in (p, p / "dev" / "cuda"):
        if (cand / "common.h").is_file():
            return cand
    raise SystemExit(f"error: no llm.c dev/cuda folder (with common.h) at {p} or {p / 'dev' / 'cuda'}")


def stage(ladder: Ladder, version: str, cuda_dir: Path, root: Path) -> Path:
    """A kernel folder for ``ktx``: the unmodified llm.c file and headers beside the spec."""
    folder = root / f"{ladder.name}-{version}"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    src = HERE / ladder.name
    shutil.copyfile(src / version / "ktx.toml", folder / "ktx.toml")
    shutil.copyfile(src / "reference.py", folder / "reference.py")
    for name in (f"{ladder.name}.cu", "common.h"):
        shutil.copyfile(cuda_dir / name, folder / name)
    for stub in sorted((HERE / "stubs").glob("*.h")):
        shutil.copyfile(stub, folder / stub.name)
    return folder


def _run(cmd: Sequence[str], log: Path, timeout: float, env: Mapping[str, str]) -> int | None:
    """Run ``cmd`` into ``log``; None when it was killed at ``timeout`` (its process group too)."""
    with log.open("ab") as out:
        out.write(f"$ {' '.join(cmd)}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            list(cmd), stdout=out, stderr=subprocess.STDOUT, env=dict(env), start_new_session=True
        )
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            out.write(f"\n[run.py: killed after {timeout:.0f} s]\n".encode())
            return None


def base_shape(name: str) -> str:
    """A hand-written bench's shape name without its block size: ``B=8,T=1024,C=768,bs=256``."""
    return ",".join(p for p in name.split(",") if not p.startswith("bs="))


def block_size(name: str) -> int | None:
    for part in name.split(","):
        if part.startswith("bs="):
            return int(part[3:])
    return None


def metric_time(m: Mapping[str, Any], metric: str | None) -> float | None:
    """A ``ktx bench --json`` measurement's time in ``metric`` (``graph`` or ``single``)."""
    if m.get("status") != "ok":
        return None
    timing = m.get(metric or "") if metric else None
    if timing is None:  # no metric from ktx: the same rule as ktx's auto (graph under 20 µs)
        single = (m.get("single") or {}).get("median_us")
        graph = (m.get("graph") or {}).get("median_us")
        if (single is not None and single >= 20.0) or graph is None:
            return float(single) if single is not None else None
        return float(graph)
    value = timing.get("median_us")
    return None if value is None else float(value)


def kernel_rows(
    ladder: Ladder, state: Mapping[str, Any] | None, hand: Mapping[str, Sequence[Mapping[str, Any]]]
) -> list[dict[str, Any]]:
    """Rows per shape from ``optimize.json`` (or None) and each hand version's measurements."""
    shapes: dict[str, dict[str, Any]] = {}
    for s in (state or {}).get("shapes", []):
        shapes[str(s["shape"])] = dict(s)
    names = list(shapes)
    for ms in hand.values():
        for m in ms:
            b = base_shape(str(m.get("shape", "")))
            if b not in shapes:
                shapes[b] = {}
                names.append(b)
    rows = []
    for name in names:
        s = shapes[name]
        metric = s.get("metric")
        best: tuple[float, str, int | None] | None = None
        failed: list[str] = []
        for version, ms in hand.items():
            for m in ms:
                if base_shape(str(m.get("shape", ""))) != name:
                    continue
                t = metric_time(m, metric)
                if t is None:
                    failed.append(f"{version} {m.get('shape')}: {m.get('status')}")
                elif best is None or t < best[0]:
                    best = (t, version, block_size(str(m.get("shape", ""))))
        ktx_us = s.get("effective_us")
        ratio = None if best is None or ktx_us is None else float(ktx_us) / best[0]
        rows.append({
            "kernel": ladder.name,
            "shape": name,
            "metric": metric,
            "naive": ladder.naive,
            "naive_us": s.get("original_us"),
            "ktx_us": ktx_us,
            "ktx_speedup": s.get("speedup"),
            "ktx_config": s.get("best_config") if s.get("wins") else None,
            "ktx_sol": s.get("sol_fraction"),
            "hand_us": None if best is None else best[0],
            "hand_version": None if best is None else best[1],
            "hand_block": None if best is None else best[2],
            "hand_failures": failed,
            "ktx_over_hand": ratio,
        })  # fmt: skip
    return rows


def geomean(values: Sequence[float]) -> float | None:
    vals = [v for v in values if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def _us(v: Any) -> str:
    return "-" if v is None else f"{float(v):.2f}"


def markdown(report: Mapping[str, Any]) -> str:
    """The table: per kernel and shape, naive, ktx, hand-written and ktx / hand."""
    lines = [
        "# llm.c ladder: ktx optimize from the naive kernel vs llm.c's hand-written best",
        "",
        f"Device: {report.get('device') or '?'}; date: {report.get('date')}; "
        f"budget {report.get('budget_s')} s "
        f"({report.get('wall_s', 0):.0f} s wall). Times in µs per launch, in the metric ktx chose per shape "
        "(graph: CUDA graph replay, the naive kernel under 20 µs; single: one launch, L2 flushed).",
        "",
        "| kernel | shape | metric | naive µs | ktx µs | ktx pipeline | hand µs (version, block) "
        "| ktx / hand |",
        "|---|---|---|---:|---:|---|---|---:|",
    ]
    for k in report.get("kernels", []):
        pipeline = k.get("pipeline") or "-"
        for r in k.get("rows", []):
            hand = (
                "-"
                if r["hand_us"] is None
                else f"{_us(r['hand_us'])} ({r['hand_version']}, {r['hand_block']})"
            )
            ratio = "-" if r["ktx_over_hand"] is None else f"{r['ktx_over_hand']:.2f}x"
            # the run's pipeline is its best round's; a shape where the table keeps the naive
            # kernel (no win, or no final check) ran none of it
            kept = r["ktx_us"] is not None and r["ktx_us"] == r["naive_us"]
            shown = "- (naive kept)" if kept and pipeline != "-" else pipeline
            lines.append(
                f"| {r['kernel']} ({r['naive']}) | {r['shape']} | {r['metric'] or '-'} | "
                f"{_us(r['naive_us'])} | "
                f"{_us(r['ktx_us'])} | {shown} | {hand} | {ratio} |"
            )
    g = report.get("geomean_ktx_over_hand")
    worst = report.get("worst_ktx_over_hand")
    lines += ["", f"Geomean ktx / hand: {'-' if g is None else f'{g:.2f}x'}; worst: "
              f"{'-' if worst is None else f'{worst:.2f}x'} "
              "(goal: geomean <= 1.0, none above 1.2)."]  # fmt: skip
    notes = [f"- {k['kernel']}: {n}" for k in report.get("kernels", []) for n in k.get("notes", [])]
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines) + "\n"


def summarize(report: dict[str, Any]) -> None:
    ratios = [r["ktx_over_hand"] for k in report["kernels"] for r in k["rows"] if r["ktx_over_hand"]]
    report["geomean_ktx_over_hand"] = geomean(ratios)
    report["worst_ktx_over_hand"] = max(ratios) if ratios else None


def save(report: dict[str, Any], out: Path) -> None:
    summarize(report)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    (out / "results.md").write_text(markdown(report))


def pack(work: Path, out: Path) -> None:
    """Run folders and logs, without the studies and caches, into one tarball under ``out``."""
    with tarfile.open(out / "llmc-runs.tar.gz", "w:gz") as tar:
        for sub in ("runs", "logs", "bench"):
            for path in sorted((work / sub).rglob("*")) if (work / sub).exists() else []:
                skipped = ("study.db", "study.jsonl", "cache.jsonl", "log.jsonl")
                if path.is_file() and path.name not in skipped:
                    tar.add(path, arcname=str(path.relative_to(work)))


def device_name(state: Mapping[str, Any] | None, bench: Mapping[str, Any] | None) -> str | None:
    """The device ``ktx bench`` recorded, else the one in ``optimize.json``."""
    names = [(bench or {}).get("device"), ((state or {}).get("device") or {}).get("name")]
    for name in names:
        if isinstance(name, dict):
            name = name.get("name")
        if name:
            return str(name)
    return None


def run_kernel(
    ladder: Ladder,
    args: argparse.Namespace,
    cuda_dir: Path,
    work: Path,
    seconds: float,
    hard: float,
    gpu: int | None = None,
) -> dict[str, Any]:
    """Optimize the naive version, bench the hand-written ones: this kernel's part of the report.

    Every command is killed at the latest at ``hard`` (a ``time.monotonic`` deadline), so the
    whole script ends within ``--budget`` plus :data:`GRACE_S`.
    """
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = lane_device(gpu, os.environ.get("CUDA_VISIBLE_DEVICES"))
    ktx = args.ktx.split() if args.ktx else [sys.executable, "-m", "ktx"]
    log = work / "logs" / f"{ladder.name}.log"
    notes: list[str] = []
    start = time.monotonic()
    reuse = getattr(args, "hand_from", None) is not None
    hand_s = seconds * HAND_SHARE if ladder.hand and not (args.no_hand or reuse) else 0.0
    opt_s = max(MIN_OPTIMIZE_S, seconds - hand_s)
    state: dict[str, Any] | None = None
    run_dir = work / "runs" / ladder.name
    if not args.no_optimize:
        naive = stage(ladder, ladder.naive, cuda_dir, work / "stage")
        cmd = [
            *ktx, "optimize", str(naive), "--planner", "rules", "--shapes", args.shapes,
            "--budget", f"{opt_s:.0f}", "--out", str(run_dir), "--ncu", "off", "--backend", args.backend,
            "--seed", "0",
        ]  # fmt: skip
        limit = min(opt_s + 30, hard - time.monotonic())
        code = _run(cmd, log, limit, env) if limit > 5 else None
        if code is None:
            notes.append(f"ktx optimize killed after {max(0.0, limit):.0f} s (budget {opt_s:.0f} s)")
        elif code != 0:
            notes.append(f"ktx optimize exited {code} (see logs/{ladder.name}.log)")
        path = run_dir / "optimize.json"
        if path.exists():
            state = json.loads(path.read_text())
            if state.get("state") != "done":
                notes.append(f"ktx optimize left state {state.get('state')!r}: its best so far is used")
        else:
            notes.append("ktx optimize wrote no optimize.json")
    hand: dict[str, list[dict[str, Any]]] = {}
    bench_meta: dict[str, Any] | None = None
    left = max(30.0, seconds - (time.monotonic() - start)) if ladder.hand else 0.0
    for i, version in enumerate(() if args.no_hand or reuse else ladder.hand):
        folder = stage(ladder, version, cuda_dir, work / "stage")
        out = work / "bench" / f"{ladder.name}-{version}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        share = left / (len(ladder.hand) - i)
        t0 = time.monotonic()
        cmd = [
            *ktx, "bench", str(folder), "--shapes", args.shapes, "--json", str(out),
            "--reference", "original", "--no-odd", "--rounds", "3",
        ]  # fmt: skip
        limit = min(share + 60, hard - time.monotonic())
        code = _run(cmd, log, limit, env) if limit > 5 else None
        left -= time.monotonic() - t0
        if code is None:
            notes.append(f"ktx bench {version} killed after {max(0.0, limit):.0f} s")
        if out.exists():
            data = json.loads(out.read_text())
            bench_meta = bench_meta or data
            hand[version] = list(data.get("measurements", []))
        else:
            notes.append(f"ktx bench {version} wrote no results (exit {code})")
    rows = kernel_rows(ladder, state, hand)
    if reuse:
        rows = hand_from(rows, Path(args.hand_from), notes)
    return {
        "kernel": ladder.name,
        "naive": ladder.naive,
        "hand_versions": list(ladder.hand),
        "pipeline": None if state is None else state.get("pipeline"),
        "stop_reason": None if state is None else state.get("stop_reason"),
        "rounds": None if state is None else state.get("rounds"),
        "device": device_name(state, bench_meta),
        "wall_s": round(time.monotonic() - start, 1),
        "notes": notes,
        "rows": rows,
    }


HAND_KEYS = ("hand_us", "hand_version", "hand_block", "hand_failures")


def hand_from(rows: list[dict[str, Any]], path: Path, notes: list[str]) -> list[dict[str, Any]]:
    """``rows`` with the hand-written columns of an earlier report's rows of the same kernel,
    shape and metric (a row whose metric differs keeps none: the times would not compare)."""
    earlier = json.loads(path.read_text())
    table = {
        (r["kernel"], r["shape"], r.get("metric")): r
        for k in earlier.get("kernels", [])
        for r in k.get("rows", [])
    }
    out = []
    for row in rows:
        old = table.get((row["kernel"], row["shape"], row.get("metric")))
        row = dict(row)
        if old is None or old.get("hand_us") is None:
            metric = row.get("metric")
            notes.append(f"{row['shape']}: no hand-written time in {path.name} for metric {metric}")
        else:
            row.update({k: old.get(k) for k in HAND_KEYS})
            ktx_us = row.get("ktx_us")
            row["ktx_over_hand"] = None if ktx_us is None else float(ktx_us) / float(old["hand_us"])
        out.append(row)
    if not any("hand-written times from" in n for n in notes):
        notes.append(
            f"hand-written times from {path.name} ({earlier.get('device')}, {earlier.get('date')}), "
            "an earlier run of this script: not re-benched"
        )
    return out


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--llmc", required=True, help="llm.c checkout (or its dev/cuda folder)")
    p.add_argument("--kernels", nargs="*", default=None, help="only these kernels")
    p.add_argument("--budget", type=float, default=420.0,
                   help="seconds for all selected kernels together (shared by weight)")  # fmt: skip
    p.add_argument("--gpus", type=int, default=1,
                   help="lanes: kernels run side by side, one per GPU (CUDA_VISIBLE_DEVICES)")  # fmt: skip
    p.add_argument("--shapes", default="ladder", help="shape set of the specs (ladder, quick)")
    p.add_argument("--backend", default="cupy", help="ktx optimize --backend")
    p.add_argument("--out", default=os.environ.get("OUT") or str(HERE / "out"), help="results folder")
    p.add_argument("--work", default=None, help="staging and run folders (default: a temporary one)")
    p.add_argument("--ktx", default=None, help="the ktx command (default: this python -m ktx)")
    p.add_argument("--no-optimize", action="store_true", help="only bench the hand-written versions")
    p.add_argument("--no-hand", action="store_true", help="only run ktx optimize")
    p.add_argument("--hand-from", default=None, metavar="RESULTS_JSON",
                   help="take the hand-written times from an earlier run's results.json (same "
                        "device kind) instead of benching them again; rows match on kernel, "
                        "shape and metric")  # fmt: skip
    return p.parse_args(argv)


def lane_device(lane: int, visible: str | None) -> str:
    """The device a lane runs on: the lane-th entry of the caller's ``CUDA_VISIBLE_DEVICES``
    when it names devices, else the lane number itself. Two ladders can then share one host
    side by side (``CUDA_VISIBLE_DEVICES=2,3 run.py --gpus 2``) without both taking GPUs 0, 1.

    >>> lane_device(1, "2,3"), lane_device(1, None), lane_device(0, "")
    ('3', '1', '0')
    """
    names = [v.strip() for v in (visible or "").split(",") if v.strip()]
    if not names:
        return str(lane)
    if lane >= len(names):
        raise SystemExit(f"error: lane {lane} but CUDA_VISIBLE_DEVICES names only {visible!r}")
    return names[lane]


def lanes(ladders: Sequence[Ladder], n: int) -> list[list[Ladder]]:
    """Kernels dealt to ``n`` GPUs, heaviest first to the least loaded lane, each lane in
    :data:`LADDERS` order (so softmax, the riskiest, still runs last in its lane)."""
    out: list[list[Ladder]] = [[] for _ in range(max(1, n))]
    load = [0.0] * len(out)
    for lad in sorted(ladders, key=lambda x: -x.weight):
        k = load.index(min(load))
        out[k].append(lad)
        load[k] += lad.weight
    order = {lad.name: i for i, lad in enumerate(LADDERS)}
    return [sorted(lane, key=lambda x: order[x.name]) for lane in out if lane]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    cuda_dir = llmc_cuda_dir(args.llmc)
    known = {lad.name: lad for lad in LADDERS}
    wanted = args.kernels or list(known)
    unknown = [k for k in wanted if k not in known]
    if unknown:
        raise SystemExit(f"error: unknown kernels {unknown} (known: {', '.join(known)})")
    ladders = [known[k] for k in wanted]
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="ktx-llmc-"))
    for sub in ("logs", "runs", "stage", "bench"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    out = Path(args.out)
    start = time.monotonic()
    hard = start + args.budget + GRACE_S
    report: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": None,
        "budget_s": args.budget,
        "gpus": args.gpus,
        "shapes": args.shapes,
        "backend": args.backend,
        "llmc": str(cuda_dir),
        "hand_from": args.hand_from,
        "kernels": [],
    }
    lock = threading.Lock()
    order = {lad.name: i for i, lad in enumerate(LADDERS)}

    def lane(index: int, mine: list[Ladder]) -> None:
        gpu = index if args.gpus > 1 else None
        for i, ladder in enumerate(mine):
            spent = time.monotonic() - start
            share = ladder.weight / sum(x.weight for x in mine[i:])
            seconds = max(MIN_OPTIMIZE_S, (args.budget - spent) * share)
            where = "" if gpu is None else f" on GPU {gpu}"
            print(f"[llmc] {ladder.name}: {seconds:.0f} s{where}", flush=True)
            try:
                part = run_kernel(ladder, args, cuda_dir, work, seconds, hard, gpu)
            except Exception as exc:  # one kernel's failure must not lose the others
                part = {"kernel": ladder.name, "naive": ladder.naive, "rows": [],
                        "notes": [f"{type(exc).__name__}: {exc}"]}  # fmt: skip
            with lock:
                report["kernels"].append(part)
                report["kernels"].sort(key=lambda k: order.get(k["kernel"], 99))
                report["device"] = report["device"] or part.get("device")
                report["wall_s"] = round(time.monotonic() - start, 1)
                save(report, out)
                for r in part["rows"]:
                    print(f"[llmc]   {ladder.name} {r['shape']}: naive {_us(r['naive_us'])} "
                          f"ktx {_us(r['ktx_us'])} hand {_us(r['hand_us'])} "
                          f"ktx/hand {r['ktx_over_hand'] or '-'}", flush=True)  # fmt: skip

    try:
        threads = [
            threading.Thread(target=lane, args=(k, mine), daemon=True)
            for k, mine in enumerate(lanes(ladders, args.gpus))
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        with lock:
            report["wall_s"] = round(time.monotonic() - start, 1)
            save(report, out)
            pack(work, out)
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
