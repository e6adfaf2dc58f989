"""When the original kernel itself fails, and tolerances that do not say what they seem to.

Every candidate is checked against the original kernel, so an original that does not compile,
does not fit the device or disagrees with the Python reference leaves nothing to compare: the
search prints ``-`` everywhere and stops. The commands say why instead, one line per failing
shape (status, the output and first bad element with got and want, the tolerance in force)
and the spec key to look at, and exit non-zero. A tolerance key silently capped by another
key's default (``atol = 1`` under an integer output's ``max_abs = 0``) gets a warning when the
spec is loaded by a command.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from ktx.measure.guards import is_spec_error, spec_error_section
from ktx.measure.types import Measurement, Status
from ktx.spec import Spec

#: The spec keys to look at, by how the original failed.
LOOK_AT = {
    Status.WRONG_RESULT: "[tolerance] and [reference] python",
    Status.COMPILE_ERROR: "[compile] flags, template_args and source",
    Status.RESOURCES: "[launch] block and shared",
    Status.LAUNCH_ERROR: "[launch] grid, block and shared",
    Status.TIMEOUT: "[shapes] (smaller shapes) and [launch]",
    Status.CRASH: "[[args]] shape and value (extents the kernel reads past)",
}


def tolerance_text(spec: Spec) -> str:
    """``out bf16 rtol=0.016 atol=0.01 max_abs=1``: the tolerance of each output."""
    parts = []
    for arg in spec.all_args:
        if arg.is_output:
            t = spec.tolerance_for(arg.dtype)
            ulp = f" ulp={t.ulp}" if t.ulp else ""
            tol = f"rtol={t.rtol:g} atol={t.atol:g} max_abs={t.max_abs:g}{ulp}"
            parts.append(f"{arg.name} {arg.dtype.name} {tol}")
    return "; ".join(parts) or "none (no outputs)"


def failure_line(spec: Spec, m: Measurement) -> str:
    """One line: where, what, the first bad element (from the measurement's message), the
    tolerance in force and the spec key to look at."""
    lines = [line.strip() for line in m.message.splitlines() if line.strip()]
    first = lines[0] if lines else "no message"
    if m.status is Status.COMPILE_ERROR and "error:" not in first.lower():
        # The first line is the compiler's status ("NVRTC_ERROR_COMPILATION (6)"); the line
        # that says what to fix is the first diagnostic of the log under it.
        diag = next((line for line in lines[1:] if "error" in line.lower()), None)
        if diag is not None:
            first = f"{first}: {diag}"
    where = LOOK_AT.get(m.status, "the spec")
    section = where
    if is_spec_error(m.message):  # guard zones or an unwritten output: the spec is wrong
        section = spec_error_section(m.message)
    elif m.status is Status.WRONG_RESULT:
        dtypes = sorted({a.dtype.name for a in spec.all_args if a.is_output})
        section = " or ".join(f"[tolerance] {d}" for d in dtypes) + " and [reference] python"
    return (
        f"{spec.path}: the original kernel fails at {m.shape}: {m.status}: {first}; "
        f"tolerance in force: {tolerance_text(spec)}; look at {section}"
    )


def report_failed_originals(spec: Spec, originals: Iterable[Measurement]) -> int:
    """Print a line per failing original to stderr; the number printed."""
    failed = [m for m in originals if not m.ok]
    for m in failed:
        print(f"ktx: error: {failure_line(spec, m)}", file=sys.stderr)
    return len(failed)


def tolerance_warnings(spec: Spec) -> list[str]:
    """Tolerance keys that cannot take effect because another key caps them."""
    out = []
    for dtype, tol in spec.tolerance:
        if tol.atol > tol.max_abs:
            out.append(
                f"{spec.path}: warning: [tolerance] {dtype}: atol = {tol.atol:g} is capped by "
                f"max_abs = {tol.max_abs:g} (the {dtype} default when not given); set max_abs too"
            )
    return out


def warn_tolerances(spec: Spec) -> None:
    for line in tolerance_warnings(spec):
        print(line, file=sys.stderr)
