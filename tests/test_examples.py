"""examples/custom_pass.py: a user pass used from Python and from the CLI (--plugin)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "custom_pass.py"
SILU = ROOT / "kernels" / "silu_and_mul" / "kernel.cu"


def test_custom_pass_from_python_and_in_process_cli() -> None:
    proc = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "[('WARPS', (0, 1, 2, 4, 8, 16))]" in proc.stdout
    assert "  dim3 block(128);" in proc.stdout
    assert "+  dim3 block(256);" in proc.stdout


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
