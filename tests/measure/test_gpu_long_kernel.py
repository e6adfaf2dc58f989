"""A long kernel's single-launch timing ends after its first launches when they agree
(``ktx.measure.gpu.steady_single``), on the simulated device of test_first_measurement."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ktx.measure import gpu
from ktx.measure.gpu import LONG_FIRST_RUNS, Options
from ktx.measure.occupancy import DeviceLimits
from ktx.measure.types import Resources, Timing
from ktx.measure.verify import seeded_inputs
from ktx.specload import load_spec

from .test_first_measurement import STEADY, SimEvent, SimGpu, SimStream


class NoisyGpu(SimGpu):
    """Every other launch 5% slower: a spread the first launches cannot pin."""

    def kernel(self) -> None:
        self.now += STEADY * (1.05 if self.runs % 2 else 1.0) * 1e-6
        self.runs += 1


def _single(monkeypatch: pytest.MonkeyPatch, sim: SimGpu, opts: Options) -> Timing:
    cuda = SimpleNamespace(Event=lambda: SimEvent(sim), get_elapsed_time=lambda s, e: (e.t - s.t) * 1e3)
    monkeypatch.setattr(gpu, "_cupy", lambda: SimpleNamespace(cuda=cuda))
    monkeypatch.setattr(gpu, "_LAST_TIMED", [])
    spec = load_spec(Path(__file__).resolve().parents[2] / "kernels" / "silu_and_mul")
    point = spec.find_point("tokens=2,d=64")
    sets = [seeded_inputs(spec, point, 1, 0, np) for _ in range(4)]
    monkeypatch.setattr(gpu, "_timing_arena", lambda *a: sets)

    def fn(grid: object, block: object, args: object, shared_mem: int, stream: object) -> None:
        if sim.capture is not None:
            sim.capture += 1
        else:
            sim.kernel()

    bound = gpu._Bound(fn, (2, 1, 1), (64, 1, 1), 0, Resources(32, 0, 0, 0, 1024, 64, 8, 1.0, "warps"))
    single, _ = gpu._time(spec, bound, point, opts, DeviceLimits(), SimStream(sim))
    return single


def test_a_steady_long_kernel_takes_its_first_single_launches_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 2.7 µs kernel counted as long (threshold below it) whose launches agree: LONG_FIRST_RUNS
    samples; counted as short (the default threshold): every run, as before."""
    long = _single(monkeypatch, SimGpu(low_runs=0), Options(flush_l2=False, long_kernel_us=1.0))
    assert long.n == LONG_FIRST_RUNS and long.median_us == pytest.approx(STEADY)
    short = _single(monkeypatch, SimGpu(low_runs=0), Options(flush_l2=False))
    assert short.n == 500


def test_a_noisy_long_kernel_takes_every_run(monkeypatch: pytest.MonkeyPatch) -> None:
    noisy = _single(monkeypatch, NoisyGpu(low_runs=0), Options(flush_l2=False, long_kernel_us=1.0))
    assert noisy.n == 500
