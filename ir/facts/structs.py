"""The byte layout of by-value struct and vector-type kernel parameters, as the compiler lays it out.

A kernel that takes ``uint3 fastdiv`` or ``Params p`` by value needs its argument bytes laid out
exactly as the compiler laid out the type: field offsets, padding, the ``aligned(16)`` of a
``float4``. Computing that by hand is how layouts silently go wrong (a ``double`` after a
``char``, a nested struct's tail padding), so this module asks libclang instead: it parses the
source as the kernel's own build sees it (the spec's include folders and ``-D``/``-I`` flags, the
CUDA shim of :mod:`ktx.ir.clang` standing in for the toolkit's headers), finds the kernel's
parameters, and reads ``sizeof``/``alignof``/``offsetof`` of every field from clang's record
layout. A template kernel's parameters are read from an instantiation
(``decltype(&k<__nv_bfloat16>)``), so ``Params<T>`` gets the layout its launch uses.

The answer is flat: one :class:`Leaf` per scalar the bytes hold (``div.mul``, ``coef[2]``), each
with its offset, size and kind; the measurement harness fills those from the spec's field
expressions (``ktx.measure.argpack``). A pointer field (causal-conv1d's ``void* x_ptr``) is a
``pointer`` leaf: the harness writes into it the device address of a buffer the spec declares.
Anything clang cannot lay out, or ktx cannot fill (a union, a bit-field, a base class), is a
:class:`ParamLayout` with ``layout=None`` and a ``reason``; this module never raises for bad
input.

>>> src = "struct P { int n; double s; char c; };\\n__global__ void k(P p, float* y) {}\\n"
>>> [(l.name, l.offset, l.size) for l in kernel_layouts(src, "k")[0].layout.leaves]
[('n', 0, 4), ('s', 8, 8), ('c', 16, 1)]
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ktx.ir.clang import CLANG_ARGS, _load, _parse_lock, shim_path

#: ``pointer``: a device address (``void* x_ptr``), which the spec fills with a buffer it declares.
LeafKind = Literal["int", "uint", "float", "bool", "fp16", "bf16", "pointer"]
#: A path into a struct: field names and array indices (``("coef", 2)``, ``("div", "mul")``).
FieldPath = tuple[str | int, ...]

_VIRTUAL = "/__ktx__/structs.cu"
_PARSE_SKIP_FUNCTION_BODIES = 0x40
_SYSTEM_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*<[^\n]*", re.M)
_LOCAL_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"[^\n]*', re.M)
#: Storage-only CUDA types the shim declares as structs; their bytes are one encoded value.
_NAMED_LEAVES: dict[str, LeafKind] = {
    "__half": "fp16",
    "half": "fp16",
    "__nv_bfloat16": "bf16",
    "nv_bfloat16": "bf16",
}
_MAX_LEAVES = 4096  # a kernel parameter block is at most 32 KiB; a bigger answer is a mistake


def path_name(path: FieldPath) -> str:
    """``("div", "mul")`` -> ``div.mul``; ``("coef", 2)`` -> ``coef[2]``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


@dataclass(frozen=True)
class Leaf:
    """One scalar stored in the struct's bytes."""

    path: FieldPath
    offset: int
    """Byte offset from the start of the outermost struct."""
    size: int
    kind: LeafKind
    ctype: str
    """clang's canonical spelling (``unsigned int``, ``double``, ``__nv_bfloat16``)."""

    @property
    def name(self) -> str:
        return path_name(self.path)


@dataclass(frozen=True)
class StructLayout:
    """A record (or vector) type as the compiler lays it out."""

    type: str
    """The canonical type spelling (``uint3``, ``Params``, ``ns::Div<float>``)."""
    size: int
    align: int
    leaves: tuple[Leaf, ...]

    def leaf(self, name: str) -> Leaf | None:
        return next((leaf for leaf in self.leaves if leaf.name == name), None)


@dataclass(frozen=True)
class ParamLayout:
    """One kernel parameter, in order: its layout when it is a by-value record, else why not.

    ``layout`` is None for scalars and pointers (``record=False``: nothing to lay out) and for
    records ktx cannot fill (``record=True`` with a ``reason``)."""

    index: int
    name: str
    type: str
    record: bool
    layout: StructLayout | None = None
    reason: str = ""
    pointee: bool = False
    """The parameter is a pointer to one record (``const RaggedBatchDescriptor* meta``) and
    ``layout`` is the pointee's: a spec array of such structs, each element's fields given."""


