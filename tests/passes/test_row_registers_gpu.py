"""On a GPU: every PACKS config of row-registers on the suite's rmsnorm and fused_add_rmsnorm
verifies against the original kernel at every default shape (tokens 1-4096 x d 4096/8192, and
the specs' odd row lengths, where no pack path runs), without timing; alone and after block-size
at its smallest and largest y (where 4 packs must cover the row with fewer threads).

Skipped without CuPy and a device.
"""

from __future__ import annotations

import pytest
from passtest import ROOT

from ktx.measure.gpu import Options
from ktx.pipeline import candidate_from_template, template_for_spec
from ktx.specload import load_spec

pytestmark = pytest.mark.gpu

CASES = [
    (stem, p)
    for stem in ("rmsnorm", "fused_add_rmsnorm")
    for p in ("row-registers", "block-size,row-registers")
]


@pytest.mark.parametrize(("stem", "passes"), CASES, ids=[f"{s}-{p}" for s, p in CASES])
def test_every_packs_config_verifies(stem: str, passes: str) -> None:
    pytest.importorskip("cupy")
    from ktx.measure.harness import Harness

    spec = load_spec(ROOT / "kernels" / stem)
    t = template_for_spec(spec, passes)
    knobs = {k.name: k for k in t.knobs}
    assert "PACKS" in knobs, [o.message for o in t.outcomes]
    sized = [k for n, k in knobs.items() if n != "PACKS"]
    others: list[dict[str, int]] = [{}]
    if sized:  # block-size: each block knob at its smallest non-default value, then its largest
        others = [
            {k.name: min((v for v in k.values if v), default=0) for k in sized},
            {k.name: max(k.values) for k in sized},
        ]
    points = list(spec.shape_set("default").points)
    jobs = []
    for rest in others:
        for packs in (1, 2, 4):
            config = {**rest, "PACKS": packs}
            for p in points:
                if t.space.feasible(config, dict(p.values)):
                    jobs.append((candidate_from_template(spec, t, config), p))
    assert jobs
    failures: list[str] = []
    with Harness(spec, options=Options(rounds=2, time=False, odd=True)) as harness:
        for (cand, point), m in zip(jobs, harness.measure_many(jobs), strict=True):
            if not m.ok:
                failures.append(f"{dict(cand.config)} @ {point.name}: {m.status.value}: {m.message[:400]}")
    assert not failures, "\n".join(failures)
