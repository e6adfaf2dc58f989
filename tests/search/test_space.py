"""Knob spaces: Optuna distributions keep order, conditions, constraints, enumeration."""

from __future__ import annotations

import optuna
import pytest
from ktx.ir.errors import KtxError
from ktx.ir.expr import Expr

from ktx.measure.types import config_key
from ktx.passbase import Knob as PassKnob
from ktx.search.space import Knob, Space, knob_from


def test_distributions_keep_the_order_of_values() -> None:
    space = Space(
        (
            Knob("BLOCK", (1024, 64, 128, 256, 512), 256),
            Knob("SPLIT", (1, 2, 3), 1),
            Knob("ODD", (3, 5, 11), 5),
            Knob("ON", (0, 1), 0),
        )
    )
    names = [space.param_name(k) for k in space.knobs]
    assert names == ["log2(BLOCK)", "SPLIT", "ODD[i]", "ON"]
    dists = [space.distribution(k) for k in space.knobs]
    assert [(d.low, d.high, d.step) for d in dists] == [(6, 10, 1), (1, 3, 1), (0, 2, 1), (0, 1, 1)]
    assert space.knobs[0].values == (64, 128, 256, 512, 1024)


def test_params_round_trip_and_conditions() -> None:
    space = Space(
        (
            Knob("SPLIT", (1, 2, 4), 1),
            Knob("COARSEN", (1, 2, 4), 1, Expr.parse("SPLIT == 1")),
            Knob("FIXED", (7,), 7),
        )
    )
    assert space.to_params({"SPLIT": 1, "COARSEN": 4}) == {"log2(SPLIT)": 0, "log2(COARSEN)": 2}
    # COARSEN is inactive when SPLIT > 1: not suggested, normalised to its default.
    assert space.to_params({"SPLIT": 2, "COARSEN": 4}) == {"log2(SPLIT)": 1}
    assert space.normalize({"SPLIT": 2, "COARSEN": 4}) == {"SPLIT": 2, "COARSEN": 1, "FIXED": 7}
    assert space.size() == 5  # 3 with SPLIT=1, plus SPLIT=2 and SPLIT=4
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = set()
    for _ in range(40):
        trial = study.ask()
        config = space.suggest(trial)
        assert space.from_params(trial.params) == config
        if config["SPLIT"] > 1:
            assert "log2(COARSEN)" not in trial.params
        seen.add(config_key(config))
        study.tell(trial, 1.0)
    assert len(seen) == 5


def test_condition_must_name_earlier_knobs() -> None:
    with pytest.raises(KtxError, match="not an earlier knob"):
        Space((Knob("A", (1, 2), 1, Expr.parse("B == 1")), Knob("B", (1, 2), 1)))
    with pytest.raises(KtxError, match="declared twice"):
        Space((Knob("A", (1, 2), 1), Knob("A", (1, 2), 1)))
    with pytest.raises(KtxError, match="default"):
        Knob("A", (1, 2), 3)


def test_violations_check_shapes_and_skip_unknown_names() -> None:
    space = Space(
        (Knob("VEC", (1, 2, 4, 8), 8), Knob("BLOCK", (64, 128), 64)),
        (Expr.parse("d % (VEC * BLOCK) == 0"), Expr.parse("VEC <= later_known")),
    )
    assert space.violations({"VEC": 8, "BLOCK": 128}, {"d": 1024}) == ()
    assert space.violations({"VEC": 8, "BLOCK": 128}, {"d": 1000}) == ("d % (VEC * BLOCK) == 0",)
    feasible = {(c["VEC"], c["BLOCK"]) for c in space.feasible_configs({"d": 256})}
    assert feasible == {(1, 64), (2, 64), (4, 64), (1, 128), (2, 128)}


def test_template_knobs_adapt() -> None:
    knob = knob_from(PassKnob("UNROLL_L0", (0, 1, 2, 4), 0, "unroll factor", "unroll", "loop L0"))
    assert (knob.name, knob.values, knob.default, knob.owner) == ("UNROLL_L0", (0, 1, 2, 4), 0, "unroll")
    assert Space((knob,)).param_name(knob) == "UNROLL_L0[i]"


def test_description_round_trips() -> None:
    space = Space(
        (Knob("S", (1, 2), 1, owner="split"), Knob("C", (1, 2), 1, Expr.parse("S == 1"))),
        (Expr.parse("S * C <= 2"),),
    )
    again = Space.from_description(space.describe(), [c.text for c in space.constraints])
    assert again.describe() == space.describe()
    assert [c.text for c in again.constraints] == ["S * C <= 2"]
