"""Default shape points meet the launcher's own assertions (ktx.draft.sizing, ir/facts/launcher)."""

from __future__ import annotations

import math
from pathlib import Path

from ktx.ir import parse
from ktx.ir.facts.launcher import LaunchDraft, relations

from ktx.draft.drafter import draft
from ktx.draft.sizing import MAX_POINTS, size_shapes

SRC = """\
__global__ void rowk(const float* x, float* y, int ncols) {
  int row = blockIdx.x;
  for (int c = threadIdx.x; c < ncols; c += 32) y[row * ncols + c] = x[row * ncols + c];
}
static void rowk_cuda(const float* x, float* y, int ncols, int nrows) {
  assert(ncols % 96 == 0);
  rowk<<<nrows, 32>>>(x, y, ncols);
}
void op(const float* x, float* y, int ncols, int nrows) {
  GGML_ASSERT(nrows <= 2 * ncols);
  rowk_cuda(x, y, ncols, nrows);
}
"""


def test_relations_are_read_from_the_launcher_and_its_callers() -> None:
    module = parse(SRC, "r.cu")
    launcher = next(f for f in module.functions if f.name == "rowk_cuda")
    got = relations(module, launcher)
    assert [line for _, line in got] == [6, 10]
    assert "ncols % 96 == 0" in got[0][0] and "nrows <= 2 * ncols" in got[1][0]


def test_points_breaking_a_relation_are_dropped_and_a_divisibility_rounds_the_defaults() -> None:
    launch = LaunchDraft(grid=("nrows",), block=("32",), shared="0", shared_text="0", notes=())
    got = size_shapes(
        {"ncols": [64, 4096], "nrows": [64, 4096]},
        ["ncols", "nrows"],
        [],
        [],
        launch,
        relations=[("ncols % 96 == 0", 6), ("nrows <= 2 * ncols", 10)],
    )
    assert got.values["ncols"] == [96, 4032]
    assert got.points is not None
    assert all(p["ncols"] % 96 == 0 and p["nrows"] <= 2 * p["ncols"] for p in got.points)
    assert {"ncols": 96, "nrows": 4096} not in got.points
    assert any("asserts nrows <= 2 * ncols" in n for n in got.notes)


def test_the_draft_says_why_its_defaults_moved(tmp_path: Path) -> None:
    src = tmp_path / "r.cu"
    src.write_text(SRC)
    text = draft(src, None, tmp_path).text
    assert "ncols: default sizes made multiples of 96" in text
    default = next(ln for ln in text.splitlines() if ln.startswith("default = "))
    assert "ncols = 64" not in default


def test_an_assertion_in_a_branch_without_the_launch_is_no_relation() -> None:
    # ggml's rope: ``if (is_vision) { GGML_ASSERT(n_dims == ne00/2); }``, then the launch for
    # every mode; the vision path's relation must not drop the other paths' points. An
    # assertion in the branch that launches still counts.
    src = SRC.replace(
        "  GGML_ASSERT(nrows <= 2 * ncols);\n",
        "  if (vision) { GGML_ASSERT(nrows == ncols / 2); }\n"
        "  if (ncols > 0) { GGML_ASSERT(nrows <= 2 * ncols); rowk_cuda(x, y, ncols, nrows); }\n",
    ).replace("int nrows) {\n  if (vision)", "int nrows, bool vision) {\n  if (vision)")
    module = parse(src, "r.cu")
    launcher = next(f for f in module.functions if f.name == "rowk_cuda")
    got = [text for text, _ in relations(module, launcher)]
    assert any("ncols % 96 == 0" in t for t in got)
    assert any("nrows <= 2 * ncols" in t for t in got)
    assert not any("nrows == ncols" in t for t in got), got


def test_many_free_variables_keep_the_product_small() -> None:
    # session 10: 15 sizes and strides at two values each were 32768 points, each evaluated
    # at every shrinking step (ggml's cpy_scalar took minutes to draft)
    names = [f"v{i}" for i in range(15)]
    launch = LaunchDraft(grid=("v0",), block=("32",), shared="0", shared_text="0", notes=())
    got = size_shapes({n: [64, 4096] for n in names}, names, [("[v0, v1]", 4)], [], launch)
    assert math.prod(len(v) for v in got.values.values()) <= MAX_POINTS
    assert got.values["v0"] == [64, 4096] and got.values["v14"] == [64]  # the last ones give way
    assert any("one default size each" in n for n in got.notes)
