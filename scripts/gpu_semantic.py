"""GPU evidence for the semantic passes (issue 5): speed-of-light of the scalar baselines after
vectorize and tuning, and the gain each semantic pass adds over the structural-only result.

    python3 scripts/gpu_semantic.py sol   --out DIR            # act_and_mul_scalar, moe_sum_scalar
    python3 scripts/gpu_semantic.py gains --out DIR [--shapes quick|default] [--trials N]

Every number comes from the measurement harness (``ktx.measure``): each candidate is verified
against the spec's reference (odd sizes included) before it is timed, the time is the CUDA-graph
time per launch (what serving sees), and speed-of-light is bytes / measured copy bandwidth. The
search is deliberately plain and written out here, so the evidence does not depend on the tuner's
heuristics: an exhaustive grid where the space is small, seeded random samples where it is not,
and for the semantic knobs a sweep with the structural knobs held at their best.

``sol``: at the largest shape of each baseline's default set, the original, then
``vectorize,block-size`` over its whole grid, then ``cache-hints`` on top (each knob swept with
the others at their best). Writes ``sol.json``.

``gains``: for silu_and_mul, fused_add_rmsnorm and merge_attn_states (``--kernels`` to change),
shape by shape: the best of ``--trials`` structural configs (``block-size,launch-bounds,unroll``
with the default among them), then for each semantic pass P the best of P's knobs over that
structural best (pipeline structural + P), and all applicable semantic passes together. Gain =
structural-best time / time with P (above 1: P helps). Writes ``gains.json``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ktx.measure.gpu import Options  # noqa: E402
from ktx.measure.harness import Harness  # noqa: E402
from ktx.measure.types import Candidate, Measurement  # noqa: E402
from ktx.pipeline import candidate_from_template, template_for_spec  # noqa: E402
from ktx.spec import ShapePoint, Spec  # noqa: E402
from ktx.specload import load_spec  # noqa: E402
from ktx.template import Template  # noqa: E402

STRUCTURAL = "block-size,launch-bounds,unroll"
SEMANTIC = ("vectorize", "hoist", "rows-per-block", "warp-reduce", "cache-hints", "fast-math")
SOL_KERNELS = ("act_and_mul_scalar", "moe_sum_scalar")
GAIN_KERNELS = ("silu_and_mul", "fused_add_rmsnorm", "merge_attn_states")


def log(*args: object) -> None:
    print(*args, file=sys.stderr, flush=True)


def build(spec: Spec, pipeline: str) -> Template:
    return template_for_spec(spec, pipeline)


def candidate(spec: Spec, t: Template, config: Mapping[str, int]) -> Candidate:
    return candidate_from_template(spec, t, config)


def feasible(t: Template, spec: Spec, point: ShapePoint, config: Mapping[str, int]) -> bool:
    return t.space.feasible(dict(config), spec.env(point))


def row(m: Measurement) -> dict[str, Any]:
    return {
        "config": dict(m.config),
        "status": m.status.value,
        "graph_us": m.graph_us,
        "single_us": m.single_us,
        "sol_fraction": m.sol_fraction,
        "max_abs_err": m.max_abs_err,
        "registers": None if m.resources is None else m.resources.registers,
        "message": m.message[:300],
    }


def ratio(before: Measurement | None, after: Measurement | None) -> float | None:
    """before / after in time (above 1: ``after`` is faster)."""
    if before is None or after is None or not before.time_us or not after.time_us:
        return None
    return before.time_us / after.time_us


def best(ms: Iterable[Measurement]) -> Measurement | None:
    ok = [m for m in ms if m.ok and m.time_us is not None]
    return min(ok, key=lambda m: m.time_us or float("inf")) if ok else None


def measure(
    harness: Harness, spec: Spec, t: Template, point: ShapePoint, configs: Sequence[Mapping[str, int]]
) -> list[Measurement]:
    jobs = [(candidate(spec, t, c), point) for c in configs if feasible(t, spec, point, c)]
    return list(harness.measure_many(jobs))


def harness(spec: Spec, args: argparse.Namespace) -> Harness:
    opts = Options(rounds=args.rounds or spec.verify.rounds, odd_rounds=args.odd_rounds)
    if args.handler:
        return Harness(spec, options=opts, handler=args.handler)
    return Harness(spec, options=opts)


def largest(spec: Spec) -> ShapePoint:
    points = [p for p in spec.shape_set().points if spec.satisfies(p)]
    return max(points, key=lambda p: spec.bytes_moved(spec.env(p)))


def sweep(base: Mapping[str, int], t: Template, names: Sequence[str]) -> list[dict[str, int]]:
    """``base`` with each named knob set to each of its values, the others as in ``base``."""
    out = [dict(base)]
    for name in names:
        for v in t.space.knob(name).values:
            c = {**base, name: v}
            if c not in out:
                out.append(c)
    return out


# -- sol ---------------------------------------------------------------------------------------


def phase_sol(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name in args.kernels or SOL_KERNELS:
        spec = load_spec(ROOT / "kernels" / name)
        point = largest(spec)
        log(f"== sol {name} @ {point.name}")
        with harness(spec, args) as h:
            original = h.measure(h.original, point)
            stage1 = build(spec, "vectorize,block-size")
            grid = [
                dict(zip([k.name for k in stage1.knobs], vals, strict=True))
                for vals in itertools.product(*[k.values for k in stage1.knobs])
            ]
            ms1 = measure(h, spec, stage1, point, grid)
            b1 = best(ms1)
            stage2 = build(spec, "vectorize,block-size,cache-hints")
            hints = [k.name for k in stage2.knobs if k.pass_name == "cache-hints"]
            base = {**stage2.space.defaults(), **(dict(b1.config) if b1 else {})}
            ms2 = measure(h, spec, stage2, point, sweep(base, stage2, hints))
            b2 = best(ms2)
            if b2 is not None and hints:
                picked = dict(base)
                for k in hints:  # each knob's best value, then the combination
                    mine = [m for m in ms2 if all(m.config.get(o) == base.get(o) for o in hints if o != k)]
                    top = best(mine)
                    if top is not None:
                        picked[k] = top.config[k]
                if picked != dict(b2.config):
                    ms2 += measure(h, spec, stage2, point, [picked])
                    b2 = best(ms2)
        final = min((m for m in (b1, b2) if m is not None), key=lambda m: m.time_us or 1e9, default=None)
        results[name] = {
            "shape": point.name,
            "original": row(original),
            "vectorize,block-size": {"best": row(b1) if b1 else None, "tried": [row(m) for m in ms1]},
            "vectorize,block-size,cache-hints": {
                "best": row(b2) if b2 else None,
                "tried": [row(m) for m in ms2],
            },
            "best": row(final) if final else None,
            "sol_fraction": final.sol_fraction if final else None,
            "speedup": (original.time_us / final.time_us)
            if final and original.time_us and final.time_us
            else None,
            "meets_85": bool(final and (final.sol_fraction or 0) >= 0.85),
        }
        log(
            f"   original {original.time_us} us, SoL {original.sol_fraction}; "
            f"best {row(final) if final else None}"
        )
    return results


# -- gains -------------------------------------------------------------------------------------


def phase_gains(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    rng = random.Random(args.seed)
    for name in args.kernels or GAIN_KERNELS:
        spec = load_spec(ROOT / "kernels" / name)
        names = {s.name for s in spec.shapes}
        set_name = args.shapes if args.shapes in names else None
        points = [p for p in spec.shape_set(set_name).points if spec.satisfies(p)]
        structural = build(spec, STRUCTURAL)
        per_pass = {p: build(spec, f"{STRUCTURAL},{p}") for p in SEMANTIC}
        applicable = [
            p
            for p, t in per_pass.items()
            if any(o.pass_name == p and o.status == "rewritten" and o.site != "prelude" for o in t.outcomes)
        ]
        everything = build(spec, ",".join([STRUCTURAL, *applicable])) if applicable else None
        results[name] = {"structural": STRUCTURAL, "applicable": applicable, "shapes": {}}
        with harness(spec, args) as h:
            for point in points:
                log(f"== gains {name} @ {point.name}")
                t0 = time.time()
                original = h.measure(h.original, point)
                space = structural.space
                configs = [space.defaults()]
                for _ in range(args.trials * 20):
                    if len(configs) > args.trials:
                        break
                    c = {k.name: rng.choice(k.values) for k in space.knobs}
                    if c not in configs and feasible(structural, spec, point, c):
                        configs.append(c)
                ms = measure(h, spec, structural, point, configs)
                bs = best(ms)
                shape: dict[str, Any] = {
                    "original": row(original),
                    "structural": {"best": row(bs) if bs else None, "tried": len(ms)},
                    "passes": {},
                }
                base_cfg = dict(bs.config) if bs else space.defaults()
                picks: dict[str, int] = {}
                for p in applicable:
                    t = per_pass[p]
                    new = [k.name for k in t.knobs if k.pass_name == p]
                    base = {**t.space.defaults(), **{k: v for k, v in base_cfg.items() if k in t.space.names}}
                    configs_p = sweep(base, t, new)[: args.limit + 1]
                    mp = measure(h, spec, t, point, configs_p)
                    bp = best(mp)
                    gain = ratio(bs, bp)
                    shape["passes"][p] = {
                        "best": row(bp) if bp else None,
                        "tried": [row(m) for m in mp],
                        "gain": gain,
                    }
                    if bp is not None:
                        picks.update({k: bp.config[k] for k in new if k in bp.config})
                if everything is not None:
                    combo = {
                        **everything.space.defaults(),
                        **{k: v for k, v in {**base_cfg, **picks}.items() if k in everything.space.names},
                    }
                    ma = measure(h, spec, everything, point, [combo])
                    ba = best(ma)
                    shape["all"] = {
                        "pipeline": everything.pipeline,
                        "best": row(ba) if ba else (row(ma[0]) if ma else None),
                        "gain": (bs.time_us / ba.time_us)
                        if bs and ba and bs.time_us and ba.time_us
                        else None,
                    }
                shape["seconds"] = round(time.time() - t0, 1)
                results[name]["shapes"][point.name] = shape
                log(
                    f"   structural {bs.time_us if bs else None} us; "
                    + ", ".join(f"{p} x{(v['gain'] or 0):.3f}" for p, v in shape["passes"].items())
                )
    return results


# -- tables ------------------------------------------------------------------------------------


def table_sol(data: Mapping[str, Any]) -> str:
    lines = [
        f"{'kernel':22} {'shape':28} {'orig us':>8} {'orig SoL':>8} {'best us':>8} {'SoL':>6} {'x':>6}"
        "  config"
    ]
    for name, r in data.items():
        o, b = r["original"], r["best"] or {}
        lines.append(
            f"{name:22} {r['shape']:28} {o['graph_us'] or 0:8.2f} {100 * (o['sol_fraction'] or 0):7.0f}% "
            f"{b.get('graph_us') or 0:8.2f} {100 * (r['sol_fraction'] or 0):5.0f}% {r['speedup'] or 0:6.2f}  "
            f"{json.dumps(b.get('config'))}{'' if r['meets_85'] else '  (< 85%)'}"
        )
    return "\n".join(lines)


def table_gains(data: Mapping[str, Any]) -> str:
    lines = [f"{'kernel':18} {'shape':32} {'struct us':>9}  gain over structural-only (x)"]
    for name, r in data.items():
        for shape, s in r["shapes"].items():
            b = (s["structural"]["best"] or {}).get("graph_us") or 0
            gains = "  ".join(
                f"{p}={v['gain']:.3f}" if v["gain"] else f"{p}=-" for p, v in s["passes"].items()
            )
            if "all" in s:
                gains += f"  all={s['all']['gain']:.3f}" if s["all"]["gain"] else "  all=-"
            lines.append(f"{name:18} {shape:32} {b:9.2f}  {gains}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("phase", choices=("sol", "gains", "table"))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--kernels", nargs="*", default=None)
    ap.add_argument("--shapes", default="quick", help="shape set for gains (quick or default)")
    ap.add_argument("--trials", type=int, default=12, help="structural configs per shape (gains)")
    ap.add_argument("--limit", type=int, default=12, help="configs per semantic pass per shape (gains)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=0, help="verification rounds (default: the spec's)")
    ap.add_argument("--odd-rounds", type=int, default=0, help="rounds per odd-size variant (0: --rounds)")
    ap.add_argument("--handler", default=None, help=argparse.SUPPRESS)  # a fake worker, for CPU tests
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.phase == "sol":
        data = phase_sol(args)
        (args.out / "sol.json").write_text(json.dumps(data, indent=1) + "\n")
        print(table_sol(data))
        return 0 if all(r["meets_85"] for r in data.values()) else 1
    if args.phase == "gains":
        data = phase_gains(args)
        (args.out / "gains.json").write_text(json.dumps(data, indent=1) + "\n")
        print(table_gains(data))
        return 0
    for fname, fn in (("sol.json", table_sol), ("gains.json", table_gains)):
        path = args.out / fname
        if path.exists():
            print(fn(json.loads(path.read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
