"""The paired final check (issue 12): the table uses a config only where re-measuring it against
the original, interleaved, gives a 95% interval above 1 + min-gain; identical code is 1.0."""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest

from ktx.cli import main
from ktx.measure.compile import find_nvcc
from ktx.measure.types import Candidate, Measurement, Status, Timing, original_candidate
from ktx.search import runner
from ktx.search.cache import MeasurementCache
from ktx.search.dispatch import Choice, build_table
from ktx.search.evaluate import Evaluator
from ktx.search.paired import (
    FAILED,
    IDENTICAL,
    MEASURED,
    SKIPPED,
    UNSUPPORTED,
    PairedCheck,
    from_pairs,
    ratio_interval,
    same_code,
    t_quantile,
)
from ktx.search.progress import Display
from ktx.search.runlog import RunLog, read_log
from ktx.search.space import Knob, Space
from ktx.search.study import default_url, open_storage
from ktx.search.tunable import Tunable
from ktx.spec import ShapePoint
from ktx.specload import load_spec

from .conftest import ROOT, SILU

STAND_IN = f"harness:{ROOT / 'tests' / 'search' / 'paired_gpu.py'}:handle"
POINT = ShapePoint.from_name("tokens=4,d=4096")


def test_interval_is_a_t_interval_on_log_ratios() -> None:
    ratios = [1.10, 1.14, 1.08, 1.12, 1.11]
    iv = ratio_interval(ratios)
    assert iv is not None and iv.n == 5
    logs = [math.log(r) for r in ratios]
    half = 2.776 * statistics.stdev(logs) / math.sqrt(5)  # t(0.975, df=4)
    assert iv.estimate == pytest.approx(math.exp(statistics.fmean(logs)))
    assert (iv.lo, iv.hi) == pytest.approx(
        (math.exp(statistics.fmean(logs) - half), math.exp(statistics.fmean(logs) + half))
    )
    assert iv.lo < iv.estimate < iv.hi
    assert ratio_interval([1.2]) is None, "one pair says nothing about its noise"
    assert t_quantile(4) == 2.776 and t_quantile(33) == 2.042 and t_quantile(500) == 1.96


def _check(ratios: list[float], metric: str = "graph") -> PairedCheck:
    pairs = [(2.0 * r, 2.0, 3.0, 3.0) for r in ratios]  # graph: original 2r, candidate 2; single: equal
    rows = tuple((a, b, c, d) for a, b, c, d in pairs)
    graph, single = (
        ratio_interval([a / b for a, b, _, _ in rows]),
        ratio_interval([c / d for _, _, c, d in rows]),
    )
    return PairedCheck("s", metric, MEASURED, {"K": 1}, graph, single, pairs=rows)


def test_the_interval_decides_not_the_estimate() -> None:
    steady = _check([1.05, 1.06, 1.05, 1.06, 1.05])
    assert steady.confirms(None) and steady.confirms(0.02) and not steady.confirms(0.06)
    noisy = _check([1.25, 0.95, 1.20, 0.98, 1.22])  # a 11% mean, but the interval holds 1.0
    assert noisy.interval is not None and noisy.interval.estimate > 1.1
    assert not noisy.confirms(None) and noisy.verdict(None) is False
    # the metric picks the mode: in single-launch mode both ran equally fast
    assert not _check([1.05, 1.06, 1.05, 1.06, 1.05], metric="single").confirms(None)
    # the backend could not re-measure: no verdict, the search's rule stands
    assert PairedCheck("s", "graph", UNSUPPORTED, {"K": 1}).verdict(None) is None
    assert PairedCheck("s", "graph", IDENTICAL, {"K": 1}).verdict(None) is False
    assert PairedCheck("s", "graph", IDENTICAL, {"K": 1}).speedup == 1.0
    again = PairedCheck.from_dict(json.loads(json.dumps(steady.to_dict())))
    assert again.interval == steady.interval and again.status == MEASURED


