"""The runoff (ktx.search.runoff): a shape's few best configs timed paired against the search's
best before the final check, and the fastest dispatched (issue 23: rmsnorm at tokens=1, d=8192
kept a config 3% slower than one the search had measured)."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import optuna
import pytest

from ktx.measure.types import Candidate, Measurement, Status, Timing, config_key, original_candidate
from ktx.search import runner
from ktx.search.cache import MeasurementCache
from ktx.search.evaluate import Evaluator
from ktx.search.final import MAX_RESERVE, reserve
from ktx.search.paired import FAILED, IDENTICAL, MEASURED
from ktx.search.progress import Display
from ktx.search.runlog import RunLog, read_log
from ktx.search.runoff import (
    PAIRS,
    RUNOFF_SHARE,
    Entrant,
    Runoff,
    entrants,
    reserve_s,
    run_runoff,
    with_runoffs,
)
from ktx.search.space import Knob, Space
from ktx.search.study import default_url, open_storage
from ktx.search.tunable import Tunable
from ktx.spec import ShapePoint
from ktx.specload import load_spec

from .conftest import SILU

POINT = ShapePoint.from_name("tokens=4,d=4096")

#: What the search's single measurements say (K=1 was lucky) ...
SEARCH_US = {0: 2.0, 1: 1.60, 2: 1.66, 3: 2.4, 4: 1.70}
#: ... and what each config takes when timed beside another (K=2 is the real best; K=4 runs
#: K=2's code).
TRUE_US = {0: 2.0, 1: 1.72, 2: 1.55, 3: 2.4, 4: 1.55}


def _tunable(spec: Any) -> Tunable:
    """Knob K: 0 is the original's code; 4 is the code of 2; the rest each their own."""
    base = original_candidate(spec)

    def make(config: dict[str, int]) -> Candidate:
        if not config:
            return base
        k = config.get("K", 0)
        code = 2 if k == 4 else k
        source = base.source if code == 0 else base.source + f"\n// variant {code}\n"
        return dataclasses.replace(base, source=source, config=dict(config))

    space = Space((Knob("K", (0, 1, 2, 3, 4), 0),), ())
    return Tunable(spec.name, "runoff-test", space, make, "runoff-test-0001")  # type: ignore[arg-type]


class Lucky:
    """A stand-in backend: the search measures K=1 fastest; paired, K=2 is."""

    fingerprint = "stand-in: lucky"

    def __init__(self, broken: int | None = None) -> None:
        self.paired_calls: list[tuple[dict[str, int], dict[str, int], int]] = []
        self.broken = broken

    def _m(self, cand: Candidate, point: ShapePoint, us: float) -> Measurement:
        return Measurement("silu_and_mul", point.name, dict(cand.config), Status.OK, graph=Timing.of([us]),
                           single=Timing.of([us + 2.0]))  # fmt: skip

    def measure(self, cand: Candidate, point: ShapePoint) -> Measurement:
        return self._m(cand, point, SEARCH_US[cand.config.get("K", 0)] if cand.config else 2.0)

    def measure_paired(
        self, first: Candidate, second: Candidate, point: ShapePoint, pairs: int, timeout: float | None
    ) -> list[tuple[Measurement, Measurement]]:
        self.paired_calls.append((dict(first.config), dict(second.config), pairs))
        out = []
        for i in range(pairs):
            wobble = 1 + 0.004 * (i % 2)
            ms = []
            for c in (first, second):
                k = c.config.get("K", 0) if c.config else 0
                if k == self.broken:
                    bad = Measurement("silu_and_mul", point.name, dict(c.config), Status.CRASH, message="x")
                    ms.append(bad)
                else:
                    ms.append(self._m(c, point, TRUE_US[k] * wobble))
            out.append((ms[0], ms[1]))
        return out


