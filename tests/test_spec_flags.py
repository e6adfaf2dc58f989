"""Issue 22: paths in ``[compile] flags`` are relative to the spec's folder, not the cwd."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ktx.spec import flag_paths
from ktx.specload import load_spec


def test_include_folders_resolve_against_the_spec_folder(tmp_path: Path) -> None:
    base = tmp_path.resolve()
    (tmp_path / "pre.h").write_text("using namespace vllm;\n")
    got = flag_paths(
        ["-std=c++17", "-I../csrc", "-I", "inc", "--include-path=a/b", "-isystem", "sys", "-I/abs/x",
         "-include", "pre.h", "--pre-include=cuda_fp16.h", "-include", "missing.h", "-DX=1"],
        tmp_path,
    )  # fmt: skip
    assert got == (
        "-std=c++17", f"-I{base.parent / 'csrc'}", "-I", str(base / "inc"), f"--include-path={base / 'a/b'}",
        "-isystem", str(base / "sys"), "-I/abs/x", "-include", str(base / "pre.h"),
        "--pre-include=cuda_fp16.h", "-include", "missing.h", "-DX=1",
    )  # fmt: skip


def test_a_loaded_spec_holds_absolute_include_paths_wherever_ktx_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "kernels" / "k"
    folder.mkdir(parents=True)
    (folder / "kernel.cu").write_text("__global__ void k(float* out) { out[0] = 1.f; }\n")
    (folder / "ktx.toml").write_text(
        'kernel = "k"\n[[args]]\nname = "out"\ndtype = "fp32"\nshape = "[n]"\nrole = "out"\n'
        '[shapes]\ndefault = [{n = 4}]\n[launch]\ngrid = ["1"]\nblock = ["n"]\n'
        '[compile]\nflags = ["-I../../include"]\n'
    )
    monkeypatch.chdir(tmp_path)
    spec = load_spec(os.path.join("kernels", "k"))
    assert spec.flags == (f"-I{tmp_path.resolve() / 'include'}",)
