"""What a drafted spec is made of: its ``[[args]]`` entries, the draft, TOML strings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

#: Bytes per element of each spec dtype (for sizing default shapes).
DTYPE_BYTES: Mapping[str, int] = {
    "fp32": 4, "fp64": 8, "fp16": 2, "bf16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1, "int8": 1, "uint8": 1,
    "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "bool": 1,
}  # fmt: skip
#: Compiler flags of a draft: the dialect CUDA kernels are written in today, and constexpr host
#: functions usable in device code (both harmless where unneeded).
DRAFT_FLAGS = ("-std=c++17", "--expt-relaxed-constexpr")


@dataclass(frozen=True)
class Arg:
    """One ``[[args]]`` entry: ``lines`` are its TOML lines, TODO comments included."""

    name: str
    lines: tuple[str, ...]
    todos: tuple[str, ...] = ()
    shape: str | None = None
    """The drafted extent (``[n, d]``) of an array, None when it is a TODO or a scalar."""
    elem_bytes: int = 0


@dataclass(frozen=True)
class Draft:
    """A drafted spec: its TOML text and the TODOs left in it (empty: it should run as is)."""

    kernel: str
    text: str
    todos: tuple[str, ...]
    checks: tuple[str, ...] = ()
    """``# TODO:`` comments over lines the draft did write but cannot vouch for (they hang on a
    TODO, or the source makes them a guess): a run is not blocked by them, a person checks them."""


def toml_str(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
