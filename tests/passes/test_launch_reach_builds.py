"""Sampled candidates of block-size, split and rows-per-block build on issue 22's launch patterns.

Each corpus file of ``tests/corpus/launch_reach`` builds as it is (checked first); every pass
that applies is instantiated at its default and at sampled configs, and each candidate is
compiled with nvcc for sm_90 (``-c``, host code included, so the launch rewrites are checked).
The issue saw 5 of its sampled candidates fail; the measure here is 0 failures.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from ktx.ir import parse_file
from ktx.ir.launch import LaunchMapping

from ktx.pipeline import run

REACH = Path(__file__).resolve().parents[1] / "corpus" / "launch_reach"
NVCC = shutil.which("nvcc")
SEEDS = (0, 1, 2)
#: The dispatch macro names ``grid``/``block`` locals the file mapping cannot follow; a spec
#: would give this mapping (``[launch]``), which rows-per-block needs.
MACRO_MAPPING = LaunchMapping(grid=("rows",), block=("128",))
HEADER_MAPPING = LaunchMapping(grid=("(n + 255) // 256",), block=("256",))

CASES = [
    ("params_helper.cu", "block-size", None),
    ("launch_ex.cu", "block-size", None),
    ("launch_ex.cu", "rows-per-block", None),
    ("dispatch_macro.cu", "block-size", None),
    ("dispatch_macro.cu", "split", None),
    ("dispatch_macro.cu", "split", MACRO_MAPPING),
    ("dispatch_macro.cu", "rows-per-block", MACRO_MAPPING),
    # The header's kernel, with the mapping ktx init drafts from scale.cu's launch.
    ("header_pair/scale.cuh", "block-size", HEADER_MAPPING),
]


def _compile(tmp_path: Path, name: str, text: str) -> str | None:
    """nvcc's errors for ``text``, or None when it builds."""
    assert NVCC is not None
    source = tmp_path / f"{name}.cu"
    source.write_text(text + "\n")
    result = subprocess.run(
        [NVCC, "-std=c++17", "-arch=sm_90", "-c", str(source), "-o", str(tmp_path / f"{name}.o")],
        capture_output=True,
        text=True,
        check=False,
    )
    return None if result.returncode == 0 else result.stderr


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize(
    ("file", "pipeline", "mapping"), CASES, ids=[f"{c[0]}-{c[1]}{'-spec' if c[2] else ''}" for c in CASES]
)
def test_sampled_candidates_build(
    tmp_path: Path, file: str, pipeline: str, mapping: LaunchMapping | None
) -> None:
    assert _compile(tmp_path, "original", (REACH / file).read_text()) is None, "the original builds"
    template = run(parse_file(REACH / file), pipeline, mapping=mapping)
    assert template.space.knobs, f"{pipeline} applies to {file}"
    configs = [{k.name: k.default for k in template.space.knobs}]
    configs += [template.space.sample(seed) for seed in SEEDS]
    failures = []
    for i, config in enumerate(configs):
        text = template.instantiate(config)
        errors = _compile(tmp_path, f"candidate{i}", text)
        if errors is not None:
            failures.append(f"{config}: {errors.strip().splitlines()[0]}")
    assert failures == []


def test_the_params_helper_call_keeps_the_kernels_arguments() -> None:
    # Issue 22: block-size rewrote the helper's argument it read as the block (a kernel argument).
    template = run(parse_file(REACH / "params_helper.cu"), "block-size")
    text = template.instantiate({"BLOCK_Y": 8})
    assert "  launch(row_sum, params, out, in, rows, cols);" in text
    assert "  params.block_dim = dim3(32, 8);" in text


def test_split_sets_the_y_of_a_dispatch_macros_grid() -> None:
    text = run(parse_file(REACH / "dispatch_macro.cu"), "split").instantiate({"SPLIT": 4})
    assert "<<<dim3(grid.x, 4, grid.z), block, 0, stream>>>" in text
    assert "dim3(grid, " not in text


def test_rows_per_block_divides_the_x_of_a_dispatch_macros_grid() -> None:
    text = run(parse_file(REACH / "dispatch_macro.cu"), "rows-per-block", mapping=MACRO_MAPPING).instantiate(
        {"ROWS": 2}
    )
    assert "<<<dim3((grid.x) / 2, grid.y, grid.z), dim3(block.x, 2, block.z), 0, stream>>>" in text