class _Refused(Exception):
    """A field ktx cannot fill; the message says which and why."""


def compiler_flags(flags: Sequence[str]) -> tuple[str, ...]:
    """The ``-D``, ``-U`` and ``-I`` flags of a build (``-DX=1``, ``-D X``, ``--define-macro=X``,
    ``-I dir``): what changes a struct's declaration. Everything else is nvcc's business."""
    out: list[str] = []
    it = iter(flags)
    for flag in it:
        for short, long in (("-D", "--define-macro"), ("-U", "--undefine-macro"), ("-I", "--include-path")):
            if flag in (short, long):
                value = next(it, None)
                if value is not None:
                    out.append(short + value)
            elif flag.startswith(long + "="):
                out.append(short + flag[len(long) + 1 :])
            elif flag.startswith(short) and len(flag) > 2:
                out.append(flag)
    return tuple(out)


def kernel_layouts(
    source: str,
    kernel: str,
    *,
    path: str | None = None,
    template_args: Sequence[str] = (),
    include_dirs: Sequence[str] = (),
    flags: Sequence[str] = (),
    param_names: Sequence[str] = (),
) -> tuple[ParamLayout, ...]:
    """Every parameter of ``kernel`` in ``source``, by-value records laid out.

    ``kernel`` may be qualified (``ns::k``). ``template_args`` instantiate a template kernel
    (``("__nv_bfloat16", "8")``); ``include_dirs`` are searched for ``#include "x.h"`` (system
    ``<...>`` headers are left to the shim); ``flags`` may hold ``-D``/``-I`` (others are ignored).
    An empty tuple when libclang is missing or the kernel is not found: callers that need a
    layout say so themselves."""
    try:
        ci, index = _load()
    except Exception:
        return ()
    dirs = [*include_dirs, *(f[2:] for f in compiler_flags(flags) if f.startswith("-I"))]
    base = os.path.dirname(os.path.abspath(path)) if path else None
    if base is not None and base not in dirs:
        dirs.insert(0, base)
    unsaved: dict[str, str] = {}
    text = _prepare(source, dirs, unsaved)
    probe = ""
    if template_args:
        # The alias names the instantiated signature; the sizeof fold makes clang complete
        # (instantiate) each parameter's class template, without which it has no layout.
        fn = f"decltype(&{kernel}<{', '.join(template_args)}>)"
        if param_names:
            # several kernels of this name (lmdeploy's two ActivationKernel): the address is
            # ambiguous, and a cast to the one whose parameters the spec names picks it
            sig = _overload_signature(
                ci, index, text, unsaved, dirs, flags, kernel, template_args, param_names
            )
            if sig is not None:
                fn = f"decltype(static_cast<void (*)({sig})>(&{kernel}<{', '.join(template_args)}>))"
        probe = (
            f"\nusing __ktx_struct_probe = {fn};\n"
            "template <typename F> struct __ktx_complete;\n"
            "template <typename R, typename... A> struct __ktx_complete<R (*)(A...)> "
            "{ static constexpr unsigned long n = (0ul + ... + sizeof(A)); };\n"
            f"enum : unsigned long {{ __ktx_struct_sizes = __ktx_complete<{fn}>::n }};\n"
        )
    unsaved[_VIRTUAL] = text + probe
    args = [*CLANG_ARGS, *compiler_flags(flags), *(f"-I{d}" for d in dirs), "-include", shim_path()]
    with _parse_lock:
        try:
            tu = index.parse(
                _VIRTUAL, args=args, unsaved_files=list(unsaved.items()), options=_PARSE_SKIP_FUNCTION_BODIES
            )
        except ci.TranslationUnitLoadError:
            return ()
        return _params(ci, tu, kernel, bool(template_args), tuple(param_names))


