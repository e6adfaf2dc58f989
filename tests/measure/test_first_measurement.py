"""The first graph measurement of a process (issue 18, item 8), on a model GPU: after an idle
gap the model runs 12.6% fast (2.373 instead of 2.715 µs per launch, the numbers seen on an
H200) for a while, longer than the two batches that the old steady-state rule needed to agree.
The old rule reported the transient; settling after an idle gap and dropping the first batch
report the steady state."""

from __future__ import annotations

import statistics

import pytest

from ktx.measure.gpu import Options
from ktx.measure.warmup import settle_seconds, stable_median, steady_samples

STEADY, LOW = 2.715, 2.373
REPLAY_S = 0.0012  # one replay of ~450 launches of a 2.7 µs kernel


class ModelGpu:
    """Simulated time; per-launch replay times are LOW for ``transient_s`` after the start."""

    def __init__(self, transient_s: float) -> None:
        self.now = 0.0
        self.transient_s = transient_s
        self.replays = 0

    def clock(self) -> float:
        return self.now

    def replay(self) -> float:
        t = LOW if self.now < self.transient_s else STEADY
        self.now += REPLAY_S
        self.replays += 1
        return t


def test_the_old_rule_reports_a_transient_longer_than_two_batches() -> None:
    gpu = ModelGpu(transient_s=0.08)
    samples, medians = stable_median(lambda: [gpu.replay() for _ in range(20)], 0.01, 5)
    assert medians == [LOW, LOW] and statistics.median(samples) == LOW  # what issue 18 saw


@pytest.mark.parametrize("transient_s", [0.0, 0.02, 0.08, 0.2])
def test_after_an_idle_gap_the_steady_time_is_reported(transient_s: float) -> None:
    opts = Options()
    gpu = ModelGpu(transient_s)
    settle = settle_seconds(None, 0.0, opts.settle_s, opts.settle_idle_s, opts.idle_gap_s)
    assert settle == opts.settle_idle_s
    samples, medians = steady_samples(
        gpu.replay, opts.graph_replays, settle, opts.stable_tolerance, opts.max_batches,
        opts.discard_batches, clock=gpu.clock,
    )  # fmt: skip
    assert statistics.median(samples) == STEADY and medians[-1] == STEADY
    # settled for the idle time, one batch dropped, two counted
    assert gpu.replays == round(settle / REPLAY_S) + 1 + 3 * opts.graph_replays


def test_the_first_batch_is_dropped_even_without_settling() -> None:
    """A transient of exactly two batches: with the first dropped, the rule sees one low batch
    and keeps going until two steady ones agree."""
    gpu = ModelGpu(transient_s=2 * 20 * REPLAY_S - 1e-9)
    samples, medians = steady_samples(gpu.replay, 20, 0.0, 0.01, 5, discard=1, clock=gpu.clock)
    assert statistics.median(samples) == STEADY and medians == [LOW, STEADY, STEADY]
    gpu = ModelGpu(transient_s=2 * 20 * REPLAY_S - 1e-9)
    samples, _ = steady_samples(gpu.replay, 20, 0.0, 0.01, 5, discard=0, clock=gpu.clock)
    assert statistics.median(samples) == LOW  # without the drop the transient would pass


def test_settle_is_short_while_the_gpu_keeps_timing() -> None:
    opts = Options()
    assert settle_seconds(10.0, 10.1, opts.settle_s, opts.settle_idle_s, opts.idle_gap_s) == opts.settle_s
    assert (
        settle_seconds(10.0, 11.0, opts.settle_s, opts.settle_idle_s, opts.idle_gap_s) == opts.settle_idle_s
    )
    assert opts.settle_idle_s > 2 * opts.graph_replays * REPLAY_S  # longer than two batches
