"""``ktx run --sanitize``: one configuration under NVIDIA compute-sanitizer (memcheck, racecheck).

Guard zones (:mod:`ktx.measure.guards`) see writes past a buffer's ends during verification;
compute-sanitizer sees more (reads out of bounds, misaligned and shared-memory accesses,
shared-memory races) at a cost of 10-100x per launch, so it runs on request, on one config at
one shape, in a child process of its own (``python -m ktx.measure.sanitize JOB.json``) that
compiles the kernel, draws the inputs and launches it once. The child turns CuPy's memory pool
off, so every array is its own ``cudaMalloc`` of its exact size and memcheck knows its bounds.

The findings of both tools come back as one block (:func:`render`).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ktx.ir.errors import KtxError

from ktx.measure.compile import find_nvcc
from ktx.measure.types import Candidate
from ktx.spec import ShapePoint, Spec

TOOLS = ("memcheck", "racecheck")
NAME = "compute-sanitizer"
#: Lines of findings shown per tool.
SHOWN = 14
#: After ``--tool T``. API errors are not reported: CUDA's runtime and Python GPU stacks probe
#: the driver with calls that fail by design (``cuGetProcAddress`` of optional entry points),
#: which compute-sanitizer would count as errors of a clean kernel; what --sanitize is for (the
#: kernel's own memory accesses and shared-memory races) is reported either way, and a launch
#: that fails still shows as the child's ``failed:`` line and exit status.
OPTIONS = ("--target-processes", "application-only", "--print-limit", "50", "--report-api-errors", "no")
#: memcheck only: a tracked red zone after every allocation. Exact-size cudaMallocs may sit back
#: to back, and a store just past one buffer's end into its neighbour is no error to memcheck
#: without one (the same reach as the guard zones).
TOOL_OPTIONS = {"memcheck": ("--padding", "4096")}
MARK = "ktx-sanitize:"
#: Toolkits installed side by side (the GPU hosts have CUDA 13.0's under /usr/local/cuda-13.0).
CUDA_GLOB = "/usr/local/cuda*/bin"
#: Finding lines left out of the block: the host backtrace of each error, long and the same.
_NOISE = ("Host Frame", "Saved host backtrace", "Device Frame")
_HEADERS = ("COMPUTE-SANITIZER", "Target application returned")


def sanitizer_places() -> list[str]:
    """Where compute-sanitizer is looked for, in order: PATH, $CUDA_HOME/bin and $CUDA_PATH/bin,
    the folder of the nvcc ktx uses (resolved), then /usr/local/cuda*/bin, newest first."""
    places = ["PATH"]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root:
            places.append(os.path.join(root, "bin"))
    nvcc = find_nvcc()
    if nvcc:
        places.append(os.path.dirname(os.path.realpath(nvcc)))
    places.extend(sorted(glob.glob(CUDA_GLOB), reverse=True))
    return list(dict.fromkeys(places))


def find_sanitizer() -> tuple[str | None, list[str]]:
    """(the compute-sanitizer to use or None, the places looked in)."""
    places = sanitizer_places()
    for place in places:
        if place == "PATH":
            found = shutil.which(NAME)
        else:
            candidate = os.path.join(place, NAME)
            found = candidate if os.path.isfile(candidate) and os.access(candidate, os.X_OK) else None
        if found:
            return found, places
    return None, places


@dataclass(frozen=True)
class ToolReport:
    """What one tool found: ``errors`` from its summary (None when it printed none)."""

    tool: str
    errors: int | None
    findings: tuple[str, ...]
    exit_code: int
    launched: bool
    tail: str = ""

    @property
    def clean(self) -> bool:
        return self.errors == 0 and self.exit_code == 0 and self.launched


_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+)\s+error")
_RACE = re.compile(
    r"RACECHECK SUMMARY:\s*(\d+)\s+hazards?\s+displayed\s*\((\d+)\s+errors?,\s*(\d+)\s+warnings?\)"
)
_PREFIX = re.compile(r"^=+\s?")


def parse(tool: str, output: str, exit_code: int) -> ToolReport:
    """The findings and error count in a compute-sanitizer run's output (its lines start with
    ``=========``; the child's own lines do not)."""
    errors: int | None = None
    findings: list[str] = []
    launched = False
    for raw in output.splitlines():
        if raw.startswith(MARK):
            launched = launched or " launching " in raw
            continue
        if not raw.startswith("="):
            continue
        line = _PREFIX.sub("", raw).rstrip()
        race = _RACE.search(line)
        summary = _SUMMARY.search(line)
        if race:
            errors = max(errors or 0, int(race.group(2)) + int(race.group(3)))
        elif summary:
            errors = max(errors or 0, int(summary.group(1)))
        elif line.strip() and not line.startswith(_HEADERS) and not any(n in line for n in _NOISE):
            findings.append(line)
    tail = "" if errors is not None and launched else "\n".join(output.strip().splitlines()[-12:])
    return ToolReport(tool, errors, tuple(findings), exit_code, launched, tail)


