"""Timeouts derived from the original's cost at each shape, and short retries after a timeout:
the policy's arithmetic, and a hang against the stand-in worker costing seconds, not minutes."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from ktx.measure.compile import find_nvcc
from ktx.measure.harness import Harness
from ktx.measure.timeouts import TimeoutPolicy, candidate_cost, request_cost, timing_cost
from ktx.measure.types import Status
from ktx.specload import load_spec

ROOT = Path(__file__).resolve().parents[2]
FAKE = str(Path(__file__).with_name("fake_gpu.py")) + ":handle"


def test_timeout_is_a_multiple_of_the_original_between_floor_and_ceiling() -> None:
    policy = TimeoutPolicy(ceiling_s=180.0, floor_s=3.0, multiple=50.0, retry_multiple=5.0)
    assert policy.timeout(None) == 180.0, "unknown original: the ceiling"
    assert policy.timeout(0.01) == 3.0, "a fast original: the floor"
    assert policy.timeout(0.4) == pytest.approx(20.0)
    assert policy.timeout(10.0) == 180.0, "never beyond the ceiling"
    # a retry after a timeout is short: it tells a flaky worker from a hang
    assert policy.retry_timeout(0.4) == pytest.approx(3.0)
    assert policy.retry_timeout(2.0) == pytest.approx(10.0)
    assert policy.retry_timeout(None) == pytest.approx(18.0)
    assert all(policy.retry_timeout(c) <= policy.timeout(c) for c in (None, 0.01, 0.4, 2.0, 50.0))


def test_request_cost_leaves_out_one_off_costs() -> None:
    assert request_cost(5.0, None) == 5.0
    assert request_cost(5.0, {"warmup_s": 1.0, "python_s": 3.5, "verify_s": 3.9}) == pytest.approx(0.5)
    assert request_cost(1.0, {"python_s": 4.0}) == 0.0


@pytest.mark.skipif(not find_nvcc(), reason="no nvcc here")
@pytest.mark.slow
def test_a_hang_costs_seconds_once_the_original_is_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path))
    spec = load_spec(ROOT / "kernels" / "silu_and_mul")
    point = spec.find_point("tokens=4,d=4096")
    other = spec.find_point("tokens=16,d=4096")
    with Harness(spec, handler=FAKE, timeout_s=120, timeout_floor_s=2.0, compile_workers=1) as h:
        orig = h.original
        hang = replace(orig, source=orig.source + "\n// KTX_TEST_HANG\n", config={"X": 1}, label="hang")
        assert h.timeout_for(hang, point) == 120, "before the original: the ceiling"
        assert h.measure(orig, point).ok
        assert point.name in h.original_cost and h.original_cost[point.name] < 1.0
        assert h.timeout_for(hang, point) == pytest.approx(2.0)
        assert h.timeout_for(hang, other) == 120, "derived per shape"
        h.prefetch(hang, point)
        h._modules(hang, point)  # compiled before the clock starts
        start = time.monotonic()
        first = h.measure(hang, point)
        again = h.measure(hang, point)  # what the search's retry does
        spent = time.monotonic() - start
        assert first.status is Status.TIMEOUT and again.status is Status.TIMEOUT
        assert "50x the original's" in first.message and "at least 2 s" in first.message
        assert spent < 15, f"a hang and its retry took {spent:.1f} s"
        # the worker is replaced and the original still measures
        assert h.measure(orig, point).ok


def test_graph_batches_of_long_kernels_fit_the_budget() -> None:
    from ktx.measure.gpu import graph_shape

    assert graph_shape(100, 20, 1, 2.5, 0.15) == (100, 20), "short kernels keep every sample"
    launches, replays = graph_shape(100, 20, 1, 350.0, 0.15)  # silu at 4096x14336
    assert launches * replays * 350e-6 <= 0.15 and replays >= 5 and launches >= 10
    launches, replays = graph_shape(100, 20, 40, 2000.0, 0.15)
    assert launches >= 40, "one pass over the rotated input sets at least"


@pytest.mark.skipif(not find_nvcc(), reason="no nvcc here")
def test_a_candidate_first_at_a_shape_brings_the_original_measured_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search may answer the original from its cache; the timeout still derives from it."""
    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path))
    spec = load_spec(ROOT / "kernels" / "silu_and_mul")
    point = spec.find_point("tokens=4,d=4096")
    with Harness(spec, handler=FAKE, timeout_s=120, compile_workers=1) as h:
        tuned = replace(h.original, config={"X": 1}, label="tuned")
        assert h.measure(tuned, point).ok
        assert point.name in h.original_cost
        assert h.timeout_for(tuned, point) < 120
        assert not h.candidate_cost, "a stand-in without a cost report tells nothing of a candidate"


