"""benchmarks/rows/plan_dry.py: the rules planner's first round on the suite's norms, with the
kernels' real facts and probes (modelled numbers). Issue 23: the row passes must be chosen where
the headroom is, in the round a short budget still reaches."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _plan_dry() -> ModuleType:
    spec = importlib.util.spec_from_file_location("plan_dry", ROOT / "benchmarks" / "rows" / "plan_dry.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["plan_dry"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_rmsnorm_rounds_build_the_hand_variants_pipelines() -> None:
    """Round 1: one block a row with 2-4 packs a thread (block-size with row-registers); round 2:
    the wide row at decode over a cluster on top of it; row-registers' probe names its loads."""
    analysis, views = _plan_dry().dry_run(ROOT / "kernels" / "rmsnorm", rounds=2)
    assert views[0].proposed == "block-size,row-registers", views[0].rationale
    assert views[1].proposed == "cluster-rows", views[1].rationale
    verdicts = {p: (v, w) for p, v, w in views[0].row_verdicts}
    assert verdicts["row-registers"][0] == "propose"
    assert "in (kept), w (early)" in verdicts["row-registers"][1]
    assert "with block-size in the same round" in views[0].rationale
    # the modelled shapes: decode under-filled and latency-bound, so the cluster rule fires
    assert any(s.underfilled for s in analysis.shapes)


@pytest.mark.slow
def test_a_real_code_refusal_names_its_construct_and_line() -> None:
    folder = ROOT / "benchmarks" / "realcode" / "ggml__norm_f32"
    src = ROOT / "benchmarks" / "realcode" / "src" / "ggml" / "src" / "ggml-cuda" / "norm.cu"
    if not src.is_file():
        pytest.skip("the real-code sources are not fetched (benchmarks/realcode/fetch.py)")
    _, views = _plan_dry().dry_run(folder, rounds=1)
    why = dict((p, w) for p, _, w in views[0].row_verdicts)["row-registers"]
    assert "loops at line 22 and line 36: a call between the loops that is not math (line 30:" in why, why
    assert "block_reduce" in why