def test_a_failed_pair_fails_the_check() -> None:
    ok = Measurement("k", "s", {}, Status.OK, graph=Timing.of([1.0]))
    bad = Measurement("k", "s", {"K": 1}, Status.TIMEOUT, message="no answer")
    check = from_pairs("s", "graph", {"K": 1}, [(ok, bad)] * 5)
    assert check.status == FAILED and "candidate: timeout" in check.reason and not check.confirms(None)


def test_the_verdict_overrides_the_search_numbers_in_the_table() -> None:
    point = ShapePoint((("tokens", 4), ("d", 64)))
    lucky = Choice(point, {"K": 1}, 2.0, 2.0 / 1.12, 0.0, verdict=False)  # search said 1.12x
    real = Choice(point, {"K": 2}, 2.0, 1.99, 0.0, verdict=True)  # search said 1.005x
    assert lucky.wins(None) is False and real.wins(None) is True
    assert build_table("k", ("tokens", "d"), "tokens", [lucky]).select(point.as_dict()) is None
    assert build_table("k", ("tokens", "d"), "tokens", [real]).select(point.as_dict()) == {"K": 2}
    assert Choice(point, {"K": 1}, 2.0, 1.0, 0.0).wins(None), "no verdict: the search's numbers decide"


# -- identical code ------------------------------------------------------------------------


class FreshProcess:
    """An in-process stand-in backend with issue 12's first-measurement effect: every
    candidate's code runs at 2.0 µs, but the search measures K=0 (which *is* the original's
    code) 12% faster. Its paired timing is honest."""

    fingerprint = "stand-in: fresh process"

    def __init__(self) -> None:
        self.paired_calls: list[dict[str, int]] = []

    def _m(self, cand: Candidate, point: ShapePoint, us: float) -> Measurement:
        return Measurement("silu_and_mul", point.name, dict(cand.config), Status.OK, graph=Timing.of([us]),
                           single=Timing.of([us + 2.0]))  # fmt: skip

    def measure(self, cand: Candidate, point: ShapePoint) -> Measurement:
        return self._m(cand, point, 2.0 / 1.12 if cand.config.get("K") == 0 else 2.0)

    def measure_paired(
        self, first: Candidate, second: Candidate, point: ShapePoint, pairs: int, timeout: float | None
    ) -> list[tuple[Measurement, Measurement]]:
        self.paired_calls.append(dict(second.config))
        return [
            (self._m(first, point, 2.0), self._m(second, point, 2.0 * (1 + 0.002 * (i % 2))))
            for i in range(pairs)
        ]


def _plugin_like(spec: Any) -> Tunable:
    """A knob K whose value 0 reproduces the original code exactly (as issue 12's user plugin
    did); 1 and 2 add a comment (other source, same speed)."""
    base = original_candidate(spec)

    def make(config: dict[str, int]) -> Candidate:
        k = config.get("K")
        if not config:
            return base
        source = base.source if k == 0 else base.source + f"\n// variant {k}\n"
        return dataclasses.replace(base, source=source, config=dict(config))

    space = Space((Knob("K", (0, 1, 2), 0),), ())
    return Tunable(spec.name, "plugin-like", space, make, "plugin-like-0001")  # type: ignore[arg-type]


