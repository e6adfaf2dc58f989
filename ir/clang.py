"""Facts from libclang that syntax alone cannot give: element types, their sizes, macro values.

tree-sitter sees ``const bf16_t* __restrict__ x`` and ``#define VEC (16 / sizeof(T))`` as
text. A ``vectorize`` pass needs more: that ``bf16_t`` is ``__nv_bfloat16`` and two bytes
wide, that ``float4`` is sixteen, that ``VEC`` is eight. libclang answers that, but the
PyPI ``libclang`` wheel ships no CUDA headers and the machine running ktx may have no CUDA
toolkit at all; so each file is parsed as CUDA host code with the toolkit and standard
library turned off and a small shim (``ir/shim/ktx_cuda_shim.h``) force-included in their
place. ``#include`` lines are blanked (same length, so every offset still matches the
module), which keeps the answer the same on every machine.

The IR works without these facts: when libclang cannot be loaded or cannot make sense of a
file, :func:`facts` still returns a :class:`ClangFacts`, with ``available=False`` and a
``reason`` that says why, and callers fall back to what the tree-sitter index knows.

>>> from ktx.ir import parse
>>> m = parse("__global__ void k(const __nv_bfloat16* x, float4* y) {}")
>>> f = facts(m)
>>> [(p.name, p.element_type, p.element_size) for p in f.kernel("k").params] if f and f.available else None
[('x', '__nv_bfloat16', 2), ('y', 'float4', 16)]
"""

from __future__ import annotations

import atexit
import hashlib
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from ktx.ir.nodes import Diagnostic, Function, Severity

if TYPE_CHECKING:
    from ktx.ir.module import Module

#: The virtual file name the source is parsed under (never read from disk).
VIRTUAL_PATH = "/__ktx__/input.cu"
#: Compiler arguments. ``--cuda-path`` points nowhere so that a local toolkit is never
#: consulted (results must not depend on the machine); ``-ferror-limit=0`` keeps clang
#: going past many errors in code the shim does not cover.
CLANG_ARGS: tuple[str, ...] = (
    "-x",
    "cuda",
    "--cuda-host-only",
    "-nocudainc",
    "-nocudalib",
    "--cuda-path=/nonexistent",
    "-std=c++17",
    "-nostdinc",
    "-nostdinc++",
    "-ferror-limit=0",
)
_PARSE_SKIP_FUNCTION_BODIES = 0x40
_CACHE_SIZE = 128
_INCLUDE = re.compile(rb"^[ \t]*#[ \t]*include\b[^\n]*", re.M)
_CV_WORDS = {"const", "volatile", "__restrict", "restrict"}
#: Element types whose size is always reported (a pass may need them before any launch exists).
COMMON_TYPES: tuple[str, ...] = (
    "float",
    "double",
    "half",
    "__half",
    "__nv_bfloat16",
    "nv_bfloat16",
    "__nv_fp8_e4m3",
    "__nv_fp8_e5m2",
    "int8_t",
    "uint8_t",
    "int32_t",
    "int64_t",
    "half2",
    "__nv_bfloat162",
    "float2",
    "float4",
    "int4",
    "uint2",
    "uint4",
)
# Template arguments that cannot be types: expressions and literals.
_NOT_A_TYPE = re.compile(r"^[-+\d(]|[-+/%|^!?]|^(true|false|nullptr)$")


@dataclass(frozen=True)
class ParamFacts:
    """One kernel parameter as clang typed it."""

    name: str
    type: str
    """clang's spelling of the declared type (``const __nv_bfloat16 *__restrict``)."""
    element_type: str
    """The type one element has after pointers, references, arrays and cv-qualifiers are
    stripped, canonical (typedefs and aliases resolved: ``__nv_bfloat16``, ``uint4``); for a
    type that depends on a template parameter, the spelling as written (``T``)."""
    element_size: int | None
    """``sizeof`` the element in bytes; ``None`` when it depends on a template parameter."""
    element_align: int | None
    pointer_depth: int
    """Pointers and arrays stripped to reach the element (references do not count)."""
    dependent: bool
    default_type: str | None = None
    """When the element is a template type parameter with a default, the default, canonical."""
    default_size: int | None = None

    @property
    def is_pointer(self) -> bool:
        return self.pointer_depth > 0


