"""Seconds one candidate's compile costs on this CPU, with and without compiling only its kernel.

For each kernel folder: the original candidate at the spec's first shape point, compiled as the
GPU harness asks (``ktx.measure.compile.compile_kernel``, nvcc: this host has no NVRTC through
CuPy) into an empty cache, once whole (``KTX_COMPILE_PRUNE=0``) and once pruned
(:mod:`ktx.measure.compile_prune`). Reports wall and CPU seconds (the compiler's processes), the
kernels in each cubin and whether the requested kernel's machine code is byte-identical in both.

    python scripts/compile_cost.py benchmarks/realcode/ggml__k_get_rows_float ... [--json OUT]

Wall seconds depend on the machine's load; CPU seconds much less (they are the number to quote).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ktx.ir.expr import expand

from ktx.measure.compile import CompileRequest, _sections, compile_kernel, elf_symbol_table, kernel_symbols
from ktx.measure.types import original_candidate
from ktx.specload import load_spec


def kernel_code(cubin: bytes, lowered: str) -> bytes:
    """The machine code of ``lowered`` (its symbol's section) in ``cubin``."""
    sections = _sections(cubin)
    for sym in elf_symbol_table(cubin):
        if sym.name == lowered and 0 < sym.shndx < len(sections):
            sec = sections[sym.shndx]
            return cubin[sec.offset : sec.offset + sec.size]
    raise KeyError(lowered)


def code_bytes(cubin: bytes) -> int:
    """Bytes of machine code of every kernel in ``cubin`` (an emptied kernel has a few)."""
    sections = _sections(cubin)
    shndx = {s.shndx for s in elf_symbol_table(cubin) if s.name in set(kernel_symbols(cubin))}
    return sum(sections[i].size for i in shndx if 0 < i < len(sections))


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def one(folder: Path, prune: bool) -> dict[str, Any]:
    spec = load_spec(folder)
    cand = original_candidate(spec)
    point = spec.shape_set().points[0]
    name = expand(cand.name_expression, cand.env(spec, point))
    req = CompileRequest(
        spec.compile_source(cand.source), name, tuple(cand.flags), "90", spec.include_dirs, "nvcc"
    )
    os.environ["KTX_COMPILE_PRUNE"] = "1" if prune else "0"
    with tempfile.TemporaryDirectory(prefix="ktx-cc-") as cache:
        os.environ["KTX_CACHE_DIR"] = cache
        cpu, wall = _children_cpu(), time.perf_counter()
        result = compile_kernel(req)
        wall, cpu = time.perf_counter() - wall, _children_cpu() - cpu
        if not result.ok:
            return {"kernel": folder.name, "prune": prune, "ok": False, "log": result.log[:400]}
        cubin = Path(result.cubin_path).read_bytes()
        return {
            "kernel": folder.name,
            "prune": prune,
            "ok": True,
            "wall_s": round(wall, 2),
            "cpu_s": round(cpu, 2),
            "kernels": len(kernel_symbols(cubin)),
            "code_bytes": code_bytes(cubin),
            "code": kernel_code(cubin, result.lowered_name).hex(),
        }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", type=Path, nargs="+")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    rows = []
    print("| kernel | whole: cpu s / wall s / kernels (code bytes) | pruned: the same | same code |")
    print("| --- | --- | --- | --- |")
    for folder in args.folders:
        whole, pruned = one(folder, False), one(folder, True)
        if not (whole["ok"] and pruned["ok"]):
            print(f"| {folder.name} | {whole.get('log', 'ok')[:80]} | {pruned.get('log', 'ok')[:80]} | - |")
            continue
        same = whole.pop("code") == pruned.pop("code")
        rows.append({"whole": whole, "pruned": pruned, "same_code": same})
        print(
            f"| {folder.name} | {whole['cpu_s']:.2f} / {whole['wall_s']:.2f} / {whole['kernels']} "
            f"({whole['code_bytes']}) | {pruned['cpu_s']:.2f} / {pruned['wall_s']:.2f} / {pruned['kernels']} "
            f"({pruned['code_bytes']}) | "
            f"{'yes' if same else 'NO'} |",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if all(r["same_code"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
