"""Where a GPU worker's request says its seconds went (``costs``), without a GPU: the harness
derives a candidate's expected cost and the loop a round's least time from it, so a one-off
cost booked as repeatable starves the run (issue 23 item 6)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from ktx.measure import gpu
from ktx.measure.occupancy import DeviceLimits
from ktx.measure.types import original_candidate
from ktx.measure.verify import seeded_inputs
from ktx.specload import load_spec

ROOT = Path(__file__).resolve().parents[2]


def test_preparing_the_python_reference_is_booked_as_its_one_off_cost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The original's first check draws every round's inputs and copies them to the host for
    the float64 reference: no candidate repeats that, so it is ``python_s``, not verification a
    candidate would pay again."""
    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path))  # no cached verdicts: every round to check
    spec = load_spec(ROOT / "kernels" / "silu_and_mul")
    point = spec.find_point("tokens=4,d=4096")
    original = original_candidate(spec)
    started: list[int] = []

    def slow_start(spec: Any, todo: list[Any], stream: Any, pool: Any) -> dict[Any, Any]:
        started.append(len(todo))
        time.sleep(0.3)  # the draws and device-to-host copies
        return {}

    def rounds(*args: Any) -> gpu._Verdict:
        time.sleep(0.05)  # the device-side check a candidate repeats
        return gpu._Verdict(0.0, 0.0, (point.name,))

    monkeypatch.setattr(gpu, "_start_python", slow_start)
    monkeypatch.setattr(gpu, "_verify_rounds", rounds)
    reference = {"kind": "python", "original_digest": original.digest}
    costs = gpu._Costs()
    opts = gpu.Options(rounds=3)
    clock = time.perf_counter()
    gpu._verify(spec, original, {}, reference, point, opts, DeviceLimits(), None, costs)
    costs.verify_s = time.perf_counter() - clock
    assert started and started[0] >= 3, "every round of the shape is prepared"
    assert costs.python_s >= 0.3, costs
    assert costs.verify_s - costs.python_s < 0.25, "only the device-side check stays repeatable"


def test_a_python_check_finds_the_reference_the_originals_check_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """The original's check runs the Python reference in threads and keeps its outputs under
    the key a later check against the Python reference (a candidate with a precision knob on)
    looks up: that check then runs no reference of its own."""
    import contextlib
    from types import SimpleNamespace

    import numpy as np

    spec = load_spec(ROOT / "kernels" / "silu_and_mul")
    point = spec.find_point("tokens=4,d=4096")
    memo = gpu.ArrayMemo(1 << 30)
    monkeypatch.setattr(gpu, "_MEMO", memo)
    shim = SimpleNamespace(asarray=np.asarray, asnumpy=lambda a, stream=None: np.asarray(a))
    monkeypatch.setattr(gpu, "_cupy", lambda: shim)

    def no_reference(*args: Any) -> Any:
        raise AssertionError("the reference ran again")

    monkeypatch.setattr(gpu, "python_reference", no_reference)
    inputs_key = ("inputs", repr(spec.args), point.name, 7, 0)
    kept = {"out": np.arange(6, dtype=np.float64)}
    memo.put(gpu._python_key(spec, inputs_key), kept)  # as the original's check does
    costs = gpu._Costs()
    want = gpu._python_want(spec, point, inputs_key, {}, costs, contextlib.nullcontext())
    assert np.array_equal(want["out"], np.arange(6)) and memo.hits == 1
    other = ("inputs", repr(spec.args), point.name, 8, 1)  # other inputs: not answered from it
    pristine = seeded_inputs(spec, point, 8, 1, np)
    with pytest.raises(AssertionError, match="ran again"):
        gpu._python_want(spec, point, other, pristine, costs, contextlib.nullcontext())


class _Stream:
    def __init__(self) -> None:
        self.synced = 0

    def synchronize(self) -> None:
        self.synced += 1


def test_the_steps_are_booked_apart_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """``KTX_COST_DETAIL=1`` (scripts/gpu_s9_overhead.sh) books each step, its device work
    synchronised into it; otherwise nothing is booked or synchronised, and the account the
    harness reads is the four totals it always was."""
    from ktx.measure.cost import request_overhead

    costs, stream = gpu._Costs(), _Stream()
    monkeypatch.delenv("KTX_COST_DETAIL", raising=False)
    with gpu._step(costs, "inputs", stream):
        time.sleep(0.01)
    assert costs.parts == {} and stream.synced == 0
    assert set(costs.to_dict()) == {"warmup_s", "python_s", "verify_s", "time_s"}
    monkeypatch.setenv("KTX_COST_DETAIL", "1")
    for _ in range(2):
        with gpu._step(costs, "inputs", stream):
            time.sleep(0.01)
    with gpu._step(costs, "bind"):
        pass
    assert stream.synced == 2 and costs.parts["inputs"] >= 0.02 and "bind" in costs.parts
    costs.time_s = 0.1
    report = costs.to_dict()
    assert report["parts"]["inputs"] >= 0.02
    assert request_overhead(0.3, report) == pytest.approx(0.2), "the steps are not counted twice"
