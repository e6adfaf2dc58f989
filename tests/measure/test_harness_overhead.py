"""What the harness learns about its own overhead, and the warm-up beside the compiles (issue 23
item 6: the overhead of an evaluation, and a final check's estimate, from measured costs)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ktx.measure.cost import TIMING_SCALE_BOUNDS, rotated_sets, timing_seconds
from ktx.measure.harness import Harness
from ktx.measure.types import Measurement
from ktx.specload import load_spec

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "kernels" / "silu_and_mul"
WARM = str(Path(__file__).with_name("fake_warm.py")) + ":handle"


def _ok(single_us: float) -> Measurement:
    t = {"median_us": single_us, "mean_us": single_us, "min_us": single_us, "max_us": single_us,
         "p10_us": single_us, "p90_us": single_us, "n": 10}  # fmt: skip
    return Measurement.from_dict(
        {"kernel": "k", "shape": "s", "config": {}, "status": "ok", "single": t, "graph": t, "bytes": 1 << 20}
    )


def test_the_request_overhead_is_what_the_worker_did_not_account_for() -> None:
    with Harness(load_spec(SPEC), handler=WARM) as h:
        assert h.request_overhead_s is None and h.observed_timing_scale is None
        h._observe(0.50, {"warmup_s": 0.0, "verify_s": 0.30, "time_s": 0.15}, _ok(10.0))
        h._observe(0.45, {"warmup_s": 0.0, "verify_s": 0.25, "time_s": 0.15}, _ok(10.0))
        h._observe(2.40, {"warmup_s": 2.0, "verify_s": 0.20, "time_s": 0.15}, _ok(10.0))  # a fresh worker
        assert h.request_overhead_s == pytest.approx(0.05)
        counted = timing_seconds(10.0, h.options, rotated_sets(1 << 20, h.options))
        low, high = TIMING_SCALE_BOUNDS
        assert h.observed_timing_scale == pytest.approx(min(high, max(low, 0.15 / counted)))


def test_a_stand_in_without_a_cost_report_is_all_overhead() -> None:
    with Harness(load_spec(SPEC), handler=WARM) as h:
        h._observe(0.21, None, _ok(2.0))
        assert h.request_overhead_s == pytest.approx(0.21)
        assert h.observed_timing_scale is None


def test_the_warm_up_runs_beside_the_caller_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Session 8's probe: the worker's 8-9 s warm-up ran after the original's compile, one after the
    other. Started in the background it returns at once, and the first measurement waits for that
    warm-up instead of starting another."""
    log = tmp_path / "warm.log"
    monkeypatch.setenv("KTX_TEST_WARM_LOG", str(log))
    monkeypatch.setenv("KTX_TEST_WARM_S", "1.0")
    with Harness(load_spec(SPEC), handler=WARM, warm_workers=True) as h:
        h.device()  # starts the worker, as opening the backend does
        began = time.monotonic()
        h.warm_in_background()
        h.warm_in_background()  # already warming: no second warm-up
        assert time.monotonic() - began < 0.5
        h._warm_worker()  # what a measurement does first: waits for the warm-up under way
        assert time.monotonic() - began >= 0.9
        h._warm_worker()
        h.warm_in_background()  # warm already: nothing
        time.sleep(0.1)
    assert log.read_text().count("warmup") == 1


def test_a_retired_worker_is_not_ready_and_its_restart_is_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the final check asks before a check: is the worker warm, and what a restart costs (the
    first warm-up capped at RESTART_S until a restart is seen; then the restarts' own)."""
    from ktx.measure.harness import RESTART_S

    monkeypatch.setenv("KTX_TEST_WARM_LOG", str(tmp_path / "warm.log"))
    monkeypatch.setenv("KTX_TEST_WARM_S", "0.3")
    with Harness(load_spec(SPEC), handler=WARM, warm_workers=True) as h:
        assert not h.worker_ready() and h.worker_start_s == RESTART_S
        h.device()
        h.warm_worker()
        assert h.worker_ready()
        assert 0.3 <= h.worker_start_s < RESTART_S
        assert h.supervisor.worker is not None
        h.supervisor.worker.kill()  # a check cut by the limit: the worker is killed at its timeout
        assert not h.worker_ready()
        monkeypatch.setenv("KTX_TEST_WARM_S", "0.6")  # the env of the next worker process
        h.warm_worker()
        assert h.worker_ready() and h.worker_start_s >= 0.6
    assert (tmp_path / "warm.log").read_text().count("warmup") == 2
