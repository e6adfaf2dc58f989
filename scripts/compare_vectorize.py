"""Compare what ``ktx apply`` prints (template and remarks) between two ktx checkouts.

Why: a legality change in the facts layer must change nothing it was not meant to. This runs
the vectorize pipelines on every kernel of llm.c's ``dev/cuda`` files and ``kernels/*/kernel.cu``
under each checkout (laid out as installed, as ``sweep_corpus.py --ktx-root`` does), and lists
the cases whose output differs, and whether a refusal became a rewrite.

    python scripts/compare_vectorize.py --base /work/wt-vecbase --new . [--out /tmp/cmp.json]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from apply_identical import _layout  # one installed-layout builder for both scripts

PIPELINES = ("vectorize", "vectorize{tie=true,peel=true}", "row-owner,vectorize{tie=true,peel=true}")


def _files(repo: Path) -> list[Path]:
    llmc = (repo / ".." / "shared" / "llmc" / "dev" / "cuda").resolve()
    return sorted(llmc.glob("*.cu")) + sorted((repo / "kernels").glob("*/kernel.cu"))


def _run_all(files: list[str]) -> dict[str, dict[str, object]]:
    """In the child: every (file, kernel, pipeline) through ``ktx.cli.main``, output captured."""
    from ktx.ir import parse_file

    from ktx.cli import main

    out: dict[str, dict[str, object]] = {}
    for f in files:
        try:
            kernels = [k.name for k in parse_file(f).kernels]
        except Exception as exc:
            out[f] = {"rc": -1, "stdout": "", "stderr": repr(exc)}
            continue
        for k in kernels:
            for p in PIPELINES:
                so, se = io.StringIO(), io.StringIO()
                with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
                    try:
                        rc = main(["apply", "--passes", p, "--kernel", k, f])
                    except SystemExit as exc:
                        rc = int(exc.code or 0)
                out[f"{f}|{k}|{p}"] = {"rc": rc, "stdout": so.getvalue(), "stderr": se.getvalue()}
    return out


def _collect(root: Path, files: list[Path]) -> dict[str, dict[str, object]]:
    env = {**os.environ, "PYTHONPATH": str(_layout(root))}
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import compare_vectorize as c; "
        "print(json.dumps(c._run_all(sys.argv[2:])))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(Path(__file__).resolve().parent), *map(str, files)],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    result: dict[str, dict[str, object]] = json.loads(done.stdout)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=Path, required=True, help="checkout of main before the change")
    ap.add_argument("--new", type=Path, default=Path("."), help="checkout with the change")
    ap.add_argument("--out", type=Path, help="write the differing cases here as JSON")
    args = ap.parse_args()
    files = _files(args.new.resolve())
    base, new = _collect(args.base.resolve(), files), _collect(args.new.resolve(), files)
    differ = sorted(key for key in base.keys() | new.keys() if base.get(key) != new.get(key))
    rows = []
    for key in differ:
        b, n = base.get(key, {}), new.get(key, {})
        exposed = "rewritten: exposed"
        became = exposed in str(n.get("stderr")) and exposed not in str(b.get("stderr"))
        rows.append({"case": key, "refusal_became_rewrite": became, "base": b, "new": n})
    print(f"{len(base)} cases compared ({len(files)} files, {len(PIPELINES)} pipelines);", end=" ")
    print(f"{len(differ)} differ")
    for r in rows:
        print(f"  {'refusal -> rewrite' if r['refusal_became_rewrite'] else 'OTHER CHANGE'}: {r['case']}")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    return 0 if all(r["refusal_became_rewrite"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