def _context(tmp_path: Path, backend: Any, trials: int = 12) -> runner.Context:
    spec = load_spec(SILU)
    folder = tmp_path / "run"
    folder.mkdir()
    request = runner.TuneRequest(kernel_dir=SILU, shapes=(POINT.name,), trials=trials, seed=1, out=folder,
                                 holdout="none", quiet=True, backend="stand-in", sampler="grid")  # fmt: skip
    url = default_url(folder)
    log = RunLog(folder / "log.jsonl")
    evaluator = Evaluator(spec, _tunable(spec), backend, MeasurementCache(None), log)
    return runner.Context(request, spec, evaluator.tunable, (POINT,), folder, url, open_storage(url), backend,
                          evaluator, log, None, Display(enabled=False))  # fmt: skip


def test_the_runoff_dispatches_the_config_that_is_fastest_paired(tmp_path: Path) -> None:
    backend = Lucky()
    ctx = _context(tmp_path, backend)
    runner.prepare_all(ctx, None)
    runner.tune_shapes(ctx, None)
    summary = runner.finalize(ctx, 0.0)
    (result,) = summary.results
    runoff = summary.runoffs[POINT.name]
    assert runoff.incumbent == {"K": 1}, "the search's best, by its single measurements"
    assert runoff.chosen == {"K": 2} and runoff.changed
    heats = {h.config["K"]: h for h in runoff.heats}
    # within 15% of 1.60 µs: K=2 (1.66), K=4 (1.70, K=2's code: not timed again); K=0 (2.0) stays out
    assert set(heats) == {2, 4} and heats[4].status == IDENTICAL and heats[2].status == MEASURED
    assert heats[2].interval is not None and heats[2].interval.estimate > 1.10
    assert backend.paired_calls[0] == ({"K": 1}, {"K": 2}, PAIRS), "the heat: the search's best first"
    # the final check pairs the winner with the original, with pairs of its own
    assert backend.paired_calls[1][1] == {"K": 2} and backend.paired_calls[1][0] == {}
    assert result.best_config == {"K": 2}
    check = summary.paired[POINT.name]
    assert check.status == MEASURED and check.config == {"K": 2}
    assert check.speedup is not None and abs(check.speedup - 2.0 / 1.55) < 0.02
    table = json.loads((ctx.run_dir / "dispatch.json").read_text())
    assert table["variants"] == [{"K": 2}]
    note = next(n for n in summary.notes if n.startswith("Runoff:"))
    assert "dispatched K=2" in note and "of 2 within 2% of it" in note
    assert summary.row(result)["runoff"]["chosen"] == {"K": 2}
    events = read_log(ctx.run_dir / "log.jsonl")
    assert any(e["event"] == "runoff" and e["chosen"] == {"K": 2} for e in events)
    # a second finalize (ktx optimize's re-check) reads the runoff from the study: no heat again
    backend.paired_calls.clear()
    again = runner.finalize(ctx, 0.0, None, None, dict(summary.paired))
    assert backend.paired_calls == [] and again.results[0].best_config == {"K": 2}


def test_no_challenger_faster_keeps_the_search_best(tmp_path: Path) -> None:
    backend = Lucky()
    ctx = _context(tmp_path, backend)
    evaluator = ctx.evaluator
    field_ = [Entrant({"K": 2}, 1.66, 3.7), Entrant({"K": 1}, 1.70, 3.6)]
    got = run_runoff(evaluator, POINT, "graph", field_)
    assert got is not None and not got.changed and got.winner == {"K": 2}
    assert got.gain_over_incumbent == 1.0 and "the search's best stays" in got.sentence()
    assert got.heats[0].interval is not None and got.heats[0].interval.estimate < 1.0
    assert run_runoff(evaluator, POINT, "graph", field_[:1]) is None, "no challenger, no runoff"


