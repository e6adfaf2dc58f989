"""Golden pass tests in lit style: ``// RUN:`` lines, ``// CHECK:`` lines, the ``filecheck`` package.

Each ``tests/golden/**/*.cu`` holds a kernel and one or more RUN lines such as::

    // RUN: ktx apply --passes unroll %s --diff -q | filecheck %s --match-full-lines

``%s`` is the file itself. The ``ktx`` half runs in-process (``2>&1`` adds stderr, where remarks
and errors go, before stdout; a leading ``not`` expects a non-zero exit); its output is piped to
``filecheck`` (its matcher, in-process), which reads the CHECK lines of the same file. ``--match-full-lines``
keeps the file's own CHECK comments (echoed by diffs) from matching themselves.

Regenerate the CHECK lines from the current output with ``KTX_UPDATE_GOLDENS=1 pytest
tests/test_golden.py`` and review the diff: each changed line of the output (``+``/``-``),
each remark and each error becomes a CHECK line; an output with no diff gets a CHECK-NOT that
no line was added or removed.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import sys
from pathlib import Path

import pytest

from ktx.cli import main

GOLDEN = Path(__file__).resolve().parent / "golden"
CASES = sorted(GOLDEN.rglob("*.cu"))
UPDATE = os.environ.get("KTX_UPDATE_GOLDENS") == "1"


def run_lines(path: Path) -> list[str]:
    return [line.split("RUN:", 1)[1].strip() for line in path.read_text().splitlines() if "// RUN:" in line]


def run_ktx(command: str, path: Path) -> tuple[int, str, list[str]]:
    """Run the ``ktx ...`` half of a RUN line; returns (exit code, output, filecheck args)."""
    left, _, right = command.partition(" | ")
    argv = shlex.split(left.replace("%s", shlex.quote(str(path))))
    expect_failure = argv[:1] == ["not"]
    argv = argv[1:] if expect_failure else argv
    merge = "2>&1" in argv
    argv = [a for a in argv if a != "2>&1"]
    assert argv[:1] == ["ktx"], f"RUN line must start with ktx: {command}"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv[1:])
    assert (code != 0) == expect_failure, f"exit code {code} for {command}\n{err.getvalue()}"
    fc = shlex.split(right.replace("%s", shlex.quote(str(path))))
    assert fc[:1] == ["filecheck"], f"RUN line must pipe into filecheck: {command}"
    return code, (err.getvalue() if merge else "") + out.getvalue(), fc[1:]


def filecheck(args: list[str], text: str) -> tuple[int, str]:
    """What ``filecheck ARGS`` exits with and prints for ``text`` on its stdin, run in this
    process through the package's own option parser and matcher (what its ``main`` does): a
    ``python -m filecheck`` per RUN line cost a Python start and import each, 150 times."""
    from filecheck.matcher import Matcher
    from filecheck.options import parse_argv_options

    opts = parse_argv_options(["filecheck", *args])
    messages = io.StringIO()
    stdin = sys.stdin
    try:
        sys.stdin = io.StringIO(text)
        with contextlib.redirect_stdout(messages), contextlib.redirect_stderr(messages):
            code = Matcher.from_opts(opts).run()
    finally:
        sys.stdin = stdin
    return code, messages.getvalue()


def _literal(text: str) -> str:
    """FileCheck pattern text for a literal line (``{{`` and ``[[`` are special there)."""
    return text.replace("{{", "{{[{][{]}}").replace("[[", "{{[[][[]}}")


def prefix_of(args: list[str]) -> str:
    for i, arg in enumerate(args):
        if arg.startswith("--check-prefix="):
            return arg.split("=", 1)[1]
        if arg == "--check-prefix" and i + 1 < len(args):
            return args[i + 1]
    return "CHECK"


def expected_checks(output: str, command: str, path: Path, prefix: str) -> list[str]:
    """CHECK lines for ``output``: diff lines, remarks and errors (every line without --diff)."""
    diff = "--diff" in command
    checks: list[str] = []
    changed = False
    for line in output.splitlines():
        if not line.strip() or line.startswith(("+++ ", "--- ")):
            continue
        text = _literal(line).replace(str(path), "{{.*}}")
        if ": remark: " in line:
            checks.append(f"// {prefix}: " + re.sub(r"^\{\{\.\*\}\}:\d+: remark:", "{{.*}}: remark:", text))
        elif line.startswith(("+", "-")) and diff:
            changed = True
            checks.append(f"// {prefix}: {text}")
        elif line.startswith("ktx: error:") or not diff:
            checks.append(f"// {prefix}: {text}")
    if diff and not changed:
        checks.append(f"// {prefix}-NOT: {{{{[-+].*}}}}")
    return checks


def regenerate(path: Path) -> None:
    checks: list[str] = []
    prefixes: set[str] = set()
    for command in run_lines(path):
        _, output, args = run_ktx(command, path)
        prefix = prefix_of(args)
        prefixes.add(prefix)
        checks += expected_checks(output, command, path, prefix)
    old = re.compile(rf"^// (?:{'|'.join(sorted(prefixes))})(?:-[A-Z]+)?:.*\n?", re.M)
    body = old.sub("", path.read_text()).rstrip("\n") + "\n"
    path.write_text(body + "\n" + "\n".join(checks) + "\n")


@pytest.mark.parametrize("path", CASES, ids=[str(p.relative_to(GOLDEN)) for p in CASES])
def test_golden(path: Path) -> None:
    if UPDATE:
        regenerate(path)
    commands = run_lines(path)
    assert commands, "a golden case needs a RUN line"
    text = path.read_text()
    assert re.search(r"^// (?!RUN:)[A-Z]+(-NOT)?:", text, re.M), "no CHECK lines (KTX_UPDATE_GOLDENS=1)"
    for command in commands:
        _, output, args = run_ktx(command, path)
        code, messages = filecheck(args, output)
        assert code == 0, f"{command}\n--- output ---\n{output}\n--- filecheck ---\n{messages}"


def test_there_are_negative_cases() -> None:
    """At least one case per pass where a site is skipped with a remark and nothing changes."""
    negative = [p for p in CASES if re.search(r"-NOT: \{\{\[-\+\]\.\*\}\}", p.read_text())]
    assert {p.parent.name for p in negative} >= {"unroll", "block_size", "expose", "coarsen", "split", "tile"}


def test_filecheck_in_process_passes_and_fails_as_its_command_does(tmp_path: Path) -> None:
    checks = tmp_path / "c.cu"
    checks.write_text("// CHECK: hello\n// CHECK-NOT: world\n")
    assert filecheck([str(checks)], "say hello\n")[0] == 0
    code, messages = filecheck([str(checks)], "say bye\n")
    assert code != 0 and "hello" in messages
    assert filecheck([str(checks)], "hello\nworld\n")[0] != 0
