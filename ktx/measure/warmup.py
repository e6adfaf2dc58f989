"""Bring the GPU to steady clocks before a process times anything.

An idle GPU runs at low clocks and ramps up under load over tens to hundreds of milliseconds;
the first timing of a process then differs from later ones (issue 12: the first measurement of
fresh processes was 13% off, enough to report identical code as a 1.13x speedup). So before
the first timing a worker keeps the GPU busy for at least ``busy_ms`` (a grid-wide read-modify-
write kernel with some arithmetic, which loads both the memory system and the SMs), then times
a short probe of the same kernel until two successive medians agree within ``tolerance``
(bounded by ``max_probes``). The probe's medians and the clocks (NVML, when CuPy exposes it)
are returned, so a run can record whether it started from steady state.

:func:`stable_median` is the same rule for one measurement: repeat a batch of timings until two
successive medians agree.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

_BUSY = r"""
extern "C" __global__ void ktx_busy(float* buf, long long n, int iters) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (; i < n; i += stride) {
    float v = buf[i];
    for (int k = 0; k < iters; ++k) v = v * 0.999f + 0.001f;
    buf[i] = v;
  }
}
"""


@dataclass(frozen=True)
class WarmUp:
    busy_ms: float
    probe_medians_us: tuple[float, ...]
    stable: bool
    seconds: float
    clocks: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["probe_medians_us"] = list(self.probe_medians_us)
        return data


_DONE: WarmUp | None = None


def agree(a: float, b: float, tolerance: float) -> bool:
    """Whether two medians agree within ``tolerance`` (relative to the later one)."""
    return b > 0 and abs(a - b) <= tolerance * b


def stable_median(
    batch: Callable[[], list[float]], tolerance: float = 0.01, max_batches: int = 5, discard: int = 0
) -> tuple[list[float], list[float]]:
    """(the last batch's samples, every counted batch's median): the first ``discard`` batches
    are taken and dropped, then batches are taken until two successive medians agree within
    ``tolerance``, at most ``max_batches``."""
    for _ in range(max(0, discard)):
        batch()
    medians: list[float] = []
    samples: list[float] = []
    for _ in range(max(1, max_batches)):
        samples = batch()
        medians.append(statistics.median(samples))
        if len(medians) >= 2 and agree(medians[-2], medians[-1], tolerance):
            break
    return samples, medians


def settle_seconds(last_busy: float | None, now: float, quick_s: float, idle_s: float, gap_s: float) -> float:
    """How long to replay a graph untimed before its timed batches: ``idle_s`` when the GPU has
    not been timing for ``gap_s`` (or ever, in this process), else ``quick_s``.

    Why (issue 18): a fresh process's first graph measurement was once 12.6% low while every
    later one, and five other processes, agreed within 0.5%. The first timing of a process is
    the one that follows a GPU-idle gap: CuPy compiling its verification kernels (``prime``)
    and the float64 Python reference of the original, both on the CPU, come after the process
    warm-up, whose "steady" verdict was about another kernel (``ktx_busy``) before that gap. What
    the GPU does after such a gap (clocks and power state moving, L2 left by other work) lasts
    tens of milliseconds, longer than the two 20-replay batches that the steady-state rule
    needed to agree, so the transient could be measured as the steady state. A longer untimed
    settle after a gap, and a first timed batch that is always dropped, take it out."""
    if last_busy is None or now - last_busy >= gap_s:
        return idle_s
    return quick_s


def steady_samples(
    replay: Callable[[], float],
    replays: int,
    settle_s: float,
    tolerance: float = 0.01,
    max_batches: int = 5,
    discard: int = 1,
    clock: Callable[[], float] = time.perf_counter,
    max_settle: int = 100_000,
) -> tuple[list[float], list[float]]:
    """(samples of the reported batch, the counted batches' medians) of a timed graph replay
    (``replay()`` runs one replay, waits for it and returns its time per launch): replays are
    run and dropped for ``settle_s`` of wall time (at least one), the next ``discard`` batches
    of ``replays`` are dropped too, then batches are taken until two successive medians agree
    (:func:`stable_median`)."""
    start = clock()
    for _ in range(max_settle):
        replay()
        if clock() - start >= settle_s:
            break

    def batch() -> list[float]:
        return [replay() for _ in range(max(1, replays))]

    return stable_median(batch, tolerance, max_batches, discard)


def clocks() -> dict[str, Any]:
    """SM and memory clocks (MHz) and temperature by NVML through CuPy, when available."""
    try:
        from cupy_backends.cuda.libs import nvml  # type: ignore[import-not-found]

        nvml.nvmlInit()
        dev = nvml.nvmlDeviceGetHandleByIndex(0)
        return {
            "sm_mhz": int(nvml.nvmlDeviceGetClockInfo(dev, 1)),
            "mem_mhz": int(nvml.nvmlDeviceGetClockInfo(dev, 2)),
        }
    except Exception:  # NVML is optional: report nothing rather than fail a measurement
        return {}


def warm_up(sm_count: int, busy_ms: float = 200.0, tolerance: float = 0.01, max_probes: int = 30) -> WarmUp:
    """Once per process (later calls return the first result)."""
    global _DONE
    if _DONE is not None:
        return _DONE
    import cupy as cp

    start = time.perf_counter()
    n = 32 << 20  # 128 MiB of float32: well past L2, so memory clocks ramp too
    buf = cp.zeros(n, dtype=cp.float32)
    kernel = cp.RawKernel(_BUSY, "ktx_busy")
    grid, block = (max(1, sm_count) * 4,), (256,)
    stream = cp.cuda.Stream(non_blocking=True)
    spent = 0.0
    with stream:  # RawKernel launches on the current stream
        while spent < busy_ms and time.perf_counter() - start < 10 * busy_ms / 1e3:
            s, e = cp.cuda.Event(), cp.cuda.Event()
            s.record(stream)
            for _ in range(5):
                kernel(grid, block, (buf, np.int64(n), np.int32(16)))
            e.record(stream)
            e.synchronize()
            spent += cp.cuda.get_elapsed_time(s, e)
        small = np.int64(1 << 20)

        def probe() -> list[float]:
            out = []
            for _ in range(15):
                s, e = cp.cuda.Event(), cp.cuda.Event()
                s.record(stream)
                kernel(grid, block, (buf, small, np.int32(16)))
                e.record(stream)
                e.synchronize()
                out.append(cp.cuda.get_elapsed_time(s, e) * 1e3)
            return out

        _, medians = stable_median(probe, tolerance, max_probes)
    stable = len(medians) >= 2 and agree(medians[-2], medians[-1], tolerance)
    _DONE = WarmUp(spent, tuple(medians), stable, time.perf_counter() - start, clocks())
    return _DONE
