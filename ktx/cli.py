"""The ``ktx`` command line.

Each subcommand lives in its own module under :mod:`ktx.commands` and exposes
``register(subparsers)``; this module only wires them together and turns
:class:`~ktx.ir.errors.KtxError` into a one-line message and exit code 2.

Only the command on the line is imported. The command modules pull in Optuna, NumPy, networkx,
the agent and every pass: importing all ten cost 2.3 s before ``ktx --help`` printed a line
(2.6 s on the H200 host). The other commands get a placeholder subparser with the same one-line
help (:data:`SUMMARIES`; tests/test_cli.py checks they match the modules' own).
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


#: Each command's one-line help, as its module registers it: ``ktx --help`` lists them without
#: importing the modules.
SUMMARIES: dict[str, str] = {
    "init": "draft a kernel folder's ktx.toml from a CUDA file (--check: TODOs left)",
    "inspect": "list kernels, loops, launch sites and performance constants",
    "apply": "apply a pass pipeline: print the template, its knobs, or an instantiated config",
    "passes": "list passes with their knobs, options and ordering",
    "run": "verify and time one configuration of a kernel on the GPU",
    "bench": "time the original kernels of a suite on the GPU",
    "tune": "search a kernel's knobs per shape; write configs and a dispatch table",
    "optimize": "plan passes, template, search and verify, round after round",
    "report": "write the report (Markdown, HTML, patch) of a ktx optimize run",
    "export": "export a run's dispatched kernel (--torch: a PyTorch extension)",
}


def command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named on the line: the first word that is not an option (the main parser's
    only options, ``--debug`` and ``-h``, take no value). None when there is none or it is not a
    command (argparse then lists the choices)."""
    for word in argv:
        if word == "--":
            return None
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def build_parser(only: str | None = None, *, lazy: bool = False) -> argparse.ArgumentParser:
    """The parser with every command's module registered, or (``lazy``) only ``only``'s, the
    others as placeholders that carry their help line."""
    parser = argparse.ArgumentParser(
        prog="ktx",
        description="Parse, template, measure and tune CUDA kernels.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        if lazy and name != only:
            sub.add_parser(name, help=SUMMARIES[name])
            continue
        module = importlib.import_module(f"ktx.commands.{name}")
        module.register(sub)
        # ``--debug`` anywhere on the line, not only before the command (SUPPRESS keeps the
        # main parser's default when the subcommand does not see it).
        sub.choices[name].add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks on errors"
        )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(command_of(words), lazy=True)
    args = parser.parse_args(words)
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
