"""Input checks every command shares, so that bad input is one line and exit 2, never a traceback.

The commands read and write files a user names: a folder that does not exist, a file where a
folder belongs, a JSON file a crash left half written, a kernel with a syntax error. Each check
raises a :class:`~ktx.ir.errors.KtxError` naming the path (and line, where there is one) and what
to do, *before* the work starts, so a long run never fails at its end for want of a folder.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ktx.ir.errors import KtxError, Location

from ktx.spec import Spec
from ktx.specload import load_spec

if TYPE_CHECKING:
    from ktx.ir.module import Module


def output_file(path: str | Path, option: str) -> Path:
    """``path`` as a file the command may write: its folder exists and it is not a folder."""
    p = Path(path)
    if p.is_dir():
        raise KtxError(f"{option}: is a folder, not a file", Location(str(p)), "give a file path")
    parent = p.parent
    if not parent.is_dir():
        what = "is a file, not a folder" if parent.exists() else "no such folder"
        raise KtxError(f"{option}: {what}: {parent}", Location(str(p)), f"create it first: mkdir -p {parent}")
    return p


def output_folder(path: str | Path, option: str) -> Path:
    """``path`` as a folder the command may create or fill: not an existing file, nor under one."""
    p = Path(path)
    for part in (p, *p.parents):
        if part.exists() and not part.is_dir():
            what = "is a file" if part == p else f"is under {part}, a file"
            raise KtxError(f"{option}: {what}, not a folder", Location(str(p)), "give a folder path")
        if part.exists():
            break
    return p


def check_number(
    option: str,
    value: float | None,
    low: float,
    *,
    above: bool = False,
    high: float | None = None,
    hint: str = "",
) -> None:
    """Refuse a numeric option outside its meaningful range (``value >= low``, or ``> low``
    with ``above``; at most ``high``): a negative time limit or gain would otherwise run and
    quietly change the result, or write an empty one (issue 21). None (not given) passes."""
    if value is None:
        return
    if not math.isfinite(value):  # argparse's float() takes nan and inf, which every test passes
        raise KtxError(
            f"{option} {value}: not a finite number", None, hint or f"leave {option} out for its default"
        )
    if above and value <= low:
        need = f"must be more than {low:g}"
    elif not above and value < low:
        need = f"must be {low:g} or more"
    elif high is not None and value > high:
        need = f"must be {high:g} or less"
    else:
        return
    raise KtxError(f"{option} {value:g}: {need}", None, hint or f"e.g. leave {option} out for its default")


def read_json(path: Path, hint: str) -> Any:
    """A JSON file's data; unreadable or corrupt is a KtxError at the offending line."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise KtxError("not UTF-8 text", Location(str(path)), hint) from None
    except OSError as exc:
        raise KtxError(f"cannot read: {exc.strerror or exc}", Location(str(path)), hint) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise KtxError(f"corrupt JSON: {exc.msg}", Location(str(path), exc.lineno, exc.colno), hint) from None


def kernel_syntax(module: Module, kernel: str | None) -> None:
    """Refuse a kernel whose body tree-sitter could not parse: a pass would rewrite a partial
    tree, and ``ktx init`` would draft from it, both silently. ``kernel`` None means the only
    kernel of the file (several without ``--kernel`` is the caller's own error, left to it)."""
    kernels = module.kernels
    if kernel is None:
        if len(kernels) != 1:
            return
        target = kernels[0]
    else:
        found = [k for k in kernels if k.name == kernel]
        if not found:
            return
        target = found[0]
    errors = [d for d in module.errors_in(target.span) if d.severity == "error"]
    if errors:
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise KtxError(
            f"syntax error in kernel {target.name!r}: {first.message}{more}",
            Location(module.path, first.span.line, first.span.col),
            "fix the kernel; nvcc reports the same line",
        )


def load_checked_spec(path: str | Path) -> Spec:
    """The spec of a kernel folder, refused (exit 2, ``file:line``) when its kernel has a syntax
    error: measuring or tuning a kernel ktx cannot read would fail later and less clearly."""
    from ktx.ir import parse

    spec = load_spec(path)
    source = spec.folder / spec.source
    kernel_syntax(parse(spec.source_text(), str(source)), spec.kernel)
    return spec
