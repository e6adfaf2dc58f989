"""Load a kernel folder's ``ktx.toml``: parse it (:mod:`ktx.spec`), then refuse at load what the
source proves wrong.

The refusals read more than the TOML: the struct arguments' layouts (libclang,
:mod:`ktx.measure.argpack`), the outputs the kernel never writes (:mod:`ktx.speccheck`) and an
access that provably lands outside its buffer (:mod:`ktx.ir.facts.extents`). Those modules take
``Spec`` and ``Arg`` from :mod:`ktx.spec`, so the loader stands above all of them, here, rather
than in ``ktx/spec.py``, which they import: that was an import circle (issue 21, item 6).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ktx.ir.errors import KtxError, Location
from ktx.ir.facts.extents import PointValues, first_out_of_bounds

from ktx.measure.argpack import struct_layouts
from ktx.spec import SPEC_FILE, Spec, parse_spec, read_spec_text, shape_note
from ktx.speccheck import refuse_unwritten_outputs


def load_spec(path: str | Path) -> Spec:
    """Load ``ktx.toml`` from a kernel folder (or the file itself) and validate it."""
    p = Path(path)
    if p.is_dir():
        p = p / SPEC_FILE
    elif p.is_file() and p.suffix != ".toml":
        refuse_non_spec(p)
    spec = parse_spec(read_spec_text(p), p)
    if any(a.is_struct for a in spec.args):
        struct_layouts(spec)  # a field the struct lacks (or lacks a value) fails here, at its line
    refuse_out_of_bounds(spec)
    refuse_unwritten_outputs(spec)
    return spec


def refuse_non_spec(p: Path) -> None:
    """A file that is no spec where a kernel folder belongs (``ktx tune kernel.cu``): say what
    is wanted and how to make it, rather than parse CUDA as TOML."""
    if p.suffix in (".cu", ".cuh", ".h", ".hpp", ".cpp", ".cc"):
        if (p.parent / SPEC_FILE).is_file():
            hint = f"give its kernel folder, {p.parent}, which holds the ktx.toml"
        else:
            hint = f"give a kernel folder (kernel.cu and ktx.toml); draft its ktx.toml with: ktx init {p}"
        raise KtxError("is a CUDA source, not a kernel folder", Location(str(p)), hint)
    raise KtxError(
        "is not a kernel folder or a ktx.toml",
        Location(str(p)),
        "give a folder with kernel.cu and ktx.toml; ktx init FILE.cu drafts one",
    )


def refuse_out_of_bounds(spec: Spec) -> None:
    """At spec load: an access that provably lands outside its buffer at a shape point is an
    error. Provably: the bounds check found a witness, a block, thread and loop values at
    which it does (:mod:`ktx.ir.facts.extents`); an access only *bounded* past the end blocks
    nothing (``ktx init --check`` lists it as not proven; verification's guard zones stay).

    Launch limits depend on the device and are reported by ``ktx init --check`` and at launch.
    A kernel the analysis cannot find is not checked here.
    """
    source = spec.folder / spec.source
    try:
        text = source.read_text(errors="replace")
    except OSError:
        return
    points: dict[str, PointValues] = {}
    for shape_set in spec.shapes:
        for p in shape_set.points:
            if p.name not in points:
                with contextlib.suppress(KtxError):
                    points[p.name] = spec.point_values(p)
    found = first_out_of_bounds(str(source), text, spec.kernel, tuple(points.values()))
    if found is None:
        return
    arg = next((a for a in spec.args if a.name == found.buffer), None)
    where = arg.shape[0].where if arg is not None and arg.shape else None
    at = Location(os.path.normpath(source), found.line, found.col)
    raise KtxError(
        f"{at}: {found.message(shape_note(spec, found.buffer))}",
        where if where is not None else at,
        f"make {found.buffer}'s shape cover what the kernel reaches, or change the shape point "
        "(ktx init --check lists every such access)",
    )
