"""Doubt that spreads: a draft line that depends on a TODO is itself a TODO.

A draft is dangerous where a line looks finished but is not: the real-code benchmark's edits
(``benchmarks/realcode/*/init.diff``) show most such lines are *downstream* of a TODO the draft
did flag. ``grid = ["block_nums"]`` names a ``[vars]`` entry left ``"TODO"``; the ``[shapes]``
points were sized before the extents of ``x`` and ``dst`` (TODOs) were known, so they miss the
variables those extents will name and the relations between them; ``shape = "[n]"`` counts
elements of a type the draft could not name. Each would run, wrongly, if trusted.

:func:`spread` reads the drafted lines and puts a ``# TODO:`` above every such line (once: a
line already under a TODO is left alone), saying which TODO it hangs on. It works on the text,
after the drafter, so it holds for every way a TODO got there.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ktx.blockers import TODO

_PLACEHOLDER = (f'"{TODO}"', f'"[{TODO}]"')
_NAME = re.compile(r"\b[A-Za-z_]\w*\b")


def _key(line: str) -> str:
    return line.split("=", 1)[0].strip() if "=" in line and not line.lstrip().startswith("#") else ""


def _value(line: str) -> str:
    return line.split("=", 1)[1] if "=" in line else ""


def _is_placeholder(line: str) -> bool:
    return any(p in line for p in _PLACEHOLDER)


def _names(text: str) -> set[str]:
    # a TOML string's words: quoted numbers and operators carry no names
    return set(_NAME.findall(text)) - {TODO, "product"}


def _unknowns(lines: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
    """(``[vars]`` left TODO, arguments whose extent or value is a TODO, arrays whose dtype is
    a TODO)."""
    section = ""
    todo_vars: list[str] = []
    no_extent: list[str] = []
    no_dtype: list[str] = []
    arg = dtype = previous = ""
    for line in lines:
        if line.startswith("["):
            section = line.strip()
            continue
        key = _key(line)
        if key == "name":
            dtype = ""
        if section == "[vars]" and key and _is_placeholder(line):
            todo_vars.append(key)
        elif section in ("[[args]]", "[[buffers]]"):  # a buffer a struct's pointer field names
            if key == "name":
                arg = _value(line).split("#", 1)[0].strip().strip('"')
            elif _is_placeholder(line) and (
                key == "shape" or (key == "value" and _maybe_size(dtype, previous))
            ):
                no_extent.append(arg)
            elif key == "dtype":
                dtype = _value(line).strip().strip('"')
            if key == "dtype" and _is_placeholder(line):
                no_dtype.append(arg)
        previous = line
    return todo_vars, no_extent, no_dtype


def _maybe_size(dtype: str, todo: str) -> bool:
    """Whether a scalar whose value is a TODO may be a size the shapes must name: an integer the
    drafter did not rule out as one (a bit count the kernel never compares nor indexes with is
    not; a float is not), or one whose type is unknown too."""
    return (dtype.startswith(("int", "uint")) or dtype in ("", TODO)) and "(no size)" not in todo


def nullable(body: str, name: str) -> str | None:
    """Where the kernel tests pointer ``name`` against null (``mask ? ... :``, ``if (sinks)``,
    ``p != nullptr``), or None. Such an argument is optional: the caller may pass none (ggml's
    soft_max without a mask), and a draft that gives it a role and random data runs the branch
    the project may never take."""
    word = re.escape(name)
    # ``if (p && ...)`` / ``(!p || ...)``: the pointer as the first operand of a condition
    # (lmdeploy's ``if (num_valid_tokens && blockIdx.x >= __ldg(num_valid_tokens))``)
    first = re.search(rf"\b(?:if|while)\s*\(\s*(!\s*)?{word}\s*(&&|\|\|)", body)
    if first is not None:
        return f"if ({first.group(1) or ''}{name} {first.group(2)} ...)"
    m = re.search(
        rf"(?<![\w.>])(?:!\s*)?{word}\s*(?:\?(?!\?)|\)\s*(?:\{{|return|\w))"
        rf"|\b{word}\s*[!=]=\s*(?:nullptr|NULL|0)\b|\b(?:nullptr|NULL)\s*[!=]=\s*{word}\b",
        body,
    )
    if m is None:
        return None
    if ")" in m.group(0):
        test = re.search(rf"\b(?:if|while)\s*\(\s*!?\s*{word}\s*\)", body)
        if test is None:
            return None  # ``f(name) x``: a call's argument, not a test
        return " ".join(test.group(0).split())  # ``if (bias)``, not the match's ``bias) {``
    return " ".join(m.group(0).split())


def _listed(names: Sequence[str], most: int = 4) -> str:
    more = len(names) - most
    return ", ".join(names[:most]) + (f" and {more} more" if more > 0 else "")


def spread(lines: Sequence[str]) -> tuple[list[str], list[str]]:
    """``lines`` with a TODO above each line that hangs on another TODO; the TODOs added."""
    todo_vars, no_extent, no_dtype = _unknowns(lines)
    todo_shapes = _todo_shapes(lines)
    out: list[str] = []
    added: list[str] = []
    section = ""
    arg = ""
    for line in lines:
        if line.startswith("["):
            section = line.strip()
            out.append(line)
            continue
        key = _key(line)
        why: str | None = None
        flagged = bool(out) and out[-1].lstrip().startswith(f"# {TODO}")
        if key and not flagged and not _is_placeholder(line):
            if section == "[[args]]" and key == "name":
                arg = _value(line).strip().strip('"')
            # [vars] lines that name a TODO var are aliases (ncols = "ne00"): right once it is written
            uses = section in ("[launch]", "[[args]]") and key != "name"
            hangs = sorted(_names(_value(line)) & set(todo_vars)) if uses else []
            if section == "[shapes]" and key in ("default", "quick"):
                why = _shapes_doubt(key, todo_vars, no_extent)
            elif section == "[launch]" and key in ("shared", "grid") and (alone := _launch_only(line, lines)):
                what = "bytes, blocks?" if key == "shared" else "rows: a product of other sizes?"
                why = (
                    f"{key} names {_listed(alone)}, which no extent or argument names: a value the "
                    f"launcher's caller computes ({what}), not a size to sweep: write it as an "
                    "expression of the shape variables"
                )
            elif section == "[[args]]" and key == "value" and (free := _free_scalar(line, lines)):
                why = (
                    f"value of {arg}: the shape variable {free}, which no drafted extent or launch line "
                    f"names while the extents of {_listed(todo_shapes)} are TODOs: once they are written, "
                    f"{free} may be a function of their sizes (a stride, an offset, a count), not a size "
                    "of its own"
                )
            elif hangs:
                why = f"{key} names {_listed(hangs)}, a TODO in [vars]: check this line once it is written"
            elif section == "[[args]]" and key == "shape" and arg in no_dtype:
                why = (
                    f"extent of {arg}: counted in elements of its element type, which is a TODO above: "
                    "write the extent in elements of the type you give"
                )
        if why is not None:
            added.append(why)
            out.append(f"# {TODO}: {why}")
        out.append(line)
    return out, added


def _todo_shapes(lines: Sequence[str]) -> list[str]:
    """The arrays whose extent is a placeholder."""
    out: list[str] = []
    arg = ""
    for line in lines:
        key = _key(line)
        if key == "name":
            arg = _value(line).strip().strip('"')
        elif key == "shape" and _is_placeholder(line):
            out.append(arg)
    return out


def _free_scalar(line: str, lines: Sequence[str]) -> str | None:
    """The shape variable an integer scalar's ``value`` line is, when the draft knows nothing
    else of it: no drafted extent, ``[vars]`` entry or launch line names it, and some array's
    extent is a TODO. ggml's rope passes ``s01 = nb[1] / type_size`` (a stride) and ``n_dims``
    from the caller: drafted as free sizes next to ``ne00``, they would be swept independently
    of the extents that, once written, they index. With every extent drafted, a scalar no extent
    names is genuinely free (a seed, a count), and is left alone. A value that is an expression
    of such a variable is doubted the same way (ggml's ``s10 = nb10 / sizeof(int32_t)``: the byte
    stride ``nb10`` swept as a size)."""
    names = _names(_value(line))
    if not names or not _todo_shapes(lines):
        return None
    section = ""
    shape_vars: set[str] = set()
    named: set[str] = set()
    dtype = ""
    for other in lines:
        if other.startswith("["):
            section = other.strip()
            continue
        key = _key(other)
        if other is line and dtype and not dtype.startswith(("int", "uint")):
            return None
        if key == "dtype":
            dtype = _value(other).strip().strip('"')
        if section == "[shapes]" and key in ("default", "quick"):
            shape_vars |= set(re.findall(r"\b([A-Za-z_]\w*)\s*=", _value(other))) - {"product"}
        elif (
            (section == "[[args]]" and (key == "shape" or key.startswith("fields.")))
            or section in ("[launch]", "[vars]")
        ) and (key and not _is_placeholder(other)):
            named |= _names(_value(other))
    free = sorted(n for n in names if n in shape_vars and n not in named)
    return free[0] if free else None


def _launch_only(line: str, lines: Sequence[str]) -> list[str]:
    """The shape variables a ``[launch]`` line names that nothing but the launch names."""
    shape_vars: set[str] = set()
    elsewhere: set[str] = set()
    section = ""
    for other in lines:
        if other.startswith("["):
            section = other.strip()
            continue
        key = _key(other)
        if section == "[shapes]" and key in ("default", "quick"):
            shape_vars |= set(re.findall(r"\b([A-Za-z_]\w*)\s*=", _value(other))) - {"product"}
        elif (section in ("[[args]]", "[vars]") and key not in ("", "name", "dtype", "role")) or (
            section == "[launch]" and other is not line
        ):
            elsewhere |= _names(_value(other))
    return sorted((_names(_value(line)) & shape_vars) - elsewhere)


def _shapes_doubt(key: str, todo_vars: Sequence[str], no_extent: Sequence[str]) -> str | None:
    """Why the drafted ``default``/``quick`` points cannot be trusted, or None."""
    if not todo_vars and not no_extent:
        return None
    parts = []
    if no_extent:
        parts.append(f"the extents or values of {_listed(list(no_extent))}")
    if todo_vars:
        parts.append(f"[vars] {_listed(list(todo_vars))}")
    what = "shape points" if key == "default" else "the quick point"
    return (
        f"{what}: drafted while {' and '.join(parts)} are TODOs: add the variables those name "
        "and pick values that meet the launcher's relations between them (divisibility, equal sizes)"
    )
