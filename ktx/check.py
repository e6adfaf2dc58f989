"""``ktx init --check DIR``: what still keeps a kernel folder's spec from a trustworthy run.

In order, each step only when the one before found nothing:

1. the ``# TODO:`` lines ``ktx init`` left whose placeholder is still there;
2. the raw TOML types ``--check`` knows the loader may take for something else (an ``[[args]]
   shape = 5``: an integer where an extent list belongs);
3. the spec loader's own error (:func:`ktx.specload.load_spec`);
4. the kernel the spec names, among the ``__global__`` functions of its source;
5. the spec against the source (:mod:`ktx.speccheck`): ``[[args]]`` names and count, roles
   against reads and writes, dtypes against element types, template arguments against the
   launches;
6. static bounds (:mod:`ktx.bounds`) at every shape point and its odd variants: an access that
   can reach past its buffer, an invalid launch, buffers over a quarter of the device.

Accesses the bounds check could not bound are listed as *not proven*: the spec may still be
right (verification's guard zones catch a write past an end), but ``--check`` does not call it
ready.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from ktx.ir import parse_file
from ktx.ir.errors import KtxError, Location

from ktx.blockers import TODO, Blocker
from ktx.bounds import Finding, check_spec
from ktx.spec import SPEC_FILE, ShapePoint, Spec, parse_spec
from ktx.speccheck import contradictions
from ktx.tomlpos import TomlPositions

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]


@dataclass(frozen=True)
class Review:
    """What ``--check`` found: blockers (exit 1) and accesses it could not bound."""

    blockers: tuple[Blocker, ...]
    unproven: tuple[Finding, ...] = ()
    points: int = 0


def review(folder: str | Path) -> Review:
    path = Path(folder) / SPEC_FILE
    if not path.is_file():
        raise KtxError("no ktx.toml here", Location(str(folder)), "run ktx init FILE.cu --out DIR first")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise KtxError(f"cannot read the spec: {exc}", Location(str(path)), "save it as UTF-8 text") from None
    blockers = todo_blockers(text)
    if blockers:
        return Review(tuple(blockers))
    blockers = type_blockers(text, str(path))
    if blockers:
        return Review(tuple(blockers))
    try:
        # parse_spec, not load_spec: load_spec stops at the first access out of bounds, and
        # --check lists them all.
        spec = parse_spec(text, path)
    except KtxError as exc:
        line = exc.location.line if exc.location is not None else 0
        return Review((Blocker(line, exc.message + (f" ({exc.hint})" if exc.hint else "")),))
    missing = kernel_blocker(spec, text)
    if missing is not None:
        return Review((missing,))
    contradicted = tuple(Blocker(c.line, str(c)) for c in contradictions(spec, text))
    if contradicted:
        return Review(contradicted)
    report = check_spec(spec, with_odd(spec))
    errors = tuple(Blocker(_line_of(spec, text, f), _message(f)) for f in report.errors)
    return Review(errors, report.unproven, report.points)


def todo_blockers(text: str) -> list[Blocker]:
    """A TODO blocks while the line it sits over still holds the placeholder: replacing that
    one line is the whole edit (the comment may stay). The line it sits over is the next one
    that is not a comment: the draft stacks several TODOs over one line (two over ``flags``),
    and a finished line under two comments was read as the second comment, which names TODO,
    so the run stayed blocked after the edit."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        if not line.lstrip().startswith(f"# {TODO}:"):
            continue
        j = i + 1
        while j < len(lines) and lines[j].lstrip().startswith("#"):
            j += 1
        if j < len(lines) and TODO in lines[j]:
            out.append(Blocker(j + 1, line.split(f"{TODO}:", 1)[1].strip()))
    return out


def type_blockers(text: str, path: str) -> list[Blocker]:
    """``[[args]] shape`` must be a string (``"[n, d]"``) or an array of extents."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return []  # the loader says where
    pos = TomlPositions.scan(text, path)
    out: list[Blocker] = []
    args = data.get("args")
    for i, arg in enumerate(args if isinstance(args, list) else []):
        if not isinstance(arg, dict) or "shape" not in arg:
            continue
        shape = arg["shape"]
        ok = isinstance(shape, str) or (
            isinstance(shape, list)
            and all(isinstance(d, str | int) and not isinstance(d, bool) for d in shape)
        )
        if not ok:
            name = arg.get("name", f"#{i + 1}")
            line = pos.locate(("args", i, "shape")).line
            example = f"[{shape}]" if isinstance(shape, int) else "[n, d]"
            out.append(
                Blocker(
                    line,
                    f"args.{name}.shape is a {type(shape).__name__} ({shape!r}) where a list of extents "
                    f'belongs (write shape = "{example}")',
                )
            )
    return out


def kernel_blocker(spec: Spec, text: str) -> Blocker | None:
    """The spec's ``kernel`` must be a ``__global__`` function of its source."""
    module = parse_file(spec.folder / spec.source)
    names = [k.name for k in module.kernels]
    if spec.kernel in names:
        return None
    line = next((i + 1 for i, s in enumerate(text.splitlines()) if s.strip().startswith("kernel")), 1)
    found = ", ".join(names) if names else "none"
    why = f"kernel {spec.kernel!r} is not a __global__ function of {spec.source} (kernels: {found})"
    return Blocker(line, why)


def with_odd(spec: Spec) -> list[ShapePoint]:
    """Every point of every shape set, and the odd variants verification also runs."""
    seen: dict[str, ShapePoint] = {}
    for shape_set in spec.shapes:
        for p in shape_set.points:
            seen.setdefault(p.name, p)
            for odd in spec.odd_points(p):
                seen.setdefault(odd.name, odd)
    return list(seen.values())


def _message(f: Finding) -> str:
    cu = f.location is not None and not str(f.location.path).endswith(".toml")
    where = f"{f.location}: " if cu else ""
    hint = {
        "out_of_bounds": f"make {f.buffer}'s shape cover what the kernel reaches, or fix the shape point",
        "launch": "fix [launch] or the shape point",
        "memory": "use smaller shapes",
    }.get(f.kind, "")
    return f"{where}{f.message} ({hint})" if hint else where + f.message


def _line_of(spec: Spec, text: str, f: Finding) -> int:
    """The spec line to edit: the buffer's ``shape``, else ``[launch]``, else ``[shapes]``."""
    arg = next((a for a in spec.args if a.name == f.buffer), None)
    if arg is not None and arg.shape and arg.shape[0].where is not None:
        return arg.shape[0].where.line
    section = "[launch]" if f.kind == "launch" else "[shapes]"
    return next((i + 1 for i, s in enumerate(text.splitlines()) if s.strip() == section), 0)
