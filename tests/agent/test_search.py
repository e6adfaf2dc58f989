"""The agent's round search: the one-knob steps a round takes first along the knobs it adds."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import optuna
import pytest
from ktx.ir.expr import Expr

from ktx.agent.search import NEIGHBOUR_STEPS, SWEEP_LIMIT, bundle_steps, sweep_new_knobs
from ktx.search.space import Knob, Space

TPR = Knob("THREADS_PER_ROW", (1, 32, 64, 128, 256, 512, 1024), 1, owner="row-owner")
VEC = Knob("VEC_LOOPS", (1, 2, 4), 1, owner="vectorize")
PACKS = Knob("PACKS", (0, 1, 2, 4, 8, 16, 32), 0, owner="row-registers")
ROW_BLOCK = Knob("ROW_BLOCK", (0, 128, 1024), 0, owner="row-owner")
ONLINE = Knob("ONLINE", (0, 1), 0, owner="online")


def test_the_new_knob_is_swept_at_the_best_of_the_earlier_ones() -> None:
    """llm.c layernorm, session 9 round 4: row-owner's best was 32 threads a row at B=8 and
    B=32; the round that added vectorize never measured 32 threads with float4 packs. The
    steps keep THREADS_PER_ROW at 32 and give VEC_LOOPS its other values, widest first, then
    move THREADS_PER_ROW one value either way with the widest packs."""
    space = Space((TPR, VEC))
    steps = sweep_new_knobs(space, {"THREADS_PER_ROW": 32, "VEC_LOOPS": 1}, {"THREADS_PER_ROW"}, {})
    assert steps == [
        {"THREADS_PER_ROW": 32, "VEC_LOOPS": 4},
        {"THREADS_PER_ROW": 32, "VEC_LOOPS": 2},
        {"THREADS_PER_ROW": 64, "VEC_LOOPS": 4},
        {"THREADS_PER_ROW": 1, "VEC_LOOPS": 4},
    ]


def test_steps_leave_out_what_breaks_a_constraint_at_the_shape() -> None:
    """row-registers' bound on the registers a block keeps (PACKS x threads <= 8192) at 1024
    threads a row leaves PACKS 16 and 32 out; the warm start itself is never repeated; 1024 has
    no larger neighbour, and 512 takes the largest PACKS that fitted at 1024."""
    space = Space((TPR, PACKS), (Expr.parse("PACKS * THREADS_PER_ROW <= 8192"),))
    steps = sweep_new_knobs(space, {"THREADS_PER_ROW": 1024}, {"THREADS_PER_ROW"}, {})
    assert [(s["THREADS_PER_ROW"], s["PACKS"]) for s in steps] == [
        (1024, 8), (1024, 4), (1024, 2), (1024, 1), (512, 8)
    ]  # fmt: skip


def test_a_shape_variable_in_a_constraint_is_read_from_the_shape() -> None:
    space = Space((TPR, VEC), (Expr.parse("C % (VEC_LOOPS * THREADS_PER_ROW) == 0"),))
    start = {"THREADS_PER_ROW": 256}

    def steps(c: int) -> list[tuple[int, int]]:
        out = sweep_new_knobs(space, start, {"THREADS_PER_ROW"}, {"C": c})
        return [(s["THREADS_PER_ROW"], s["VEC_LOOPS"]) for s in out]

    assert steps(768) == [(128, 1)]  # no width fits 256 threads; 128 threads do, 512 do not
    assert steps(1536) == [(256, 2), (128, 2)]
    assert steps(1024) == [(256, 4), (256, 2), (128, 4)]


def test_several_new_knobs_take_turns_and_the_steps_are_capped() -> None:
    """Every new knob gets its largest step before any gets its second (cache-hints adds one
    binary knob per pointer; tile dozens); the earlier knob keeps its two neighbour places, and
    the cap leaves the rest of the round to the sampler."""
    knobs = tuple(Knob(f"K{i}", (1, 2, 4, 8), 1) for i in range(5))
    space = Space((TPR, *knobs))
    steps = sweep_new_knobs(space, {"THREADS_PER_ROW": 32}, {"THREADS_PER_ROW"}, {})
    assert len(steps) == SWEEP_LIMIT
    moved = [sorted(k for k, v in s.items() if k != "THREADS_PER_ROW" and v != 1) for s in steps]
    assert moved[:6] == [["K0"], ["K1"], ["K2"], ["K3"], ["K4"], ["K0"]]
    assert [s["K0"] for s in steps[:6]] == [8, 1, 1, 1, 1, 4]
    assert [(s["THREADS_PER_ROW"], s["K0"]) for s in steps[6:]] == [(64, 8), (1, 8)]


def test_no_new_knob_no_steps() -> None:
    """A round whose knobs were all searched before (or a knob with one value) adds nothing."""
    space = Space((TPR, Knob("ONE", (4,), 4)))
    assert sweep_new_knobs(space, {"THREADS_PER_ROW": 64}, {"THREADS_PER_ROW"}, {}) == []


def test_an_inactive_knob_step_is_not_a_new_config() -> None:
    """A knob whose condition is false at the best point normalizes back to its default: its
    steps are no new configs, and only the earlier knob's neighbour is left."""
    cond = Knob("WIDTH", (1, 2, 4), 1, condition=Expr.parse("THREADS_PER_ROW > 1"))
    space = Space((TPR, cond))
    assert sweep_new_knobs(space, {"THREADS_PER_ROW": 1}, {"THREADS_PER_ROW"}, {}) == [
        {"THREADS_PER_ROW": 32, "WIDTH": 1}
    ]
    steps = sweep_new_knobs(space, {"THREADS_PER_ROW": 32}, {"THREADS_PER_ROW"}, {})
    assert [(s["THREADS_PER_ROW"], s["WIDTH"]) for s in steps] == [(32, 4), (32, 2), (64, 4), (1, 1)]


