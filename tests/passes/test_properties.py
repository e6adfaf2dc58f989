"""Properties of every built-in pass on every kernel of the suite (``kernels/*/kernel.cu``).

* an empty pipeline gives the input bytes;
* the same pipeline applied twice gives the same bytes (and the same knobs and launch);
* replaying the trace gives the template's bytes, and reloading from it gives the same template;
* every knob's default is in its domain, and the default config instantiates without a trace of
  the machinery; for passes whose default is textually the original it *is* the original
  (plus one comment line);
* where each pass applies is pinned, so a change in coverage shows up here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ktx.ir import parse
from passtest import SUITE

from ktx.pipeline import run
from ktx.registry import default_registry
from ktx.template import Template, Trace

PASSES = [cls.name for cls in default_registry()]
#: Passes whose default config is byte-for-byte the original kernel.
TRANSPARENT = {
    "expose",
    "block-size",
    "launch-bounds",
    "unroll",
    "cluster-rows",
    "early-loads",
    "loads-first",
    "row-owner",
}
#: Kernels on which each pass exposes at least one knob (among the kernels listed in KNOWN;
#: kernels added to the suite later are checked for the properties, not pinned here).
KNOWN = {
    "fused_add_rmsnorm",
    "merge_attn_states",
    "moe_sum",
    "per_token_group_quant_fp8",
    "rmsnorm",
    "rope",
    "silu_and_mul",
}
APPLIES = {
    "block-size": {"fused_add_rmsnorm", "merge_attn_states", "moe_sum", "rmsnorm", "rope", "silu_and_mul"},
    "cluster-rows": {"fused_add_rmsnorm", "rmsnorm"},
    "coarsen": {"merge_attn_states"},
    "early-loads": {"fused_add_rmsnorm", "per_token_group_quant_fp8", "rmsnorm"},
    "expose": {"fused_add_rmsnorm", "merge_attn_states", "moe_sum", "rmsnorm", "rope", "silu_and_mul"},
    "loads-first": {"merge_attn_states"},
    "launch-bounds": {"fused_add_rmsnorm", "merge_attn_states", "moe_sum", "rmsnorm", "rope", "silu_and_mul"},
    "row-owner": set(),  # the suite has no thread-per-row kernel (llm.c's are in test_row_owner)
    "split": {"moe_sum", "rope", "silu_and_mul"},
    "tile": {"fused_add_rmsnorm", "per_token_group_quant_fp8", "rmsnorm", "rope", "silu_and_mul"},
    "unroll": {
        "fused_add_rmsnorm",
        "moe_sum",
        "per_token_group_quant_fp8",
        "rmsnorm",
        "rope",
        "silu_and_mul",
    },
}
PIPELINES = [*PASSES, "expose,block-size,launch-bounds,unroll", "split,tile{sizes=2|4},unroll{max=4}"]


def _id(path: Path) -> str:
    return path.parent.name


@pytest.fixture(scope="module")
def templates() -> dict[tuple[str, str], Template]:
    out: dict[tuple[str, str], Template] = {}
    for path in SUITE:
        for pipeline in PIPELINES:
            out[(path.parent.name, pipeline)] = run(path.read_text(), pipeline, path=str(path))
    return out


@pytest.mark.parametrize("path", SUITE, ids=_id)
def test_empty_pipeline_is_identical(path: Path) -> None:
    data = path.read_bytes()
    t = run(data, "")
    assert t.source.encode() == data
    assert t.instantiate().encode() == data


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("path", SUITE, ids=_id)
def test_deterministic_replayable_and_well_formed(
    path: Path, pipeline: str, templates: dict[tuple[str, str], Template]
) -> None:
    t = templates[(path.parent.name, pipeline)]
    again = run(path.read_text(), pipeline, path=str(path))
    assert again.source == t.source
    assert again.space == t.space and again.mapping == t.mapping
    trace = Trace.from_json(t.trace.to_json())
    assert trace.replay(path.read_bytes()).decode() == t.source
    assert Template.from_trace(path.read_text(), trace).space == t.space
    before = {d.message for d in parse(t.original).diagnostics}
    assert {d.message for d in parse(t.source).diagnostics} <= before, "the template parses"
    for knob in t.knobs:
        assert knob.default in knob.values
    out = t.instantiate()
    assert "KTX_" not in out and "ktx:knobs" not in out
    if t.knobs and set(pipeline.split(",")) <= TRANSPARENT:
        kept = [line for line in out.splitlines(keepends=True) if not line.startswith("// ktx: `")]
        assert "".join(kept) == t.original


@pytest.mark.parametrize("name", sorted(APPLIES))
def test_where_each_pass_applies(name: str, templates: dict[tuple[str, str], Template]) -> None:
    applied = {kernel for (kernel, pipeline), t in templates.items() if pipeline == name and t.knobs}
    assert applied & KNOWN == APPLIES[name]
    for (_, pipeline), t in templates.items():
        if pipeline == name and not t.knobs:
            assert t.source == t.original, "a pass that exposes nothing changes nothing"
            assert t.outcomes, "and says why"
