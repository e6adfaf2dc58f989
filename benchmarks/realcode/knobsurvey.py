"""Issue 22 item 3 beyond the benchmark: what the tuning facts (:mod:`ktx.ir.facts.tuning`) read
on the held-out stand-in corpus (``benchmarks/vheld``) and on ktx's own ``kernels/``, and the
integer template parameters, ``constexpr``s and ``#define``s a kernel uses that they do not read
as a setting, for reading one by one. CPU only, no build.

    python benchmarks/realcode/knobsurvey.py [--json OUT] [--md OUT --title LINE]

Prints one line per kernel with settings (name:role=value) and one per unread integer
(``unread``: name, kind, value, the first use in the kernel), then the counts.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def sources() -> Iterator[tuple[str, Path, tuple[str, ...]]]:
    """(corpus, file, kernel names; empty: every kernel) of both corpora."""
    manifest = json.loads((ROOT / "benchmarks" / "vheld" / "manifest.json").read_text())
    base = ROOT / manifest["root"]
    for f in manifest["files"]:
        yield "vheld", base / f["project"] / f["file"], tuple(f["kernels"])
    for cu in sorted((ROOT / "kernels").glob("*/kernel.cu")):
        yield "kernels", cu, ()


def survey() -> list[dict[str, object]]:
    from ktx.ir import parse
    from ktx.ir.analysis import perf_constants
    from ktx.ir.facts.tuning import thread_indexed_shared, tuning_params

    rows: list[dict[str, object]] = []
    for corpus, path, names in sources():
        if not path.exists():
            print(f"missing {path} (fetch the sources first)", file=sys.stderr)
            continue
        module = parse(path.read_text(errors="replace"))
        for fn in module.kernels:
            if names and fn.name not in names:
                continue
            settings = tuning_params(module, fn)
            read = {t.name for t in settings}
            unread: list[dict[str, object]] = []
            body = module.text(fn.span)
            for tp in fn.template_params:
                if (
                    tp.kind == "value"
                    and tp.name not in read
                    and re.match(r".*(int|size_t|unsigned)", tp.type or "")
                ):
                    unread.append(
                        {"name": tp.name, "kind": "template-int", "value": None, "use": _use(body, tp.name)}
                    )
            seen = {u["name"] for u in unread}
            for c in perf_constants(module):
                if c.kind in ("launch-literal", "template-int") or c.name in read or c.name in seen:
                    continue
                if re.search(rf"\b{re.escape(c.name)}\b", module.text(fn.body)):
                    seen.add(c.name)
                    unread.append(
                        {"name": c.name, "kind": c.kind, "value": c.value, "use": _use(body, c.name)}
                    )
            # a constant that sizes a __shared__ array the threads write at their (warp's) id: a
            # knob over it must keep the extent at least what the launch's threads write
            shared: list[str] = []
            for name in [*read, *(str(u["name"]) for u in unread)]:
                found = thread_indexed_shared(module, fn, name)
                for ti in dict.fromkeys((t.array, t.extent, t.axis, t.per, t.modulo) for t in found):
                    array, extent, axis, per, modulo = ti
                    at = f"threadIdx.{'xyz'[axis]}" + (f" {'%' if modulo else '/'} {per}" if per > 1 else "")
                    shared.append(f"{name}: {array}[{extent}] at {at}")
            rows.append(
                {
                    "corpus": corpus,
                    "file": str(path.relative_to(ROOT)),
                    "kernel": fn.name,
                    "settings": [f"{t.name}:{t.role}={t.value}" for t in settings],
                    "unread": unread,
                    "shared": sorted(shared),
                }
            )
    return rows


def _use(body: str, name: str) -> str:
    for line in body.splitlines():
        if re.search(rf"\b{re.escape(name)}\b", line) and "template" not in line:
            return " ".join(line.split())[:100]
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--md", type=Path, help="also write the listing as markdown here")
    ap.add_argument("--title", default="", help="lines under the markdown's heading")
    args = ap.parse_args(argv)
    rows = survey()
    lines: list[str] = []
    for r in rows:
        if r["settings"] or r["unread"]:
            lines.append(f"{r['corpus']} {r['file']} {r['kernel']}: {', '.join(r['settings'])}")  # type: ignore[arg-type]
            for u in r["unread"]:  # type: ignore[attr-defined]
                lines.append(f"    unread {u['name']} ({u['kind']}, {u['value']}): {u['use']}")
            for text in r["shared"]:  # type: ignore[attr-defined]
                lines.append(f"    shared extent {text}")
    counts = []
    for corpus in ("vheld", "kernels"):
        mine = [r for r in rows if r["corpus"] == corpus]
        with_settings = sum(1 for r in mine if r["settings"])
        settings = sum(len(r["settings"]) for r in mine)  # type: ignore[arg-type]
        unread = sum(len(r["unread"]) for r in mine)  # type: ignore[arg-type]
        shared = sum(len(r["shared"]) for r in mine)  # type: ignore[arg-type]
        counts.append(
            f"{corpus}: {len(mine)} kernels, {with_settings} with a setting, {settings} settings, "
            f"{unread} unread, {shared} shared extents written at the thread's id"
        )
    print("\n".join(lines + counts))
    if args.md is not None:
        md = ["# Tuning settings beyond the benchmark (issue 22 item 3)", "", args.title, ""]
        md += [f"- {c}" for c in counts] + ["", "```", *lines, "```", ""]
        args.md.write_text("\n".join(md))
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