@pytest.mark.slow
def test_a_round_measures_the_steps_right_after_its_warm_start(tmp_path: Path) -> None:
    """End to end on the model backend: round 2 adds block-size to round 1's split; at every
    shape round 1 won, the study's first trial is the warm start and the next ones are
    ``BLOCK_X`` steps with ``SPLIT`` at its round-1 best, then at most two with ``SPLIT`` one
    step away, each measured (a finished trial)."""
    from ktx.agent.loop import load_records, optimize
    from ktx.search.study import default_url, open_storage

    from .model_backend import ModelBackend
    from .test_loop import request

    out = tmp_path / "run"
    optimize(request(out, rounds=2), backend=ModelBackend())
    rounds = load_records(out)
    assert [r["pipeline"] for r in rounds] == ["split", "split,block-size"]
    storage = open_storage(default_url(out / "round-02"))
    stepped = 0
    for summary in optuna.get_all_study_summaries(storage):
        trials = optuna.load_study(study_name=summary.study_name, storage=storage).trials
        if not trials or not trials[0].user_attrs.get("warm_start"):
            continue
        split = trials[0].params["log2(SPLIT)"]
        steps = [t for t in trials if t.user_attrs.get("new_knob_step")]
        assert steps and trials[1 : 1 + len(steps)] == steps, "the steps come right after the warm start"
        same = [t for t in steps if t.params["log2(SPLIT)"] == split]
        moved = [t for t in steps if t.params["log2(SPLIT)"] != split]
        assert same == steps[: len(same)] and len(moved) <= NEIGHBOUR_STEPS
        assert len({t.params["BLOCK_X[i]"] for t in same}) == len(same)
        assert all(abs(t.params["log2(SPLIT)"] - split) == 1 for t in moved)
        assert all(t.params["BLOCK_X[i]"] == same[0].params["BLOCK_X[i]"] for t in moved)
        assert all(t.state == optuna.trial.TrialState.COMPLETE for t in steps)
        stepped += 1
    assert stepped >= 2, "split won at two shapes in round 1"


def test_a_bundle_from_the_original_starts_with_the_companions_on() -> None:
    """llm.c softmax v1's round 1 (row-owner with online and vectorize, 126 configs): the
    companions at their largest (ONLINE 1, VEC_LOOPS 4), row-owner's knobs stepped largest
    first; ROW_BLOCK only where its constraint allows it (a warp a row), the thread-per-row
    default never (with the companions on it is the naive kernel again). Session 10's configs
    faster than the hand kernels (1024 threads a row at C=50257, 32 at C=768, both with float4
    and the online pair) are among the first six."""
    constraints = (Expr.parse("THREADS_PER_ROW == 32 or ROW_BLOCK == 0"),)
    space = Space((TPR, ROW_BLOCK, ONLINE, VEC), constraints)
    steps = bundle_steps(space, "row-owner", ("online", "vectorize"), {"C": 768})
    assert all(s["ONLINE"] == 1 and s["VEC_LOOPS"] == 4 for s in steps)
    assert [s["THREADS_PER_ROW"] for s in steps] == [1024, 512, 256, 128, 64, 32]
    # ROW_BLOCK's steps from the default THREADS_PER_ROW (1) break the constraint; at the first
    # step (1024 threads a row) too: no ROW_BLOCK step here
    assert all(s["ROW_BLOCK"] == 0 for s in steps)
    assert len(steps) <= SWEEP_LIMIT
    # a companion whose knob has one value, or no companion knob at all: nothing to seed
    one = Knob("ONLINE", (0,), 0, owner="online")
    assert bundle_steps(Space((TPR, one)), "row-owner", ("online",), {}) == []
    assert bundle_steps(Space((TPR, VEC)), "row-owner", (), {}) == []
    # the cap holds
    assert len(bundle_steps(space, "row-owner", ("online", "vectorize"), {}, limit=3)) == 3


