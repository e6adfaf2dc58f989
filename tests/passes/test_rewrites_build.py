"""Rewrites that once applied but did not build (issue 17, found on foreign code) now compile.

Each case instantiates a golden's kernel with a non-default config and compiles the result
with nvcc for sm_90 (``-c``, host code included, so launcher rewrites are checked too):

* coarsen on a 2-D grid passed as a ``dim3`` it cannot see into (``(grid + 1) / 2``);
* coarsen and block-size on a launch inside a multi-line ``#define`` (the whole call was
  divided: ``KTX_CDIV takes two arguments``);
* cache-hints on ``&(p[i])``, a reference bound to an element, and a ``volatile`` pointer;
* vectorize and split on loops that step by ``WARP_SIZE`` under a 2-D block whose x it is, and
  by a template block size a ``cub::BlockReduce`` is instantiated with (issue 22, item 3).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from ktx.ir import parse_file

from ktx.pipeline import run

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
NVCC = shutil.which("nvcc")

CASES = [
    ("coarsen/dim3_grid.cu", "coarsen", {"COARSEN": 2}),
    ("coarsen/macro_launch.cu", "coarsen", {"COARSEN": 4}),
    ("block_size/macro_launch.cu", "block-size", {"BLOCK_X": 128}),
    ("cache_hints/lvalues.cu", "cache-hints", {"CACHE_LD_IN": 1, "CACHE_ST_OUT": 1}),
    ("block_size/template_block.cu", "block-size", {"BLOCK_X": 128}),
    ("block_size/warp_constant.cu", "block-size", {"BLOCK_Y": 8}),
    ("block_size/braced_block.cu", "block-size", {"BLOCK_Y": 4}),
    ("block_size/braced_block_xy.cu", "block-size", {"BLOCK_X": 64, "BLOCK_Y": 2}),
    ("block_size/grid_ceil_literal.cu::add_one", "block-size", {"BLOCK_X": 512}),
    ("block_size/grid_ceil_literal.cu::add_two", "block-size", {"BLOCK_X": 64}),
    # issue 22 item 3: loops stepping by a name the facts equate with blockDim.x
    ("vectorize/warp_x_2d.cu", "vectorize", {"VEC_L0": 4, "VEC_L2": 4}),
    ("split/warp_x_2d.cu", "split", {"SPLIT": 4}),
    ("vectorize/cub_block.cu", "vectorize", {"VEC_L0": 4, "VEC_L1": 2}),
    ("vectorize/ldg_macro.cu", "vectorize", {"VEC_L0": 4}),
    ("vectorize/offset_start.cu", "vectorize", {"VEC_L0": 4, "VEC_L1": 2}),
]


#: CUB's headers take a minute of nvcc on a loaded two-core machine: run with the slow tests
HEAVY = {"vectorize/cub_block.cu"}


@pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize(
    ("golden", "pipeline", "config"),
    [pytest.param(*c, marks=pytest.mark.slow) if c[0] in HEAVY else c for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_instantiated_rewrite_compiles(
    tmp_path: Path, golden: str, pipeline: str, config: dict[str, int]
) -> None:
    path, _, kernel = golden.partition("::")  # ``file.cu::kernel`` where a file has several
    template = run(parse_file(GOLDEN / path), pipeline, kernel=kernel or None)
    assert set(config) <= {k.name for k in template.space.knobs}, "the pass exposes the knobs"
    source = tmp_path / "case.cu"
    source.write_text(template.instantiate(config) + "\n")
    assert NVCC is not None
    result = subprocess.run(
        [NVCC, "-std=c++17", "-arch=sm_90", "-c", str(source), "-o", str(tmp_path / "case.o")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


def test_grid_of_a_dim3_parameter_is_divided_through_x() -> None:
    template = run(parse_file(GOLDEN / "coarsen/dim3_grid.cu"), "coarsen")
    text = template.instantiate({"COARSEN": 2})
    assert "fill<<<dim3((grid.x + 1) / 2, grid.y, grid.z), 256>>>(y, n);" in text
    assert "<<<(grid + 1) / 2" not in text


@pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize(
    ("pipeline", "config"), [("rows-per-block", {"ROWS": 4}), ("vectorize", {"VEC_L0": 4, "VEC_L2": 2})]
)
def test_header_block_size_rewrites_compile(tmp_path: Path, pipeline: str, config: dict[str, int]) -> None:
    """A block size from a header the file includes (ggml's WARP_SIZE): the header stands beside it."""
    template = run(parse_file(GOLDEN / "rows_per_block" / "dim3_trailing_ones.cu"), pipeline)
    assert set(config) <= {k.name for k in template.space.knobs}, "the pass exposes the knobs"
    (tmp_path / "common.cuh").write_text("#pragma once\n#define WARP_SIZE 32\n")
    source = tmp_path / "case.cu"
    source.write_text(template.instantiate(config) + "\n")
    assert NVCC is not None
    result = subprocess.run(
        [NVCC, "-std=c++17", "-arch=sm_90", "-c", str(source), "-o", str(tmp_path / "case.o")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
