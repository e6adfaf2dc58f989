"""The ``ktx`` command line.

Each subcommand lives in its own module under :mod:`ktx.commands` and exposes
``register(subparsers)``; this module only wires them together and turns
:class:`~ktx.ir.errors.KtxError` into a one-line message and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from collections.abc import Sequence

from ktx.ir.errors import KtxError

#: Subcommand modules, in the order ``ktx --help`` lists them.
COMMANDS: tuple[str, ...] = (
    "init", "inspect", "apply", "passes", "run", "bench", "tune", "optimize", "report", "export",
)  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ktx",
        description="Parse, template, measure and tune CUDA kernels.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"ktx.commands.{name}")
        module.register(sub)
        # ``--debug`` anywhere on the line, not only before the command (SUPPRESS keeps the
        # main parser's default when the subcommand does not see it).
        sub.choices[name].add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks on errors"
        )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except KtxError as exc:
        if args.debug:
            traceback.print_exc()
        from ktx.blockers import todo_blocker

        print(f"ktx: error: {todo_blocker(exc) or exc}", file=sys.stderr)
        return 2
    except (OSError, UnicodeDecodeError) as exc:
        # A file the user named that no check above caught (a folder vanished, a disk full, a
        # permission): still one line naming the path, not a traceback.
        if args.debug:
            traceback.print_exc()
        print(f"ktx: error: {os_error_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ktx: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


def os_error_line(exc: OSError | UnicodeDecodeError) -> str:
    """``path: reason (hint)`` for an operating-system or decoding error."""
    if isinstance(exc, UnicodeDecodeError):
        where = f"{exc.reason} at byte {exc.start}"
        return f"a file is not UTF-8 text ({where}) (save it as UTF-8; --debug shows which)"
    path = exc.filename if exc.filename is not None else "<file>"
    reason = exc.strerror or type(exc).__name__
    return f"{path}: {reason} (check the path and its permissions; --debug shows where)"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
