"""On a GPU: every THREADS_PER_ROW config of llm.c's layernorm and softmax kernel1 verifies.

The unmodified llm.c files are staged the way ``benchmarks/llmc/run.py`` stages them (its spec,
reference and headers), the template is built the way ``ktx optimize`` builds it
(:func:`ktx.pipeline.template_for_spec`), and the measurement harness verifies each config
against the original kernel (fresh seeded inputs, poisoned outputs, the specs' odd variants:
one row fewer, so the last block holds a partial group of rows, and row lengths that are not
multiples of 32 or of a pack), without timing. Configs: every THREADS_PER_ROW alone; 1, 32 and
256 with vectorize's and unroll's largest values composed on the new loops (and, for all four
naive row kernels, ``vectorize{tie=true,peel=true}``, the rules planner's choice). Shapes: each spec's
``quick`` shape, and softmax's rows=1024, C=50257 (llm.c's vocabulary) for the long-row path.
The other naive row kernels of the benchmark (encoder_forward v1, fused_residual_forward v2,
bf16) are verified under every THREADS_PER_ROW alone.

Skipped without CuPy and a device, or without llm.c (``../shared/llmc`` or ``shared/llmc``).
About two minutes on an H100 (the naive softmax at C=50257 takes ~33 ms a launch).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_row_owner import LADDER, LADDERS, LLMC

from ktx.measure.gpu import Options
from ktx.pipeline import candidate_from_template, template_for_spec
from ktx.specload import load_spec

pytestmark = pytest.mark.gpu

KERNELS = ("layernorm_forward", "softmax_forward")
CASES = [(stem, p) for stem in KERNELS for p in ("row-owner", "row-owner,vectorize", "row-owner,unroll")]
CASES += [(stem, "row-owner") for stem in LADDERS if stem not in KERNELS]
#: what the rules planner runs: one tied width over every loop of every ownership branch (the
#: naive kernels' write loops are packed behind ktx::apart, their pointers carry no __restrict__)
CASES += [(stem, "row-owner,vectorize{tie=true,peel=true}") for stem in LADDERS]


@pytest.mark.skipif(LLMC is None, reason="llm.c is not at ../shared/llmc")
@pytest.mark.parametrize(("stem", "passes"), CASES, ids=[f"{s}-{p}" for s, p in CASES])
def test_llmc_kernel1_every_config_verifies(tmp_path: Path, stem: str, passes: str) -> None:
    pytest.importorskip("cupy")
    from ktx.measure.harness import Harness

    assert LLMC is not None
    lad = next(lad for lad in LADDER.LADDERS if lad.name == stem)
    spec = load_spec(LADDER.stage(lad, lad.naive, LLMC, tmp_path / "stage"))
    t = template_for_spec(spec, passes)
    assert t.knobs[0].name == "THREADS_PER_ROW"
    rest = {k.name: max(k.values) for k in t.knobs[1:]}
    values = t.knobs[0].values if passes == "row-owner" else (1, 32, 256)
    # THREADS_PER_ROW=1 alone is the original; composed, it is the thread's own row packed
    # ROW_BLOCK (the block of a warp per row) at its widest where T = 32, the original's elsewhere
    configs = [
        {**rest, "THREADS_PER_ROW": v, "ROW_BLOCK": 1024 if v == 32 else 0}
        for v in values
        if v > 1 or len(rest) > 1
    ]
    points = list(spec.shape_set("quick").points)
    if stem == "softmax_forward" and passes == "row-owner":
        points += [p for p in spec.shape_set("ladder").points if "C=50257" in p.name][:1]
    jobs = [(candidate_from_template(spec, t, c), p) for c in configs for p in points]
    failures: list[str] = []
    with Harness(spec, options=Options(rounds=2, time=False, odd=True)) as harness:
        for (cand, point), m in zip(jobs, harness.measure_many(jobs), strict=True):
            if not m.ok:
                failures.append(f"{dict(cand.config)} @ {point.name}: {m.status.value}: {m.message[:400]}")
    assert not failures, "\n".join(failures)
