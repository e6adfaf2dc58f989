"""Is ``ktx apply --passes PIPELINE`` byte-identical between two checkouts on known kernels?

A pass that learns a new form must not change what it already writes. This runs
``ktx apply`` (template and remarks) on every kernel of llm.c's ``dev/cuda`` files and the
repository's ``kernels/*/kernel.cu`` with this checkout's ktx and with ``--base``'s (e.g. a
worktree of main: ``git -C /work/main worktree add --detach /work/wt-base main``), and lists
the kernels whose output differs.

    .venv/bin/python scripts/apply_identical.py --base /work/wt-base --passes block-size
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def _files() -> list[Path]:
    llmc = sorted((HERE.parent / "shared" / "llmc").rglob("*.cu"))
    return llmc + sorted(HERE.glob("kernels/*/kernel.cu"))


def _dump(pipeline: str) -> dict[str, str]:
    """Every kernel's ``ktx apply`` output (stdout, then stderr, then the exit code)."""
    from ktx.ir import ParseError, parse_file

    from ktx.cli import main

    out: dict[str, str] = {}
    for path in _files():
        try:
            kernels = [f.name for f in parse_file(path).functions if f.is_kernel]
        except ParseError as err:
            out[str(path)] = f"parse error: {err}"
            continue
        for kernel in kernels:
            so, se = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
                try:
                    rc = main(["apply", "--passes", pipeline, "--kernel", kernel, str(path)])
                except SystemExit as exc:
                    rc = exc.code if isinstance(exc.code, int) else 1
            out[f"{path}::{kernel}"] = f"{so.getvalue()}\n--stderr--\n{se.getvalue()}\n--rc {rc}"
    return out


def _layout(root: Path) -> Path:
    """``root``'s sources laid out as the installed ``ktx`` package (``ir``/``passes`` inside)."""
    layout = Path(tempfile.mkdtemp(prefix="ktx-root-"))
    pkg = layout / "ktx"
    pkg.mkdir()
    for entry in (root / "ktx").iterdir():
        if entry.name != "__pycache__":
            (pkg / entry.name).symlink_to(entry)
    (pkg / "ir").symlink_to(root / "ir")
    (pkg / "passes").symlink_to(root / "passes")
    return layout


def _run(root: Path, pipeline: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(_layout(root))}
    done = subprocess.run(
        [sys.executable, __file__, "--dump", "--passes", pipeline],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, str] = json.loads(done.stdout)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="the checkout to compare against")
    parser.add_argument("--passes", default="block-size")
    parser.add_argument("--dump", action="store_true", help="(internal) print this ktx's outputs")
    args = parser.parse_args()
    if args.dump:
        print(json.dumps(_dump(args.passes)))
        return 0
    if args.base is None:
        parser.error("--base DIR is needed")
    mine, base = _run(HERE, args.passes), _run(args.base.resolve(), args.passes)
    differ = sorted(k for k in set(mine) | set(base) if mine.get(k) != base.get(k))
    here, there = (sum("rewritten:" in v for v in out.values()) for out in (mine, base))
    print(f"{len(mine)} kernels; rewritten here {here}, in {args.base} {there}; {len(differ)} differ")
    for key in differ:
        was = "rewritten" if "rewritten:" in base.get(key, "") else "skipped"
        now = "rewritten" if "rewritten:" in mine.get(key, "") else "skipped"
        print(f"  differs ({was} there, {now} here): {key}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