@dataclass(frozen=True)
class KernelFacts:
    """A ``__global__`` function clang found, with its parameters typed."""

    name: str
    line: int
    offset: int
    """Byte offset of the kernel's name, the same in the module and in clang's view."""
    params: tuple[ParamFacts, ...]
    function: Function | None
    """The module's record of the same kernel (matched by position), when there is one."""

    def param(self, name: str) -> ParamFacts | None:
        return next((p for p in self.params if p.name == name), None)


@dataclass(frozen=True)
class ClangFacts:
    """What libclang knows about one module; ``available`` says whether it knows anything."""

    available: bool
    reason: str
    """Why libclang gave nothing (``available=False``) or why facts may be partial."""
    kernels: tuple[KernelFacts, ...] = ()
    macro_values: tuple[tuple[str, int], ...] = ()
    """Object-like macros of the file that expand to an integer constant, with the value."""
    diagnostics: tuple[Diagnostic, ...] = ()
    """clang's warnings and errors in the file itself (the shim and probes excluded)."""
    type_sizes: tuple[tuple[str, str, int], ...] = ()
    """``(type as written, canonical type, sizeof)`` for the type arguments of the file's
    launch sites (``k<__nv_bfloat16, 8>``) and the usual element types (:data:`COMMON_TYPES`):
    what ``sizeof(T)`` is for each instantiation a launcher makes."""

    @property
    def macros(self) -> dict[str, int]:
        return dict(self.macro_values)

    def macro(self, name: str) -> int | None:
        return next((v for n, v in self.macro_values if n == name), None)

    def sizeof(self, type_text: str) -> int | None:
        """``sizeof`` a type written in the file (a launch's type argument, or a common type)."""
        key = " ".join(type_text.split())
        return next((size for written, _, size in self.type_sizes if written == key), None)

    def kernel(self, name: str) -> KernelFacts | None:
        """The kernel called ``name``: the one the module has a definition for, if any."""
        found = [k for k in self.kernels if k.name == name]
        return next((k for k in found if k.function is not None), found[-1] if found else None)

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == "error")


# -- libclang loading ------------------------------------------------------------------


@cache
def _load() -> tuple[Any, Any]:
    """``(clang.cindex, Index)``; raises whatever loading raises, once per process."""
    import clang.cindex as ci

    return ci, ci.Index.create()


# Drop the Index while clang.cindex is still alive: its __del__ fails at interpreter teardown.
atexit.register(_load.cache_clear)


def shim_path() -> str:
    return str(resources.files("ktx.ir") / "shim" / "ktx_cuda_shim.h")


@cache
def _shim_digest() -> bytes:
    try:
        with open(shim_path(), "rb") as fh:
            return hashlib.sha256(fh.read()).digest()
    except OSError:
        return b""


# -- the cache ---------------------------------------------------------------------------

_cache: OrderedDict[str, ClangFacts] = OrderedDict()
_lock = threading.Lock()
# libclang indexes are not documented as thread-safe; parses are serialised.
_parse_lock = threading.Lock()


def _key(module: Module) -> str:
    h = hashlib.sha256(module.source)
    h.update(b"\0" + (module.path or "").encode() + b"\0" + "\0".join(CLANG_ARGS).encode())
    h.update(_shim_digest())
    return h.hexdigest()


def clear_cache() -> None:
    with _lock:
        _cache.clear()


