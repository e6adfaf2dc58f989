"""On a GPU: every config of every semantic pass, on every kernel it applies to, verifies.

For each (pass, kernel) pinned in :data:`semantic.APPLIES`, the configs of
:func:`semantic.configs` (all of them for the small spaces) are instantiated and verified
against the spec's reference (the float64 Python reference where the spec has one, else the
original kernel) by the measurement harness, without timing: fresh seeded inputs, outputs
poisoned before each run, and the spec's odd-size variants of each shape (``d + 1``, ``d - 3``,
or ``n + 1`` and ``n - 3`` for the flat test kernel, whose packed loop then ends in a scalar
tail). Each config runs on the spec's ``quick`` shapes where its constraints allow, else on the
smallest default shape that does. ``KTX_SEMANTIC_JSON=FILE`` appends one JSON line per result.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from semantic import APPLIES, build, candidate, configs, load

from ktx.measure.gpu import Options
from ktx.spec import ShapePoint, Spec
from ktx.template import Template

pytestmark = pytest.mark.gpu
LIMIT = int(os.environ.get("KTX_SEMANTIC_GPU_LIMIT", "24"))
PAIRS = sorted((name, kernel) for name, kernels in APPLIES.items() for kernel in kernels)


def shapes_for(spec: Spec, t: Template, config: dict[str, int]) -> list[ShapePoint]:
    def ok(p: ShapePoint) -> bool:
        return spec.satisfies(p) and t.space.feasible(config, spec.env(p))

    names = {s.name for s in spec.shapes}
    quick = [p for p in spec.shape_set("quick" if "quick" in names else None).points if ok(p)]
    if quick:
        return quick
    ordered = sorted(spec.shape_set().points, key=lambda p: sum(v for _, v in p.values))
    found = [p for p in ordered if ok(p)][:1]
    if found:
        return found
    # Short rows (rows-per-block wants them): the smallest shape with its row sizes cut down.
    for size in (64, 96, 128, 256):
        for base in ordered:
            keep = ("tokens", "rows", "topk")
            values = tuple((k, v if k in keep else min(v, size)) for k, v in base.values)
            point = ShapePoint(tuple((k, 64 if k in ("tokens", "rows") else v) for k, v in values))
            if ok(point):
                return [point]
    return []


@pytest.mark.parametrize(("name", "kernel"), PAIRS, ids=[f"{n}:{k}" for n, k in PAIRS])
def test_every_config_verifies(name: str, kernel: str) -> None:
    from ktx.measure.harness import Harness

    spec = load(kernel)
    t = build(spec, name)
    out = os.environ.get("KTX_SEMANTIC_JSON")
    jobs = [(candidate(spec, t, c), p) for c in configs(t, LIMIT) for p in shapes_for(spec, t, c)]
    assert jobs, f"no config of {name} on {kernel} fits any shape"
    failures: list[str] = []
    # vectorize{tail=false} holds only where its constraints do, and the spec's odd variants of a
    # shape (d + 1) break them on purpose: it is verified on the shapes that satisfy them.
    odd = "tail=false" not in name
    options = Options(rounds=max(3, spec.verify.rounds), time=False, odd=odd)
    with Harness(spec, options=options) as harness:
        for (cand, point), m in zip(jobs, harness.measure_many(jobs), strict=True):
            config = dict(cand.config)
            if out:
                row = {
                    "pass": name,
                    "kernel": kernel,
                    "config": config,
                    "shape": point.name,
                    "status": m.status.value,
                    "verified": list(m.verified),
                    "max_abs_err": m.max_abs_err,
                    "message": m.message[:300],
                }
                with Path(out).open("a") as f:
                    f.write(json.dumps(row) + "\n")
            if not m.ok:
                failures.append(f"{config} @ {point.name}: {m.status.value}: {m.message[:400]}")
    assert not failures, "\n".join(failures)
