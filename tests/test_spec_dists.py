"""Issue 22's inputs: data-dependent indices drawn in a range (``int:LOW..HIGH``,
``distinct:LOW..HIGH``) and pointers the project passes as null (``dist = "null"``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ktx.ir.errors import KtxError

from ktx.measure.verify import Draws, draw, python_reference, seeded_inputs
from ktx.spec import ShapePoint
from ktx.specload import load_spec

SOURCE = """\
__global__ void rope(float* out, const float* cache, const long* positions, const int* slots,
                     const float* scale, int n) {
  int i = threadIdx.x;
  if (i < n) out[i] = cache[positions[i]] + slots[i] + (scale ? scale[0] : 0.f);
}
"""

SPEC = """\
kernel = "rope"

[vars]
rows = "max_pos + 1"

[[args]]
name = "out"
dtype = "fp32"
shape = "[n]"
role = "out"

[[args]]
name = "cache"
dtype = "fp32"
shape = "[rows]"

[[args]]
name = "positions"
dtype = "int64"
shape = "[n]"
dist = "{positions}"

[[args]]
name = "slots"
dtype = "int32"
shape = "[n]"
dist = "{slots}"

[[args]]
name = "scale"
dtype = "fp32"
dist = "null"

[[args]]
name = "n"
dtype = "int32"
value = "n"

[shapes]
default = [{{n = 64, max_pos = 7}}, {{n = 100, max_pos = 300}}]

[launch]
grid = ["1"]
block = ["n"]
"""


def write(tmp_path: Path, positions: str = "int:0..rows", slots: str = "distinct:0..2 * n") -> Path:
    (tmp_path / "kernel.cu").write_text(SOURCE)
    (tmp_path / "ktx.toml").write_text(SPEC.format(positions=positions, slots=slots))
    return tmp_path


def test_indices_are_drawn_inside_their_range_at_every_shape(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path))
    for n, max_pos in ((64, 7), (100, 300)):
        point = ShapePoint((("n", n), ("max_pos", max_pos)))
        arrays = seeded_inputs(spec, point, seed=3)
        positions, slots = arrays["positions"], arrays["slots"]
        assert positions.dtype == np.int64 and slots.dtype == np.int32
        assert positions.min() >= 0 and positions.max() <= max_pos  # [0, rows)
        assert len(set(positions.tolist())) > 1  # drawn, not a constant
        assert slots.min() >= 0 and slots.max() < 2 * n
        assert len(set(slots.tolist())) == n  # distinct: no two tokens share a slot
        assert "scale" not in arrays  # null: no buffer


def test_a_null_pointer_is_no_buffer_and_the_reference_sees_none(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path))
    scale = next(a for a in spec.args if a.name == "scale")
    assert scale.null and not scale.is_array
    point = spec.shape_set().points[0]
    seen: dict[str, object] = {}

    def reference(inputs: dict[str, object], shape: dict[str, int]) -> dict[str, np.ndarray]:
        seen.update(inputs)
        return {"out": np.zeros(shape["n"])}

    python_reference(spec, point, seeded_inputs(spec, point, 0), reference)
    assert seen["scale"] is None and seen["n"] == 64


@pytest.mark.parametrize(
    ("positions", "slots", "message"),
    [
        ("int:5..5", "int:0..n", "empty range"),
        ("int:0..rows", "distinct:0..n // 2", "fewer than the"),
        ("int:0..nope", "int:0..n", "nope"),
        ("int:0..", "int:0..n", "int:LOW..HIGH"),
        ("int0..4", "int:0..n", "unknown distribution"),
    ],
)
def test_bad_ranges_are_refused_at_the_dist_line(
    tmp_path: Path, positions: str, slots: str, message: str
) -> None:
    with pytest.raises(KtxError, match=message) as err:
        load_spec(write(tmp_path, positions, slots))
    assert err.value.location is not None and err.value.location.line in (21, 27)  # the dist lines


def test_without_a_shape_priming_draws_from_zero(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path))
    positions = next(a for a in spec.args if a.name == "positions")
    values = draw(positions, (4, 16), Draws(0))
    assert values.shape == (4, 16) and int(values.max()) == 0


def test_the_range_is_part_of_the_cache_context(tmp_path: Path) -> None:
    """Results measured with one index range are not reused for another."""
    from ktx.search.tunable import spec_context

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one = spec_context(load_spec(write(tmp_path / "a")))
    two = spec_context(load_spec(write(tmp_path / "b", "int:1..rows")))
    assert one["args"][2]["dist"] == ["int", [], ["0", "rows"]]
    assert one != two


def test_a_null_pointer_is_no_contradiction_of_the_kernels_pointer_parameter(tmp_path: Path) -> None:
    """``dist = "null"`` has no shape, so the spec's arg is not an array: ``--check`` must not read
    it as a scalar given for the kernel's pointer (ggml soft_max's mask and sinks are null)."""
    from ktx.speccheck import contradictions

    folder = write(tmp_path)
    text = (folder / "ktx.toml").read_text()
    spec = load_spec(folder / "ktx.toml")
    found = [c.message for c in contradictions(spec, text)]
    assert not [m for m in found if "scale" in m and "is a scalar" in m], found
    # a real scalar for a pointer is still refused
    bad = text.replace('dist = "null"', 'value = "1.0"')
    (folder / "ktx.toml").write_text(bad)
    found = [c.message for c in contradictions(load_spec(folder / "ktx.toml"), bad)]
    assert any("scale is a scalar (it has a value)" in m for m in found), found
