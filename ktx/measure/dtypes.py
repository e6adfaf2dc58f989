"""Element types of kernel arguments, and their host-side encodings.

CuPy has no bfloat16 or fp8 dtypes, so such buffers live on the device as raw bits (``uint16``
and ``uint8``) and are converted on the host here: bf16 by round-to-nearest-even from float32,
fp8 e4m3/e5m2 through a 256-entry decode table and a nearest-even, saturating encoder. All of
this is numpy-only, so verification logic is testable without a GPU.

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
        DType("fp16", "__half", "float16", 2, "float", False),
        DType("bf16", "__nv_bfloat16", "uint16", 2, "float", False),
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


def lookup(name: str) -> DType | None:
    return DTYPES.get(ALIASES.get(name, name))


# -- bf16 ---------------------------------------------------------------------------------


def bf16_encode(values: npt.ArrayLike) -> npt.NDArray[np.uint16]:
    """float -> bf16 bits, round to nearest even; NaN stays a quiet NaN."""
    f = np.ascontiguousarray(np.asarray(values, dtype=np.float32))
    bits = f.view(np.uint32)
    # In place, in uint32: only NaN bit patterns can wrap around, and they are fixed below.
    rounded = (bits >> 16) & 1
    rounded += bits
    rounded += 0x7FFF
    rounded >>= 16
    out = rounded.astype(np.uint16)
    nan = np.isnan(f)
    if nan.any():
        out[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)
    return out


def bf16_decode(bits: npt.ArrayLike) -> npt.NDArray[np.float32]:
    b = np.ascontiguousarray(np.asarray(bits, dtype=np.uint16))
    return (b.astype(np.uint32) << 16).view(np.float32)


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


def fp8_encode(values: npt.ArrayLike, name: str) -> npt.NDArray[np.uint8]:
    """float -> fp8 code, round to nearest even, saturating to the largest finite value.

    Saturation matches ``__nv_fp8_e4m3(float)`` (``__NV_SATFINITE``), the conversion kernels use.
    """
    table = fp8_table(name)
    x = np.asarray(values, dtype=np.float64).ravel()
    out = np.empty(x.shape, dtype=np.uint8)
    positive = np.arange(128)
    finite = positive[np.isfinite(table[:128])]
    mags = table[finite]  # ascending for codes 0..max
    a = np.minimum(np.abs(x), fp8_max(name))
    a = np.where(np.isnan(a), 0.0, a)
    hi = np.clip(np.searchsorted(mags, a, side="left"), 0, len(mags) - 1)
    lo = np.clip(hi - 1, 0, len(mags) - 1)
    d_lo = np.abs(a - mags[lo])
    d_hi = np.abs(mags[hi] - a)
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (finite[hi] % 2 == 0))
    code = np.where(pick_hi, finite[hi], finite[lo]).astype(np.uint8)
    code = code | np.where(np.signbit(x), 0x80, 0).astype(np.uint8)
    nan_code = 0x7F if name == "fp8_e4m3" else 0x7E
    out[:] = np.where(np.isnan(x), nan_code, code)
    return out.reshape(np.shape(values))


def fp8_order(codes: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Map sign-magnitude codes to integers whose differences count ulps (+0 and -0 meet)."""
    c = np.asarray(codes, dtype=np.int64)
    mag = c & 0x7F
    return np.where(c & 0x80, -mag, mag)


# -- generic ------------------------------------------------------------------------------


def encode(values: npt.ArrayLike, dtype: str | DType) -> npt.NDArray[Any]:
    """Host float/int values -> the storage array a device buffer of ``dtype`` holds."""
    d = dtype if isinstance(dtype, DType) else DTYPES[dtype]
    if d.name == "bf16":
        return bf16_encode(values)
    if d.kind == "fp8":
        return fp8_encode(values, d.name)
    if d.kind == "int":
        return np.asarray(np.rint(values), dtype=d.storage)
    return np.asarray(values, dtype=d.storage)


def decode(stored: npt.ArrayLike, dtype: str | DType) -> npt.NDArray[np.float64]:
    """A storage array -> float64 values (what comparisons and Python references see)."""
    d = dtype if isinstance(dtype, DType) else DTYPES[dtype]
    if d.name == "bf16":
        return bf16_decode(stored).astype(np.float64)
    if d.kind == "fp8":
        return fp8_table(d.name)[np.asarray(stored, dtype=np.uint8)]
    return np.asarray(stored).astype(np.float64)


def poison(shape: tuple[int, ...], dtype: str | DType) -> npt.NDArray[Any]:
    """The pattern written into outputs before each run: NaN for floats, 0xFF bytes otherwise.

    A kernel that leaves an element unwritten then shows NaN (or an absurd integer, or an fp8
    NaN) there, which no tolerance accepts.
    """
    d = dtype if isinstance(dtype, DType) else DTYPES[dtype]
    if d.kind == "float":
        if d.name == "bf16":
            return np.full(shape, 0x7FC0, dtype=np.uint16)
        return np.full(shape, np.nan, dtype=d.storage)
    return np.frombuffer(b"\xff" * (int(np.prod(shape)) * d.itemsize), dtype=d.storage).reshape(shape)