def facts(module: Module) -> ClangFacts | None:
    """libclang's facts about ``module``, cached by source hash; never raises.

    ``None`` only for a module with no text at all. Otherwise a :class:`ClangFacts`: with
    ``available=False`` and a reason when libclang cannot be loaded or cannot parse the
    file, else the kernels' parameter types and sizes, integer macro values and clang's
    diagnostics.
    """
    if not module.source.strip():
        return None
    key = _key(module)
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    try:
        result = _compute(module)
    except Exception as exc:  # a libclang failure must never take the IR down with it
        result = ClangFacts(False, f"libclang failed: {type(exc).__name__}: {exc}")
    with _lock:
        _cache[key] = result
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return result


# -- the parse -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Probe:
    """Text appended after the source whose outcome answers one question."""

    line: int
    kind: str  # "macro" or "default"
    key: str


def _blank_includes(source: bytes) -> bytes:
    """Replace ``#include`` lines by spaces: the shim stands in for every header."""
    return _INCLUDE.sub(lambda m: b" " * len(m.group(0)), source)


def _compute(module: Module) -> ClangFacts:
    try:
        ci, index = _load()
    except Exception as exc:
        return ClangFacts(False, f"libclang cannot be loaded: {type(exc).__name__}: {exc}")
    text = _blank_includes(module.source)
    if not text.endswith(b"\n"):
        text += b"\n"
    source_lines = text.count(b"\n")
    probes: list[_Probe] = []
    extra: list[str] = []

    def add(kind: str, key: str, line: str) -> None:
        probes.append(_Probe(source_lines + len(extra) + 1, kind, key))
        extra.append(line)

    attribute = getattr(module, "attribute_macros", {})
    for macro in module.macros:
        if macro.params is not None or not macro.value.strip() or macro.name in attribute:
            continue
        n = len(probes)
        probe = f"enum __ktx_probe_{n} : long long {{ __ktx_probe_{n}_v = ({macro.name}) }};"
        add("macro", macro.name, probe)
    for fn in module.kernels:
        for tp in fn.template_params:
            if tp.kind == "type" and tp.default:
                n = len(probes)
                scope = _namespace_path(module, fn)
                decl = f"using __ktx_probe_{n} = {tp.default};"
                for ns in reversed(scope):
                    decl = f"namespace {ns} {{ {decl} }}"
                add("default", f"{fn.name}\0{fn.span.start}\0{tp.name}", decl)
    types: dict[str, list[str]] = {t: [] for t in COMMON_TYPES}
    for site in module.launch_sites:
        host = next((f for f in module.functions if f.span.contains(site.span)), None)
        for arg in site.template_args:
            written = " ".join(arg.split())
            if written not in types and not _NOT_A_TYPE.search(written) and not _integer(written, module):
                types[written] = _namespace_path(module, host) if host is not None else []
    for written, scope in types.items():
        n = len(probes)
        decl = f"using __ktx_probe_{n} = {written};"
        for ns in reversed(scope):
            decl = f"namespace {ns} {{ {decl} }}"
        add("type", written, decl)
    unsaved = text + "\n".join(extra).encode() + (b"\n" if extra else b"")
    args = [*CLANG_ARGS, "-include", shim_path()]
    with _parse_lock:
        try:
            tu = index.parse(
                VIRTUAL_PATH,
                args=args,
                unsaved_files=[(VIRTUAL_PATH, unsaved.decode("utf-8", "surrogateescape"))],
                options=_PARSE_SKIP_FUNCTION_BODIES,
            )
        except ci.TranslationUnitLoadError as exc:
            return ClangFacts(False, f"libclang could not parse the file: {exc}")
        return _collect(ci, tu, module, source_lines, probes)


def _integer(text: str, module: Module) -> bool:
    """Whether a template argument names an integer the module knows (``BLOCK``, ``kVec``)."""
    return any(m.name == text for m in module.macros) or any(c.name == text for c in module.constants)


