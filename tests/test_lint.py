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
import tempfile
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
        [_tool("ruff"), "check", *paths], cwd=ROOT, capture_output=True, text=True
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


def start_mypy(dest: Path) -> subprocess.Popen[str]:
    """mypy --strict on the installed layout built in ``dest``, started, not awaited."""
    installed_layout(dest)
    command = [_tool("mypy"), "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(MYPY_CACHE)]
    return subprocess.Popen(
        [*command, "-p", "ktx"],
        cwd=dest,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "MYPYPATH": str(dest)},
    )


#: The mypy process :func:`start_early` started for a test item.
_STARTED = pytest.StashKey[tuple[Path, "subprocess.Popen[str]"]]()


def start_early(item: pytest.Item) -> None:
    """Called by tests/conftest.py for every test selected to run, when collection ends: starts
    mypy (30-60 s of CPU on a cold cache, in a process of its own) then, so that it checks on the
    second core while the suite, one process, runs on the first; the test only awaits it.

    Not under pytest-xdist: every worker collects every test, so each would start one mypy on
    the same cache. There tests/conftest.py hands this module out first instead, and the test
    starts mypy itself."""
    if item.name != "test_mypy_strict_clean" or hasattr(item.config, "workerinput"):
        return
    try:
        _tool("mypy")
    except pytest.skip.Exception:
        return  # the test says so itself when it runs
    dest = Path(tempfile.mkdtemp(prefix="ktx-mypy-"))
    proc = start_mypy(dest)
    item.stash[_STARTED] = (dest, proc)

    def cleanup() -> None:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        shutil.rmtree(dest, ignore_errors=True)

    item.config.add_cleanup(cleanup)


def test_mypy_strict_clean(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    dest, proc = request.node.stash.get(_STARTED, None) or (tmp_path, start_mypy(tmp_path))
    stdout, stderr = proc.communicate()
    assert proc.returncode == 0, stdout.replace(str(dest), "") + stderr
    assert (dest / "ktx").exists()
