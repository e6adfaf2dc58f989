"""``ktx init FILE.cu``: draft a kernel folder's ``ktx.toml`` from the source; ``--check DIR``.

The draft reads the kernel's signature, what it reads and writes, how it is indexed and how the
host code launches it (see :mod:`ktx.draft`). Whatever it cannot tell is a ``# TODO:`` line
naming what is missing and where it looked; ``ktx init --check DIR`` lists the ones that still
block a run (exit 1): the TODOs, then the loader's error, a kernel the file does not define,
accesses that reach past their buffer at some shape point, invalid launches (see
:mod:`ktx.check`); or says the spec is ready (exit 0), or, when some access could not be
bounded, lists those instead of saying ready (exit 0). ``source`` points at FILE where it lives,
so the user keeps one copy. Bad input (no kernel, several kernels and no ``--kernel``, no launch
site, a template kernel never instantiated) is one line with the location and exit 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ktx.ir import parse_file
from ktx.ir.errors import KtxError, Location

from ktx.blockers import Blocker
from ktx.check import review
from ktx.commands._checks import kernel_syntax, load_checked_spec, output_folder
from ktx.draft import draft
from ktx.spec import read_spec_text


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("init", help="draft a kernel folder's ktx.toml from a CUDA file (--check: TODOs left)")
    p.add_argument("file", metavar="FILE.cu|DIR", help="the CUDA file (with --check: the kernel folder)")
    p.add_argument("--kernel", metavar="NAME", help="the kernel to draft (needed if the file has several)")
    p.add_argument("--out", metavar="DIR", help="the kernel folder to write (default: FILE's folder)")
    p.add_argument("--print", action="store_true", help="print the draft instead of writing it")
    p.add_argument("--force", action="store_true", help="overwrite an existing ktx.toml")
    p.add_argument("--check", action="store_true", help="list what still blocks a run of DIR/ktx.toml")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.check:
        return run_check(Path(args.file))
    out = Path(args.out) if args.out else Path(args.file).parent
    if not args.print:
        output_folder(out, "--out")
    kernel_syntax(parse_file(args.file), args.kernel)
    result = draft(args.file, args.kernel, out)
    if args.print:
        sys.stdout.write(result.text)
    else:
        target = out / "ktx.toml"
        if target.exists() and not args.force:
            hint = "give --out DIR, or --force to overwrite"
            raise KtxError("ktx.toml exists", Location(str(target)), hint)
        out.mkdir(parents=True, exist_ok=True)
        target.write_text(result.text)
        print(f"wrote {target} ({result.kernel})")
    for todo in result.todos:
        print(f"ktx init: TODO: {todo}", file=sys.stderr)
    for todo in result.checks:
        print(f"ktx init: TODO (check the line drafted under it): {todo}", file=sys.stderr)
    if result.todos:
        print(f"ktx init: {len(result.todos)} TODO(s) block a run; edit them, then ktx init --check DIR",
              file=sys.stderr)  # fmt: skip
    return 0


def check_target(path: Path) -> Path:
    """The kernel folder ``--check`` reviews: PATH itself, or the folder of PATH/ktx.toml; any
    other file or a missing path is one line saying what to give instead."""
    if path.is_dir():
        return path
    if path.is_file() and path.name == "ktx.toml":
        return path.parent
    if not path.exists():
        raise KtxError("no such kernel folder", Location(str(path)), "give the folder that holds ktx.toml")
    if path.suffix in (".cu", ".cuh"):
        hint = f"give the kernel folder; to draft its ktx.toml first: ktx init {path}"
        raise KtxError("--check takes a kernel folder, not a CUDA file", Location(str(path)), hint)
    hint = "give the kernel folder, or its ktx.toml"
    raise KtxError("--check takes a kernel folder, not this file", Location(str(path)), hint)


def run_check(path: Path) -> int:
    folder = check_target(path)
    spec = folder / "ktx.toml"
    if spec.is_file():
        read_spec_text(spec)  # not UTF-8 is one line at the offending byte, not a traceback
    result = review(folder)
    blockers = list(result.blockers)
    for b in blockers:
        print(f"{spec}:{b.line}: blocks a run: {b.message}")
    if not blockers:
        # The spec loads; a kernel ktx cannot read would still fail every run.
        try:
            load_checked_spec(folder)
        except KtxError as exc:
            print(f"{exc.location}: blocks a run: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""))
            blockers = [Blocker(exc.location.line if exc.location else 0, exc.message)]
    if blockers:
        print(f"{spec}: not ready: {len(blockers)} problem(s) above block a run", file=sys.stderr)
        return 1
    for f in result.unproven:
        print(f"{spec}: not proven in bounds: {f}")
    if result.unproven:
        print(
            f"{spec}: the spec loads and no access was found out of bounds at its {result.points} shape "
            f"points, but {len(result.unproven)} could not be bounded (listed above); ktx run {folder} "
            "verifies it on a GPU"
        )
        return 0
    print(
        f"{spec}: ready (the spec loads; every access is in bounds at its {result.points} shape points; "
        f"ktx run {folder} verifies it on a GPU)"
    )
    return 0
