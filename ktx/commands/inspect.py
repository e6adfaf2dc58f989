"""``ktx inspect FILE... [--json] [--facts [--kernel K]]``: what the IR sees in CUDA files.

The first thing a user runs on their kernel: if ktx indexes it wrongly, nothing after
can be trusted, so the listing is complete (kernels, parameters, loops, launch sites,
performance constants) and the diagnostics are shown with their positions.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any

from ktx.ir import Module, parse_file
from ktx.ir.affine import LoopShape, kernel_index
from ktx.ir.analysis import perf_constants
from ktx.ir.errors import KtxError, Location


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("inspect", help="list kernels, loops, launch sites and performance constants")
    p.add_argument("files", nargs="+", metavar="FILE", help="CUDA source files (.cu, .cuh)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument(
        "--facts",
        action="store_true",
        help="print what the facts layer (ktx.ir.facts) knows of each kernel: loops and owners, memory "
        "references, reductions, launch mapping, and why vectorize would or would not pack each loop",
    )
    p.add_argument("--kernel", metavar="K", help="with --facts: only this kernel")
    p.set_defaults(func=run)


def check_module(module: Module) -> None:
    """Fail on what makes a file useless to ktx: no kernel, or a syntax error inside every one.

    A kernel that does not parse is skipped alone (listed with its line); the file is refused
    only when no kernel is left.
    """
    broken = module.broken_kernels()
    if module.kernels and len(broken) == len(module.kernels):
        module.require_parsed(broken[0][0])
    if not module.kernels:
        raise KtxError(
            "no __global__ kernel found",
            Location(module.path),
            "give a file that defines a kernel (headers: pass the .cu that includes them)",
        )


def summary(module: Module) -> dict[str, Any]:
    """A JSON-ready description of a module's IR."""

    def span(s: Any) -> Any:
        return None if s is None else {"line": s.line, "col": s.col, "start": s.start, "end": s.end}

    kernels: list[dict[str, Any]] = []
    broken = dict((k.name, d) for k, d in module.broken_kernels())
    for k in module.kernels:
        if k.name in broken:
            d = broken[k.name]
            reason = f"syntax error at line {d.span.line}: {d.message}"
            kernels.append({"name": k.name, "line": k.span.line, "skipped": reason})
            continue
        index = kernel_index(module, k)
        t = index.thread_index()
        shapes = {lp.id: index.loop_shape(lp) for lp in module.loops_in(k)}
        kernels.append(
            {
                "name": k.name,
                "line": k.span.line,
                "template_params": [
                    {"name": t.name, "kind": t.kind, "type": t.type, "default": t.default}
                    for t in k.template_params
                ],
                "params": [
                    {
                        "name": p.name,
                        "type": p.type,
                        "pointer": p.is_pointer,
                        "const": p.const,
                        "restrict": p.restrict,
                    }
                    for p in k.params
                ],
                "launch_bounds": None
                if k.launch_bounds is None
                else {"max_threads": k.launch_bounds.max_threads, "min_blocks": k.launch_bounds.min_blocks},
                "loops": [
                    {
                        "id": f"L{lp.id}",
                        "kind": lp.kind,
                        "line": lp.span.line,
                        "var": lp.var,
                        "init": module.text(lp.init).rstrip(";").strip() if lp.init else None,
                        "cond": module.text(lp.cond) if lp.cond else None,
                        "step": module.text(lp.step) if lp.step else None,
                        "pragma": lp.pragma.text if lp.pragma else None,
                        "depth": lp.depth,
                        "shape": _shape(shapes[lp.id]),
                    }
                    for lp in module.loops_in(k)
                ],
                "thread_index": None
                if t is None
                else {
                    "var": t.var,
                    "form": str(t.form),
                    "type": t.type,
                    "line": t.line,
                    "guard": None
                    if t.guard is None
                    else {"kind": t.guard.kind, "bound": t.guard.bound_text, "line": t.guard.line},
                },
                "block_size_names": [
                    {"name": a.name, "kind": a.kind, "value": a.value} for a in index.block_aliases.values()
                ],
            }
        )
    return {
        "file": module.path,
        "kernels": kernels,
        "device_functions": [f.name for f in module.device_functions],
        "launch_sites": [
            {
                "kernel": s.kernel,
                "line": s.span.line,
                "template_args": list(s.template_args),
                "grid": module.text(s.grid),
                "block": module.text(s.block),
                "shared": module.text(s.shared) if s.shared else None,
                "stream": module.text(s.stream) if s.stream else None,
                "in": s.function,
            }
            for s in module.launch_sites
        ],
        "shared_arrays": [asdict(a) | {"span": span(a.span)} for a in module.shared_arrays],
        "perf_constants": [
            {
                "name": c.name,
                "kind": c.kind,
                "value": c.value,
                "line": c.span.line,
                "kernel": c.kernel,
                "used_in": sorted({u.kind for u in c.uses}),
            }
            for c in perf_constants(module)
        ],
        "diagnostics": [
            {"severity": d.severity, "line": d.span.line, "col": d.span.col, "message": d.message}
            for d in module.diagnostics
        ],
    }


