"""Doubt spreads (ktx.draft.doubt): a drafted line that hangs on a TODO gets a TODO over it."""

from __future__ import annotations

from pathlib import Path

from ktx.draft.doubt import nullable, spread
from ktx.draft.drafter import draft

DRAFT = """kernel = "k"

[vars]
# TODO: block_nums: the launcher's dim3 parameter
block_nums = "TODO"
ncols = "ne00"

[[args]]
name = "x"
# TODO: element type 'T' of x
dtype = "TODO"
shape = "[n]"
role = "in"

[[args]]
name = "bits"
dtype = "int32"
# TODO: value of bits: the kernel never compares it or indexes with it (no size)
value = "TODO"

[shapes]
default = { product = { n = [4096, 1048576], nbytes = [64] } }
quick = [{ n = 4096, nbytes = 64 }]

[launch]
grid = ["block_nums"]
block = ["256"]
shared = "nbytes"
"""


def _above(lines: list[str], start: str) -> str:
    at = next(i for i, ln in enumerate(lines) if ln.startswith(start))
    return lines[at - 1]


def test_lines_hanging_on_a_todo_get_one_and_others_do_not() -> None:
    lines, added = spread(DRAFT.splitlines())
    assert _above(lines, "grid = ").startswith("# TODO: grid names block_nums")
    assert _above(lines, "shape = ").startswith("# TODO: extent of x: counted in elements")
    assert _above(lines, "shared = ").startswith("# TODO: shared names nbytes")
    assert _above(lines, "default = ").startswith("# TODO: shape points: drafted while [vars] block_nums")
    assert _above(lines, "quick = ").startswith("# TODO: the quick point")
    assert not _above(lines, "block = ").startswith("# TODO")
    assert not _above(lines, "ncols = ").startswith("# TODO"), "an alias of a TODO var is right once it is"
    assert len(added) == 5


def test_a_scalar_ruled_out_as_a_size_casts_no_doubt_on_the_shapes() -> None:
    text = DRAFT.replace('block_nums = "TODO"', 'block_nums = "1"')
    text = text.replace('dtype = "TODO"', 'dtype = "fp32"')
    lines, _ = spread(text.splitlines())
    assert not _above(lines, "default = ").startswith("# TODO")


def test_a_line_already_under_a_todo_is_left_alone() -> None:
    lines, _ = spread(spread(DRAFT.splitlines())[0])
    assert lines == spread(DRAFT.splitlines())[0]


def test_nullable_finds_tests_against_null_and_not_uses() -> None:
    assert nullable("float m = sinks ? sinks[i] : -INFINITY;", "sinks") == "sinks ?"
    assert nullable("if (mask) { y += mask[i]; }", "mask") is not None
    assert nullable("if (p != nullptr) p[i] = 0;", "p") == "p != nullptr"
    assert nullable("y[i] = x[i] * 2.0f; f(x) ;", "x") is None


SOFTMAX_LIKE = """
__global__ void sm(const float* x, const float* mask, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + (mask ? mask[i] : 0.0f);
}
void go(const float* x, const float* mask, float* y, int n) {
  dim3 block(min(n, 1024));
  if (n % 32 != 0) {
    block.x = 1024;
  }
  sm<<<(n + 1023) / 1024, block>>>(x, mask, y, n);
}
"""


def test_the_drafter_flags_an_optional_input_and_a_block_changed_after_it_is_built(tmp_path: Path) -> None:
    src = tmp_path / "sm.cu"
    src.write_text(SOFTMAX_LIKE)
    result = draft(src, None, tmp_path)
    lines = result.text.splitlines()
    mask = lines.index('name = "mask"')
    role = next(i for i in range(mask, len(lines)) if lines[i].startswith("role = "))
    assert lines[role - 1].startswith("# TODO: mask may be null")
    assert _above(lines, "block = ").startswith("# TODO: block of the launch at sm.cu:11")
    assert "line 9" in _above(lines, "block = ")
    assert any("mask may be null" in c for c in result.checks)
    assert not any("mask may be null" in t for t in result.todos), "a check, not a blocker"


TEMPLATED = """
template <typename T> __global__ void k(const T* x, T* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}
typedef float T;
template <typename U> void go(const U* x, U* y, int n) { k<<<(n + 255) / 256, 256>>>(x, y, n); }
"""


def test_an_unsettled_template_type_is_a_todo_dtype_not_a_typedef_of_its_name(tmp_path: Path) -> None:
    src = tmp_path / "t.cu"
    src.write_text(TEMPLATED)
    text = draft(src, None, tmp_path).text
    assert 'dtype = "fp32"' not in text
    assert "# TODO: element type of x: template parameter T" in text


CALLER_LOCALS = """
struct tensor { long ne[4]; };
__global__ void scale(const float* x, float* y, int ncols) {
  int i = blockIdx.x * ncols + threadIdx.x;
  if (threadIdx.x < ncols) y[i] = 2.0f * x[i];
}
static void scale_cuda(const float* x, float* y, int ncols, int nrows) {
  scale<<<nrows, 256>>>(x, y, ncols);
}
void op(const tensor* src0, const float* x, float* y) {
  const long ne00 = src0->ne[0];
  const long ne01 = src0->ne[1];
  scale_cuda(x, y, ne00, ne01);
}
"""


def test_the_callers_locals_for_the_launchers_sizes_are_shape_variables(tmp_path: Path) -> None:
    src = tmp_path / "op.cu"
    src.write_text(CALLER_LOCALS)
    text = draft(src, "scale", tmp_path).text
    assert 'ne00 = "TODO"' not in text and 'ne01 = "TODO"' not in text
    assert "# note: ne00, ne01: the caller's values for the launcher's sizes" in text
    default = next(ln for ln in text.splitlines() if ln.startswith("default = "))
    assert "ne00 = " in default and "ne01 = " in default


def test_a_pointer_only_dereferenced_is_one_element_with_its_role(tmp_path: Path) -> None:
    src = tmp_path / "s.cu"
    src.write_text(
        "__global__ void upd(float* scale, int* tracker, float f) {\n"
        "  if (*tracker > 0) { *tracker -= 1; } else { *scale = (*scale) * f; }\n}\n"
        "void go(float* s, int* t, float f) { upd<<<1, 1>>>(s, t, f); }\n"
    )
    text = draft(src, None, tmp_path).text
    for name in ("scale", "tracker"):
        entry = text.split(f'name = "{name}"', 1)[1].split("[[args]]", 1)[0]
        assert 'shape = "[1]"' in entry and 'role = "inout"' in entry, entry


def test_a_vector_pointer_drafts_as_its_elements_with_the_lanes_last(tmp_path: Path) -> None:
    src = tmp_path / "v.cu"
    src.write_text(
        "__global__ void ax(const float4* x, float4* y, float a, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) { float4 v = x[i]; v.x *= a; y[i] = v; }\n}\n"
        "void go(const float4* x, float4* y, float a, int n) { ax<<<(n + 255) / 256, 256>>>(x, y, a, n); }\n"
    )
    text = draft(src, None, tmp_path).text
    entry = text.split('name = "x"', 1)[1].split("[[args]]", 1)[0]
    assert 'dtype = "fp32"' in entry and 'shape = "[n, 4]"' in entry, entry
