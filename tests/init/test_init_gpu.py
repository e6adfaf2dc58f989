"""The drafts that need no edit run: ``ktx run`` verifies and times the original kernel of each
on a GPU (the suite's ready kernels, and llm.c's naive ones read in place, with one added line:
the include path of benchmarks/llmc/stubs for the cuBLAS names common.h declares).

GPU host: ``source scripts/gpu_env.sh && python3 -m pytest -q tests/init/test_init_gpu.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktx.cli import main
from ktx.draft import draft

from .test_foreign import FOREIGN, FOREIGN_READY
from .test_init import LLMC, LLMC_KERNELS, READY, ROOT

try:
    import cupy as cp

    HAVE_GPU = cp.cuda.runtime.getDeviceCount() > 0
except Exception:
    HAVE_GPU = False

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not HAVE_GPU, reason="needs CuPy and a CUDA GPU")]
STUBS = ROOT / "benchmarks" / "llmc" / "stubs"


def run_draft(tmp_path: Path, source: Path, kernel: str | None, include: Path | None = None) -> int:
    out = tmp_path / "k"
    out.mkdir()
    text = draft(source, kernel, out).text
    if include is not None:  # the one edited line
        text = text.replace('"--expt-relaxed-constexpr"]', f'"--expt-relaxed-constexpr", "-I{include}"]')
    (out / "ktx.toml").write_text(text)
    return main(["run", str(out), "--shape", "quick", "--rounds", "3"])


@pytest.mark.parametrize("name", sorted(n for n in READY if (ROOT / "kernels" / n).is_dir()))
def test_suite_draft_runs(name: str, tmp_path: Path) -> None:
    assert run_draft(tmp_path, ROOT / "kernels" / name / "kernel.cu", None) == 0


@pytest.mark.parametrize("name", sorted(n for n in READY if n in LLMC_KERNELS))
def test_llmc_draft_runs(name: str, tmp_path: Path) -> None:
    source = LLMC / f"{name}.cu"
    if not source.is_file():
        pytest.skip("no llm.c")
    assert run_draft(tmp_path, source, LLMC_KERNELS[name], STUBS) == 0


@pytest.mark.parametrize("name", FOREIGN_READY)
def test_foreign_draft_runs(name: str, tmp_path: Path) -> None:
    # Deduced template arguments, the dynamic shared memory, [vars] for the launcher's locals
    # and grid-stride extents: the original kernel compiles, launches and runs clean.
    assert run_draft(tmp_path, FOREIGN / f"{name}.cu", None) == 0
