"""The loop goes on past --rounds and --patience while the best is under 80% of speed-of-light
and the budget lasts (issue 11's rules planner), on the modelled GPU."""

from __future__ import annotations

from pathlib import Path

from ktx.agent.loop import optimize

from .model_backend import ModelBackend
from .test_loop import request


def test_under_80_percent_of_sol_the_run_goes_on_within_the_budget(tmp_path: Path) -> None:
    # modelled silu_and_mul: two of three shapes far under speed-of-light after round 1
    result = optimize(request(tmp_path / "a", rounds=1, budget_s=600), backend=ModelBackend())
    assert len(result.rounds) > 1
    assert any(n.startswith("keep going: the best was at") for n in result.notes)
    assert len(result.rounds) <= 3  # at most three times --rounds


def test_without_a_budget_rounds_bound_the_run(tmp_path: Path) -> None:
    result = optimize(request(tmp_path / "b", rounds=1), backend=ModelBackend())
    assert len(result.rounds) == 1 and result.stop_reason in ("rounds", "planner")
    assert not any(n.startswith("keep going") for n in result.notes)


def test_the_planner_stop_says_which_passes_had_no_site(tmp_path: Path) -> None:
    from dataclasses import replace

    from ktx.agent.catalog import Catalog
    from ktx.agent.planner import PlanContext, PlanOutcome
    from ktx.agent.rules import RulesPlanner

    class Stopper:
        """The rules planner over an empty catalog: no pass can be proposed, so it stops."""

        name = "rules"

        def plan(self, context: PlanContext) -> PlanOutcome:
            empty = replace(context, catalog=Catalog.of([]))
            return RulesPlanner().plan(empty)

    result = optimize(request(tmp_path / "c", rounds=2), backend=ModelBackend(), planner=Stopper())
    assert result.stop_reason == "planner"
    note = next(n for n in result.notes if n.startswith("planner stop:"))
    # silu_and_mul has no shared-memory tree reduction: warp-reduce's remark says so
    assert "passes with no site:" in note and "warp-reduce: no site to rewrite" in note
