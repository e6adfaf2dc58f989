"""examples/custom_pass.py: a user pass used from Python and from the CLI (--plugin)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "custom_pass.py"
SILU = ROOT / "kernels" / "silu_and_mul" / "kernel.cu"


def test_custom_pass_from_python_and_in_process_cli() -> None:
    proc = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "[('WARPS', (0, 1, 2, 4, 8, 16))]" in proc.stdout
    assert "  dim3 block(128);" in proc.stdout
    assert "+  dim3 block(256);" in proc.stdout


@pytest.mark.slow
def test_custom_pass_through_the_ktx_command() -> None:
    cmd = [
        sys.executable,
        "-m",
        "ktx",
        "apply",
        "--plugin",
        str(EXAMPLE),
        "--passes",
        "warps",
        str(SILU),
        "--knobs",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert '"name": "WARPS"' in proc.stdout
    conflict = subprocess.run([*cmd[:-1], "--passes", "warps,block-size"], capture_output=True, text=True)
    assert conflict.returncode == 2 and "passes 'warps' and 'block-size' conflict" in conflict.stderr


LIBRARY = ROOT / "examples" / "library_use.py"


@pytest.mark.slow
def test_library_use_runs_on_the_replay_backend(tmp_path: Path) -> None:
    # PYTHONPATH: the checkout's ktx, a regular package (an editable install made before
    # ktx/__init__.py existed maps ``ktx`` as a namespace package until it is reinstalled).
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(LIBRARY), str(tmp_path)], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert "init: silu_and_mul_kernel, 0 TODO(s)" in proc.stdout
    assert "knobs: BLOCK_X[0, 32, 64, 128, 256, 512, 1024], SPLIT[1, 2, 4, 8, 16]" in proc.stdout
    assert "SPLIT=4 launches: dim3 grid(num_tokens, 4);" in proc.stdout
    assert "tune: tokens=1,d=4096: best" in proc.stdout and "(NVIDIA H200)" in proc.stdout
    assert (tmp_path / "tune" / "dispatch.json").is_file()
    assert "optimize: best `split` at round 1, geomean 1.117x" in proc.stdout


def test_the_api_is_exported() -> None:
    import ktx

    assert set(ktx.__all__) >= {"apply", "tune", "optimize", "init", "KtxError"}
    template = ktx.apply(SILU, "split")
    assert [k.name for k in template.space.knobs] == ["SPLIT"]
    with pytest.raises(ktx.KtxError, match="unknown option"):
        ktx.tune(SILU.parent, "split", trails=3)
