"""``ktx apply --passes PIPELINE FILE``: template a kernel, show its knobs, or instantiate a config.

With no config it prints the template (the rewritten source, knobs as ``KTX_`` macros);
``--knobs`` prints the knob space as JSON; ``--config NAME=VALUE`` (missing knobs take their
defaults) or ``--sample SEED`` (a random feasible config) prints concrete CUDA. ``--diff`` shows
a unified diff against the input instead; ``--trace FILE`` writes the trace that replays the
template. What each pass did or declined to do is printed to stderr as remarks (``-q`` hides
them). A bad pipeline, knob value or constraint gives exit 2 and one line saying what is valid.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path

from ktx.ir import parse_file
from ktx.ir.errors import KtxError, Location

from ktx.commands._checks import kernel_syntax, output_file
from ktx.pipeline import run as run_pipeline
from ktx.registry import add_plugin_option, load_plugins
from ktx.template import Template


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "apply",
        help="apply a pass pipeline: print the template, its knobs, or an instantiated config",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # ``nargs="?"``: ``--config A=1 B=2 kernel.cu`` lets --config take the file too; run() moves
    # it back, so that options and FILE go in any order.
    p.add_argument("file", metavar="FILE", nargs="?", help="CUDA source file")
    p.add_argument(
        "--passes",
        required=True,
        metavar="PIPELINE",
        help="passes, e.g. 'block-size,unroll{max=8},tile{sizes=16|32|64}' (ktx passes lists them)",
    )
    p.add_argument("--kernel", metavar="NAME", help="the kernel to template (needed if the file has several)")
    p.add_argument("--knobs", action="store_true", help="print the knob space as JSON")
    p.add_argument(
        "--config",
        nargs="+",
        action="extend",
        default=[],
        metavar="NAME=VALUE",
        help="instantiate with these knob values (the others take their defaults)",
    )
    p.add_argument("--sample", type=int, metavar="SEED", help="instantiate a random feasible config")
    p.add_argument("-o", "--output", metavar="OUT", help="write the result here instead of stdout")
    p.add_argument("--diff", action="store_true", help="print a unified diff against the input")
    p.add_argument("--trace", metavar="FILE", help="write the trace (JSON) of passes, sites and edits")
    add_plugin_option(p)
    p.add_argument("-q", "--quiet", action="store_true", help="do not print remarks")
    p.set_defaults(func=run)


def parse_config(items: list[str]) -> dict[str, int]:
    """``["A=1", "B=2,C=4"]`` -> ``{"A": 1, "B": 2, "C": 4}``; malformed items fail."""
    config: dict[str, int] = {}
    for item in items:
        for part in item.split(","):
            if not part.strip():
                continue
            name, eq, value = part.partition("=")
            if not eq or not name.strip():
                raise KtxError(f"--config {part!r} is not NAME=VALUE", None, "e.g. --config BLOCK_X=64")
            try:
                number = int(value.strip(), 0)
            except ValueError:
                hint = "knob values are integers; ktx apply --knobs lists each knob's values"
                raise KtxError(
                    f"--config {part!r}: {value.strip()!r} is not an integer", None, hint
                ) from None
            config[once(config, name.strip(), number)] = number
    return config


def once(config: dict[str, int], name: str, value: int) -> str:
    """``name``, refused when ``--config`` already set it: which of two values was meant is
    the user's to say (the last silently winning hid typos in long command lines)."""
    if name in config:
        raise KtxError(
            f"--config {name} is given twice ({name}={config[name]} and {name}={value})",
            None,
            "give each knob once",
        )
    return name


def knobs_json(template: Template) -> str:
    """The knob space as JSON, one knob a line (``{name, values, default, ...}``)."""
    data = template.to_json()
    lines = ["{"]
    items = list(data.items())
    for i, (key, value) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        if key == "knobs" and value:
            lines.append('  "knobs": [')
            lines += [f"    {json.dumps(k)}{',' if j < len(value) - 1 else ''}" for j, k in enumerate(value)]
            lines.append(f"  ]{comma}")
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value)}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def remarks(template: Template, path: str) -> list[str]:
    return [
        f"{path}:{o.line}: remark: [{o.pass_name}] {o.site}: {o.status}: {o.message}"
        for o in template.outcomes
    ]


def split_file_from_config(file: str | None, items: list[str]) -> tuple[str, list[str]]:
    """The FILE that a greedy ``--config A=1 FILE`` took, and the config items left.

    An item without ``=`` is the positional argument; two of them, or none when FILE is
    missing, is a usage error naming what is wrong."""
    strays = [item for item in items if "=" not in item]
    config = [item for item in items if "=" in item]
    if file is None and len(strays) == 1:
        return strays[0], config
    if strays:
        raise KtxError(f"--config {strays[0]!r} is not NAME=VALUE", None, "e.g. --config BLOCK_X=64")
    if file is None:
        raise KtxError("the CUDA source FILE is missing", None, "ktx apply --passes PIPELINE FILE")
    return file, config


def run(args: argparse.Namespace) -> int:
    load_plugins(args.plugin)
    args.file, args.config = split_file_from_config(args.file, args.config)
    # Every path is checked before the work, so a typo in -o costs no pipeline run.
    if args.output:
        output_file(args.output, "-o")
    if args.trace:
        output_file(args.trace, "--trace")
    config = parse_config(args.config)
    if args.sample is not None and args.sample < 0:
        raise KtxError(f"--sample {args.sample}: a seed is 0 or more", None, "e.g. --sample 0")
    module = parse_file(args.file)
    kernel_syntax(module, args.kernel)
    template = run_pipeline(module, args.passes, kernel=args.kernel)
    # Remarks only once the command has succeeded: on an error its one line comes first and
    # alone, not under the passes' remarks (issue 21).
    if args.knobs:
        text = knobs_json(template)
    else:
        if args.sample is not None:
            config = {**template.space.sample(args.sample), **config}
        try:
            text = template.instantiate(config) if config or args.sample is not None else template.source
        except KtxError as exc:
            raise KtxError(exc.message, Location(args.file), exc.hint) from None
    if not args.quiet:
        for line in remarks(template, args.file):
            print(line, file=sys.stderr)
    if args.trace:
        Path(args.trace).write_text(template.trace.dumps())
    if args.knobs:
        _emit(text, args.output)
        return 0
    if args.diff:
        text = "".join(
            difflib.unified_diff(
                template.original.splitlines(keepends=True),
                text.splitlines(keepends=True),
                args.file if Path(args.file).is_absolute() else f"a/{args.file}",
                args.file if Path(args.file).is_absolute() else f"b/{args.file}",
            )
        )
    _emit(text, args.output)
    return 0


def _emit(text: str, output: str | None) -> None:
    if output:
        Path(output).write_text(text)
    else:
        sys.stdout.write(text)