def _overload_signature(
    ci: Any,
    index: Any,
    text: str,
    unsaved: dict[str, str],
    dirs: Sequence[str],
    flags: Sequence[str],
    kernel: str,
    template_args: Sequence[str],
    param_names: Sequence[str],
) -> str | None:
    """The parameter types of the overload of ``kernel`` whose parameters are ``param_names``,
    the template arguments put in; None where the name has one kernel or none matches."""
    unsaved = {**unsaved, _VIRTUAL: text}
    args = [*CLANG_ARGS, *compiler_flags(flags), *(f"-I{d}" for d in dirs), "-include", shim_path()]
    with _parse_lock:
        try:
            tu = index.parse(
                _VIRTUAL, args=args, unsaved_files=list(unsaved.items()), options=_PARSE_SKIP_FUNCTION_BODIES
            )
        except ci.TranslationUnitLoadError:
            return None
        decls = _kernel_decls(ci, tu, kernel.rpartition("::")[2])
        if len({_names(ci, d) for d in decls}) < 2:
            return None
        fits = [d for d in decls if _fits(_names(ci, d), param_names)]
        if not fits:
            return None
        decl = fits[-1]
        tparams = [
            c.spelling
            for c in decl.get_children()
            if c.kind
            in (
                ci.CursorKind.TEMPLATE_TYPE_PARAMETER,
                ci.CursorKind.TEMPLATE_NON_TYPE_PARAMETER,
                ci.CursorKind.TEMPLATE_TEMPLATE_PARAMETER,
            )
        ]
        bind = dict(zip(tparams, template_args, strict=False))
        types = [c.type.spelling for c in decl.get_children() if c.kind == ci.CursorKind.PARM_DECL]
    words = re.compile(r"\b[A-Za-z_]\w*\b")
    return ", ".join(
        words.sub(lambda m: bind.get(m.group(0), m.group(0)), re.sub(r"\b__restrict(__)?\b", " ", t))
        for t in types
    )


def _names(ci: Any, decl: Any) -> tuple[str, ...]:
    return tuple(c.spelling for c in decl.get_children() if c.kind == ci.CursorKind.PARM_DECL)


def _fits(names: Sequence[str], wanted: Sequence[str]) -> bool:
    """An overload's parameters are the spec's arguments: same count, each name the same (an
    unnamed parameter matches any)."""
    return len(names) == len(wanted) and all(not n or n == w for n, w in zip(names, wanted, strict=True))


def _prepare(source: str, dirs: Sequence[str], unsaved: dict[str, str], depth: int = 0) -> str:
    """``source`` with system includes blanked (the shim stands in for them); each local header
    found in ``dirs`` is handed to clang the same way, and one not found is blanked too."""

    def local(m: re.Match[str]) -> str:
        name = m.group(1)
        for d in dirs:
            full = os.path.abspath(os.path.join(d, name))
            if os.path.isfile(full):
                if full not in unsaved and depth < 16:
                    unsaved[full] = ""  # reserve: an include cycle stops here
                    try:
                        with open(full, encoding="utf-8", errors="surrogateescape") as fh:
                            header = fh.read()
                    except OSError:
                        break
                    here = os.path.dirname(full)
                    unsaved[full] = _prepare(header, [here, *dirs], unsaved, depth + 1)
                return f'#include "{full}"'
        return " " * len(m.group(0))

    text = _SYSTEM_INCLUDE.sub(lambda m: " " * len(m.group(0)), source)
    return _LOCAL_INCLUDE.sub(local, text)


def _params(
    ci: Any, tu: Any, kernel: str, probed: bool, param_names: tuple[str, ...] = ()
) -> tuple[ParamLayout, ...]:
    if probed:
        alias = _find(
            ci,
            tu.cursor,
            lambda c: c.kind == ci.CursorKind.TYPE_ALIAS_DECL and c.spelling == "__ktx_struct_probe",
        )
        if alias is None:
            return ()
        fn_type = alias.underlying_typedef_type.get_canonical().get_pointee()
        if fn_type.kind != ci.TypeKind.FUNCTIONPROTO:
            return ()
        decl = _kernel_decl(ci, tu, kernel.rpartition("::")[2], param_names)
        names = [c.spelling for c in decl.get_children() if c.kind == ci.CursorKind.PARM_DECL] if decl else []
        types = list(fn_type.argument_types())
    else:
        decl = _kernel_decl(ci, tu, kernel.rpartition("::")[2], param_names)
        if decl is None:
            return ()
        names = [c.spelling for c in decl.get_children() if c.kind == ci.CursorKind.PARM_DECL]
        types = [c.type for c in decl.get_children() if c.kind == ci.CursorKind.PARM_DECL]
    broken = _broken_params(ci, tu, decl)
    out = []
    for i, t in enumerate(types):
        name = names[i] if i < len(names) else f"#{i}"
        if name in broken:  # clang recovers an unknown type as int: no layout to trust
            out.append(ParamLayout(i, name, "", False, reason=broken[name]))
        else:
            out.append(_param(ci, i, name, t))
    return tuple(out)