def _namespace_path(module: Module, fn: Function) -> list[str]:
    """Names of the namespaces around ``fn``, outermost first (from the tree)."""
    names: list[str] = []
    node = module.node(fn.span).parent
    while node is not None:
        if node.type == "namespace_definition":
            name = node.child_by_field_name("name")
            names.insert(0, module.text(module.span(name.start_byte, name.end_byte)) if name else "")
        node = node.parent
    # ``namespace a::b`` is one node with a nested name; reopening it the same way works.
    return names


def _collect(ci: Any, tu: Any, module: Module, source_lines: int, probes: list[_Probe]) -> ClangFacts:
    failed_lines: set[int] = set()
    diagnostics: list[Diagnostic] = []
    for d in tu.diagnostics:
        loc = d.location
        if d.severity < 2 or loc.file is None or loc.file.name != VIRTUAL_PATH:
            continue
        if loc.line > source_lines:
            failed_lines.add(loc.line)
            continue
        start = module.lines.line_start(loc.line) + max(loc.column - 1, 0) if loc.line > 0 else 0
        start = min(start, len(module.source))
        severity: Severity = "error" if d.severity >= 3 else "warning"
        span = module.span(start, start)
        diagnostics.append(Diagnostic(severity, f"clang: {d.spelling}", span, module.path))

    by_line = {p.line: p for p in probes}
    macro_values: list[tuple[str, int]] = []
    type_sizes: list[tuple[str, str, int]] = []
    defaults: dict[str, tuple[str, int | None]] = {}
    kernels: list[KernelFacts] = []

    def walk(cursor: Any) -> None:
        for child in cursor.get_children():
            loc = child.location
            if loc.file is None or loc.file.name != VIRTUAL_PATH:
                continue
            kind = child.kind
            probe = by_line.get(loc.line) if loc.line > source_lines else None
            if probe is not None and loc.line not in failed_lines:
                if probe.kind == "macro" and kind == ci.CursorKind.ENUM_DECL:
                    for const in child.get_children():
                        macro_values.append((probe.key, int(const.enum_value)))
                elif probe.kind in ("default", "type") and kind == ci.CursorKind.NAMESPACE:
                    walk(child)
                elif probe.kind == "default" and kind == ci.CursorKind.TYPE_ALIAS_DECL:
                    t = child.underlying_typedef_type.get_canonical()
                    defaults[probe.key] = (_unqualified(t.spelling), _size(t.get_size()))
                elif probe.kind == "type" and kind == ci.CursorKind.TYPE_ALIAS_DECL:
                    t = child.underlying_typedef_type.get_canonical()
                    size = _size(t.get_size())
                    if size is not None:
                        type_sizes.append((probe.key, _unqualified(t.spelling), size))
                continue
            if loc.line > source_lines:
                continue
            if kind in (ci.CursorKind.NAMESPACE, ci.CursorKind.LINKAGE_SPEC, ci.CursorKind.UNEXPOSED_DECL):
                walk(child)
            elif kind in (ci.CursorKind.FUNCTION_DECL, ci.CursorKind.FUNCTION_TEMPLATE) and any(
                c.kind == ci.CursorKind.CUDAGLOBAL_ATTR for c in child.get_children()
            ):
                kernels.append(_kernel(ci, child, module))

    walk(tu.cursor)
    kernels = _dedupe(kernels)
    kernels = [_with_defaults(k, defaults) for k in kernels]
    errors = [d for d in diagnostics if d.severity == "error"]
    matched = {k.function.span.start for k in kernels if k.function is not None}
    expected = module.kernels
    if errors and not kernels and (expected or b"__global__" in module.source):
        first = errors[0]
        reason = (
            f"libclang could not parse the file: {len(errors)} error(s) and no kernel recognised; "
            f"first at {first.span.line}:{first.span.col}: {first.message.removeprefix('clang: ')}"
        )
        return ClangFacts(False, reason, (), tuple(macro_values), tuple(diagnostics), tuple(type_sizes))
    notes: list[str] = []
    if errors:
        notes.append(f"{len(errors)} clang error(s); facts may be partial")
    missed = [f.name for f in expected if f.span.start not in matched]
    if missed:
        notes.append("kernels clang did not recognise: " + ", ".join(missed))
    return ClangFacts(
        True, "; ".join(notes), tuple(kernels), tuple(macro_values), tuple(diagnostics), tuple(type_sizes)
    )


