"""Plans: validation against the catalog, pipeline text, schema, JSON extraction, knob ranges."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest

from ktx.agent.catalog import Catalog
from ktx.agent.plan import (
    MAX_PASSES,
    Plan,
    PlanError,
    extract_json,
    plan_schema,
    restrict_knobs,
    validate_plan,
)
from ktx.passbase import Knob, KnobSpec, Option, Pass, Rewriter, Site, Skip, Target
from ktx.pipeline import parse_pipeline
from ktx.registry import Registry


def problems(data: Any, catalog: Catalog) -> tuple[str, ...]:
    with pytest.raises(PlanError) as err:
        validate_plan(data, catalog)
    return err.value.problems


def test_valid_plan_and_pipeline_text(catalog: Catalog) -> None:
    plan = validate_plan(
        {
            "rationale": "memory-bound, scalar loads",
            "passes": [
                {
                    "name": "vectorize",
                    "options": {"widths": [2, 4, 8]},
                    "knobs": {"VEC": [4, 8]},
                    "why": "wider",
                },
                {"name": "block-size", "options": {"min": 64}},
                "unroll",
            ],
        },
        catalog,
    )
    assert plan.names == ("vectorize", "block-size", "unroll")
    assert plan.pipeline == "vectorize{widths=2|4|8},block-size{min=64},unroll"
    assert [str(s) for s in parse_pipeline(plan.pipeline)] == plan.pipeline.split(",")
    assert plan.knob_ranges() == {"VEC": (4, 8)}
    assert not plan.stop
    again = Plan.from_json(json.loads(json.dumps(plan.to_json())), catalog)
    assert again == plan
    assert Plan.from_json(plan.to_json()) == plan


def test_unknown_pass_suggests_the_close_name(catalog: Catalog) -> None:
    found = problems({"rationale": "r", "passes": [{"name": "vectorise"}]}, catalog)
    assert len(found) == 1
    assert "'vectorise' does not exist" in found[0] and "did you mean 'vectorize'" in found[0]
    assert "block-size" in found[0]  # lists the valid names


def test_every_problem_is_reported_at_once(catalog: Catalog) -> None:
    found = problems(
        {
            "rationale": "",
            "passes": [
                {"name": "vectorize", "options": {"width": 4}},
                {"name": "block-size", "options": {"min": "64"}, "knobs": {"BLOCK_X": [32, "x"]}},
                {"name": "unroll", "knobs": {"UNROLL": [2]}, "extra": 1},
                {"name": "vectorize"},
            ],
            "comment": "hi",
        },
        catalog,
    )
    text = "\n".join(found)
    assert "unknown top-level keys ['comment']" in text
    assert "rationale must say why" in text
    assert "option 'width' does not exist (did you mean 'widths'?)" in text
    assert 'option block-size.min expects an integer, got "64"' in text
    assert "knob BLOCK_X needs a non-empty list of integers" in text
    assert "knob 'UNROLL' does not exist" in text
    assert "unknown keys ['extra']" in text
    assert "'vectorize' is listed twice" in text


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"widths": []}, "non-empty list of integers"),
        ({"widths": [1.5]}, "list of integers"),
        ({"widths": "1|x"}, "list of integers"),
        ({"widths": True}, "non-empty list"),
    ],
)
def test_option_kinds_are_enforced(catalog: Catalog, options: dict[str, Any], message: str) -> None:
    found = problems({"rationale": "r", "passes": [{"name": "vectorize", "options": options}]}, catalog)
    assert message in found[0]


def test_pipeline_forms_of_lists_and_bools_are_accepted(catalog: Catalog) -> None:
    plan = validate_plan(
        {"rationale": "r", "passes": [{"name": "vectorize", "options": {"widths": "2|4"}}]}, catalog
    )
    assert plan.passes[0].options == (("widths", (2, 4)),)
    plan = validate_plan(
        {"rationale": "r", "passes": [{"name": "fast-math", "options": {"flag": True}}]}, catalog
    )
    assert plan.pipeline == "fast-math{flag=true}"


def test_strings_cannot_change_the_pipeline_structure(catalog: Catalog) -> None:
    for bad in ("L0,evil{x=1}", "a}b", "x=y", "L0|L1"):
        found = problems(
            {"rationale": "r", "passes": [{"name": "unroll", "options": {"loops": [bad]}}]}, catalog
        )
        assert "plain strings" in found[0]


def test_conflicts_and_limits(catalog: Catalog) -> None:
    found = problems({"rationale": "r", "passes": ["fast-math", "hoist"]}, catalog)
    assert found == ("passes 'fast-math' and 'hoist' conflict; keep one",)
    found = problems({"rationale": "r", "passes": ["unroll"] * (MAX_PASSES + 1)}, catalog)
    assert any(f"at most {MAX_PASSES}" in p for p in found)
    assert problems({"rationale": "r", "passes": []}, catalog) == (
        "passes is empty: list the pipeline, or set stop to true",
    )
    assert problems([1, 2], catalog)[0].startswith("the answer must be a JSON object")
    assert "stop must be true or false" in problems(
        {"rationale": "r", "passes": ["unroll"], "stop": "no"}, catalog
    )


def test_stop_with_no_passes_is_valid(catalog: Catalog) -> None:
    plan = validate_plan({"rationale": "nothing left", "passes": [], "stop": True}, catalog)
    assert plan.stop and plan.passes == ()


def test_knob_patterns_match_concrete_names(catalog: Catalog) -> None:
    plan = validate_plan(
        {
            "rationale": "r",
            "passes": [{"name": "unroll", "knobs": {"UNROLL_L3": [2, 4], "UNROLL_*": [1, 2]}}],
        },
        catalog,
    )
    assert dict(plan.passes[0].knobs) == {"UNROLL_L3": (2, 4), "UNROLL_*": (1, 2)}


def test_schema_lists_every_pass_and_option(catalog: Catalog) -> None:
    schema = plan_schema(catalog)
    variants = schema["properties"]["passes"]["items"]["oneOf"]
    assert [v["properties"]["name"]["const"] for v in variants] == list(catalog.names)
    vec = variants[catalog.names.index("vectorize")]
    assert vec["properties"]["options"]["properties"]["widths"]["type"] == "array"
    assert schema["required"] == ["rationale", "passes"]
    json.dumps(schema)  # serialisable


@pytest.mark.parametrize(
    "text",
    [
        '{"rationale": "r", "passes": ["unroll"]}',
        'Here is my plan:\n```json\n{"rationale": "r", "passes": ["unroll"]}\n```\nThanks',
        'Sure. {"rationale": "r", "passes": ["unroll"]} Done.',
    ],
)
def test_extract_json(text: str) -> None:
    assert extract_json(text) == {"rationale": "r", "passes": ["unroll"]}


def test_extract_json_errors() -> None:
    with pytest.raises(ValueError, match="no JSON object"):
        extract_json("I think you should vectorize.")
    with pytest.raises(ValueError, match="not valid JSON"):
        extract_json('{"rationale": "r", "passes": [}')


def knobs() -> tuple[Knob, ...]:
    return (
        Knob("VEC", (1, 2, 4, 8), 1, pass_name="vectorize"),
        Knob("UNROLL_L0", (0, 1, 2, 4, 8), 0, pass_name="unroll"),
        Knob("UNROLL_L2", (0, 1, 2, 4, 8), 0, pass_name="unroll"),
        Knob("BLOCK_X", (32, 64, 128, 256), 128, pass_name="block-size"),
    )


def test_restrict_knobs_keeps_default_and_reports_outside_values(catalog: Catalog) -> None:
    plan = validate_plan(
        {
            "rationale": "r",
            "passes": [
                {"name": "vectorize", "knobs": {"VEC": [4, 8]}},
                {"name": "unroll", "knobs": {"UNROLL_<loop>": [2, 4, 16]}},
                {"name": "block-size"},
            ],
        },
        catalog,
    )
    r = restrict_knobs(knobs(), plan, catalog)
    by = {k.name: k for k in r.knobs}
    assert by["VEC"].values == (1, 4, 8)  # the default 1 stays
    assert by["UNROLL_L0"].values == by["UNROLL_L2"].values == (0, 2, 4)
    assert by["BLOCK_X"].values == (32, 64, 128, 256)
    assert r.applied == {"VEC": (1, 4, 8), "UNROLL_L0": (0, 2, 4), "UNROLL_L2": (0, 2, 4)}
    assert r.problems == (
        "knob UNROLL_L0 of unroll: values [16] are outside its domain [0, 1, 2, 4, 8]",
        "knob UNROLL_L2 of unroll: values [16] are outside its domain [0, 1, 2, 4, 8]",
    )


def test_restrict_knobs_names_missing_knobs(catalog: Catalog) -> None:
    plan = validate_plan({"rationale": "r", "passes": [{"name": "split", "knobs": {"SPLIT": [2]}}]}, catalog)
    r = restrict_knobs(knobs(), plan, catalog)
    assert r.problems == ("knob range SPLIT of split: the template has no such knob (its knobs: none)",)
    exact = validate_plan(
        {"rationale": "r", "passes": [{"name": "unroll", "knobs": {"UNROLL_L2": [1]}}]}, catalog
    )
    r = restrict_knobs(knobs(), exact, catalog)
    assert {k.name: k.values for k in r.knobs}["UNROLL_L0"] == (0, 1, 2, 4, 8)
    assert {k.name: k.values for k in r.knobs}["UNROLL_L2"] == (0, 1)


class _ToySite(Site):
    pass


class ToyPass(Pass[_ToySite]):
    name = "toy-pass"
    summary = "a pass for catalog tests"
    knobs: ClassVar[tuple[KnobSpec, ...]] = (KnobSpec("TOY_<loop>", "1, 2", "1", "a toy knob"),)
    options: ClassVar[tuple[Option, ...]] = (Option("level", "int", 1, "how much"),)
    conflicts: ClassVar[tuple[str, ...]] = ("other-pass",)

    def sites(self, target: Target) -> Any:
        yield Skip("toy")

    def rewrite(self, site: _ToySite, rw: Rewriter) -> None:
        return None


def test_catalog_from_registry() -> None:
    registry = Registry()
    registry.register(ToyPass)
    cat = Catalog.from_registry(registry)
    assert cat.names == ("toy-pass",)
    info = cat.get("toy-pass")
    assert info is not None and info.conflicts == ("other-pass",)
    assert info.knob_for("TOY_L3") is not None and info.knob_for("TOYS") is None
    assert "option level (int, default 1): how much" in cat.text()
    assert "knob TOY_<loop>: values 1, 2; default 1; a toy knob" in cat.text()
    plan = validate_plan({"rationale": "r", "passes": [{"name": "toy-pass", "options": {"level": 3}}]}, cat)
    assert plan.pipeline == "toy-pass{level=3}"


def test_default_registry_catalog_validates_its_own_defaults() -> None:
    """Every registered pass, with every option at its default, is a valid plan."""
    from ktx.registry import default_registry

    cat = Catalog.from_registry(default_registry())
    for info in cat.passes:
        options = {
            o.name: list(o.default) if isinstance(o.default, tuple) else o.default for o in info.options
        }
        plan = validate_plan({"rationale": "r", "passes": [{"name": info.name, "options": options}]}, cat)
        parsed = parse_pipeline(plan.pipeline)
        assert parsed[0].name == info.name
