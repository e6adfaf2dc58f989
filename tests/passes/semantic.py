"""Helpers for the semantic passes' tests: spec-driven templates, candidates, config sets.

The semantic passes (vectorize, fast-math, warp-reduce, hoist, cache-hints, rows-per-block) are
checked on the suite kernels and on two test kernels under ``tests/passes/kernels`` (a flat
grid-stride loop whose length is odd, and a shared-memory tree reduction) that exercise what no
suite kernel has.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

from passtest import ROOT

from ktx.measure.types import Candidate
from ktx.pipeline import candidate_from_template, template_for_spec
from ktx.spec import Spec
from ktx.specload import load_spec
from ktx.template import Template

SEMANTIC = ("vectorize", "fast-math", "warp-reduce", "hoist", "cache-hints", "rows-per-block")
TEST_KERNELS = ROOT / "tests" / "passes" / "kernels"
#: Where each semantic pass exposes knobs or rewrites (suite kernels with a spec, test kernels).
APPLIES: dict[str, set[str]] = {
    "vectorize": {"act_and_mul_scalar", "moe_sum", "moe_sum_scalar", "scaled_add", "tree_sum"},
    "vectorize{tail=false}": {"act_and_mul_scalar", "moe_sum", "moe_sum_scalar", "scaled_add", "tree_sum"},
    "fast-math": {
        "act_and_mul_scalar",
        "fused_add_rmsnorm",
        "merge_attn_states",
        "per_token_group_quant_fp8",
        "rmsnorm",
        "scaled_add",
        "silu_and_mul",
    },
    "warp-reduce": {"tree_sum"},
    "hoist": {"scaled_add"},
    "cache-hints": {
        "act_and_mul_scalar",
        "fused_add_rmsnorm",
        "merge_attn_states",
        "moe_sum",
        "moe_sum_scalar",
        "per_token_group_quant_fp8",
        "rmsnorm",
        "scaled_add",
        "silu_and_mul",
        "tree_sum",
    },
    "rows-per-block": {
        "act_and_mul_scalar",
        "merge_attn_states",
        "moe_sum",
        "moe_sum_scalar",
        "per_token_group_quant_fp8",
        "silu_and_mul",
    },
}


def spec_dirs() -> list[Path]:
    """Every kernel folder with a spec: the suite's and the test kernels."""
    suite = sorted(p.parent for p in (ROOT / "kernels").glob("*/ktx.toml"))
    return suite + sorted(p.parent for p in TEST_KERNELS.glob("*/ktx.toml"))


def build(spec: Spec, pipeline: str) -> Template:
    """The template of ``pipeline`` on the spec's kernel, launched as the spec says."""
    return template_for_spec(spec, pipeline)


def candidate(spec: Spec, template: Template, config: dict[str, int]) -> Candidate:
    return candidate_from_template(spec, template, config)


def configs(template: Template, limit: int = 64, seed: int = 0) -> list[dict[str, int]]:
    """Every config when there are at most ``limit``; else the default, each knob value alone
    (others at their defaults), every knob at its largest value, and random fill-ins."""
    knobs = template.space.knobs
    every = [
        dict(zip([k.name for k in knobs], vals, strict=True))
        for vals in itertools.product(*[k.values for k in knobs])
    ]
    every = [c for c in every if template.space.feasible(c)]
    if len(every) <= limit:
        return every
    chosen = [template.space.defaults()]
    for k in knobs:
        for v in k.values:
            c = {**template.space.defaults(), k.name: v}
            if c not in chosen:
                chosen.append(c)
    top = {k.name: max(k.values) for k in knobs}
    if top not in chosen:
        chosen.append(top)
    chosen = [c for c in chosen if template.space.feasible(c)]
    rng = random.Random(seed)
    rest = [c for c in every if c not in chosen]
    chosen += rng.sample(rest, min(len(rest), max(0, limit - len(chosen))))
    return chosen


def load(name: str) -> Spec:
    folder = ROOT / "kernels" / name
    if not folder.exists():
        folder = TEST_KERNELS / name
    return load_spec(folder)
