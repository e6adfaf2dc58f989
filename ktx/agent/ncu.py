"""Nsight Compute metrics for the analysis, when ``ncu`` is on the PATH.

``ncu`` profiles one launch of the kernel inside ``ktx run`` (the worker process that launches it
is a child, hence ``--target-processes all``), with ``--clock-control none`` so the clocks are the
ones the timings saw, and reports the raw metrics of three sections as CSV. From them the
analysis takes DRAM throughput, SM throughput and achieved occupancy (percent of peak) and the
top warp stall reasons (cycles per issued instruction). Everything here is optional: without
``ncu``, or when profiling fails (no permission to the counters is common), the analysis goes on
from the timings alone and the run log says why.
"""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ktx.agent.analysis import NcuMetrics

#: DRAM throughput: the SpeedOfLight section of recent ncu (2025.3 on an H200 here) reports
#: ``gpu__dram_throughput``; older versions and ``--metrics`` users name ``dram__throughput``.
DRAM_NAMES = (
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
)
SM = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
_STALL = re.compile(r"^smsp__average_warps?_(?:latency_)?issue_stalled_(\w+?)_per_issue_active\.ratio$")
SECTIONS = ("SpeedOfLight", "Occupancy", "WarpStateStats")


@dataclass(frozen=True)
class NcuResult:
    """Metrics, or why there are none."""

    metrics: NcuMetrics | None
    error: str = ""
    command: tuple[str, ...] = ()


def ncu_path() -> str | None:
    return shutil.which("ncu")


def command(ncu: str, kernel_dir: Path, shape: str, kernel: str, python: str = sys.executable) -> list[str]:
    cmd = [ncu, "--clock-control", "none", "--target-processes", "all", "-k", f"regex:{re.escape(kernel)}"]
    cmd += ["--launch-count", "1"]
    for section in SECTIONS:
        cmd += ["--section", section]
    cmd += ["--csv", "--page", "raw"]
    cmd += [python, "-m", "ktx", "run", str(kernel_dir), "--shape", shape, "--no-odd"]
    return cmd


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def parse_csv(text: str) -> Mapping[str, float]:
    """Metric -> value of the first profiled launch in ``ncu --csv --page raw`` output."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if len(rows) < 2:
        return {}
    header = rows[0]
    data = next((r for r in rows[1:] if len(r) == len(header) and r[0].strip() and r[0] != "" and
                 _number(r[0]) is not None), None)  # fmt: skip
    if data is None:
        return {}
    out: dict[str, float] = {}
    for name, value in zip(header, data, strict=True):
        number = _number(value)
        if number is not None:
            out[name] = number
    return out


def metrics_from(raw: Mapping[str, float], top: int = 3) -> NcuMetrics:
    stalls = []
    for name, value in raw.items():
        m = _STALL.match(name)
        if m and value > 0:
            stalls.append((m.group(1), value))
    stalls.sort(key=lambda s: (-s[1], s[0]))
    dram = next((raw[n] for n in DRAM_NAMES if n in raw), None)
    return NcuMetrics(
        dram,
        raw.get(SM),
        raw.get(OCCUPANCY),
        tuple(stalls[:top]),
        dict(raw),
    )


def profile(
    kernel_dir: Path, shape: str, kernel: str, timeout_s: float = 300.0, ncu: str | None = None
) -> NcuResult:
    """Profile the original kernel at ``shape``; never raises."""
    exe = ncu or ncu_path()
    if exe is None:
        return NcuResult(None, "ncu is not on the PATH")
    cmd = command(exe, kernel_dir, shape, kernel)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return NcuResult(None, f"ncu did not finish: {exc}", tuple(cmd))
    raw = parse_csv(done.stdout)
    if not raw:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return NcuResult(
            None, f"ncu gave no metrics (exit {done.returncode}): {' | '.join(tail)[:300]}", tuple(cmd)
        )
    return NcuResult(metrics_from(raw), "", tuple(cmd))


#: Seconds one ``ncu`` profile of a shape takes, for the budget (session 8's probe on an H200: two
#: profiles took 25.0 s and 28.2 s, a whole ``ktx run`` process under ncu each).
PROFILE_S = 15.0

#: The share of ``--budget`` that Nsight Compute may take under ``--ncu auto``.
BUDGET_SHARE = 0.1


def budgeted(shapes: Sequence[str], budget_s: float | None, mode: str) -> tuple[list[str], str]:
    """The shapes to profile and, where some are left out, why (one line for the run's notes).

    Why (issue 23 item 6): under ``--budget 20`` and ``40`` the real-code runs spent 23-28 s in
    ``ncu`` before round 1, so no round ran at all. Metrics only sharpen the planner's analysis
    (the timings alone drive it too), so under ``auto`` they may take at most
    :data:`BUDGET_SHARE` of the budget, at :data:`PROFILE_S` a profile; ``on`` profiles every
    shape asked for, whatever it costs."""
    names = list(shapes)
    if mode != "auto" or budget_s is None:
        return names, ""
    fits = int(BUDGET_SHARE * budget_s // PROFILE_S)
    if fits >= len(names):
        return names, ""
    least = PROFILE_S * (fits + 1) / BUDGET_SHARE
    kept = names[:fits]
    what = "skipped" if not kept else f"profiled {', '.join(kept)} only"
    return kept, (
        f"{what}: a profile takes about {PROFILE_S:.0f} s and --ncu auto gives Nsight Compute at most "
        f"{BUDGET_SHARE:.0%} of the --budget of {budget_s:g} s ({least:.0f} s would profile one more shape; "
        "--ncu on profiles them whatever the budget)"
    )


def profile_shapes(
    kernel_dir: Path, shapes: Sequence[str], kernel: str, timeout_s: float = 300.0
) -> tuple[dict[str, NcuMetrics], list[str]]:
    """Metrics per shape and the errors met (one line each)."""
    found: dict[str, NcuMetrics] = {}
    errors: list[str] = []
    for shape in shapes:
        result = profile(kernel_dir, shape, kernel, timeout_s)
        if result.metrics is not None:
            found[shape] = result.metrics
        else:
            errors.append(f"{shape}: {result.error}")
    return found, errors
