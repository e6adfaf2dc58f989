"""Pipeline text, typed options, and the ordering graph (requires / after / conflicts)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from ktx.ir.errors import KtxError

from ktx.passbase import Option, Pass, Rewriter, Site, Skip, Target
from ktx.pipeline import instantiate_specs, parse_pipeline, run, schedule
from ktx.registry import Registry, default_registry

KERNEL = """\
__global__ void k(float* x, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = 0.f;
}
void launch(float* x, int n) {
  k<<<1, 256>>>(x, n);
}
"""


class _Noop(Pass[Site]):
    """A pass that only exists to be ordered."""

    summary = "does nothing"
    options: ClassVar[tuple[Option, ...]] = (Option("n", "int", 1, "a number"),)

    def sites(self, target: Target) -> Iterator[Site | Skip]:
        yield Skip("nothing to do", target.kernel.name)

    def rewrite(self, site: Site, rw: Rewriter) -> None:  # pragma: no cover - never a site
        raise AssertionError


def make(name: str, **meta: tuple[str, ...]) -> type[Pass[Any]]:
    return type(name.replace("-", "_"), (_Noop,), {"name": name, **meta})


def registry(*classes: type[Pass[Any]]) -> Registry:
    reg = Registry()
    for cls in classes:
        reg.register(cls)
    return reg


def order(reg: Registry, text: str) -> list[tuple[str, str]]:
    return [(s.pass_.name, s.reason) for s in schedule(instantiate_specs(parse_pipeline(text), reg), reg)]


def test_parse_pipeline_options_and_whitespace() -> None:
    specs = parse_pipeline(" block-size , unroll{max=8, loops=L0|L2},tile{sizes=16|32|64} ")
    assert [s.name for s in specs] == ["block-size", "unroll", "tile"]
    assert specs[1].options == (("max", "8"), ("loops", "L0|L2"))
    assert str(specs[2]) == "tile{sizes=16|32|64}"
    assert parse_pipeline("") == ()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("unroll{max=8", "unclosed"),
        ("unroll}", "without"),
        ("unroll,,tile", "empty element"),
        ("unroll{max}", "key=value"),
    ],
)
def test_malformed_pipelines_fail(text: str, message: str) -> None:
    with pytest.raises(KtxError, match=message):
        parse_pipeline(text)


def test_options_are_typed_and_unknown_ones_listed() -> None:
    reg = default_registry()
    (unroll,) = instantiate_specs(parse_pipeline("unroll{max=4,loops=L0|L2}"), reg)
    assert unroll.values == {"max": 4, "loops": ("L0", "L2")}
    (tile,) = instantiate_specs(parse_pipeline("tile{sizes=16|32,unroll=false}"), reg)
    assert tile.values["sizes"] == (16, 32) and tile.values["unroll"] is False
    with pytest.raises(KtxError, match="has no option 'size'") as info:
        instantiate_specs(parse_pipeline("tile{size=4}"), reg)
    assert "sizes (ints" in info.value.hint
    with pytest.raises(KtxError, match="expects an integer"):
        instantiate_specs(parse_pipeline("unroll{max=many}"), reg)


def test_unknown_pass_lists_the_valid_ones() -> None:
    with pytest.raises(KtxError, match="unknown pass 'unrol'") as info:
        instantiate_specs(parse_pipeline("unrol"), default_registry())
    assert "did you mean 'unroll'" in info.value.hint
    assert "block-size" in info.value.hint and "split" in info.value.hint


def test_a_pass_given_twice_fails() -> None:
    with pytest.raises(KtxError, match="twice"):
        instantiate_specs(parse_pipeline("unroll,unroll"), default_registry())


def test_order_is_stable_and_follows_after_edges() -> None:
    reg = registry(make("a"), make("b", after=("a",)), make("c"))
    assert [n for n, _ in order(reg, "c,a,b")] == ["c", "a", "b"]
    assert [n for n, _ in order(reg, "b,c,a")] == ["c", "a", "b"]
    assert [n for n, _ in order(reg, "b,a")] == ["a", "b"]


def test_required_passes_are_added_and_say_why() -> None:
    reg = registry(make("base"), make("mid", requires=("base",)), make("top", requires=("mid",)))
    assert order(reg, "top") == [("base", "required by mid"), ("mid", "required by top"), ("top", "pipeline")]
    assert order(reg, "base,top")[0] == ("base", "pipeline")


def test_conflicts_fail_naming_both() -> None:
    reg = registry(make("a"), make("b", conflicts=("a",)))
    with pytest.raises(KtxError, match="passes 'b' and 'a' conflict"):
        order(reg, "a,b")
    assert [n for n, _ in order(reg, "b")] == ["b"]


def test_cycles_fail_naming_the_passes() -> None:
    reg = registry(make("a", after=("b",)), make("b", after=("a",)))
    with pytest.raises(KtxError, match=r"cycle: (a -> b -> a|b -> a -> b)"):
        order(reg, "a,b")


def test_soft_edges_order_unless_they_would_close_a_cycle() -> None:
    reg = registry(make("a", prefer_after=("b",)), make("b"), make("c", after=("a",)))
    assert [n for n, _ in order(reg, "a,b")] == ["b", "a"], "a prefers to run after b"
    reg = registry(make("a", prefer_after=("b",)), make("b", after=("a",)))
    assert [n for n, _ in order(reg, "a,b")] == ["a", "b"], "the hard edge wins; no cycle error"


def test_split_and_coarsen_run_after_vectorize_so_it_still_sees_the_plain_loop() -> None:
    assert [n for n, _ in order(default_registry(), "split,vectorize")] == ["vectorize", "split"]
    assert next(n for n, _ in order(default_registry(), "coarsen,vectorize")) == "vectorize"
    # rows-per-block runs after split and vectorize after rows-per-block (hard edges): the soft
    # edge that would close the loop is dropped, not reported as a cycle
    names = [n for n, _ in order(default_registry(), "split,rows-per-block,vectorize")]
    assert names.index("split") < names.index("rows-per-block") < names.index("vectorize")


def test_builtin_ordering_puts_structural_passes_before_unroll() -> None:
    names = [n for n, _ in order(default_registry(), "unroll,tile,launch-bounds")]
    assert names == ["tile", "unroll", "block-size", "launch-bounds"]


def test_builtin_conflict_split_coarsen() -> None:
    with pytest.raises(KtxError, match="conflict"):
        run(KERNEL, "split,coarsen")


def test_run_records_required_passes_in_the_trace() -> None:
    t = run(KERNEL, "launch-bounds")
    assert [(s.pass_name, s.reason) for s in t.trace.steps[:2]] == [
        ("block-size", "required by launch-bounds"),
        ("launch-bounds", "pipeline"),
    ]


def test_a_template_cannot_be_templated_again() -> None:
    t = run(KERNEL, "unroll")
    with pytest.raises(KtxError, match="already a ktx template"):
        run(t.source, "tile")


def test_spec_seam_for_the_harness() -> None:
    from pathlib import Path

    from ktx.pipeline import candidate, template_for_spec
    from ktx.specload import load_spec

    spec = load_spec(Path(__file__).resolve().parents[1] / "kernels" / "rmsnorm")
    t = template_for_spec(spec, "block-size")
    launch = t.launch()
    assert launch is not None and launch.shared.startswith("cdiv(BLOCK_Y if BLOCK_Y else max(1,")
    c = candidate(spec, "block-size", {"BLOCK_Y": 8})
    assert c.name_expression == "rmsnorm_kernel<__nv_bfloat16>"
    assert c.block[1] == "BLOCK_Y if BLOCK_Y else max(1, cdiv(min(1024, d // 8), 32))"
    assert c.config == {"BLOCK_Y": 8} and c.flags == spec.flags and "KTX_" not in c.source
