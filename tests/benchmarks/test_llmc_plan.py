"""The rules planner on llm.c's fused_residual v2, with its real facts and probes (modelled
numbers): session 9's rounds replayed as history, the next proposal checked (issue 23)."""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
LLMC = ROOT / "shared" / "llmc" / "dev" / "cuda" / "common.h"


def _plan_dry() -> ModuleType:
    spec = importlib.util.spec_from_file_location("plan_dry", ROOT / "benchmarks" / "rows" / "plan_dry.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["plan_dry"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
@pytest.mark.skipif(not LLMC.is_file(), reason="needs shared/llmc (cp -a /work/shared/llmc shared/llmc)")
def test_fused_residual_after_vectorize_gets_online_written_before_it() -> None:
    """Session 9: row-owner won, row-registers and online gained nothing on it, vectorize won
    (47.1x). Round 5 was cache-hints, because online's probe on ``row-owner,vectorize,online``
    had no site. Written before vectorize, online's probe rewrites the kernel, and the planner
    proposes ``row-owner,online,vectorize`` (v4's two passes over the row)."""
    from ktx.ir import parse

    from ktx.agent.analysis import analyze, kernel_facts
    from ktx.agent.catalog import Catalog
    from ktx.agent.loop import _Templates, error_budget, probe_passes
    from ktx.agent.plan import PassChoice, Plan
    from ktx.agent.planner import PlanContext, RoundSummary
    from ktx.agent.rules import RulesPlanner
    from ktx.registry import default_registry
    from ktx.specload import load_spec

    dry = _plan_dry()
    with tempfile.TemporaryDirectory() as scratch:
        folder = dry.staged(ROOT / "benchmarks" / "llmc" / "fused_residual_forward" / "v2", Path(scratch))
        spec = load_spec(folder)
        registry = default_registry()
        catalog = Catalog.from_registry(registry)
        facts = kernel_facts(parse(spec.source_text(), str(spec.folder / spec.source)), spec.kernel)
        tolerance, budget = error_budget(spec)
        pairs = [(dry.modelled(spec, p), "graph") for p in spec.shape_set("ladder").points]
        analysis = analyze(spec.name, "", facts, pairs, dry.DEVICE, flags=spec.flags, tolerance=tolerance,
                           fast_math_budget=budget)  # fmt: skip
        vec = PassChoice("vectorize", options=(("tie", True), ("peel", True)))
        current = Plan((PassChoice("row-owner"), vec), "round 4")
        history = (
            RoundSummary(1, "row-owner", "rules", "", "improved", 35.3),
            RoundSummary(2, "row-owner,row-registers", "rules", "", "no-gain", 36.0),
            RoundSummary(3, "row-owner,online", "rules", "", "no-gain", 35.3),
            RoundSummary(4, "row-owner,vectorize{tie=true,peel=true}", "rules", "", "improved", 47.1),
        )
        probes = probe_passes(spec, current, catalog, registry, _Templates(spec, registry))
        online = next(p for p in probes if p.name == "online")
        assert online.applies, online.text()
        assert dict(online.knobs).get("ONLINE") == (0, 1, 2)  # 2: the Σx, Σx² pair vectorize packs
        context = PlanContext(spec.name, 5, 2, analysis, catalog, current, history, tuple(probes))
        plan = RulesPlanner().plan(context).plan
    assert plan.pipeline == "row-owner,online,vectorize{tie=true,peel=true}", plan.rationale