def test_identical_code_is_never_reported_faster(tmp_path: Path) -> None:
    spec = load_spec(SILU)
    tunable = _plugin_like(spec)
    assert same_code(tunable.candidate({}), tunable.candidate({"K": 0}), spec, POINT)
    assert not same_code(tunable.candidate({}), tunable.candidate({"K": 1}), spec, POINT)
    backend = FreshProcess()
    folder = tmp_path / "run"
    folder.mkdir()
    request = runner.TuneRequest(kernel_dir=SILU, shapes=(POINT.name,), trials=3, seed=1, out=folder,
                                 holdout="none", quiet=True, backend="stand-in")  # fmt: skip
    url = default_url(folder)
    log = RunLog(folder / "log.jsonl")
    evaluator = Evaluator(spec, tunable, backend, MeasurementCache(None), log)
    ctx = runner.Context(request, spec, tunable, (POINT,), folder, url, open_storage(url), backend,
                         evaluator, log, None, Display(enabled=False))  # fmt: skip
    runner.prepare_all(ctx, None)
    runner.tune_shapes(ctx, None)
    summary = runner.finalize(ctx, 0.0)
    (result,) = summary.results
    assert result.best_config == {"K": 0} and result.speedup == pytest.approx(1.12), "the search was fooled"
    check = summary.paired[POINT.name]
    assert check.status == IDENTICAL and check.speedup == 1.0
    # the runoff (ktx.search.runoff) times K=1 and K=2, within 15% of the search's K=0, against
    # K=0; none is faster paired, so K=0 stays, and the final check measures nothing more
    assert backend.paired_calls == [{"K": 1}, {"K": 2}], "identical code: 1.0, not measured again"
    assert summary.runoffs[POINT.name].chosen == {"K": 0}
    data = json.loads((folder / "summary.json").read_text())
    (row,) = data["shapes"]
    assert row["speedup"] == 1.0 and row["search_speedup"] == pytest.approx(1.12) and not row["dispatched"]
    assert data["dispatched_geomean_speedup"] == 1.0
    assert json.loads((folder / "dispatch.json").read_text())["variants"] == []
    assert "1.000 (identical code)" in (folder / "summary.md").read_text()
    assert [e["status"] for e in read_log(folder / "log.jsonl") if e["event"] == "paired"] == ["identical"]


# -- the stand-in worker: a lucky search measurement, and a real win -------------------------


@pytest.mark.slow
@pytest.mark.skipif(find_nvcc() is None, reason="no nvcc here to compile the candidates")
def test_noise_that_fooled_the_search_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path / "cubins"))
    out = tmp_path / "run"
    argv = ["tune", str(SILU), "--backend", STAND_IN, "--passes", "block-size{min=64,max=256}"]
    argv += ["--shapes", "tokens=4,d=4096;tokens=16,d=4096", "--trials", "4", "--seed", "1"]
    assert main([*argv, "--out", str(out), "--quiet", "--holdout", "none"]) == 0, capsys.readouterr().err
    data = json.loads((out / "summary.json").read_text())
    rows = {r["shape"]: r for r in data["shapes"]}
    lucky, real = rows["tokens=4,d=4096"], rows["tokens=16,d=4096"]
    # tokens=4: the search measured BLOCK_X=64 12% faster; re-measured it is not
    assert lucky["best_config"] == {"BLOCK_X": 64} and lucky["search_speedup"] == pytest.approx(1.12)
    assert lucky["paired"]["status"] == "measured" and len(lucky["paired"]["pairs"]) >= 5
    lo, hi = lucky["speedup_interval"]
    assert lo < 1.01 and hi < 1.02 and lucky["speedup"] == pytest.approx(1.0, abs=0.01)
    assert not lucky["dispatched"]
    # tokens=16: BLOCK_X=128 is faster in every measurement, and the table uses it
    assert real["best_config"] == {"BLOCK_X": 128} and real["dispatched"]
    assert real["speedup_interval"][0] > 1.2 and real["speedup"] == pytest.approx(1.25, abs=0.01)
    table = json.loads((out / "dispatch.json").read_text())
    assert table["variants"] == [{"BLOCK_X": 128}]
    assert data["dispatched_geomean_speedup"] == pytest.approx(1.25**0.5, abs=0.01)
    text = (out / "summary.md").read_text()
    assert "re-measured [95%]" in text and "| original |" in text


def test_recorded_best_is_not_remeasured_on_replay(recording_path: Path, tmp_path: Path) -> None:
    """A replay cannot re-measure: the check says so, and the search's rule decides."""
    out = tmp_path / "run"
    argv = ["tune", str(SILU), "--backend", f"replay:{recording_path}", "--shapes", "tokens=256,d=4096"]
    assert (
        main([*argv, "--trials", "20", "--seed", "1", "--out", str(out), "--quiet", "--holdout", "none"]) == 0
    )
    (row,) = json.loads((out / "summary.json").read_text())["shapes"]
    assert row["paired"]["status"] == "unsupported" and row["speedup"] == row["search_speedup"]
    assert "not re-measured" in (out / "summary.md").read_text()