def _shape(shape: LoopShape | None) -> dict[str, Any] | None:
    """A loop as the index analysis reads it (start, step, bound, how threads share it)."""
    if shape is None:
        return None
    return {
        "stride": shape.stride,
        "start": None if shape.start is None else str(shape.start),
        "step": None if shape.step is None else str(shape.step),
        "bound": None if shape.bound is None else str(shape.bound),
        "partitions": shape.partitions,
    }


_STRIDE_WORDS = {
    "block": "block-stride",
    "grid": "grid-stride",
    "grid-blocks": "rows over blocks",
    "warp": "warp-stride",
    "unit": "sequential",
}


def render_text(info: dict[str, Any]) -> str:
    lines = [f"{info['file']}"]
    for k in info["kernels"]:
        if "skipped" in k:
            lines.append(f"  kernel {k['name']} (line {k['line']}): skipped, {k['skipped']}")
            continue
        tps = ", ".join(
            f"{t['kind']} {t['name']}" + (f"={t['default']}" if t["default"] else "")
            for t in k["template_params"]
        )
        lines.append(f"  kernel {k['name']} (line {k['line']})" + (f" template<{tps}>" if tps else ""))
        if k["launch_bounds"]:
            lb = k["launch_bounds"]
            lines.append(
                f"    __launch_bounds__({lb['max_threads']}"
                + (f", {lb['min_blocks']}" if lb["min_blocks"] else "")
                + ")"
            )
        for p in k["params"]:
            flags = [
                f
                for f, on in (("ptr", p["pointer"]), ("const", p["const"]), ("restrict", p["restrict"]))
                if on
            ]
            lines.append(f"    param {p['name']}: {p['type']}" + (f"  [{', '.join(flags)}]" if flags else ""))
        for a in k.get("block_size_names", []):
            value = "" if a["value"] is None else f" = {a['value']}"
            what = f"block size {a['name']}{value} ({a['kind']})"
            lines.append(f"    {what}: every launch passes it as the block, so it is blockDim.x")
        t = k.get("thread_index")
        if t is not None:
            g = t["guard"]
            guard = ""
            if g is not None:
                guard = f", guarded by {t['var']} < {g['bound']} ({g['kind']}, line {g['line']})"
            where = f"({t['type'] or 'int'}, line {t['line']})"
            lines.append(f"    thread index {t['var']} = {t['form']} {where}{guard}")
        for lp in k["loops"]:
            header = "; ".join(x or "" for x in (lp["init"], lp["cond"], lp["step"]))
            pragma = f"  #pragma {lp['pragma']}" if lp["pragma"] else ""
            indent = "  " * lp["depth"]
            shape = lp.get("shape")
            word = _STRIDE_WORDS.get(shape["stride"], "") if shape else ""
            tag = f"  [{word}]" if word else ""
            head = f"{indent}loop {lp['id']} {lp['kind']} line {lp['line']}"
            lines.append(f"    {head}: ({header}){pragma}{tag}")
    if info["device_functions"]:
        lines.append(f"  device functions: {', '.join(info['device_functions'])}")
    for s in info["launch_sites"]:
        targs = f"<{', '.join(s['template_args'])}>" if s["template_args"] else ""
        cfg = ", ".join(x for x in (s["grid"], s["block"], s["shared"], s["stream"]) if x)
        lines.append(f"  launch {s['kernel']}{targs}<<<{cfg}>>> (line {s['line']}, in {s['in']})")
    for a in info["shared_arrays"]:
        dims = "".join(f"[{d}]" for d in a["dims"])
        lines.append(
            f"  shared {'extern ' if a['extern'] else ''}{a['type']} {a['name']}{dims} in {a['function']}"
        )
    for c in info["perf_constants"]:
        value = "?" if c["value"] is None else c["value"]
        used = ", ".join(c["used_in"]) or "kernel"
        lines.append(f"  perf constant {c['name']} = {value} ({c['kind']}, line {c['line']}; used in {used})")
    for d in info["diagnostics"]:
        lines.append(f"  {d['severity']}: {info['file']}:{d['line']}:{d['col']}: {d['message']}")
    return "\n".join(lines)


def run_facts(args: argparse.Namespace) -> int:
    from ktx.ir.facts.text import render

    blocks = []
    for path in args.files:
        module = parse_file(path)
        check_module(module)
        kernels = [module.kernel(args.kernel)] if args.kernel else list(module.kernels)
        blocks += [render(module.facts(k)) for k in kernels]
    print("\n\n".join(blocks))
    return 0


def run(args: argparse.Namespace) -> int:
    if args.facts:
        return run_facts(args)
    infos = []
    for path in args.files:
        module = parse_file(path)
        check_module(module)
        infos.append(summary(module))
    if args.json:
        json.dump(infos if len(infos) > 1 else infos[0], sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print("\n\n".join(render_text(i) for i in infos))
    return 0
