"""``ktx report RUN_DIR``: Markdown, self-contained HTML and a patch from a ``ktx optimize`` run."""

from __future__ import annotations

import argparse

from ktx.errors import KtxError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("report", help="write the report (Markdown, HTML, patch) of a ktx optimize run")
    p.add_argument("run_dir", metavar="RUN_DIR", help="the --out folder of ktx optimize")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raise KtxError("ktx report is not written yet")
