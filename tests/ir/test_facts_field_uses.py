"""The fields of a by-value struct a kernel compares as bounds (``ktx.ir.facts.field_uses``),
and ``ktx init``'s use of them: each such integer field, where the launcher's value is not
followed, is drafted as a shape variable of its own name under a TODO."""

from __future__ import annotations

from pathlib import Path

from ktx.ir import parse_file
from ktx.ir.facts.field_uses import bounded_fields
from ktx.ir.facts.params import KernelBody, read_kernel

from ktx.draft.drafter import draft

SRC = """\
struct Params { int ncols; int rows; long stride; float scale; };
template <int NCOLS>
__global__ void k(float* y, const float* x, const Params p) {
  const int ncols = NCOLS == 0 ? p.ncols : NCOLS;
  const long row = blockIdx.x;
  if (row >= p.rows) return;
  for (int c = threadIdx.x; c < ncols; c += blockDim.x)
    y[row * p.stride + c] = x[row * p.stride + c] * p.scale;
}
void go(float* y, const float* x, Params p, int n) { k<0><<<n, 256>>>(y, x, p); }
"""


def _kernel(tmp_path: Path, text: str = SRC) -> KernelBody:
    src = tmp_path / "k.cu"
    src.write_text(text)
    module = parse_file(src)
    fn = next(f for f in module.kernels if f.name == "k")
    return read_kernel(module, fn)


def test_compared_fields_directly_and_through_a_chosen_local(tmp_path: Path) -> None:
    got = bounded_fields(_kernel(tmp_path), "p")
    assert set(got) == {"ncols", "rows"}  # not stride (offsets only), not scale
    assert got["rows"] == "row >= p.rows"


def test_a_local_computed_from_a_field_is_no_alias(tmp_path: Path) -> None:
    text = SRC.replace("const int ncols = NCOLS == 0 ? p.ncols : NCOLS;", "const int ncols = p.ncols / 2;")
    assert set(bounded_fields(_kernel(tmp_path, text), "p")) == {"rows"}


def test_the_draft_makes_bounded_fields_shape_variables_under_a_todo(tmp_path: Path) -> None:
    src = tmp_path / "k.cu"
    src.write_text(SRC)
    text = draft(src, "k", tmp_path).text
    lines = text.splitlines()
    for name in ("ncols", "rows"):
        at = lines.index(f'fields.{name} = "{name}"')
        assert lines[at - 1].startswith(f"# TODO: value of p.{name}: the launcher's value is not followed")
    assert 'fields.stride = "TODO"' in lines and 'fields.scale = "TODO"' in lines
    default = next(ln for ln in lines if ln.startswith("default ="))
    assert "ncols" in default and "rows" in default  # shape variables, not [vars] TODOs
    assert 'ncols = "TODO"' not in text