def test_a_bundles_steps_are_ordered_by_the_bytes_each_thread_moves() -> None:
    """With the launch known, the steps nearest BYTES_PER_THREAD come first: a 768-float row of
    8192 rows (50 MB) starts at a warp a row (192 B a thread), a 50257-float row of 1024 rows
    (412 MB) at 1024 threads a row (392 B); a launch that does not evaluate goes last."""
    constraints = (Expr.parse("THREADS_PER_ROW == 32 or ROW_BLOCK == 0"),)
    space = Space((TPR, ROW_BLOCK, ONLINE, VEC), constraints)

    def rows(n: int) -> Callable[[Mapping[str, int]], int | None]:
        return lambda c: None if c["THREADS_PER_ROW"] == 128 else n * c["THREADS_PER_ROW"]

    both = ("online", "vectorize")
    narrow = bundle_steps(space, "row-owner", both, {}, threads=rows(8192), nbytes=50331648)
    # a warp a row first, the next width, then the warp's ROW_BLOCK steps (warps a block), the rest
    assert [(s["THREADS_PER_ROW"], s["ROW_BLOCK"]) for s in narrow] == [
        (32, 0), (64, 0), (32, 1024), (32, 128), (256, 0), (512, 0), (1024, 0), (128, 0)
    ]  # fmt: skip
    wide = bundle_steps(space, "row-owner", both, {}, threads=rows(1024), nbytes=411705344)
    assert [s["THREADS_PER_ROW"] for s in wide][:3] == [1024, 512, 256]
    # the order only: the same steps as without the launch
    plain = bundle_steps(space, "row-owner", ("online", "vectorize"), {})
    assert {str(s) for s in plain} <= {str(s) for s in narrow}


def test_a_rounds_share_counts_the_passes_it_adds() -> None:
    """An equal share gave a three-pass bundle a fifth of the budget (the sleeping model of
    llm.c softmax: 11 evaluations over three shapes); one part per pass added."""
    from ktx.agent.loop import round_share

    assert round_share(200.0, 5, 1) == pytest.approx(40.0)  # one pass: as before
    assert round_share(200.0, 5, 3) == pytest.approx(200.0 * 3 / 7)
    assert round_share(200.0, 1, 3) == pytest.approx(200.0)  # the last round takes what is left
    assert round_share(200.0, 5, 0) == pytest.approx(40.0)


def test_the_round_bundle_is_the_chosen_pass_and_the_companions_after_it() -> None:
    """The loop reads the chosen pass from the plan's rationale (``add NAME:``); companions
    written before it (block-size before row-registers) are a launch shape, not an "on"."""
    from ktx.agent.loop import bundle_of
    from ktx.agent.plan import PassChoice, Plan

    def plan(names: tuple[str, ...], chosen: str) -> Plan:
        return Plan(tuple(PassChoice(n) for n in names), f"latency-bound overall; add {chosen}: why")

    three = ("row-owner", "online", "vectorize")
    assert bundle_of(plan(three, "row-owner"), list(three)) == ("row-owner", ("online", "vectorize"))
    two = ("block-size", "row-registers")
    assert bundle_of(plan(two, "row-registers"), list(two)) is None
    assert bundle_of(plan(("row-owner",), "row-owner"), ["row-owner"]) is None
    # a pass already in the pipeline is no companion of this round
    assert bundle_of(plan(("row-owner", "online", "vectorize"), "online"), ["online", "vectorize"]) == (
        "online", ("vectorize",)
    )  # fmt: skip
    assert bundle_of(Plan((PassChoice("a"), PassChoice("b")), "no add here"), ["a", "b"]) is None
