"""Apply a pipeline to every kernel of a folder of real CUDA files, instantiate its widest config
and compile it for sm_90 (nvcc -cubin, no GPU needed): the check that a pass's rewrites of code it
has never seen still build. A file whose *original* does not build here (host code that needs
cuBLAS or MPI headers) is reported apart, not as a rewrite failure.

    python scripts/sweep_compile.py DIR [--pipeline P ...] [--include DIR ...] [--json OUT]

Example (llm.c's dev/cuda, the benchmark's cuBLAS stand-in headers):

    python scripts/sweep_compile.py ../shared/llmc/dev/cuda --include benchmarks/llmc/stubs \\
        --pipeline 'vectorize{tie=true,peel=true}' --pipeline 'row-owner,vectorize{tie=true,peel=true}'
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ktx.ir import parse

from ktx.pipeline import run


def nvcc(source: Path, includes: list[Path]) -> tuple[int, str]:
    cmd = ["nvcc", "-std=c++17", "-O3", "--use_fast_math", "-arch=sm_90", "-cubin", "-o", f"{source}.cubin"]
    cmd += [str(source)] + [f"-I{d}" for d in includes]
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, "\n".join(line for line in r.stderr.splitlines() if "error" in line)[:600]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", type=Path)
    p.add_argument("--pipeline", action="append", default=None)
    p.add_argument("--include", action="append", type=Path, default=[])
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--jobs", type=int, default=4)
    args = p.parse_args(argv)
    pipelines = args.pipeline or ["vectorize{tie=true,peel=true}"]
    work = Path(tempfile.mkdtemp(prefix="ktx-sweep-"))
    includes = [args.folder, *args.include]
    stats: collections.Counter[str] = collections.Counter()
    problems: list[dict[str, Any]] = []
    jobs: list[tuple[str, str, str, Path]] = []
    originals: dict[str, Path] = {}
    for cu in sorted(args.folder.glob("*.cu")):
        text = cu.read_text(errors="replace")
        try:
            kernels = [fn.name for fn in parse(text, str(cu)).kernels]
        except Exception as exc:  # a file the parser refuses is reported, the sweep goes on
            problems.append({"file": cu.name, "what": "parse", "error": str(exc)[:300]})
            continue
        for kernel in kernels:
            for pipeline in pipelines:
                stats["templates"] += 1
                try:
                    t = run(text, pipeline, kernel=kernel, path=str(cu))
                except Exception as exc:
                    error = f"{type(exc).__name__}: {str(exc)[:300]}"
                    where = {"file": cu.name, "kernel": kernel, "pipeline": pipeline}
                    problems.append({**where, "what": "template", "error": error})
                    continue
                for o in t.outcomes:
                    stats[f"sites {o.status}"] += 1
                if not t.knobs:
                    continue
                config = {k.name: max(k.values) for k in t.knobs}
                if t.space.violations(config, {}):
                    config = {k.name: k.values[min(1, len(k.values) - 1)] for k in t.knobs}
                out = work / f"{cu.stem}__{kernel}__{len(jobs)}.cu"
                out.write_text(t.instantiate(config))
                jobs.append((cu.name, kernel, pipeline, out))
                if cu.name not in originals:
                    originals[cu.name] = work / f"orig__{cu.name}"
                    shutil.copy(cu, originals[cu.name])
    with ThreadPoolExecutor(args.jobs) as ex:
        base = dict(zip(originals, ex.map(lambda f: nvcc(f, includes)[0], originals.values()), strict=True))
        results = list(ex.map(lambda j: nvcc(j[3], includes), jobs))
    for (name, kernel, pipeline, _), (code, err) in zip(jobs, results, strict=True):
        if code == 0:
            stats["compiled"] += 1
        elif base.get(name) != 0:
            stats["original does not build here"] += 1
        else:
            stats["rewrite failed to compile"] += 1
            where = {"file": name, "kernel": kernel, "pipeline": pipeline}
            problems.append({**where, "what": "compile", "error": err})
    report = {"folder": str(args.folder), "pipelines": pipelines, "stats": dict(stats), "problems": problems}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    for k, v in sorted(stats.items()):
        print(f"{k}: {v}")
    for prob in problems:
        print(f"PROBLEM {prob}")
    return 1 if any(p["what"] != "parse" for p in problems) else 0


if __name__ == "__main__":
    sys.exit(main())
