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


SPLIT = b"""#define WIDE 1
__global__ void a(float* x, int n) { x[threadIdx.x] = 1.f; }
__global__ void b(float* x, int n) {
#if defined(WIDE) && __CUDA_ARCH__ >= 900
  for (int i = threadIdx.x; i < n; i += 2 * blockDim.x) {
#elif __CUDA_ARCH__ >= 700
  for (int i = threadIdx.x; i < n; i += 4 * blockDim.x) {
#else
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
#endif
    x[i] = 0.f;
  }
}
__global__ void c(float* x) {
#ifdef NOT_DEFINED
  x[0] = 1.f;
#endif
  x[1] = 2.f;
}
"""


def test_conditions_read_as_nvcc_compiles_for_sm90() -> None:
    from ktx.ir.mask import condition_value

    assert condition_value("if", "__CUDA_ARCH__ >= 800", {}) is True
    assert condition_value("if", "__CUDA_ARCH__ < 800 || defined FOO", {"FOO": None}) is True
    assert condition_value("ifndef", "FOO", {}) is True
    assert condition_value("if", "UNKNOWN_NAME", {}) is False  # cpp: an unknown name is 0
    assert condition_value("if", "sizeof(int) == 4", {}) is None  # not a preprocessor expression


def test_split_conditionals_keep_the_kernel_and_one_branch() -> None:
    masked = mask(SPLIT)
    assert len(masked.text) == len(SPLIT) and masked.text.count(b"\n") == SPLIT.count(b"\n")
    (hidden,) = masked.hidden
    assert hidden.directive.startswith("#if defined(WIDE)") and hidden.kept_line == 5
    assert b"2 * blockDim.x" in masked.text and b"4 * blockDim.x" not in masked.text
    assert b"#ifdef NOT_DEFINED" in masked.text  # whole statements: tree-sitter reads them as they are
    m = parse(SPLIT)
    assert [k.name for k in m.kernels] == ["a", "b", "c"]
    assert not [d for d in m.diagnostics if d.severity == "error"]
    (warning,) = m.diagnostics
    assert warning.span.line == 4 and "kernel 'b'" in warning.message and "line 5" in warning.message
    assert m.print().encode() == SPLIT  # the module keeps every byte
