"""On a GPU: every PACKS config of row-registers on the suite's rmsnorm and fused_add_rmsnorm
verifies against the original kernel at every default shape (tokens 1-4096 x d 4096/8192, and
the specs' odd row lengths, where no pack path runs), without timing; alone and after block-size
at its smallest and largest y, and at y = 4 and 8 (where 2-4 packs cover a row of 4096: the
loads-first head's configs that the planner's block-size,row-registers round searches).

Also llm.c's layernorm v1 and fused_residual v2 after row-owner (scalar rows: PACKS elements a
thread), every feasible THREADS_PER_ROW x PACKS pair.

Skipped without CuPy and a device (and the llm.c cases without ../shared/llmc).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from passtest import ROOT
from test_row_owner import LADDER, LLMC

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
    if sized:  # block-size: each block knob at its smallest non-default value, then its largest,
        # and at 4 and 8 (BLOCK_Y: 128 and 256 threads, where 2-4 packs hold a row of 4096)
        others = [
            {k.name: min((v for v in k.values if v), default=0) for k in sized},
            {k.name: max(k.values) for k in sized},
        ]
        others += [{k.name: v for k in sized} for v in (4, 8) if all(v in k.values for k in sized)]
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


@pytest.mark.skipif(LLMC is None, reason="llm.c is not at ../shared/llmc")
@pytest.mark.parametrize("kernel", ["layernorm_forward", "fused_residual_forward"])
def test_llmc_every_scalar_packs_config_verifies(tmp_path: Path, kernel: str) -> None:
    """llm.c layernorm v1 and fused_residual v2 after row-owner: every PACKS value at each
    ownership branch (THREADS_PER_ROW 1, 32, 256, 1024), where feasible, against the naive
    kernel at the quick shape and the widest ladder shape, with the odd variants (C not a
    multiple of 32, a row fewer)."""
    pytest.importorskip("cupy")
    from ktx.measure.harness import Harness

    assert LLMC is not None
    lad = next(lad for lad in LADDER.LADDERS if lad.name == kernel)
    spec = load_spec(LADDER.stage(lad, lad.naive, LLMC, tmp_path / "stage"))
    t = template_for_spec(spec, "row-owner,row-registers")
    knobs = {k.name: k for k in t.knobs}
    assert "PACKS" in knobs, [o.message for o in t.outcomes]
    points = list(spec.shape_set("quick").points) + list(spec.shape_set("ladder").points)[-1:]
    jobs = []
    for tpr in (1, 32, 256, 1024):  # the thread, warp and block branches, the widest block
        for packs in knobs["PACKS"].values:
            if packs == 0:
                continue
            config = {"THREADS_PER_ROW": tpr, "PACKS": packs}
            for p in points:
                if t.space.feasible(config, dict(p.values)):
                    jobs.append((candidate_from_template(spec, t, config), p))
    assert len(jobs) >= 40
    failures: list[str] = []
    with Harness(spec, options=Options(rounds=2, time=False, odd=True)) as harness:
        for (cand, point), m in zip(jobs, harness.measure_many(jobs), strict=True):
            if not m.ok:
                failures.append(f"{dict(cand.config)} @ {point.name}: {m.status.value}: {m.message[:400]}")
    assert not failures, "\n".join(failures)
