"""``ktx init`` on issue 22's launch patterns: header kernels, launch helpers, dispatch macros."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from ktx.cli import main
from ktx.draft import check, draft
from ktx.pipeline import template_for_spec
from ktx.specload import load_spec

REACH = Path(__file__).resolve().parents[1] / "corpus" / "launch_reach"


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("# Drafted by")]


@pytest.mark.parametrize("given", ["scale.cu", "scale.cuh"])
def test_a_header_kernel_is_drafted_from_the_cu_that_launches_it(tmp_path: Path, given: str) -> None:
    folder = tmp_path / "pair"
    shutil.copytree(REACH / "header_pair", folder)
    text = draft(folder / given, None, folder).text
    lines = _lines(text)
    assert 'source = "scale.cuh"' in lines and 'kernel = "scale"' in lines
    assert "# note: scale is defined in scale.cuh and launched from scale.cu:4" in lines
    assert 'grid = ["(n + 255) // 256"]' in lines and 'block = ["256"]' in lines
    # The one TODO (the scalar a) filled, the spec loads and block-size templates the header.
    (folder / "ktx.toml").write_text(text.replace('value = "TODO"', "value = 2.0"))
    assert check(folder) == []
    template = template_for_spec(load_spec(folder), "block-size")
    assert "__launch_bounds__(128) scale(" in template.instantiate({"BLOCK_X": 128})


def test_a_cu_without_the_header_it_launches_from_is_still_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cu = tmp_path / "scale.cu"
    shutil.copy(REACH / "header_pair" / "scale.cu", cu)  # scale.cuh left behind
    assert main(["init", "--print", str(cu)]) == 2
    assert "no __global__ kernel in the file" in capsys.readouterr().err


def test_a_kernel_launched_from_a_sibling_cu_through_its_declaring_header(tmp_path: Path) -> None:
    # bitsandbytes: kernels.cu defines the kernel, kernels.cuh declares it, ops.cu includes
    # <kernels.cuh> (the project builds with -I csrc) and launches it. ktx init kernels.cu
    # drafts the launch from ops.cu instead of refusing "never launched in the file".
    folder = tmp_path / "sibling"
    shutil.copytree(REACH / "sibling_cu", folder)
    d = draft(folder / "kernels.cu", "quant", folder)
    lines = _lines(d.text)
    assert 'source = "kernels.cu"' in lines
    assert "# note: quant is defined in kernels.cu and launched from ops.cu:5" in lines
    assert 'template_args = ["float", "256"]' in lines
    assert 'block = ["256"]' in lines and 'grid = ["(n + 255) // 256"]' in lines
    # without ops.cu the launch is nowhere ktx can see: a stand-in whose values are TODOs
    (folder / "ops.cu").unlink()
    alone = draft(folder / "kernels.cu", "quant", folder)
    assert "quant is launched nowhere ktx can see: give the launch" in alone.todos
    assert 'template_args = ["TODO", "TODO"]' in alone.text and 'grid = ["grid_TODO"]' in alone.text


def test_a_kernel_launched_nowhere_is_drafted_from_its_own_index_use(tmp_path: Path) -> None:
    # FlashInfer's act_and_mul_kernel: in a header, in a namespace, launched only from code the
    # project's Python JIT writes. ktx init drafts it (arrays from the kernel's subscripts, the
    # launch a TODO) instead of refusing; --check then names what is left to give.
    header = tmp_path / "act.cuh"
    header.write_text(
        "namespace act {\n"
        "template <typename T, float (*F)(const float&)>\n"
        "__global__ void act_and_mul(T* __restrict__ out, const T* __restrict__ in, const int d) {\n"
        "  const int64_t t = blockIdx.x;\n"
        "  for (int i = threadIdx.x; i < d; i += blockDim.x)\n"
        "    out[t * d + i] = T(F(float(in[t * 2 * d + i])) * float(in[t * 2 * d + d + i]));\n"
        "}\n"
        "}  // namespace act\n"
    )
    d = draft(header, None, tmp_path)
    lines = _lines(d.text)
    assert 'kernel = "act::act_and_mul"' in lines and 'source = "act.cuh"' in lines
    assert any(line.startswith("# TODO: act_and_mul is launched nowhere in act.cuh") for line in lines)
    assert 'role = "out"' in lines and 'role = "in"' in lines
    # the source is left as it was: the stand-in exists only in the draft's reading
    assert "__ktx_standin" not in header.read_text()


def test_a_params_struct_helper_gives_the_launch_the_caller_set() -> None:
    lines = _lines(draft(REACH / "params_helper.cu", None, REACH).text)
    assert 'grid = ["(rows + 3) // 4"]' in lines and 'block = ["32", "4"]' in lines


def test_cuda_launch_kernel_ex_gives_the_config_fields() -> None:
    lines = _lines(draft(REACH / "launch_ex.cu", None, REACH).text)
    assert 'grid = ["(n + 255) // 256"]' in lines and 'block = ["256"]' in lines


def test_an_unseen_helper_is_not_read_as_a_launch(capsys: pytest.CaptureFixture[str]) -> None:
    # Before issue 22 the draft read the kernel's first argument ``y`` as the block, no TODO.
    assert main(["init", "--print", str(REACH / "unseen_helper.cu")]) == 2
    assert "kernel scale is never launched in the file" in capsys.readouterr().err


def test_a_dispatch_macro_names_every_branch_and_its_guess() -> None:
    d = draft(REACH / "dispatch_macro.cu", None, REACH)
    lines = _lines(d.text)
    at = lines.index('template_args = ["float", "TODO"]')
    todo = lines[at - 1]
    assert todo.startswith(
        "# TODO: template arguments: the dispatch macro LAUNCH_ROW_SCALE (line 12) expands 2 times"
    )
    assert "<float, 4> if cols % 4 == 0 (line 18); <float, 1> else of cols % 4 == 0 (line 20)" in todo
    assert "Guess (the first): <float, 4>" in todo
    grid = next(line for line in lines if line.startswith("# TODO: grid:"))
    block = next(line for line in lines if line.startswith("# TODO: block:"))
    assert re.search(r"guess rows \(the local grid of run_row_scale, .* lines 18, 20\)", grid)
    assert "guess 128 (the local block of run_row_scale" in block
    assert not any(line.startswith("# TODO: dynamic shared memory") for line in lines)  # the body's 0
    assert any("dispatch macro" in t for t in d.todos)
