"""C element types and the spec dtype each one is, through the file's own aliases.

``ktx init`` types each ``[[args]]`` entry from the kernel's parameter types. The types are
written as the project spells them: ``float``, ``__nv_bfloat16``, or an alias (``typedef float
floatX;``, ``#define floatX float``) in the file or a header it includes from its own folder,
under ``#if`` branches the file selects. :func:`dtype_of` follows those aliases (only the
branches the file's own ``#define``s take) to a name of :data:`DTYPES`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ktx.ir.module import Module


#: C++ element types to spec dtypes: CUDA's, PyTorch's (``c10::``/``at::``, which a project's
#: launchers pass as ``scalar_t``), CUTLASS's and ``<cstdint>``'s. ``ktx init`` maps a kernel's
#: pointer types through it, and a spec may write any of them as a dtype. ``c10::Float8_e4m3fnuz``
#: (bias 8, no negative zero) is a different encoding and is not mapped.
C_TYPES: dict[str, str] = {
    "float": "fp32", "double": "fp64",
    "half": "fp16", "__half": "fp16", "at::Half": "fp16", "c10::Half": "fp16", "float16_t": "fp16",
    "cutlass::half_t": "fp16", "half_t": "fp16", "_Float16": "fp16",
    "__nv_bfloat16": "bf16", "nv_bfloat16": "bf16", "at::BFloat16": "bf16", "c10::BFloat16": "bf16",
    "bfloat16_t": "bf16", "cutlass::bfloat16_t": "bf16", "__bf16": "bf16",
    "__nv_fp8_e4m3": "fp8_e4m3", "c10::Float8_e4m3fn": "fp8_e4m3", "at::Float8_e4m3fn": "fp8_e4m3",
    "cutlass::float_e4m3_t": "fp8_e4m3", "float_e4m3_t": "fp8_e4m3",
    "__nv_fp8_e5m2": "fp8_e5m2", "c10::Float8_e5m2": "fp8_e5m2", "at::Float8_e5m2": "fp8_e5m2",
    "cutlass::float_e5m2_t": "fp8_e5m2", "float_e5m2_t": "fp8_e5m2",
    "int8_t": "int8", "signed char": "int8", "char": "int8", "uint8_t": "uint8", "unsigned char": "uint8",
    "int16_t": "int16", "short": "int16", "uint16_t": "uint16", "unsigned short": "uint16",
    "int": "int32", "int32_t": "int32", "unsigned": "uint32", "unsigned int": "uint32",
    "uint32_t": "uint32", "long": "int64", "long long": "int64", "int64_t": "int64",
    "unsigned long": "uint64", "unsigned long long": "uint64", "uint64_t": "uint64", "size_t": "uint64",
    "bool": "bool",
}  # fmt: skip

#: The table under the name this module's readers use (ktx.dtypes re-exports it as C_TYPES).
DTYPES: Mapping[str, str] = C_TYPES


def dtype_of(module: Module, path: Path, type_name: str) -> str | None:
    """The dtype of the C type ``type_name`` (qualifiers dropped, aliases followed), or None."""
    name = " ".join(type_name.replace("const", " ").replace("__restrict__", " ").split())
    seen: set[str] = set()
    while name not in DTYPES and name not in seen:
        seen.add(name)
        alias = _alias(module, path, name)
        if alias is None:
            return None
        name = alias
    return DTYPES.get(name)


#: CUDA's vector types by their element: ``float4`` is four ``float`` lanes (cuda-samples'
#: saxpy takes ``float4*``), ``__half2`` two ``half``.
_VECTOR = re.compile(
    r"(?:::)?(float|double|char|uchar|short|ushort|int|uint|long|ulong|longlong|ulonglong)([1-4])"
    r"|(?:__)?(half|nv_bfloat16)(2)"
)
_VECTOR_ELEMENT = {
    "float": "float", "double": "double", "char": "signed char", "uchar": "unsigned char",
    "short": "short", "ushort": "unsigned short", "int": "int", "uint": "unsigned int", "long": "long",
    "ulong": "unsigned long", "longlong": "long long", "ulonglong": "unsigned long long",
    "half": "half", "nv_bfloat16": "__nv_bfloat16",
}  # fmt: skip


def vector_of(module: Module, path: Path, type_name: str) -> tuple[str, int] | None:
    """(element dtype, lanes) of a CUDA vector type (``float4`` -> ``("fp32", 4)``), aliases
    followed; None for any other type. A spec writes such an array as its elements with a last
    dimension of the lanes: ``float4* x`` over ``n`` vectors is ``fp32 [n, 4]``."""
    name = " ".join(type_name.replace("const", " ").replace("__restrict__", " ").split())
    seen: set[str] = set()
    while name not in seen:
        seen.add(name)
        m = _VECTOR.fullmatch(name)
        if m is not None:
            base, lanes = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            dtype = DTYPES.get(_VECTOR_ELEMENT[base])
            return (dtype, int(lanes)) if dtype is not None else None
        alias = _alias(module, path, name)
        if alias is None:
            return None
        name = alias
    return None


def _alias(module: Module, path: Path, name: str) -> str | None:
    """The type ``name`` stands for, by ``typedef``/``using``/``#define`` in the file or a local
    header it includes, in the branches of ``#if defined(M)``/``#ifdef``/``#else`` that the
    file's own ``#define M`` lines select (llm.c's ``#define ENABLE_BF16`` picks bf16)."""
    main = module.text_str
    defined = set(re.findall(r"^\s*#\s*define\s+(\w+)", main, re.M))
    texts = []
    for inc in re.findall(r'#\s*include\s+"([^"]+)"', main):
        header = path.parent / inc
        if header.is_file():
            texts.append(header.read_text(errors="replace"))
    texts.append(main)
    pattern = re.compile(
        rf"typedef\s+([\w:\s]+?)\s+{re.escape(name)}\s*;|using\s+{re.escape(name)}\s*=\s*([\w:\s]+?)\s*;"
        rf"|#\s*define\s+{re.escape(name)}\s+([\w:]+)\s*$"
    )
    found = None
    for text in texts:
        for line in _active_lines(text, defined):
            m = pattern.search(line)
            if m:
                found = " ".join((m.group(1) or m.group(2) or m.group(3)).split())
    return found


