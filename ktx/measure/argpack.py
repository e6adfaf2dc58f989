"""By-value struct and vector arguments: the spec's field values packed into the compiler's layout.

A kernel that takes ``uint3 div`` or ``Params p`` by value gets its bytes from the spec's
``fields`` (``docs/spec.md``), laid out as :mod:`ktx.ir.facts.structs` read the layout from
libclang, never by hand. The bytes travel as a NumPy structured scalar whose dtype has the
compiler's offsets and ``itemsize``: CuPy passes any NumPy scalar to a raw kernel by value,
copying its bytes, so the kernel sees exactly the struct its own build declares.

The layouts are checked against the spec when it is loaded (:func:`struct_layouts`): a field
the struct lacks, one the spec leaves out, a ``type =`` that is not the kernel's, or a parameter
that is no struct at all is a :class:`~ktx.ir.errors.KtxError` at the argument's line.

>>> from ktx.ir.facts.structs import Leaf, StructLayout
>>> n, s = Leaf(("n",), 0, 4, "int", "int"), Leaf(("s",), 8, 8, "float", "double")
>>> layout = StructLayout("P", 16, 8, (n, s))
>>> struct_dtype(layout).itemsize, struct_dtype(layout).fields["s"][1]
(16, 8)
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np
from ktx.ir.errors import KtxError, Location
from ktx.ir.expr import Value

from ktx.dtypes import encode

if TYPE_CHECKING:
    from ktx.ir.facts.structs import Leaf, ParamLayout, StructLayout

    from ktx.spec import Arg, Spec

_FORMATS = {"int": "i", "uint": "u", "float": "f"}


def struct_dtype(layout: StructLayout) -> np.dtype[Any]:
    """A NumPy dtype with one field per leaf at the compiler's offset and the struct's size
    (padding included), so its scalar's bytes are the struct's bytes."""
    formats: list[str] = []
    for leaf in layout.leaves:
        if leaf.kind == "bool":
            formats.append("?")
        elif leaf.kind == "pointer":
            formats.append(f"<u{leaf.size}")  # a device address
        elif leaf.kind in ("fp16", "bf16"):
            formats.append("<u2")  # the encoded bits (see :func:`_bits`)
        else:
            formats.append(f"<{_FORMATS[leaf.kind]}{leaf.size}")
    return np.dtype(
        {
            "names": [leaf.name for leaf in layout.leaves],
            "formats": formats,
            "offsets": [leaf.offset for leaf in layout.leaves],
            "itemsize": layout.size,
        }
    )


def element_values(arg: Arg, env: Mapping[str, Value]) -> list[dict[str, Value]]:
    """Each element's field values (by field path) at ``env``: one element for a by-value
    struct; for an array of structs (``const Seq* seqs``, ``shape = "[n_seqs]"``) one per flat
    index ``i``, with ``i`` bound to it so that elements differ (``start = "i * seq_len"``).

    The one place ``i`` is bound: the bytes the kernel gets (:func:`pack_array`) and the values a
    Python reference gets (:func:`struct_values`) both come from here, so they cannot disagree
    (the device check once evaluated the fields without ``i`` and failed on ``i * seq_len``)."""
    if not arg.is_array:
        return [{name: expr.evaluate(env) for name, expr in arg.fields}]
    count = int(np.prod(arg.dims(env)))
    return [{name: expr.evaluate({**env, "i": k}) for name, expr in arg.fields} for k in range(count)]


def pack(
    arg: Arg, layout: StructLayout, env: Mapping[str, Value], addresses: Mapping[str, int] | None = None
) -> np.void:
    """``arg``'s fields evaluated at ``env``, as one structured scalar in ``layout``; each
    pointer field (:attr:`~ktx.spec.Arg.pointers`) holds its buffer's device address from
    ``addresses`` (by buffer name: the arrays this launch gets, so a guarded copy's address).

    Padding is zero. A value an integer field cannot hold (a fraction, out of range) is a
    KtxError at the field's expression rather than a silent wrap."""
    out = np.zeros((), dtype=struct_dtype(layout))
    (values,) = element_values(arg, env)
    _fill(arg, layout, out, values)
    for name, buffer in arg.pointers:
        if addresses is None or buffer not in addresses:
            raise KtxError(f"arg {arg.name!r} field {name}: no address for buffer {buffer!r}", arg.where)
        out[name] = addresses[buffer]
    result = out[()]
    assert isinstance(result, np.void)
    return result


def pack_array(arg: Arg, layout: StructLayout, env: Mapping[str, Value]) -> np.ndarray[Any, Any]:
    """An array of structs (``const RaggedBatchDescriptor* batch``) as its bytes: element ``i``
    holds :func:`element_values`' ``i``-th values; padding is zero."""
    elements = element_values(arg, env)
    out = np.zeros(len(elements), dtype=struct_dtype(layout))
    for k, values in enumerate(elements):
        _fill(arg, layout, out[k], values)
    return out.view(np.uint8)


def _fill(arg: Arg, layout: StructLayout, out: Any, values: Mapping[str, Value]) -> None:
    """Write ``values`` into the structured element ``out``, each checked against its leaf."""
    for name, expr in arg.fields:
        leaf = layout.leaf(name)
        assert leaf is not None, f"{arg.name}.{name}: checked by struct_layouts"
        out[name] = _bits(arg, leaf, values[name], expr.where)


def _bits(arg: Arg, leaf: Leaf, value: Value, where: Location | None) -> Any:
    label = f"arg {arg.name!r} field {leaf.name} ({leaf.ctype})"
    if leaf.kind == "pointer":
        if value != 0:
            raise KtxError(f"{label}: a pointer field takes a buffer's name or 0 (null), got {value}", where,
                           "declare the buffer under [[buffers]] and write its name")  # fmt: skip
        return 0
    if leaf.kind == "float":
        return float(value)
    if leaf.kind == "bool":
        return bool(value)
    if leaf.kind in ("fp16", "bf16"):
        x = np.array([float(value)], dtype=np.float64)
        bits = encode(x, leaf.kind) if leaf.kind == "bf16" else x.astype(np.float16).view(np.uint16)
        return int(bits[0])
    if isinstance(value, float):
        if not value.is_integer():
            raise KtxError(f"{label}: {value} is not an integer", where, "use // or an integer expression")
        value = int(value)
    low, high = (-(2 ** (8 * leaf.size - 1)), 2 ** (8 * leaf.size - 1) - 1)
    if leaf.kind == "uint":
        low, high = 0, 2 ** (8 * leaf.size) - 1
    if not low <= int(value) <= high:
        raise KtxError(f"{label}: {value} does not fit in {leaf.size} byte(s)", where)
    return int(value)


def struct_layouts(spec: Spec, env: Mapping[str, Value] | None = None) -> dict[str, StructLayout]:
    """The layout of every struct argument of ``spec``, checked against its ``fields``;
    an empty dict when it has none (libclang is then never asked).

    With ``{expr}`` template arguments (``Params<{vec}>``) the layout is that of the
    instantiation at ``env``; without ``env``, every distinct instantiation of the listed shape
    points is checked and the first one's layouts returned."""
    if not any(a.is_struct for a in spec.args):
        return {}
    if not any("{" in t for t in spec.template_args):
        return dict(_layouts(spec, spec.template_args))
    if env is not None:
        return dict(_layouts(spec, spec.template_args_at(env)))
    found: list[tuple[str, ...]] = []
    for shape_set in spec.shapes:
        for point in shape_set.points:
            targs = spec.template_args_at(spec.env(point))
            if targs not in found:
                found.append(targs)
    results = [_layouts(spec, targs) for targs in found]
    return dict(results[0]) if results else {}


@cache
def _layouts(spec: Spec, template_args: tuple[str, ...]) -> tuple[tuple[str, StructLayout], ...]:
    from ktx.ir.facts.structs import compiler_flags, kernel_layouts  # libclang: only when needed

    from ktx.measure.overload import overload_params

    source = spec.compile_source(spec.source_text())  # the prelude too: a template argument it defines
    # several kernels of the spec's name: its arguments' names pick the overload
    pick = overload_params(source, spec.kernel, [a.name for a in spec.args])

    def read(targs: tuple[str, ...]) -> tuple[ParamLayout, ...]:
        return kernel_layouts(
            source,
            # ``ns::k`` where the spec names namespaces (main's Spec.qualified_kernel), else ``k``
            str(getattr(spec, "qualified_kernel", spec.kernel)),
            path=str(spec.folder / spec.source),
            template_args=targs,
            # a relative -I in [compile] flags is relative to the spec, as headers are (docs/spec.md)
            include_dirs=(
                *spec.include_dirs,
                *(str(spec.folder / f[2:]) for f in compiler_flags(spec.flags) if f.startswith("-I")),
            ),
            flags=spec.flags,
            param_names=pick,
        )

    params = read(template_args)
    if not params and template_args:
        # The instantiation did not parse (a template argument from a header libclang is not
        # given: causal-conv1d's at::BFloat16 from torch). A struct whose type does not depend
        # on a template parameter has one layout in every instantiation, so the declaration's
        # own is as good; a dependent one still has none (its reason says so).
        params = tuple(p for p in read(()) if not (p.layout is None and "template" in p.reason))
    first = next(a for a in spec.args if a.is_struct)
    if not params:
        raise KtxError(
            f"arg {first.name!r}: libclang found no kernel {spec.kernel!r} to read the struct layout from",
            first.where,
            "is libclang installed (pip install libclang), and does the kernel parse?",
        )
    out: list[tuple[str, StructLayout]] = []
    for i, arg in enumerate(spec.args):
        if not arg.is_struct:
            continue
        if i >= len(params):
            raise KtxError(f"arg {arg.name!r}: the kernel has only {len(params)} parameters", arg.where)
        param = params[i]
        if arg.is_array != param.pointee:
            said = "an array of structs (it has a shape)" if arg.is_array else "a struct by value"
            takes = "a pointer to one" if param.pointee else "not a pointer to a struct"
            hint = "drop shape and role" if param.pointee is False and arg.is_array else "give it a shape"
            declared = f"parameter {param.name} ({param.type})"
            raise KtxError(f"arg {arg.name!r} is {said}, but {declared} is {takes}", arg.where, hint)
        if param.layout is None:
            if param.record:
                raise KtxError(
                    f"arg {arg.name!r}: parameter {param.name} ({param.type}): {param.reason}", arg.where
                )
            if param.reason:  # a type clang could not read, or one that depends on a template parameter
                raise KtxError(f"arg {arg.name!r}: parameter {param.name}: {param.reason}", arg.where)
            hint = "give it value = ... (a scalar) or shape/role (a pointer)"
            raise KtxError(
                f"arg {arg.name!r}: parameter {param.name} is {param.type}, not a struct", arg.where, hint
            )
        layout = param.layout
        if arg.ctype is not None and not _same_type(arg.ctype, layout.type):
            raise KtxError(
                f"arg {arg.name!r}: type = {arg.ctype!r}, but parameter {param.name} is {layout.type}",
                arg.where,
            )
        _check_fields(arg, layout)
        out.append((arg.name, layout))
    return tuple(out)


def _same_type(written: str, canonical: str) -> bool:
    """``Params`` names ``ns::Params``; spaces do not matter."""
    w, c = "".join(written.split()), "".join(canonical.split())
    return w == c or c.endswith("::" + w)


def _check_fields(arg: Arg, layout: StructLayout) -> None:
    for name, buffer in arg.pointers:
        leaf = layout.leaf(name)
        if leaf is not None and leaf.kind != "pointer":
            raise KtxError(
                f"arg {arg.name!r}: field {name} ({leaf.ctype}) is no pointer, yet names buffer {buffer!r}",
                arg.where,
                "a buffer's name fills a pointer field; give a number here",
            )
    given = [name for name, _ in arg.fields] + [name for name, _ in arg.pointers]
    known = [leaf.name for leaf in layout.leaves]
    unknown = [n for n in given if n not in known]
    if unknown:
        raise KtxError(
            f"arg {arg.name!r}: {layout.type} has no field {unknown[0]}",
            next(e.where for n, e in arg.fields if n == unknown[0]),
            "fields: " + ", ".join(known[:24]) + (" ..." if len(known) > 24 else ""),
        )
    missing = [n for n in known if n not in given]
    if missing:
        shown = ", ".join(missing[:8]) + (" ..." if len(missing) > 8 else "")
        raise KtxError(
            f"arg {arg.name!r}: no value for field(s) {shown} of {layout.type}",
            arg.where,
            "every field needs a value (write 0 for one the kernel ignores)",
        )


def struct_values(spec: Spec, env: Mapping[str, Value]) -> dict[str, dict[str, Any]]:
    """Each struct argument's field values at ``env`` (by field path), as a Python reference
    sees them: numbers for a by-value struct (its bytes left to :func:`pack`), a pointer field
    as the name of the buffer it points at (its values are in the inputs); for an array of
    structs, one array per field in the argument's shape, element ``i``'s value at ``[i]``."""
    out: dict[str, dict[str, Any]] = {}
    for arg in spec.args:
        if not arg.is_struct:
            continue
        elements = element_values(arg, env)
        if not arg.is_array:
            # a pointer field as the name of the buffer it points at (the reference has it by name)
            out[arg.name] = {**elements[0], **dict(arg.pointers)}
            continue
        dims = arg.dims(env)
        out[arg.name] = {name: np.array([e[name] for e in elements]).reshape(dims) for name, _ in arg.fields}
    return out
