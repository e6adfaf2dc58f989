"""Element types of kernel arguments, and their encodings.

CuPy has no bfloat16 or fp8 dtypes, so such buffers live on the device as raw bits (``uint16``
and ``uint8``): bf16 by round-to-nearest-even from float32, fp8 e4m3/e5m2 through a 256-entry
decode table and a nearest-even, saturating encoder. The converters take the array module
(``xp``): cupy encodes and decodes on the device, numpy runs the same code in CPU tests.
The module sits beside ``ktx.spec`` rather than under ``ktx.measure`` because a dtype is part of
a kernel's spec (``[[args]] dtype``); measurement only uses the encoders.

>>> decode(encode(np.array([1.0, -2.5, 3.140625]), "bf16"), "bf16").tolist()
[1.0, -2.5, 3.140625]
>>> int(encode(np.array([448.0]), "fp8_e4m3")[0])
126
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from ktx.ir.facts.dtypes import C_TYPES

Kind = Literal["float", "int", "fp8", "bool"]


@dataclass(frozen=True)
class DType:
    """One element type: its spec name, C++ spelling, storage dtype and comparison family."""

    name: str
    ctype: str
    storage: str  # numpy dtype of the device buffer
    itemsize: int
    kind: Kind
    scalar_ok: bool  # may be a by-value kernel parameter

    @property
    def np_storage(self) -> np.dtype[Any]:
        return np.dtype(self.storage)


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("fp64", "double", "float64", 8, "float", True),
        DType("fp32", "float", "float32", 4, "float", True),
        # halves by value: 2 bytes, fp16 as np.float16 and bf16 as encoded bits (ktx.measure.gpu)
        DType("fp16", "__half", "float16", 2, "float", True),
        DType("bf16", "__nv_bfloat16", "uint16", 2, "float", True),
        DType("fp8_e4m3", "__nv_fp8_e4m3", "uint8", 1, "fp8", False),
        DType("fp8_e5m2", "__nv_fp8_e5m2", "uint8", 1, "fp8", False),
        DType("int8", "int8_t", "int8", 1, "int", True),
        DType("uint8", "uint8_t", "uint8", 1, "int", True),
        DType("int16", "int16_t", "int16", 2, "int", True),
        DType("uint16", "uint16_t", "uint16", 2, "int", True),
        DType("int32", "int", "int32", 4, "int", True),
        DType("uint32", "unsigned int", "uint32", 4, "int", True),
        DType("int64", "int64_t", "int64", 8, "int", True),
        DType("uint64", "uint64_t", "uint64", 8, "int", True),
        DType("bool", "bool", "bool", 1, "bool", True),
    )
}

#: Common spellings accepted in specs.
ALIASES: dict[str, str] = {
    "float": "fp32",
    "float32": "fp32",
    "double": "fp64",
    "float64": "fp64",
    "half": "fp16",
    "float16": "fp16",
    "bfloat16": "bf16",
    "int": "int32",
    "e4m3": "fp8_e4m3",
    "e5m2": "fp8_e5m2",
}


#: C++ element types to spec dtypes: the table lives in ir/ (ir/facts/dtypes.py), which reads
#: kernels' parameter types with it and may not import ktx above it.


def ctype_dtype(ctype: str) -> str | None:
    """The spec dtype of a C++ element type (``const c10::BFloat16``, ``::at::Half``, ``std::int32_t``),
    or None; qualifiers and a global or ``std::`` prefix do not matter."""
    words = [w for w in ctype.replace("*", " ").split() if w not in ("const", "volatile", "__restrict__")]
    name = " ".join(words).removeprefix("::").removeprefix("std::")
    return C_TYPES.get(name)


def lookup(name: str) -> DType | None:
    """A spec's dtype: its own name (``bf16``), a common alias (``half``, ``bfloat16``) or a C++
    element type (``__half``, ``c10::BFloat16``, ``__nv_fp8_e4m3``, ``int32_t``)."""
    found = DTYPES.get(ALIASES.get(name, name))
    if found is None and (ctype := ctype_dtype(name)) is not None:
        found = DTYPES[ctype]
    return found


def of_ctype(name: str) -> DType | None:
    """The spec dtype of C type ``name`` (``std::``/``::`` prefixes dropped), or None."""
    plain = " ".join(name.split())
    for prefix in ("std::", "::"):
        plain = plain.removeprefix(prefix)
    found = C_TYPES.get(plain)
    return DTYPES[found] if found is not None else None


# -- bf16 ---------------------------------------------------------------------------------
#
# Every converter takes ``xp``, the array module (numpy, or cupy on the device): the same code
# encodes inputs on the GPU and runs in the CPU tests. Only operations both modules have are
# used (no boolean-mask assignment, no in-place tricks that differ between them).


def bf16_encode(values: Any, xp: Any = np) -> Any:
    """float -> bf16 bits, round to nearest even; NaN stays a quiet NaN."""
    f = xp.ascontiguousarray(xp.asarray(values, dtype=xp.float32))
    bits = f.view(xp.uint32)
    # uint32 arithmetic: only NaN bit patterns can wrap around, and they are replaced below.
    rounded = (((bits >> 16) & 1) + bits + 0x7FFF) >> 16
    quiet = ((bits >> 16) | 0x40).astype(xp.uint16)
    return xp.where(xp.isnan(f), quiet, rounded.astype(xp.uint16))


def bf16_decode(bits: Any, xp: Any = np) -> Any:
    b = xp.ascontiguousarray(xp.asarray(bits, dtype=xp.uint16))
    return (b.astype(xp.uint32) << 16).view(xp.float32)


# -- fp8 ----------------------------------------------------------------------------------


@cache
def fp8_table(name: str) -> npt.NDArray[np.float64]:
    """All 256 fp8 codes decoded (e4m3fn: no inf, NaN at 0x7f/0xff; e5m2: IEEE-like)."""
    exp_bits, man_bits, bias = (4, 3, 7) if name == "fp8_e4m3" else (5, 2, 15)
    table = np.empty(256, dtype=np.float64)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        exp = (code >> man_bits) & ((1 << exp_bits) - 1)
        man = code & ((1 << man_bits) - 1)
        if name == "fp8_e4m3" and exp == 15 and man == 7:
            value = float("nan")
        elif name == "fp8_e5m2" and exp == 31:
            value = float("inf") if man == 0 else float("nan")
        elif exp == 0:
            value = man / (1 << man_bits) * 2.0 ** (1 - bias)
        else:
            value = (1 + man / (1 << man_bits)) * 2.0 ** (exp - bias)
        table[code] = sign * value
    return table


def fp8_max(name: str) -> float:
    return 448.0 if name == "fp8_e4m3" else 57344.0


def fp8_encode(values: Any, name: str, xp: Any = np) -> Any:
    """float -> fp8 code, round to nearest even, saturating to the largest finite value.

    Saturation matches ``__nv_fp8_e4m3(float)`` (``__NV_SATFINITE``), the conversion kernels use.
    The nearest code is found by a binary search over the ascending finite magnitudes (one
    elementwise pass per step on the device), ties going to the even code.
    """
    table = fp8_table(name)
    finite_np = np.arange(128)[np.isfinite(table[:128])]
    mags = xp.asarray(table[finite_np])  # ascending for codes 0..max
    finite = xp.asarray(finite_np)
    x = xp.asarray(values, dtype=xp.float64)
    shape = x.shape
    x = x.ravel()
    a = xp.minimum(xp.abs(x), fp8_max(name))
    a = xp.where(xp.isnan(a), 0.0, a)
    last = int(mags.shape[0]) - 1
    hi = xp.clip(xp.searchsorted(mags, a, side="left"), 0, last)
    lo = xp.clip(hi - 1, 0, last)
    d_lo = xp.abs(a - mags[lo])
    d_hi = xp.abs(mags[hi] - a)
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (finite[hi] % 2 == 0))
    code = xp.where(pick_hi, finite[hi], finite[lo]).astype(xp.uint8)
    code = code | xp.where(xp.signbit(x), 0x80, 0).astype(xp.uint8)
    nan_code = 0x7F if name == "fp8_e4m3" else 0x7E
    out = xp.where(xp.isnan(x), nan_code, code).astype(xp.uint8)
    return out.reshape(shape)


def fp8_order(codes: Any, xp: Any = np) -> Any:
    """Map sign-magnitude codes to integers whose differences count ulps (+0 and -0 meet)."""
    c = xp.asarray(codes).astype(xp.int64)
    mag = c & 0x7F
    return xp.where((c & 0x80) != 0, -mag, mag)


# -- generic ------------------------------------------------------------------------------


def encode(values: Any, dtype: str | DType, xp: Any = np) -> Any:
    """Float/int values -> the storage array a device buffer of ``dtype`` holds."""
    d = dtype if isinstance(dtype, DType) else DTYPES[dtype]
    if d.name == "bf16":
        return bf16_encode(values, xp)
    if d.kind == "fp8":
        return fp8_encode(values, d.name, xp)
    if d.kind == "int":
        return xp.asarray(xp.rint(values), dtype=d.storage)
    return xp.asarray(values, dtype=d.storage)


def decode(stored: Any, dtype: str | DType, xp: Any = np) -> Any:
    """A storage array -> float64 values (what comparisons and Python references see)."""
    d = dtype if isinstance(dtype, DType) else DTYPES[dtype]
    if d.name == "bf16":
        return bf16_decode(stored, xp).astype(xp.float64)
    if d.kind == "fp8":
        return xp.asarray(fp8_table(d.name))[xp.asarray(stored, dtype=xp.uint8).astype(xp.int64)]
    return xp.asarray(stored).astype(xp.float64)


#: Bytes written into integer (and bool) outputs before a run, one per verification round in
#: turn. 0xFF alone is -1 for int8, a common quantized value: an element a kernel forgets to
#: write could match a reference -1 by chance. With the byte changing between rounds, an
#: unwritten element cannot match in every round.
POISON_BYTES = (0xFF, 0xA5, 0x5A, 0xC3)

#: fp8 poison stays a NaN code in every round (e4m3 has only 0x7F and 0xFF), alternating sign.
FP8_POISON = (0xFF, 0x7F)


def poison_byte(dtype: str | DType, round_index: int = 0) -> int:
    """The byte that fills a non-float output in verification round ``round_index``."""
    d = dtype if isinstance(dtype, DType) else DTYPES[dtype]
    table = FP8_POISON if d.kind == "fp8" else POISON_BYTES
    return table[round_index % len(table)]


def poison(shape: tuple[int, ...], dtype: str | DType, round_index: int = 0, xp: Any = np) -> Any:
    """The pattern written into outputs before each run: NaN for floats, bytes otherwise.

    A kernel that leaves an element unwritten then shows NaN (or a byte pattern that changes
    between rounds, or an fp8 NaN) there, which no tolerance accepts.
    """
    d = dtype if isinstance(dtype, DType) else DTYPES[dtype]
    if d.kind == "float":
        if d.name == "bf16":
            return xp.full(shape, 0x7FC0, dtype=xp.uint16)
        return xp.full(shape, xp.nan, dtype=d.storage)
    count = int(np.prod(shape)) * d.itemsize
    raw = xp.full(count, poison_byte(d, round_index), dtype=xp.uint8)
    return raw.view(d.storage).reshape(shape)