def _broken_params(ci: Any, tu: Any, decl: Any) -> dict[str, str]:
    """Parameters whose declaration clang reported an error in (``unknown type name 'Params'``:
    a header not on the include path), with the error, by name."""
    if decl is None:
        return {}
    errors = [d for d in tu.diagnostics if d.severity >= 3 and d.location.file is not None]
    out: dict[str, str] = {}
    for parm in decl.get_children():
        if parm.kind != ci.CursorKind.PARM_DECL:
            continue
        ext = parm.extent
        if ext.start.file is None:  # an unnamed tag parameter (``constant<B>``): no extent to hold an error
            continue
        for d in errors:
            loc = d.location
            if loc.file.name == ext.start.file.name and (ext.start.line, ext.start.column) <= (
                loc.line,
                loc.column,
            ) <= (ext.end.line, ext.end.column):
                out[parm.spelling] = f"clang: {d.spelling} (is its header on the include path?)"
                break
    return out


def _find(ci: Any, cursor: Any, want: Any) -> Any:
    for child in cursor.get_children():
        if child.location.file is not None and child.location.file.name != _VIRTUAL:
            continue
        if want(child):
            return child
        if child.kind in (ci.CursorKind.NAMESPACE, ci.CursorKind.LINKAGE_SPEC, ci.CursorKind.UNEXPOSED_DECL):
            found = _find(ci, child, want)
            if found is not None:
                return found
    return None


def _kernel_decl(ci: Any, tu: Any, kernel: str, param_names: Sequence[str] = ()) -> Any:
    """The kernel's definition (else its last declaration): in the main file, else in a local
    header it includes (the shim's declarations are never a user's kernel). Of several
    overloads, the one whose parameters are ``param_names`` where one is."""
    found = _kernel_decls(ci, tu, kernel)
    if param_names and len({_names(ci, d) for d in found}) > 1:
        found = [d for d in found if _fits(_names(ci, d), param_names)] or found
    defined = [c for c in found if c.is_definition()]
    return (defined or found or [None])[-1]


def _kernel_decls(ci: Any, tu: Any, kernel: str) -> list[Any]:
    """Every declaration of kernel ``kernel``: in the main file, else in local headers."""
    found: list[Any] = []
    shim = shim_path()

    def walk(cursor: Any) -> None:
        for child in cursor.get_children():
            if child.location.file is None or child.location.file.name == shim:
                continue
            if child.kind in (
                ci.CursorKind.NAMESPACE,
                ci.CursorKind.LINKAGE_SPEC,
                ci.CursorKind.UNEXPOSED_DECL,
            ):
                walk(child)
            elif (
                child.kind in (ci.CursorKind.FUNCTION_DECL, ci.CursorKind.FUNCTION_TEMPLATE)
                and child.spelling == kernel
                and any(c.kind == ci.CursorKind.CUDAGLOBAL_ATTR for c in child.get_children())
            ):
                found.append(child)

    walk(tu.cursor)
    main = [c for c in found if c.location.file.name == _VIRTUAL]
    return main or found


