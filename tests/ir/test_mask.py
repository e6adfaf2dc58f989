"""Attribute macros and __align__ are hidden from tree-sitter without moving offsets."""

from __future__ import annotations

from ktx.ir import parse
from ktx.ir.mask import attribute_macros, mask

SRC = b"""#define MY_INLINE inline __attribute__((always_inline)) __device__
#define MY_HOST_DEVICE __host__ __device__
#define NOT_ATTR 42
MY_INLINE float twice(float x) { return 2.f * x; }
MY_HOST_DEVICE int one() { return 1; }
__global__ void k(float* x) {
  extern __shared__ __align__(16) float smem[];
  x[threadIdx.x] = twice(smem[0]);
}
"""


def test_attribute_macros_are_found_and_expanded_to_qualifiers() -> None:
    macros = attribute_macros(SRC)
    assert set(macros) == {"MY_INLINE", "MY_HOST_DEVICE"}
    assert "__device__" in macros["MY_INLINE"] and "inline" in macros["MY_INLINE"]


def test_mask_keeps_length_and_newlines() -> None:
    masked = mask(SRC)
    assert len(masked.text) == len(SRC)
    assert masked.text.count(b"\n") == SRC.count(b"\n")
    assert b"__align__" not in masked.text
    assert b"#define MY_INLINE" in masked.text  # definitions stay


def test_masked_module_parses_cleanly_and_keeps_original_text() -> None:
    m = parse(SRC)
    assert m.diagnostics == ()
    assert m.print().encode() == SRC
    twice = next(f for f in m.functions if f.name == "twice")
    assert twice.is_device and "inline" in twice.qualifiers
    assert next(f for f in m.functions if f.name == "one").is_device
    assert [a.name for a in m.shared_arrays] == ["smem"]
    assert m.text(m.kernel("k").signature).startswith("__global__ void k")