def _kernel(ci: Any, cursor: Any, module: Module) -> KernelFacts:
    offset = int(cursor.location.offset)
    fn = next(
        (
            f
            for f in module.kernels
            if f.name == cursor.spelling and f.signature.start <= offset < f.body.start
        ),
        None,
    )
    params = tuple(
        _param(ci, c) for c in cursor.get_children() if c.kind == ci.CursorKind.PARM_DECL
    )
    return KernelFacts(cursor.spelling, int(cursor.location.line), offset, params, fn)


def _param(ci: Any, cursor: Any) -> ParamFacts:
    declared = cursor.type
    t = declared
    depth = 0
    K = ci.TypeKind
    arrays = (K.CONSTANTARRAY, K.INCOMPLETEARRAY, K.VARIABLEARRAY, K.DEPENDENTSIZEDARRAY)
    for _ in range(16):
        canon = t.get_canonical()
        if t.kind == K.POINTER or (canon.kind == K.POINTER and not _dependent(t)):
            depth += 1
            t = t.get_pointee() if t.kind == K.POINTER else canon.get_pointee()
        elif t.kind in (K.LVALUEREFERENCE, K.RVALUEREFERENCE):
            t = t.get_pointee()
        elif t.kind in arrays:
            depth += 1
            t = t.element_type
        elif canon.kind in arrays and not _dependent(t):
            depth += 1
            t = canon.element_type
        else:
            break
    size = _size(t.get_size())
    dependent = _dependent(t)
    spelling = t.spelling if dependent else t.get_canonical().spelling
    return ParamFacts(
        name=cursor.spelling,
        type=declared.spelling,
        element_type=_unqualified(spelling),
        element_size=None if dependent else size,
        element_align=None if dependent else _size(t.get_align()),
        pointer_depth=depth,
        dependent=dependent,
    )


def _dependent(t: Any) -> bool:
    """Whether a type depends on a template parameter (clang reports its layout as -3)."""
    return int(t.get_size()) == -3 or "type-parameter-" in t.get_canonical().spelling


def _size(value: int) -> int | None:
    """libclang's layout answers are negative error codes when there is no size."""
    return int(value) if value is not None and int(value) > 0 else None


def _unqualified(spelling: str) -> str:
    words = spelling.split()
    while words and words[0] in _CV_WORDS:
        words.pop(0)
    while words and words[-1] in _CV_WORDS:
        words.pop()
    return " ".join(words)


def _dedupe(kernels: list[KernelFacts]) -> list[KernelFacts]:
    seen: set[tuple[str, int]] = set()
    result: list[KernelFacts] = []
    for k in kernels:
        if (k.name, k.offset) not in seen:
            seen.add((k.name, k.offset))
            result.append(k)
    return result


def _with_defaults(kernel: KernelFacts, defaults: dict[str, tuple[str, int | None]]) -> KernelFacts:
    """Fill ``default_type``/``default_size`` of parameters whose element is a defaulted type parameter."""
    fn = kernel.function
    if fn is None or not defaults:
        return kernel
    params: list[ParamFacts] = []
    for p in kernel.params:
        hit = defaults.get(f"{fn.name}\0{fn.span.start}\0{p.element_type}") if p.dependent else None
        if hit is not None:
            p = ParamFacts(
                p.name,
                p.type,
                p.element_type,
                p.element_size,
                p.element_align,
                p.pointer_depth,
                p.dependent,
                default_type=hit[0],
                default_size=hit[1],
            )
        params.append(p)
    return KernelFacts(kernel.name, kernel.line, kernel.offset, tuple(params), kernel.function)