def _param(ci: Any, index: int, name: str, declared: Any) -> ParamLayout:
    t = declared.get_canonical()
    K = ci.TypeKind
    spelling = _unqualified(t.spelling)
    if "type-parameter-" in spelling and t.kind != K.POINTER:
        why = "its type depends on a template parameter (give the spec's template_args)"
        return ParamLayout(index, name, spelling, False, reason=why)
    if t.kind == K.POINTER:
        target = t.get_pointee()
        pointee = target.get_canonical()
        if pointee.kind == K.RECORD and _unqualified(pointee.spelling) not in _NAMED_LEAVES:
            inner = _param(ci, index, name, target)
            return ParamLayout(index, name, spelling, False, inner.layout, inner.reason, pointee=True)
        return ParamLayout(index, name, spelling, False)
    if t.kind != K.RECORD or spelling in _NAMED_LEAVES:
        return ParamLayout(index, name, spelling, False)
    if "(unnamed" in spelling or "(anonymous" in spelling:
        # ``struct { ... } typedef RaggedBatchDescriptor;`` (DeepSpeed): the typedef names it
        spelling = _unqualified(declared.spelling)
    size, align = int(t.get_size()), int(t.get_align())
    if size <= 0 or align <= 0:
        why = (
            "its type depends on a template parameter (give the spec's template_args)"
            if size == -3
            else "clang cannot lay it out (is the type complete?)"
        )
        return ParamLayout(index, name, spelling, True, reason=why)
    leaves: list[Leaf] = []
    try:
        _record(ci, t, 0, (), leaves)
    except _Refused as exc:
        return ParamLayout(index, name, spelling, True, reason=str(exc))
    return ParamLayout(index, name, spelling, True, StructLayout(spelling, size, align, tuple(leaves)))


def _record(ci: Any, t: Any, base: int, path: FieldPath, leaves: list[Leaf]) -> None:
    decl = t.get_declaration()
    where = path_name(path) or _unqualified(t.spelling)
    if decl.kind == ci.CursorKind.UNION_DECL:
        raise _Refused(f"{where} is a union: ktx cannot tell which member to fill")
    if any(c.kind == ci.CursorKind.CXX_BASE_SPECIFIER for c in decl.get_children()):
        raise _Refused(f"{where} has a base class: ktx lays out only plain structs")
    for field in t.get_fields():
        if field.is_bitfield():
            raise _Refused(f"{path_name((*path, field.spelling))} is a bit-field: ktx cannot fill it")
        name = field.spelling
        if not name:  # an anonymous struct member: its fields belong to the enclosing one
            raise _Refused(f"{where} has an anonymous member: name it to give its fields values")
        offset = field.get_field_offsetof()
        if offset < 0 or offset % 8:
            raise _Refused(f"{path_name((*path, name))}: clang gives no byte offset")
        _value(ci, field.type.get_canonical(), base + offset // 8, (*path, name), leaves)


def _value(ci: Any, t: Any, offset: int, path: FieldPath, leaves: list[Leaf]) -> None:
    K = ci.TypeKind
    spelling = _unqualified(t.spelling)
    if len(leaves) > _MAX_LEAVES:
        raise _Refused(f"more than {_MAX_LEAVES} scalars: not a kernel parameter ktx can fill")
    if spelling in _NAMED_LEAVES:
        leaves.append(Leaf(path, offset, int(t.get_size()), _NAMED_LEAVES[spelling], spelling))
    elif t.kind == K.RECORD:
        _record(ci, t, offset, path, leaves)
    elif t.kind == K.CONSTANTARRAY:
        element = t.element_type.get_canonical()
        step = int(element.get_size())
        for i in range(int(t.element_count)):
            _value(ci, element, offset + i * step, (*path, i), leaves)
    elif t.kind == K.ENUM:
        under = t.get_declaration().enum_type.get_canonical()
        _value(ci, under, offset, path, leaves)
    elif t.kind == K.POINTER:
        leaves.append(Leaf(path, offset, int(t.get_size()), "pointer", spelling))
    else:
        kind = _scalar_kind(K, t.kind)
        if kind is None:
            raise _Refused(
                f"{path_name(path)} has type {spelling}: ktx fills numbers, bools, pointers, structs of them"
            )
        leaves.append(Leaf(path, offset, int(t.get_size()), kind, spelling))


def _scalar_kind(K: Any, kind: Any) -> LeafKind | None:
    if kind == K.BOOL:
        return "bool"
    if kind in (K.FLOAT, K.DOUBLE):
        return "float"
    if kind in (K.CHAR_S, K.SCHAR, K.SHORT, K.INT, K.LONG, K.LONGLONG, K.WCHAR):
        return "int"
    if kind in (K.CHAR_U, K.UCHAR, K.USHORT, K.UINT, K.ULONG, K.ULONGLONG, K.CHAR16, K.CHAR32):
        return "uint"
    return None


def _unqualified(spelling: str) -> str:
    words = [w for w in spelling.split() if w not in ("const", "volatile", "struct", "class")]
    return " ".join(words)
