"""Static bounds, the spec's side: every shape point's launch and buffers, against what the
kernel's accesses reach.

Verification compares outputs; a spec whose extent is too small (a grid-stride loop walking
4096 tokens into a buffer of 256 rows) makes the original kernel write past its buffers, and
nothing compares what lies beyond. For every shape point this module evaluates the spec (the
launch, each buffer's size: :meth:`Spec.point_values`) and asks the analysis layer
(:mod:`ktx.ir.facts.extents`, which reads the source) about each access. It reports:

* ``out_of_bounds``: an access a *witness* shows outside its buffer: a concrete block, thread
  and loop values at which it lands there (an error; the spec's loader refuses it too);
* ``unproven``: an access that cannot be bounded, or whose bound passes the end with no
  witness found (a bound is not a reachable index): listed by ``ktx init --check``, never
  blocking;
* ``launch``: no blocks, over 1024 threads, more dynamic shared memory than a launch gets;
* ``memory``: the buffers of a point take over a quarter of the device's memory.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ktx.ir import parse_file
from ktx.ir.errors import KtxError, Location
from ktx.ir.expr import Value
from ktx.ir.facts.extents import AccessCheck, KernelExtents
from ktx.ir.facts.kernel import with_bound_pointers

from ktx.spec import ShapePoint, Spec, shape_note, spec_kernel

#: Shared memory a block gets without opting in, and on sm_90 with it
from ktx.specload import load_spec

#: Shared memory a block gets without opting in, and on sm_90 with it
#: (``cudaFuncAttributeMaxDynamicSharedMemorySize``, which ktx's harness sets when needed).
SHARED_DEFAULT = 48 * 1024
SHARED_OPT_IN_SM90 = 227 * 1024
#: Device memory assumed when the device is not known (an 80 GB H100), and the fraction of it
#: one shape point's buffers may take (verification keeps several copies of the outputs).
DEVICE_MEMORY = 80 * 10**9
MEMORY_FRACTION = 4

Kind = Literal["out_of_bounds", "launch", "memory", "unproven"]


@dataclass(frozen=True)
class Finding:
    """One thing ``--check`` reports: an error (``out_of_bounds``, ``launch``, ``memory``) or
    an access it could not prove in bounds (``unproven``)."""

    kind: Kind
    message: str
    location: Location | None = None
    buffer: str = ""
    point: str = ""

    @property
    def is_error(self) -> bool:
        return self.kind != "unproven"

    def __str__(self) -> str:
        where = f"{self.location}: " if self.location is not None else ""
        return where + self.message


@dataclass(frozen=True)
class Launch:
    grid: tuple[int, ...]
    block: tuple[int, ...]
    shared: int


@dataclass(frozen=True)
class Report:
    """What the bounds check found over the points it looked at."""

    findings: tuple[Finding, ...]
    points: int

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.is_error)

    @property
    def unproven(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if not f.is_error)


def launch_at(spec: Spec, env: dict[str, Value]) -> Launch:
    grid = tuple(e.evaluate_int(env) for e in spec.launch.grid)
    block = tuple(e.evaluate_int(env) for e in spec.launch.block)
    return Launch(grid, block, spec.launch.shared.evaluate_int(env))


def launch_problems(launch: Launch, static_shared: int = 0, opt_in: bool = True) -> list[str]:
    """Why a launch is invalid on sm_90: no blocks, no threads, over 1024 threads a block, a
    grid dimension past its limit, more shared memory than a launch gets."""
    out: list[str] = []
    if any(g <= 0 for g in launch.grid):
        out.append(f"grid {launch.grid} has no blocks")
    if any(g > 65535 for g in launch.grid[1:]) or (launch.grid and launch.grid[0] > 2**31 - 1):
        out.append(f"grid {launch.grid} is past the limits (x < 2^31, y and z <= 65535)")
    if any(b <= 0 for b in launch.block):
        out.append(f"block {launch.block} has no threads")
    threads = 1
    for b in launch.block:
        threads *= max(b, 0)
    if threads > 1024:
        out.append(f"block {launch.block} is {threads:,} threads (at most 1024)")
    if len(launch.block) == 3 and launch.block[2] > 64:
        out.append(f"block z = {launch.block[2]} (at most 64)")
    limit = SHARED_OPT_IN_SM90 if opt_in else SHARED_DEFAULT
    total = launch.shared + static_shared
    if launch.shared < 0:
        out.append(f"dynamic shared memory is {launch.shared} bytes")
    elif total > limit:
        what = f"{launch.shared:,} bytes of dynamic shared memory" + (
            f" and {static_shared:,} static" if static_shared else ""
        )
        opt = (
            " on sm_90 (opted in)"
            if opt_in
            else f" without opting in (sm_90 allows {SHARED_OPT_IN_SM90 // 1024} KiB)"
        )
        out.append(f"{what}: over the {limit // 1024} KiB a block gets{opt}")
    return out


def check_spec(
    spec: Spec,
    points: Sequence[ShapePoint] | None = None,
    device_memory: int = DEVICE_MEMORY,
    opt_in: bool = True,
) -> Report:
    """Check every point of every shape set (or ``points``): accesses within their buffers,
    the launch valid, the buffers within a quarter of ``device_memory``."""
    if points is None:
        seen: dict[str, ShapePoint] = {}
        for shape_set in spec.shapes:
            for p in shape_set.points:
                seen.setdefault(p.name, p)
        points = list(seen.values())
    module = parse_file(spec.folder / spec.source)
    fn = spec_kernel(module.kernels, spec)  # of several overloads, the one its args name
    if fn is None:
        raise KtxError(f"no kernel {spec.kernel!r} in {spec.source}", Location(str(spec.path)))
    kernel = KernelExtents(module, with_bound_pointers(fn, spec.template_args))
    source = os.path.normpath(spec.folder / spec.source)
    findings: list[Finding] = []
    said: set[tuple[str, int, str]] = set()
    for point in points:
        findings += _check_point(spec, kernel, point, source, device_memory, opt_in, said)
    findings += [_finding(spec, c, source) for c in kernel.escapes()]
    return Report(tuple(findings), len(points))


def _check_point(
    spec: Spec,
    kernel: KernelExtents,
    point: ShapePoint,
    source: str,
    device_memory: int,
    opt_in: bool,
    said: set[tuple[str, int, str]],
) -> list[Finding]:
    out: list[Finding] = []
    env = spec.env(point)
    try:
        launch = launch_at(spec, env)
    except KtxError as exc:
        why = f"at {point.name}: the launch does not evaluate: {exc.message}"
        return [Finding("launch", why, Location(str(spec.path)), "", point.name)]
    problems = launch_problems(launch, kernel.static_shared, opt_in)
    for why in problems:
        out.append(Finding("launch", f"at {point.name}: {why}", Location(str(spec.path)), "", point.name))
    if any("no blocks" in p or "no threads" in p for p in problems):
        return out  # nothing runs at this point
    values = spec.point_values(point)
    arrays = (a for a in spec.args if a.is_array)
    total = sum(count * arg.dtype.itemsize for arg, (_, count) in zip(arrays, values.extents, strict=True))
    if total * MEMORY_FRACTION > device_memory:
        out.append(
            Finding(
                "memory",
                f"at {point.name}: the buffers take {total / 1e9:.1f} GB, over a quarter of the "
                f"device's {device_memory / 1e9:.0f} GB (verification keeps several copies)",
                Location(str(spec.path)),
                "",
                point.name,
            )
        )
    for check in kernel.check(values):
        if check.status == "in_bounds":
            continue
        key = (check.status, check.line, check.buffer if check.status == "out_of_bounds" else check.text)
        if key not in said:
            said.add(key)
            out.append(_finding(spec, check, source))
    return out


def _finding(spec: Spec, check: AccessCheck, source: str) -> Finding:
    kind: Kind = "out_of_bounds" if check.status == "out_of_bounds" else "unproven"
    where = Location(source, check.line, check.col)
    return Finding(kind, check.message(shape_note(spec, check.buffer)), where, check.buffer, check.point)


def check_folder(folder: str | Path) -> Report:
    return check_spec(load_spec(folder))