def _active_lines(text: str, defined: set[str]) -> Iterator[str]:
    """The lines a preprocessor keeps, for conditions on ``defined(M)`` (others count as true)."""
    stack: list[tuple[bool, bool]] = []  # (this branch active, some branch taken)

    def cond(expr: str) -> bool:
        m = re.fullmatch(r"\s*(!?)\s*defined\s*\(?\s*(\w+)\s*\)?\s*", expr)
        if m is None:
            return True
        return (m.group(2) in defined) != bool(m.group(1))

    for line in text.splitlines():
        d = re.match(r"\s*#\s*(ifdef|ifndef|if|elif|else|endif)\b(.*)", line)
        outer = all(a for a, _ in stack)
        if d is None:
            if outer:
                yield line
            continue
        kind, rest = d.groups()
        if kind in ("ifdef", "ifndef", "if"):
            c = (
                rest.strip() in defined
                if kind == "ifdef"
                else (rest.strip() not in defined if kind == "ifndef" else cond(rest))
            )
            stack.append((c, c))
        elif kind == "elif" and stack:
            _, taken = stack.pop()
            c = not taken and cond(rest)
            stack.append((c, taken or c))
        elif kind == "else" and stack:
            _, taken = stack.pop()
            stack.append((not taken, True))
        elif kind == "endif" and stack:
            stack.pop()


def guess_rank(types: Sequence[str]) -> tuple[int, int]:
    """How a draft ranks the instantiations it may guess among, by their type arguments: fewest
    fp64 first (a GPU kernel is rarely run, and never tuned, in double), then fewest other
    non-fp32 floats (fp32 is the type every float kernel in a dispatch is built for, and the one
    its check compares most tightly). A tie keeps the project's own order."""
    kinds = [DTYPES.get(" ".join(t.replace("const", " ").split()), "") for t in types]
    floats = [k for k in kinds if k.startswith(("fp", "bf"))]
    return (sum(k == "fp64" for k in floats), sum(k not in ("fp32", "fp64") for k in floats))


#: Pointee types that say nothing of the elements: ``void``, and plain ``char``, C's raw bytes
#: (ggml's ``const char * cx``). ``uint8_t``/``int8_t``/``unsigned char`` are element types of
#: their own (quantized data, fp8 bytes), whatever view the kernel stores them through.
BYTE_TYPES = frozenset({"void", "char"})
#: Integer vector types a kernel casts a buffer to only to move 8 or 16 bytes at once: a view,
#: not the elements (``(int2*) out`` over fp8 bytes).
_PACKING = re.compile(r"(?:u?(?:char|short|int|long|longlong)[1-4])|uint\d+_t|int\d+_t")


def cast_element(body: str, name: str) -> str | None:
    """The one element type the kernel casts the byte or ``void`` pointer ``name`` to, before it
    indexes it (``(const half2*) x``, ``(float*)((char*) y + off)``, ``reinterpret_cast<float4*>(
    p + i)``), or None when it casts it to none or to several (a flag picks ``half`` or ``float``:
    the draft cannot tell which). Casts to byte types and to integer packing views (``int2``,
    ``uint4``, ``uint32_t``) do not count."""
    word = re.escape(name)
    bytes_ = r"(?:\(\s*(?:const\s+)?(?:char|void|unsigned\s+char|uint8_t|int8_t)\s*\*\s*\)\s*)?"
    c_cast = re.compile(
        r"\(\s*((?:const\s+)?[A-Za-z_][\w:]*(?:\s+[A-Za-z_]\w*)?)\s*\*\s*(?:__restrict__\s*)?\)"
        rf"\s*\(*\s*{bytes_}\(*\s*{word}\b"
    )
    cpp_cast = re.compile(
        rf"(?:reinterpret|static)_cast\s*<\s*((?:const\s+)?[A-Za-z_][\w:]*)\s*\*\s*>\s*\(\s*{bytes_}\(*\s*{word}\b"
    )
    found = (
        {
            " ".join(m.group(1).replace("const", " ").split())
            for pattern in (c_cast, cpp_cast)
            for m in pattern.finditer(body)
        }
        - BYTE_TYPES
        - {"signed char", "unsigned char"}
    )
    found = {t for t in found if not _PACKING.fullmatch(t)}
    return next(iter(found)) if len(found) == 1 else None
