"""ruff and mypy --strict run as tests, so the README's one test command checks everything.

mypy cannot follow setuptools' editable-install finder, which is what maps ``ir/`` and
``passes/`` to ``ktx.ir`` and ``ktx.passes``; the test therefore builds the installed layout
out of symlinks in a temporary folder and checks that.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINTED = ["ktx", "ir", "passes", "tests", "examples"]
#: mypy's cache outlives the temporary layout (about 25 s of CPU cold, 1 s warm): mypy keys each
#: module by its content hash, so a new folder of symlinks to unchanged files still hits it. Its
#: own folder, apart from a ``mypy`` run at the root, which sees ``ir/`` under another name.
MYPY_CACHE = ROOT / ".mypy_cache" / "installed-layout"


def _tool(name: str) -> str:
    exe = Path(sys.executable).with_name(name)
    if exe.exists():
        return str(exe)
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[dev]')")
    return found


def test_ruff_clean() -> None:
    paths = [p for p in LINTED if (ROOT / p).exists()]
    result = subprocess.run(
        [_tool("ruff"), "check", "--no-cache", *paths], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def installed_layout(dest: Path) -> Path:
    """``dest/ktx`` laid out as installed: ktx/*, ktx/ir -> ir/, ktx/passes -> passes/."""
    pkg = dest / "ktx"
    pkg.mkdir()
    for entry in (ROOT / "ktx").iterdir():
        if entry.name != "__pycache__":
            os.symlink(entry, pkg / entry.name)
    os.symlink(ROOT / "ir", pkg / "ir")
    os.symlink(ROOT / "passes", pkg / "passes")
    return pkg


def test_mypy_strict_clean(tmp_path: Path) -> None:
    pkg = installed_layout(tmp_path)
    result = subprocess.run(
        [
            _tool("mypy"),
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(MYPY_CACHE),
            "-p",
            "ktx",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "MYPYPATH": str(tmp_path)},
    )
    assert result.returncode == 0, result.stdout.replace(str(tmp_path), "") + result.stderr
    assert pkg.exists()
