"""What one timing costs in wall seconds, from the kernel's measured time per launch.

Why (issue 23): the final check's estimate came from the original's *verified* measurement, whose
wall time is dominated by what a check never does (verification rounds, odd sizes, the Python
reference, compiling). On the llm.c ladder it said a check "needs about 117 s" in a round that
took 22.9 s in all, so a config about 70x faster than the original was dropped unchecked. A
timing's launches are known before it runs: :func:`ktx.measure.gpu._time` launches a fixed warm-up,
``runs`` single launches, then graphs shaped by :func:`~ktx.measure.gpu.graph_shape`. Counting
those launches, times the kernel's measured time, plus the host's per-launch and per-request
overhead, gives an estimate that follows the kernel instead of the verification around it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ktx.measure.gpu import Options, graph_shape

#: Host time per launch that waits for the GPU (event record, launch, synchronise): the floor of
#: a single launch of a tiny kernel (H100/H200 single-launch medians of 1 µs kernels read 6-8 µs).
HOST_LAUNCH_US = 10.0

#: The same for each replay of a captured graph (one launch call and one synchronise).
HOST_REPLAY_US = 10.0

#: Wall seconds of one timing request outside its launches: argument sets from the shape's arena,
#: event objects, capturing and instantiating the graph, the L2 flush buffer's fills.
REQUEST_S = 0.03

#: Wall seconds of a paired request outside its timings: the call to the worker, its reply and
#: loading both modules (compiled before: the cache answers).
PAIRED_REQUEST_S = 0.2

#: A single launch behind a fresh L2 flush: filling the flush buffer (about twice the L2, 100 MB
#: on an H200, at a few TB/s) costs this much per launch.
FLUSH_US = 40.0

#: L2 bytes assumed where the device's are not known (H200: 60 MiB; H100: 50 MiB); the count of
#: rotated input sets follows it.
L2_BYTES = 64 << 20


def rotated_sets(set_bytes: int | None, options: Options, l2_bytes: int = L2_BYTES) -> int:
    """Input sets a timing rotates over (as :func:`ktx.measure.gpu._timing_arena` chooses
    them): together over twice the L2, bounded; 1 where the bytes are not known."""
    if not set_bytes or set_bytes <= 0:
        return 1
    want = math.ceil(2 * l2_bytes / set_bytes)
    return max(1, min(want, options.max_sets, options.max_rotate_bytes // set_bytes))


@dataclass(frozen=True)
class LaunchPlan:
    """How many launches one timing makes of a kernel estimated at ``estimate_us``: the counts
    :func:`ktx.measure.gpu._time` uses, the timed batches at their most."""

    warmup: int
    single: int
    per_graph: int
    replays: int
    #: replays of the captured graph before the timed batches: the instantiating launch and the
    #: settle (at least one)
    untimed_replays: int
    batches: int

    @property
    def graph_launches(self) -> int:
        return self.per_graph * (self.untimed_replays + self.replays * self.batches)

    @property
    def launches(self) -> int:
        return self.warmup + self.single + self.graph_launches


def paired_options(options: Options) -> Options:
    """The options of a paired check's timings: timing only, with fewer graph batches and
    replays (both sides were verified and timed before). One place, shared with the harness,
    so that the estimate counts the launches the check makes."""
    return replace(
        options,
        verify=False,
        max_batches=min(options.max_batches, 2),
        graph_replays=min(options.graph_replays, 10),
    )


def launch_plan(time_us: float, options: Options, nsets: int = 1) -> LaunchPlan:
    """The launches of one timing (see :func:`ktx.measure.gpu._time`) of a kernel that takes
    ``time_us`` a launch; ``nsets``: the rotated input sets (1 for inputs larger than the L2).
    Every single launch is counted, though a long kernel whose first launches agree stops
    after :data:`~ktx.measure.gpu.LONG_FIRST_RUNS` (:func:`~ktx.measure.gpu.steady_single`):
    an upper bound, as the batches."""
    estimate = max(time_us, 0.5)
    runs = int(min(options.max_runs, max(options.min_runs, 50_000 / estimate)))
    launches = max(options.graph_launches, nsets if nsets > 1 else 0)
    launches = min(launches, max(options.graph_launches, options.max_sets))
    launches, replays = graph_shape(launches, options.graph_replays, nsets, estimate, options.graph_budget_s)
    long_kernel = estimate >= options.long_kernel_us
    discard = 0 if long_kernel else options.discard_batches
    settle_replays = max(1, int(options.settle_s * 1e6 / max(1.0, launches * estimate)))
    return LaunchPlan(
        warmup=options.warmup,
        single=runs,
        per_graph=launches,
        replays=replays,
        untimed_replays=1 + settle_replays,
        batches=discard + options.max_batches,
    )


def timing_seconds(time_us: float, options: Options, nsets: int = 1) -> float:
    """Wall seconds of one timing (no verification) of a kernel of ``time_us`` a launch: its
    launches at the kernel's time plus the host's overhead per launch and per request. An
    upper bound on the batches (all ``max_batches`` taken), so it errs long, never short by much."""
    plan = launch_plan(time_us, options, nsets)
    kernel = max(time_us, 0.5)
    flush = FLUSH_US if options.flush_l2 else 0.0
    warm = plan.warmup * kernel
    single = plan.single * (kernel + HOST_LAUNCH_US + flush)
    replays = plan.untimed_replays + plan.replays * plan.batches
    graph = plan.graph_launches * kernel + replays * HOST_REPLAY_US + plan.per_graph * 2.0  # capture
    return REQUEST_S + (warm + single + graph) * 1e-6


def pair_seconds(original_us: float, candidate_us: float, options: Options, nsets: int = 1) -> float:
    """Wall seconds of one pair of a paired check: one timing of each side."""
    opts = paired_options(options)
    return timing_seconds(original_us, opts, nsets) + timing_seconds(candidate_us, opts, nsets)


def check_seconds(
    original_us: float, candidate_us: float, pairs: int, options: Options, nsets: int = 1
) -> float:
    """Wall seconds of a paired check of ``pairs`` pairs, its request included."""
    return PAIRED_REQUEST_S + pairs * pair_seconds(original_us, candidate_us, options, nsets)


def request_overhead(seconds: float, costs: Mapping[str, object] | None) -> float:
    """Wall seconds of one measure request outside its warm-up, verification and timing: the
    call to the worker and its reply, loading the modules, the arena of argument sets. The
    worker reports where its seconds went (``costs``); without a report (a stand-in handler)
    the whole request is overhead.

    Why (issue 23 item 6): a paired check makes two such requests' worth of work per pair
    besides its launches, and an estimate that counts only the launches was many times short
    where that fixed part dominates (a stand-in worker's 0.2 s a measurement made a check
    start with too little time and time out).

    >>> request_overhead(0.5, {"warmup_s": 0.1, "verify_s": 0.2, "time_s": 0.15})
    0.05
    >>> request_overhead(0.2, None)
    0.2
    """
    spent = 0.0
    for name in ("warmup_s", "verify_s", "time_s"):
        value = (costs or {}).get(name)
        spent += float(value) if isinstance(value, int | float) else 0.0
    return round(max(0.0, seconds - spent), 6)


#: How far a timing's measured wall time may correct :func:`timing_seconds` (either way).
TIMING_SCALE_BOUNDS = (0.25, 4.0)


def timing_scale(measured_s: float, time_us: float, options: Options, nsets: int = 1) -> float:
    """The measured wall seconds of a timing over :func:`timing_seconds`'s count of them,
    bounded by :data:`TIMING_SCALE_BOUNDS`: the host's own launch overhead, measured."""
    counted = timing_seconds(time_us, options, nsets)
    low, high = TIMING_SCALE_BOUNDS
    return min(high, max(low, measured_s / counted)) if counted > 0 else 1.0


def typical(values: Sequence[float]) -> float | None:
    """The median of what was observed (None before anything was)."""
    return statistics.median(values) if values else None