def render(reports: Sequence[ToolReport], sanitizer: str, what: str) -> str:
    """One block: a line per tool with its count, then its first findings, indented."""
    lines = [f"compute-sanitizer ({sanitizer}) on {what}:"]
    for r in reports:
        if r.errors is None:
            head = f"no summary (exit {r.exit_code})"
        elif r.errors == 0 and r.launched:
            head = "clean, 0 errors"
        else:
            head = f"{r.errors} error{'s' if r.errors != 1 else ''}"
        if not r.launched:
            head += "; the kernel was not launched (see below)"
        lines.append(f"  {r.tool:<10} {head}")
        shown = list(r.findings[:SHOWN])
        lines.extend(f"      {f.strip()}" for f in shown)
        if len(r.findings) > SHOWN:
            lines.append(f"      ... {len(r.findings) - SHOWN} more lines")
        if r.tail:
            lines.extend(f"      | {t}" for t in r.tail.splitlines())
    verdict = "clean" if all(r.clean for r in reports) else "FINDINGS: fix the kernel (or the spec) first"
    lines.append(f"  verdict: {verdict}")
    return "\n".join(lines)


def sanitize(spec: Spec, cand: Candidate, point: ShapePoint, timeout_s: float = 600.0) -> tuple[int, str]:
    """(exit status, report block): 0 clean, 1 findings. Raises KtxError (exit 2) when
    compute-sanitizer is missing, saying where it looked."""
    sanitizer, places = find_sanitizer()
    if sanitizer is None:
        raise KtxError(
            f"--sanitize: {NAME} not found; looked in: {', '.join(places)}",
            None,
            f"install the CUDA toolkit's {NAME}, or set CUDA_HOME to a toolkit that has it in bin/",
        )
    job = {"spec": str(spec.path), "shape": point.name, "candidate": cand.to_dict()}
    reports = []
    with tempfile.TemporaryDirectory(prefix="ktx-sanitize-") as tmp:
        path = Path(tmp) / "job.json"
        path.write_text(json.dumps(job))
        for tool in TOOLS:
            child = [sys.executable, "-m", "ktx.measure.sanitize", str(path)]
            options = (*OPTIONS, *TOOL_OPTIONS.get(tool, ()))
            output, code = _run([sanitizer, "--tool", tool, *options, *child], timeout_s)
            reports.append(parse(tool, output, code))
    label = cand.label or (json.dumps(dict(cand.config)) if cand.config else "original")
    block = render(reports, sanitizer, f"{spec.name} @ {point.name}, {label}")
    return (0 if all(r.clean for r in reports) else 1), block


def _run(cmd: Sequence[str], timeout_s: float) -> tuple[str, int]:
    """(stdout + stderr, exit status) of ``cmd``; past ``timeout_s`` its whole process group
    (compute-sanitizer and the Python child it started) is killed and the status is 124."""
    proc = subprocess.Popen(
        list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
        return out + err, proc.returncode
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return f"{_text(out)}{_text(err)}\n{MARK} timed out after {timeout_s:g} s", 124


def _text(data: str | bytes | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


# -- the child ----------------------------------------------------------------------------


def launch_once(job: Mapping[str, Any]) -> str:
    """Compile, draw the inputs and launch the job's kernel once, with exact-size allocations."""
    import cupy as cp
    from ktx.ir.expr import expand

    from ktx.measure import gpu
    from ktx.measure.compile import CompileRequest, compile_kernel
    from ktx.measure.overload import overload_params
    from ktx.specload import load_spec

    cp.cuda.set_allocator(None)  # every array its own cudaMalloc: memcheck knows its bounds
    cp.cuda.set_pinned_memory_allocator(None)
    spec = load_spec(Path(job["spec"]))
    point = ShapePoint.from_name(job["shape"])
    cand = Candidate.from_dict(job["candidate"])
    limits = gpu.device_limits(measure_bandwidth=False)
    name = expand(cand.name_expression, cand.env(spec, point))
    source = spec.compile_source(cand.source)
    pick = overload_params(source, spec.kernel, [a.name for a in spec.args])
    req = CompileRequest(source, name, tuple(cand.flags), limits.cc, spec.include_dirs, param_names=pick)
    result = compile_kernel(req)
    if not result.ok:
        raise KtxError(f"{name} does not compile: {result.log[:2000]}", None)
    bound = gpu._bind(spec, cand, point, {name: result.to_dict()}, limits)
    stream = cp.cuda.Stream(non_blocking=True)
    env = spec.env(point)
    with stream:
        _, pristine = gpu._inputs(spec, point, 0)
        arrays = {a.name: pristine[a.name].copy() if a.is_output else pristine[a.name]
                  for a in spec.all_args if a.is_array}  # fmt: skip
        # Said before the launch: under memcheck a faulting launch raises, and it still ran.
        print(
            f"{MARK} launching {name} grid={bound.grid} block={bound.block} shared={bound.shared}", flush=True
        )
        bound(gpu._args(spec, env, arrays), stream)
        stream.synchronize()
    return name


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    job = json.loads(Path(args[0]).read_text())
    try:
        what = launch_once(job)
    except Exception as exc:  # reported in the block: the tool's output and this line
        print(f"{MARK} failed: {type(exc).__name__}: {exc}", flush=True)
        return 3
    print(f"{MARK} done {what}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
