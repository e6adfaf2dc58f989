"""The CLI imports only the command on the line; ``ktx --help`` lists every command regardless."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ktx.cli import COMMANDS, SUMMARIES, build_parser, command_of


def _helps(parser: object) -> dict[str, str]:
    import argparse

    assert isinstance(parser, argparse.ArgumentParser)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {c.dest: str(c.help) for c in sub._choices_actions}


def test_summaries_match_the_modules_own_help() -> None:
    assert set(SUMMARIES) == set(COMMANDS)
    assert _helps(build_parser()) == SUMMARIES


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["tune", "k", "--shapes", "x"], "tune"),
        (["--debug", "optimize", "k"], "optimize"),
        (["-h"], None),
        ([], None),
        (["nosuch"], None),
        (["--", "tune"], None),
    ],
)
def test_command_of(argv: list[str], command: str | None) -> None:
    assert command_of(argv) == command


def _imported_after(argv: list[str]) -> set[str]:
    code = (
        "import sys, contextlib, io\n"
        "from ktx.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        "    try:\n"
        f"        main({argv!r})\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_help_imports_no_command_module() -> None:
    mods = _imported_after(["--help"])
    assert not {m for m in mods if m.startswith("ktx.commands.")}
    assert "optuna" not in mods and "numpy" not in mods


def test_a_command_imports_only_its_module() -> None:
    mods = _imported_after(["passes", "--help"])
    commands = {m for m in mods if m.startswith("ktx.commands.") and not m.split(".")[-1].startswith("_")}
    assert commands == {"ktx.commands.passes"}


def test_an_unknown_command_is_a_usage_error_listing_the_choices() -> None:
    out = subprocess.run([sys.executable, "-m", "ktx", "nosuch"], capture_output=True, text=True)
    assert out.returncode == 2
    assert "invalid choice" in out.stderr and "optimize" in out.stderr
