"""A second look at a draft, as ``ktx init --check`` would see it.

The draft is checked with its TODOs stood in for where they do not bear on the check
(:func:`second_look`): an extent the kernel provably reaches past becomes a TODO that says so,
never a silently wrong line. :func:`check` lists what blocks a run of a drafted folder.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path

from ktx.ir.errors import KtxError
from ktx.ir.nodes import Function

from ktx.blockers import TODO, Blocker
from ktx.check import review
from ktx.draft.entries import toml_str
from ktx.spec import ShapePoint


def _near(points: Sequence[ShapePoint]) -> list[ShapePoint]:
    """The points and, for each variable, the point with it one less: default sizes are
    powers of two, which hide an extent that is right only for multiples of the block."""
    seen: dict[str, ShapePoint] = {}
    for p in points:
        seen.setdefault(p.name, p)
        for name, value in p.values:
            if value > 1:
                q = ShapePoint(tuple((n, v - 1 if n == name else v) for n, v in p.values))
                seen.setdefault(q.name, q)
    return list(seen.values())


#: Stand-ins for the placeholders that do not change where the kernel's accesses reach: an
#: unknown extent as large as can be (never the one found too small), a dtype, a role.
_STAND_INS = {
    'shape = "[TODO]"': 'shape = "[1099511627776]"',
    'dtype = "TODO"': 'dtype = "fp32"',
    'role = "TODO"': 'role = "inout"',
}


def _probe(lines: list[str], path: Path, fn: Function) -> list[str] | None:
    """The draft as a spec the bounds check can load: the TODOs that do not bear on where
    accesses reach replaced by stand-ins, or None when one does (a scalar's value, a launch
    dimension, a derived value, a template value argument)."""
    out: list[str] = []
    for line in lines:
        if line.startswith("source = "):
            out.append(f"source = {toml_str(str(path.resolve()))}")
        elif line.startswith("template_args = ") and TODO in line:
            values = ast.literal_eval(line.split("=", 1)[1].strip())
            kinds = [t.kind for t in fn.template_params]
            if any(v == TODO and (i >= len(kinds) or kinds[i] != "type") for i, v in enumerate(values)):
                return None
            out.append(
                "template_args = [" + ", ".join(toml_str("float" if v == TODO else v) for v in values) + "]"
            )
        elif line in _STAND_INS:
            out.append(_STAND_INS[line])
        elif TODO in line and not line.lstrip().startswith("#"):
            return None
        else:
            out.append(line)
    return out


def second_look(lines: list[str], path: Path, fn: Function) -> tuple[list[str], list[str]]:
    """The draft is checked as ``--check`` would (:mod:`ktx.bounds`), its TODOs stood in for
    where they do not bear on it: an extent the kernel provably reaches past becomes a TODO
    that says so, never a silently wrong line."""
    from ktx.bounds import check_spec
    from ktx.spec import parse_spec

    probe = _probe(lines, path, fn)
    if probe is None:
        return lines, []
    try:
        spec = parse_spec("\n".join(probe) + "\n", path.parent / "ktx.toml")
        report = check_spec(spec, _near(spec.shape_set().points))
    except KtxError:
        return lines, []
    todos: list[str] = []
    out = list(lines)
    done: set[str] = set()
    for f in report.errors:
        if f.kind != "out_of_bounds" or f.buffer in done:
            continue
        start = next((i for i, x in enumerate(out) if x == f"name = {toml_str(f.buffer)}"), None)
        at = next((i for i in range(start or 0, len(out)) if out[i].startswith("shape = ")), None)
        if start is None or at is None or TODO in out[at]:
            continue
        done.add(f.buffer)
        guess = out[at].split("=", 1)[1].strip()
        line = f.location.line if f.location is not None else 0
        why = (
            f"extent of {f.buffer}: the guess {guess} is too small: {path.name}:{line}: "
            + f.message.split(" ", 1)[1]
        )
        todos.append(why)
        out[at : at + 1] = [f"# {TODO}: {why}", f'shape = "[{TODO}]"']
    return out, todos


# -- checking a draft --------------------------------------------------------------------------


def check(folder: str | Path) -> list[Blocker]:
    """What blocks a run of ``folder/ktx.toml``: TODOs left, else the loader's error, else an
    unknown kernel, else what the static bounds check finds (see :mod:`ktx.check`)."""
    return list(review(folder).blockers)