def test_a_candidates_cost_leaves_out_the_originals_python_check() -> None:
    """Issue 23 item 6 (llm.c layernorm v1, H200): the original's request spent seconds checking
    against the float64 Python reference, which no candidate repeats; a candidate costs its
    timing, the request's fixed part and a check no dearer than its timing."""
    layernorm = {"warmup_s": 0.0, "python_s": 2.0, "verify_s": 6.5, "time_s": 0.7}
    assert request_cost(7.5, layernorm) == pytest.approx(5.5), "the repeatable cost keeps the check"
    assert candidate_cost(7.5, layernorm) == pytest.approx(0.7 + 0.7 + 0.3)
    cheap = {"warmup_s": 0.0, "python_s": 0.0, "verify_s": 0.05, "time_s": 0.4}
    assert candidate_cost(0.5, cheap) == pytest.approx(0.5), "a cheap check is counted as it is"
    # the warm-up is one-off: never part of a candidate's cost
    assert candidate_cost(9.5, {**cheap, "warmup_s": 9.0}) == pytest.approx(0.5)
    # without the worker's account the whole request stands for it
    assert candidate_cost(0.2, None) == pytest.approx(0.2)
    assert candidate_cost(0.2, {"warmup_s": 0.1}) == pytest.approx(0.1)
    # a side of a paired check only times: no verification at all
    assert timing_cost(7.5, layernorm) == pytest.approx(0.7 + 0.3)
    assert timing_cost(0.2, None) == pytest.approx(0.2)


@pytest.mark.skipif(not find_nvcc(), reason="no nvcc here")
def test_the_harness_counts_a_candidates_cost_from_the_originals_account(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From the original's request the harness keeps what a candidate and a timing-only
    request are expected to cost: without the original's Python check, which it alone pays."""
    from tests.measure import fake_costs

    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path))
    spec = load_spec(ROOT / "kernels" / "silu_and_mul")
    point = spec.find_point("tokens=4,d=4096")
    handler = str(Path(__file__).with_name("fake_costs.py")) + ":handle"
    with Harness(spec, handler=handler, timeout_s=120, compile_workers=1) as h:
        assert h.measure(h.original, point).ok
        python, check, timing = fake_costs.ORIGINAL_PYTHON_S, fake_costs.ORIGINAL_CHECK_S, fake_costs.TIME_S
        assert h.original_cost[point.name] >= check + timing, "the original's own check is repeatable"
        fixed = h.original_cost[point.name] - check - timing  # the request's fixed part, as measured
        assert h.timing_cost[point.name] == pytest.approx(timing + fixed, abs=1e-3)
        # the check a candidate repeats is counted at most as long as its timing
        assert h.candidate_cost[point.name] == pytest.approx(2 * timing + fixed, abs=1e-3)
        assert h.candidate_cost[point.name] < h.original_cost[point.name] - python
        # the worker's account of the last request, kept for the run log
        assert h.last_costs is not None and h.last_costs["python_s"] == pytest.approx(python)
        assert h.last_costs["request_s"] >= python + check + timing


def test_the_cost_examples_in_the_docstrings_hold() -> None:
    import doctest

    from ktx.measure import timeouts

    result = doctest.testmod(timeouts)
    assert result.attempted >= 4 and result.failed == 0