def test_a_failing_challenger_is_never_chosen(tmp_path: Path) -> None:
    backend = Lucky(broken=2)
    ctx = _context(tmp_path, backend)
    got = run_runoff(ctx.evaluator, POINT, "graph", [Entrant({"K": 1}, 1.6), Entrant({"K": 2}, 1.66)])
    assert got is not None and got.heats[0].status == FAILED and got.winner == {"K": 1}


def test_the_runoff_yields_to_the_final_checks_time(tmp_path: Path) -> None:
    backend = Lucky()
    ctx = _context(tmp_path, backend)
    field_ = [Entrant({"K": 1}, 1.6, 3.6), Entrant({"K": 2}, 1.66, 3.7)]
    soon = time.monotonic() + 5.0
    got = run_runoff(ctx.evaluator, POINT, "graph", field_, deadline=soon, after_s=4.9)
    assert got is not None and got.skipped.startswith("it needs about") and not got.changed
    assert backend.paired_calls == [] and "no runoff" in got.sentence()
    assert Runoff.from_dict(json.loads(json.dumps(got.to_dict()))) == got


class Replay(Lucky):
    """A run replay: answers the recorded checks, measures nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.recorded = {"K": 2}

    def has_check(self, shape: str, config: dict[str, int]) -> bool:
        return config == self.recorded

    def recorded_check(self, shape: str, config: dict[str, int]) -> Any:
        raise AssertionError("not asked here")


def test_a_replay_takes_the_recorded_runs_choice_without_measuring(tmp_path: Path) -> None:
    backend = Replay()
    ctx = _context(tmp_path, backend)
    field_ = [Entrant({"K": 1}, 1.6), Entrant({"K": 2}, 1.66)]
    got = run_runoff(ctx.evaluator, POINT, "graph", field_)
    assert got is not None and got.winner == {"K": 2} and backend.paired_calls == []
    backend.recorded = {"K": 1}
    kept = run_runoff(ctx.evaluator, POINT, "graph", field_)
    assert kept is None, "the recorded run kept the search's best"


def test_the_field_is_the_few_best_within_the_window() -> None:
    times = ((3, 2.4), (1, 1.6), (2, 1.66), (0, 2.0), (4, 1.7), (1, 1.9))
    ranked = [Entrant({"K": k}, us) for k, us in times]
    assert [e.config["K"] for e in entrants(ranked)] == [1, 2, 4]
    assert [e.config["K"] for e in entrants(ranked, top=2)] == [1, 2]
    assert [e.config["K"] for e in entrants(ranked, top=4, window=0.30)] == [1, 2, 4, 0]
    assert [e.config["K"] for e in entrants(ranked, top=4)] == [1, 2, 4], "0 is 25% slower: out"
    assert [e.config["K"] for e in entrants(ranked, lead={"K": 4})] == [4, 1, 2]


# -- the diagonal: a config the search never measured ---------------------------------------

#: (BLOCK_Y, PACKS) -> (the search's single measurement, the time paired): the search measured only
#: (8, 4); (16, 2), the same threads x packs, is the real best (rmsnorm at tokens=1, d=8192).
GRID = {(8, 4): (2.50, 2.49), (16, 2): (2.45, 2.40), (4, 4): (2.9, 2.9), (16, 1): (3.0, 3.0)}


def _grid_tunable(spec: Any) -> Tunable:
    base = original_candidate(spec)

    def make(config: dict[str, int]) -> Candidate:
        if not config:
            return base
        source = base.source + f"\n// Y{config.get('BLOCK_Y')} P{config.get('PACKS')}\n"
        return dataclasses.replace(base, source=source, config=dict(config))

    space = Space((Knob("BLOCK_Y", (0, 1, 2, 4, 8, 16, 32), 0), Knob("PACKS", (0, 1, 2, 4), 0)), ())
    return Tunable(spec.name, "diagonal-test", space, make, "diagonal-test-0001")  # type: ignore[arg-type]


class Grid(Lucky):
    def __init__(self) -> None:
        super().__init__()
        self.measured: list[dict[str, int]] = []

    def _us(self, cand: Candidate, paired: bool) -> float:
        if not cand.config or not cand.config.get("BLOCK_Y"):
            return 3.2
        return GRID.get((cand.config["BLOCK_Y"], cand.config["PACKS"]), (3.5, 3.5))[int(paired)]

    def measure(self, cand: Candidate, point: ShapePoint) -> Measurement:
        self.measured.append(dict(cand.config))
        return self._m(cand, point, self._us(cand, False))

    def measure_paired(
        self, first: Candidate, second: Candidate, point: ShapePoint, pairs: int, timeout: float | None
    ) -> list[tuple[Measurement, Measurement]]:
        self.paired_calls.append((dict(first.config), dict(second.config), pairs))
        return [
            (self._m(first, point, self._us(first, True) * (1 + 0.003 * (i % 2))),
             self._m(second, point, self._us(second, True)))
            for i in range(pairs)
        ]  # fmt: skip


def test_the_runoff_measures_the_diagonal_neighbour_the_search_missed(tmp_path: Path) -> None:
    backend = Grid()
    spec = load_spec(SILU)
    folder = tmp_path / "run"
    folder.mkdir()
    request = runner.TuneRequest(kernel_dir=SILU, shapes=(POINT.name,), trials=1, seed=1, out=folder,
                                 holdout="none", quiet=True, backend="stand-in")  # fmt: skip
    url = default_url(folder)
    log = RunLog(folder / "log.jsonl")
    evaluator = Evaluator(spec, _grid_tunable(spec), backend, MeasurementCache(None), log)
    ctx = runner.Context(request, spec, evaluator.tunable, (POINT,), folder, url, open_storage(url), backend,
                         evaluator, log, None, Display(enabled=False))  # fmt: skip
    runner.prepare_all(ctx, None)
    study = runner.open_study(ctx.storage, runner.study_name(ctx, POINT), optuna.samplers.RandomSampler())
    study.enqueue_trial(evaluator.space.to_params({"BLOCK_Y": 8, "PACKS": 4}))
    runner.tune_shapes(ctx, None)
    assert {"BLOCK_Y": 16, "PACKS": 2} not in backend.measured, "the search did not measure it"
    summary = runner.finalize(ctx, 0.0)
    assert {"BLOCK_Y": 16, "PACKS": 2} in backend.measured, "the runoff measured the diagonal, verified"
    runoff = summary.runoffs[POINT.name]
    assert runoff.incumbent == {"BLOCK_Y": 8, "PACKS": 4} and runoff.chosen == {"BLOCK_Y": 16, "PACKS": 2}
    assert list(runoff.measured) == [config_key({"BLOCK_Y": 16, "PACKS": 2})]
    (result,) = summary.results
    assert result.best_config == {"BLOCK_Y": 16, "PACKS": 2}
    assert summary.paired[POINT.name].config == {"BLOCK_Y": 16, "PACKS": 2}
    assert json.loads((folder / "dispatch.json").read_text())["variants"] == [{"BLOCK_Y": 16, "PACKS": 2}]


def test_a_short_rounds_capped_checks_still_leave_the_runoffs_time() -> None:
    # session 11's norms at 76 s: the checks' reserve sat at its cap (MAX_RESERVE of a 25 s
    # round) and the runoffs, reserved under the same cap, got nothing in every round
    limit = 25.0
    checks = reserve({"a": 30.0, "b": 30.0}, holdout=0, time_limit=limit)
    assert checks == pytest.approx(MAX_RESERVE * limit)
    need = 3 * reserve_s(0.1)  # three shapes, a 0.1 s check pair each
    kept = with_runoffs(checks, need, limit)
    assert kept == pytest.approx(checks + need) and kept > MAX_RESERVE * limit
    # never more than RUNOFF_SHARE of the limit on top, however many shapes
    assert with_runoffs(checks, 100.0, limit) == pytest.approx(checks + RUNOFF_SHARE * limit)
