"""The drafter's ``-I`` folders: the project's headers the kernel's file includes, found above it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktx.draft import includes
from ktx.draft.drafter import draft
from ktx.draft.includes import build_defines, define_flags, include_dirs, include_flags

KERNEL = """#include "common.cuh"
#include <cuda_fp16.h>
#ifdef USE_HIP
#include <hip/hip_runtime.h>
#endif
__global__ void scale(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] *= 2.0f; }
void launch(float* x, int n) { scale<<<1, 256>>>(x, n); }
"""


def _project(root: Path, extra: str = "") -> Path:
    """proj/src/cuda/k.cu includes common.cuh (beside it), which includes "proj.h" (proj/include)."""
    (root / "proj" / "include").mkdir(parents=True)
    (root / "proj" / "src" / "cuda").mkdir(parents=True)
    (root / "proj" / "include" / "proj.h").write_text("#pragma once\n#define PROJ 1\n")
    (root / "proj" / "src" / "cuda" / "common.cuh").write_text(f'#pragma once\n#include "proj.h"\n{extra}')
    kernel = root / "proj" / "src" / "cuda" / "k.cu"
    kernel.write_text(KERNEL)
    return kernel


def test_a_header_included_from_a_header_is_found_in_the_projects_include_folder(tmp_path: Path) -> None:
    found = include_dirs(_project(tmp_path))
    assert found.dirs == ((tmp_path / "proj" / "include").resolve(),)
    assert found.missing == ()  # <hip/hip_runtime.h> is not installed and not a TODO


def test_the_flags_are_relative_to_the_spec_folder(tmp_path: Path) -> None:
    kernel = _project(tmp_path)
    out = tmp_path / "specs" / "scale"
    out.mkdir(parents=True)
    flags, todo = include_flags(kernel, out)
    assert flags == ["-I../../proj/include"]
    assert todo is None


def test_a_quoted_header_found_nowhere_is_a_todo_that_names_it(tmp_path: Path) -> None:
    kernel = _project(tmp_path, '#include "generated/config.h"\n')
    flags, todo = include_flags(kernel, kernel.parent)
    assert flags == ["-I../../include"]
    assert todo is not None and "generated/config.h" in todo


def test_the_draft_carries_the_include_flag_and_the_todo(tmp_path: Path) -> None:
    kernel = _project(tmp_path, '#include "generated/config.h"\n')
    text = draft(kernel, "scale").text
    flags = next(ln for ln in text.splitlines() if ln.startswith("flags = "))
    assert '"-I../../include"' in flags
    before = text.splitlines()[text.splitlines().index(flags) - 1]
    assert before.startswith("# TODO: compile flags") and "generated/config.h" in before


def test_an_uninstalled_header_a_plain_build_reaches_is_a_todo(tmp_path: Path) -> None:
    kernel = _project(tmp_path, "#include <torch/extension.h>\n")
    flags, todo = include_flags(kernel, kernel.parent)
    assert flags == ["-I../../include"]
    assert todo is not None and "<torch/extension.h>" in todo


def test_an_angle_bracket_header_of_the_project_is_found_and_flagged_by_folder(tmp_path: Path) -> None:
    kernel = _project(tmp_path, "#include <helper_proj.h>\n")
    (tmp_path / "proj" / "common").mkdir()
    (tmp_path / "proj" / "common" / "helper_proj.h").write_text("#pragma once\n")
    flags, todo = include_flags(kernel, kernel.parent)
    assert flags == ["-I../../include", "-I../../common"]
    assert todo is None


def test_a_macro_the_files_test_is_a_check_and_a_build_files_define_is_drafted(tmp_path: Path) -> None:
    kernel = _project(tmp_path, "#ifdef BF16_AVAILABLE\n#endif\n#ifdef USE_FAST\n#endif\n")
    assert include_flags(kernel, kernel.parent) == (["-I../../include"], None)  # nothing blocks
    flags, check = define_flags(kernel)
    assert flags == [] and check is not None and "BF16_AVAILABLE, USE_FAST" in check
    (tmp_path / "proj" / "setup.py").write_text('cc_flag = ["-O3", "-DBF16_AVAILABLE"]\n')
    flags, check = define_flags(kernel)
    assert flags == ["-DBF16_AVAILABLE"]
    assert check is not None and "setup.py:1" in check and "USE_FAST" in check
    text = draft(kernel, "scale").text
    assert '"-I../../include", "-DBF16_AVAILABLE"]' in text


def test_build_defines_reads_cmake_definitions(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "CMakeLists.txt").write_text("project(p)\nadd_compile_definitions(GGML_CUDA_F16 K=2)\n")
    got = build_defines(tmp_path / "src" / "k.cu")
    assert got["GGML_CUDA_F16"][0] == "-DGGML_CUDA_F16"
    assert got["K"] == ("-DK=2", "../CMakeLists.txt:2")


def test_a_header_only_ktx_own_folders_hold_is_a_todo_not_an_include(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A kernel file inside ktx's tree (the benchmark's fetched projects) that lacks a header
    # ktx's own stubs hold: a user's project has no such folder, so the draft must say so.
    kernel = _project(tmp_path, "#include <torch/extension.h>\n")
    (tmp_path / "proj" / "README.md").write_text("the project's root: the search stops here\n")
    stubs = tmp_path / "proj" / "stubs"
    (stubs / "torch").mkdir(parents=True)
    (stubs / "torch" / "extension.h").write_text("#pragma once\n")
    assert include_flags(kernel, kernel.parent)[0] == ["-I../../include", "-I../../stubs"]
    monkeypatch.setattr(includes, "_OWN", (stubs.resolve(),))
    flags, todo = include_flags(kernel, kernel.parent)
    assert flags == ["-I../../include"]
    assert todo is not None and "<torch/extension.h>" in todo


def test_ktx_own_folders_are_its_code_scripts_and_tests() -> None:
    root = Path(includes.__file__).resolve().parents[2]
    assert (root / "scripts") in includes._OWN and (root / "ktx") in includes._OWN
    # a kernel file in one of them (a test's corpus) still finds that folder's headers
    assert not includes._own(root / "tests" / "corpus", root / "tests" / "corpus" / "x")
    assert includes._own(root / "scripts" / "corpus_stubs", root / "benchmarks" / "realcode")


def test_another_ktx_checkouts_folders_are_not_a_projects(tmp_path: Path) -> None:
    # the upward search walks folders beside the project (no root marker): a ktx clone there
    # holds stubs that are not the project's
    # two folders deeper, so the search (4 levels up) stays out of other tests' folders
    root = tmp_path / "a" / "b"
    kernel = _project(root, "#include <torch/extension.h>\n")
    clone = root / "ktx-clone"
    (clone / "ktx" / "draft").mkdir(parents=True)
    (clone / "ktx" / "draft" / "includes.py").write_text("")
    (clone / "scripts" / "corpus_stubs" / "torch").mkdir(parents=True)
    (clone / "scripts" / "corpus_stubs" / "torch" / "extension.h").write_text("#pragma once\n")
    flags, todo = include_flags(kernel, kernel.parent)
    assert not any("corpus_stubs" in f for f in flags)
    assert todo is not None and "<torch/extension.h>" in todo
