"""Why each real-code kernel ended where it did: a table read from ``ktx optimize`` run folders.

    python benchmarks/realcode/why.py RUNS_DIR [--out benchmarks/realcode/why.md]

``RUNS_DIR`` holds one folder per kernel as ``scripts/gpu_calls.sh realcode`` leaves them
(``<project>__<kernel>/optimize.log`` and ``optimize/`` with ``optimize.json``, ``rounds.jsonl``
and ``round-NN/log.jsonl``). Nothing is measured here: every number comes from the run's own
records, so the same script reads this session's GPU run as it read session 8's.

Per kernel: the rounds (pipeline and outcome), what the planner could not use (passes whose probe
found no site), the candidates measured and those that failed (wrong result, compile error, ...),
final checks that failed or were skipped at a shape the search had made faster ("lost wins"),
time by phase, and one reason the kernel ended at 1.000x. The summary at the top counts the
reasons, so the largest causes are fixed first.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: A search speedup at least this large that the final check did not confirm is a lost win.
LOST_GAIN = 1.05


@dataclass(frozen=True)
class Lost:
    """A shape the search made faster whose final check did not let the table use it."""

    round: int
    shape: str
    search_speedup: float
    status: str
    reason: str


@dataclass(frozen=True)
class KernelWhy:
    kernel: str
    dispatched: float | None
    stop: str
    rounds: tuple[str, ...]
    no_site: tuple[str, ...]
    measured: int
    failed: Mapping[str, int]
    failed_examples: tuple[str, ...]
    lost: tuple[Lost, ...]
    phases: str
    nvcc_fallback_s: float
    crash: str = ""
    reasons: tuple[str, ...] = field(default=())


def _json_lines(path: Path) -> Iterator[dict[str, Any]]:
    if not path.is_file():
        return
    for line in path.read_text().splitlines():
        if line.strip():
            yield json.loads(line)


def _crash(log: Path) -> str:
    """The last line of a Python traceback in ``optimize.log`` (empty when the run finished)."""
    if not log.is_file():
        return ""
    lines = log.read_text().splitlines()
    if not any(line.startswith("Traceback") for line in lines):
        return ""
    return next((line for line in reversed(lines) if line.strip()), "")[:160]


def _round_logs(run: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for folder in sorted(run.glob("round-*")):
        index = int(folder.name.split("-")[1])
        for event in _json_lines(folder / "log.jsonl"):
            yield index, event


def _lost(rounds: Sequence[Mapping[str, Any]]) -> tuple[Lost, ...]:
    """Per round, the shapes whose search result beat the original by :data:`LOST_GAIN` or more
    and whose paired check was not measured (failed, skipped) or did not confirm the gain."""
    out = []
    for r in rounds:
        result = r.get("result") or {}
        for s in result.get("shapes") or ():
            original, best = s.get("original_us"), s.get("best_us")
            if not original or not best:
                continue
            gain = original / best
            paired = s.get("paired") or {}
            status = str(paired.get("status", "none"))
            if gain >= LOST_GAIN and not s.get("wins"):
                iv = paired.get("interval") or {}
                why = str(paired.get("reason") or "")
                if status == "measured" and iv:
                    why = f"paired {iv.get('estimate', 0):.3f} [{iv.get('lo', 0):.3f}, {iv.get('hi', 0):.3f}]"
                out.append(Lost(int(r["round"]), str(s["shape"]), gain, status, why))
    return tuple(out)


def _phases(data: Mapping[str, Any]) -> tuple[str, float]:
    ph = data.get("phases") or {}
    rounds = ph.get("rounds") or ()

    def total(key: str) -> float:
        return sum(float(r.get(key) or 0.0) for r in rounds)

    compiles = ph.get("compiles") or ()
    nvcc = sum(float(c.get("seconds") or 0.0) for c in compiles if "NVRTC" in str(c.get("kind")))
    text = (
        f"wall {float(ph.get('wall_s') or 0):.0f}: orig {float(ph.get('originals_s') or 0):.1f}, "
        f"plan {total('plan_s'):.1f}, search {total('search_s'):.1f}, check {total('check_s'):.1f}, "
        f"recheck {total('recheck_s'):.1f}, report {float(ph.get('report_s') or 0):.1f}"
    )
    return text, nvcc


def _reasons(k: KernelWhy, rounds: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """Why the kernel ended at 1.000x (or below what its search found): the causes in the order
    they are checked, most specific first."""
    out: list[str] = []
    if k.crash:
        return (f"optimize crashed: {k.crash}",)
    ran = [r for r in rounds if r.get("pipeline")]
    if not ran and "planner" in k.stop:
        out.append("planner proposed nothing (no pass has a site)")
    if k.lost:
        cut = sum(1 for x in k.lost if x.status in ("failed", "skipped") or "timeout" in x.reason)
        if cut:
            out.append(f"{cut} found win(s) lost in the final check (failed/skipped)")
        weak = len(k.lost) - cut
        if weak:
            out.append(f"{weak} found win(s) not confirmed by the paired check")
    if k.failed:
        bad = sum(k.failed.values())
        out.append(f"{bad} of {k.measured + bad} candidates failed ({', '.join(sorted(k.failed))})")
    found = [float((r.get("result") or {}).get("search_geomean_speedup") or 1.0) for r in ran]
    best = max(found, default=1.0)
    if ran and best < 1.02 and not k.lost:
        out.append(f"search found nothing faster (best search geomean {best:.3f}x)")
    if "budget" in k.stop:
        out.append(f"budget ran out after {len(ran)} round(s)")
    elif "without a gain" in k.stop:
        out.append(f"patience: {k.stop}")
    elif "planner" in k.stop and ran:
        out.append("planner ran out of passes")
    return tuple(out)


def read_run(folder: Path) -> KernelWhy:
    run = folder / "optimize"
    crash = _crash(folder / "optimize.log")
    data: dict[str, Any] = {}
    if (run / "optimize.json").is_file():
        data = json.loads((run / "optimize.json").read_text())
    rounds = list(_json_lines(run / "rounds.jsonl"))
    failed: collections.Counter[str] = collections.Counter()
    examples: list[str] = []
    measured = 0
    for index, event in _round_logs(run):
        if event.get("event") != "measure":
            continue
        status = str(event.get("status"))
        if status == "ok":
            measured += 1
            continue
        failed[status] += 1
        config = ",".join(f"{k}={v}" for k, v in (event.get("config") or {}).items())
        example = f"r{index} {config} {status}"
        if example not in examples:
            examples.append(example)
    no_site: set[str] = set()
    for r in rounds:
        for p in r.get("probes") or ():
            if not p.get("rewritten"):
                no_site.add(str(p.get("name")))
    shapes = data.get("shapes") or ()
    dispatched = None
    if shapes:
        logs = [math.log(float(s.get("speedup") or 1.0)) for s in shapes]
        dispatched = math.exp(sum(logs) / len(logs))
    phases, nvcc = _phases(data)
    label = []
    for r in rounds:
        pipeline = r.get("pipeline") or "-"
        label.append(f"{r.get('round')}:`{pipeline}` {r.get('status')}")
    k = KernelWhy(
        folder.name,
        dispatched,
        str(data.get("stop_reason") or ("crashed" if crash else "?")),
        tuple(label),
        tuple(sorted(no_site)),
        measured,
        dict(failed),
        tuple(examples[:4]),
        _lost(rounds),
        phases,
        nvcc,
        crash,
    )
    return KernelWhy(**{**k.__dict__, "reasons": _reasons(k, rounds)})


def cause_of(reason: str) -> str:
    """A reason without its numbers, so that the summary counts kernels per cause.

    >>> cause_of("3 of 19 candidates failed (wrong_result)")
    'candidates failed'
    >>> cause_of("budget ran out after 2 round(s)")
    'budget ran out'
    """
    for word in ("found win(s) lost in the final check", "found win(s) not confirmed", "candidates failed",
                 "search found nothing faster", "budget ran out", "patience"):  # fmt: skip
        if word in reason:
            return word
    return reason.split(":")[0]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(rows: Sequence[KernelWhy], source: str) -> str:
    at_one = [r for r in rows if r.dispatched is None or abs(r.dispatched - 1.0) < 1e-9]
    causes: collections.Counter[str] = collections.Counter()
    for r in rows:
        for reason in r.reasons:
            causes[cause_of(reason)] += 1
    lost_wins = [x for r in rows for x in r.lost]
    nvcc = sum(r.nvcc_fallback_s for r in rows)
    wall = 0.0
    for r in rows:
        with contextlib.suppress(IndexError, ValueError):
            wall += float(r.phases.split(":")[0].split()[1])
    out = [
        "# Why real-code kernels ended where they did",
        "",
        f"Generated by `benchmarks/realcode/why.py` from `{source}`; every number is the run's own record.",
        "",
        f"{len(rows)} kernels read; {len(at_one)} ended at 1.000x (or crashed). "
        f"Found wins (search >= {LOST_GAIN}x) the table did not use: {len(lost_wins)} shape(s) in "
        f"{len({(r.kernel) for r in rows if r.lost})} kernel(s). Compiles that fell back to nvcc after "
        f"NVRTC rejected an option: {nvcc:.0f} s of compiling (in part beside the measuring) in "
        f"{wall:.0f} s of optimize wall time.",
        "",
        "| cause (kernels it touches) | kernels |",
        "| --- | ---: |",
    ]
    out += [f"| {_cell(c)} | {n} |" for c, n in causes.most_common()]
    out += [
        "",
        "| kernel | dispatched | stop | rounds | candidates ok / failed (examples) | lost wins "
        "(round shape search-x status: reason) | time by phase (s) | nvcc fallback s | why |",
        "| --- | ---: | --- | --- | --- | --- | --- | ---: | --- |",
    ]
    for r in rows:
        failed = ", ".join(f"{n} {s}" for s, n in sorted(r.failed.items()))
        failed_cell = f"{r.measured} / {sum(r.failed.values())}" + (
            f" ({failed}; {'; '.join(r.failed_examples)})" if r.failed else ""
        )
        lost = "; ".join(
            f"r{x.round} {x.shape} {x.search_speedup:.2f}x {x.status}: {x.reason[:90]}" for x in r.lost
        )
        disp = "-" if r.dispatched is None else f"{r.dispatched:.3f}x"
        out.append(
            f"| {r.kernel} | {disp} | {_cell(r.stop)} | {_cell('; '.join(r.rounds) or '-')} "
            f"| {_cell(failed_cell)} | {_cell(lost or '-')} | {_cell(r.phases)} | {r.nvcc_fallback_s:.1f} "
            f"| {_cell('; '.join(r.reasons) or '-')} |"
        )
    out += [
        "",
        "Passes whose probe found no site in any round, per kernel (what the planner could not use):",
        "",
    ]
    for r in rows:
        if r.no_site:
            out.append(f"- {r.kernel}: {', '.join(r.no_site)}")
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("runs", type=Path, help="folder with one run folder per kernel")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "why.md")
    ap.add_argument("--source", default=None, help="how the table names the runs (default: RUNS)")
    args = ap.parse_args(argv)
    folders = sorted(
        p for p in args.runs.iterdir() if (p / "optimize.log").is_file() or (p / "optimize").is_dir()
    )
    rows = [read_run(p) for p in folders]
    args.out.write_text(render(rows, args.source or str(args.runs)))
    print(f"{args.out}: {len(rows)} kernels")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