def test_another_launch_is_not_same_code() -> None:
    spec = load_spec(SILU)
    base = original_candidate(spec)
    other = dataclasses.replace(base, block=("BLOCK",), config={"BLOCK": 128})
    assert not same_code(base, other, spec, POINT), "another launch is other code"


def test_the_worker_interleaves_the_pair() -> None:
    """The worker's ``paired`` request runs the two jobs alternately, A B A B ..., in one process."""
    from ktx.measure.worker import paired

    calls: list[str] = []

    def handler(op: str, payload: Any) -> Any:
        assert op == "measure"
        calls.append(payload["who"])
        return {"who": payload["who"], "n": len(calls)}

    result = paired(handler, {"jobs": [{"who": "A"}, {"who": "B"}], "pairs": 5})
    assert calls == ["A", "B"] * 5
    assert [[a["who"], b["who"]] for a, b in result] == [["A", "B"]] * 5


class FasterOne(FreshProcess):
    """K=1 is 20% faster in every measurement."""

    def measure(self, cand: Candidate, point: ShapePoint) -> Measurement:
        return self._m(cand, point, 1.6 if cand.config.get("K") == 1 else 2.0)

    def measure_paired(
        self, first: Candidate, second: Candidate, point: ShapePoint, pairs: int, timeout: float | None
    ) -> list[tuple[Measurement, Measurement]]:
        self.paired_calls.append(dict(second.config))
        return [(self.measure(first, point), self.measure(second, point)) for _ in range(pairs)]


def test_a_second_finalize_measures_only_the_checks_that_were_cut(tmp_path: Path) -> None:
    """``ktx optimize`` re-finalizes a round whose time share cut a final check: the cut check
    runs, a check that ran is kept as it was (not timed again), and the table then uses the win."""
    spec = load_spec(SILU)
    tunable = _plugin_like(spec)
    backend = FasterOne()
    folder = tmp_path / "run"
    folder.mkdir()
    points = (POINT, ShapePoint.from_name("tokens=16,d=4096"))
    request = runner.TuneRequest(kernel_dir=SILU, shapes=tuple(p.name for p in points), trials=3, seed=1,
                                 out=folder, holdout="none", quiet=True, backend="stand-in")  # fmt: skip
    url = default_url(folder)
    log = RunLog(folder / "log.jsonl")
    evaluator = Evaluator(spec, tunable, backend, MeasurementCache(None), log)
    ctx = runner.Context(request, spec, tunable, points, folder, url, open_storage(url), backend,
                         evaluator, log, None, Display(enabled=False))  # fmt: skip
    runner.prepare_all(ctx, None)
    runner.tune_shapes(ctx, None)
    first = runner.finalize(ctx, 0.0)
    assert {c.status for c in first.paired.values()} == {MEASURED} and len(backend.paired_calls) == 2
    cut_name = points[1].name
    keep = dict(first.paired)
    keep[cut_name] = dataclasses.replace(keep[cut_name], status=SKIPPED, graph=None, single=None, pairs=())
    backend.paired_calls.clear()
    again = runner.finalize(ctx, 0.0, None, None, keep)
    assert backend.paired_calls == [{"K": 1}], "only the cut check is timed again"
    assert again.paired[POINT.name] is first.paired[POINT.name]
    assert again.paired[cut_name].status == MEASURED
    table = json.loads((folder / "dispatch.json").read_text())
    assert table["variants"] == [{"K": 1}]
    # a kept check for another config than the studies' best is not reused
    keep = {POINT.name: dataclasses.replace(first.paired[POINT.name], config={"K": 2})}
    backend.paired_calls.clear()
    runner.finalize(ctx, 0.0, None, None, keep)
    assert backend.paired_calls == [{"K": 1}, {"K": 1}]
