"""``ktx report RUN_DIR``: Markdown, self-contained HTML and a patch from a ``ktx optimize`` run.

Writes ``report.md`` (with ``plots/*.png``), ``report.html`` (plots embedded, no other files
needed) and ``ktx.patch`` (the kernel file and the dispatch header, for ``patch -p1``) into
``RUN_DIR/report`` or ``--out``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ktx.ir.errors import KtxError, Location

from ktx.commands._checks import output_folder


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("report", help="write the report (Markdown, HTML, patch) of a ktx optimize run")
    p.add_argument("run_dir", metavar="RUN_DIR", help="the --out folder of ktx optimize")
    p.add_argument(
        "--out", type=Path, default=None, metavar="DIR", help="where to write (default RUN_DIR/report)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ktx.report import make_report

    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        what = "is a file, not a run folder" if run_dir.exists() else "no such run folder"
        raise KtxError(what, Location(str(run_dir)), "give the --out folder of ktx optimize")
    if args.out is not None:
        output_folder(args.out, "--out")
    files = make_report(run_dir, args.out)
    print(f"wrote {files.markdown}")
    print(f"wrote {files.html}")
    if files.patch is not None:
        print(f"wrote {files.patch}")
    else:
        print("no patch: no round beat the original kernel")
    return 0
