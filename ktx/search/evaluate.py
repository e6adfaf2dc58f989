"""From a config to a judged measurement: static checks first, then the cache, then the backend.

The order is the cost order. A config that breaks a constraint at this shape, or whose launch
the device cannot run (threads per block, block and grid dimensions, dynamic shared memory), is
refused before anything is compiled. A config measured before (same source, launch, flags,
shape, device, toolkit) is answered from the cache. Only the rest reach the backend, which
compiles, checks registers, shared memory and spills against the device, verifies against the
original and times. A timeout or crash is measured once more before it counts, and failures that
say nothing about the candidate (a compile process that died, a reference that failed, the
original kernel failing) are not cached. A resource *policy* (minimum occupancy, spill budget)
is applied last to what the backend reports.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ktx.ir.errors import KtxError

from ktx.measure.backend import Backend
from ktx.measure.occupancy import DeviceLimits
from ktx.measure.types import Candidate, Measurement, Status
from ktx.search.cache import MeasurementCache, cache_key
from ktx.search.gpuqueue import GpuQueue
from ktx.search.runlog import RunLog
from ktx.search.space import Config, Space
from ktx.search.tunable import Tunable, spec_digest
from ktx.spec import ShapePoint, Spec

#: Statuses the search adds to the backend's: refused before compiling, or by the policy.
INFEASIBLE = "infeasible"
LAUNCH_LIMITS = "launch_limits"
POLICY = "policy"
BUDGET = "budget"  # not measured: other trials in flight used up the budget

#: Below this original time (µs) the objective is graph-mode time, above it single-launch time.
GRAPH_THRESHOLD_US = 20.0

METRICS = ("auto", "graph", "single")


#: Messages of failures that say nothing about the candidate: the machinery broke (a compile
#: process died) or the reference it was checked against failed. Never cached.
TRANSIENT = ("compile process failed", "reference failed")

#: Statuses that may be bad luck (a hung or killed worker): measured once more before caching.
RETRIED = (Status.TIMEOUT, Status.CRASH)


def cacheable(m: Measurement) -> bool:
    """Whether ``m`` may answer for its candidate from now on: not an infrastructure failure,
    and not a failure of the original kernel (the reference every candidate is checked against:
    its failure is a problem of the run, to be looked at and measured again)."""
    if m.ok:
        return True
    if any(marker in m.message for marker in TRANSIENT):
        return False
    return bool(m.config)


#: Looks a cache key up in a store other processes write (None: not there).
Lookup = Callable[[str], "Measurement | None"]


def fingerprint_of(backend: object) -> str:
    """Device and toolkit identity of a backend, for cache keys: a ``fingerprint`` attribute,
    else the GPU harness's ``device()`` limits plus the compiler versions."""
    value = getattr(backend, "fingerprint", None)
    if isinstance(value, str) and value:
        return value
    device = getattr(backend, "device", None)
    if callable(device):
        limits = device()
        from ktx.measure import compile as compiler
        from ktx.measure.protocol import DEFAULT_HANDLER

        toolchain = getattr(compiler, "_toolchain_id", lambda: "")()
        handler = str(getattr(backend, "handler", DEFAULT_HANDLER))
        kind = "cupy" if handler == DEFAULT_HANDLER else f"stand-in harness:{handler}"
        device_id = f"{limits.name}|sm_{limits.cc}|driver {limits.driver}|runtime {limits.runtime}"
        return f"{kind}|{device_id}|{toolchain}" + harness_context(backend)
    return type(backend).__name__


def harness_context(backend: object) -> str:
    """The harness options (rounds, verification, odd shapes, ...) and the reference choice:
    they change what a measurement means, so they belong to its identity."""
    options = getattr(backend, "options", None)
    if options is None:
        return ""
    import dataclasses

    is_instance = dataclasses.is_dataclass(options) and not isinstance(options, type)
    data = dataclasses.asdict(options) if is_instance else repr(options)
    reference = getattr(backend, "reference", "")
    precision = getattr(backend, "precision_python", False)
    context = {"options": data, "reference": reference, "precision_python": precision}
    return "|" + json.dumps(context, sort_keys=True, default=str)


@dataclass(frozen=True)
class Policy:
    """Resource rules on top of the device's hard limits (which the backend enforces)."""

    min_occupancy: float = 0.0
    max_spill_bytes: int | None = None

    def check(self, m: Measurement) -> str:
        r = m.resources
        if r is None:
            return ""
        if r.occupancy < self.min_occupancy:
            return f"occupancy {r.occupancy:.2f} below the minimum {self.min_occupancy:.2f}"
        if self.max_spill_bytes is not None and r.local_bytes > self.max_spill_bytes:
            return f"{r.local_bytes} bytes of local memory per thread (allowed {self.max_spill_bytes})"
        return ""


def objective_time(m: Measurement, metric: str) -> float | None:
    """The time the objective uses: graph or single-launch median, the other when missing."""
    first, second = (m.graph_us, m.single_us) if metric == "graph" else (m.single_us, m.graph_us)
    value = first if first is not None else second
    return value if value is not None and math.isfinite(value) and value > 0 else None


def timing_spread(m: Measurement, metric: str) -> float | None:
    """(p90 - p10) / median of the timing :func:`objective_time` uses."""
    first, second = (m.graph, m.single) if metric == "graph" else (m.single, m.graph)
    timing = first if first is not None else second
    return None if timing is None else timing.spread


def choose_metric(requested: str, original: Measurement) -> str:
    """``auto``: graph-mode time for kernels under :data:`GRAPH_THRESHOLD_US`, else single launch."""
    if requested != "auto":
        return requested
    t = original.time_us
    return "graph" if t is None or t < GRAPH_THRESHOLD_US else "single"


@dataclass(frozen=True)
class Evaluation:
    """A config's fate at one shape. ``source``: static (refused unmeasured), cache or measured."""

    config: Mapping[str, int]
    status: str
    source: str
    key: str = ""
    reason: str = ""
    measurement: Measurement | None = field(default=None, compare=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def time(self, metric: str) -> float | None:
        return None if self.measurement is None or not self.ok else objective_time(self.measurement, metric)


class Evaluator:
    """Judges configs of one tunable at any shape; thread-safe (the cache and log are)."""

    def __init__(
        self,
        spec: Spec,
        tunable: Tunable,
        backend: Backend,
        cache: MeasurementCache,
        log: RunLog,
        limits: DeviceLimits | None = None,
        policy: Policy | None = None,
    ) -> None:
        self.spec = spec
        self.tunable = tunable
        self.backend = backend
        self.cache = cache
        self.log = log
        self.limits = limits or DeviceLimits()
        self.policy = policy or Policy()
        self.fingerprint = fingerprint_of(backend)
        self.context = spec_digest(spec)
        self._lock = threading.Lock()
        self._gpu = GpuQueue()  # backends measure one candidate at a time, in arrival order
        self._inflight: dict[str, threading.Event] = {}

    @property
    def space(self) -> Space:
        return self.tunable.space

    def launch_problem(self, candidate: Candidate, point: ShapePoint) -> str:
        """Why the device cannot launch this at all ('' when it can), found without compiling."""
        try:
            grid, block, shared = candidate.launch(self.spec, point)
        except KtxError as exc:
            return f"launch mapping: {exc}"
        lim = self.limits
        threads = math.prod(block)
        if threads > lim.max_threads_per_block:
            return f"{threads} threads per block (device limit {lim.max_threads_per_block})"
        for axis, (size, top) in enumerate(zip(block, lim.max_block, strict=False)):
            if size > top:
                return f"block dimension {axis} is {size} (limit {top})"
        for axis, (size, top) in enumerate(zip(grid, lim.max_grid, strict=False)):
            if size > top:
                return f"grid dimension {axis} is {size} (limit {top})"
        if any(n <= 0 for n in (*grid, *block)):
            return f"empty launch grid={grid} block={block}"
        if shared > lim.shared_per_block_optin:
            return f"{shared} bytes of dynamic shared memory (limit {lim.shared_per_block_optin})"
        return ""

    def measure(
        self,
        candidate: Candidate,
        point: ShapePoint,
        shared: Lookup | None = None,
        admit: Callable[[], bool] | None = None,
        deadline: float | None = None,
    ) -> tuple[Measurement | None, str, str]:
        """(measurement, 'cache' or 'measured', key); (None, 'budget', key) when ``admit`` (asked
        only before a new backend call) says the budget is spent; (None, 'deadline', key) when the
        GPU comes free only after ``deadline`` (``time.monotonic()``).

        The deadline is checked again once the GPU is ours: with ``--jobs N`` up to N trials
        wait for the one GPU, and measuring all of them after a shape's time share had run out
        overran it by N measurements. On an H200 that starved the last shapes of a set of any
        evaluation (fused_add_rmsnorm's d=8192 shapes got none in a 180 s tune).

        ``shared`` looks a key up where other workers record their measurements (the study in
        an RDB storage, for workers on other machines whose cache files this one cannot see).

        With several trials in flight, the compile of each starts at once (the backend's
        ``prefetch``) while the GPU measures one at a time; a second trial asking for a key
        already being measured waits for that measurement instead of repeating it. The GPU
        serves trials in the order they got here (:mod:`ktx.search.gpuqueue`), so at a deadline
        the trials dropped are the last to arrive, whatever the thread scheduler does.
        """
        key = cache_key(candidate, point.name, self.fingerprint, self.context)
        while True:
            hit = self.cache.get(key)
            if hit is None and shared is not None:
                hit = shared(key)
                if hit is not None:
                    self.cache.put(key, hit, {"shape": point.name, "config": dict(candidate.config)})
            if hit is not None:
                return hit, "cache", key
            with self._lock:
                pending = self._inflight.get(key)
                if pending is None:
                    # Asked again under the lock: a trial that missed the cache above while
                    # another measured this key, and got here after that one had stored it and
                    # left _inflight, would otherwise measure it a second time.
                    hit = self.cache.get(key)
                    if hit is not None:
                        return hit, "cache", key
                    if admit is not None and not admit():
                        return None, "budget", key
                    self._inflight[key] = threading.Event()
                    break
            pending.wait()
        place = self._gpu.join()  # before the prefetch: the place is the order of admission
        try:
            prefetch = getattr(self.backend, "prefetch", None)
            if callable(prefetch):
                prefetch(candidate, point)
            with place:
                if deadline is not None and time.monotonic() >= deadline:
                    return None, "deadline", key  # the finally below releases the waiters
                m = self.backend.measure(candidate, point)
                if m.status in RETRIED:
                    self.log.write("retry", shape=point.name, config=dict(candidate.config), key=key,
                                   status=m.status.value, message=m.message[:200])  # fmt: skip
                    m = self.backend.measure(candidate, point)
                # the worker's account of this request (the GPU harness's), read before the
                # next measurement can replace it
                costs = getattr(self.backend, "last_costs", None)
            if cacheable(m):
                self.cache.put(key, m, {"shape": point.name, "config": dict(candidate.config)})
        finally:
            place.leave()  # a prefetch that raised must not hold up the trials behind it
            with self._lock:
                self._inflight.pop(key).set()
        self.log.write(
            "measure",
            shape=point.name,
            config=dict(candidate.config),
            key=key,
            status=m.status.value,
            single_us=m.single_us,
            graph_us=m.graph_us,
            **({"costs": costs} if isinstance(costs, dict) else {}),
        )
        return m, "measured", key

    def original(self, point: ShapePoint) -> Measurement:
        m = self.measure(self.tunable.candidate({}), point)[0]
        assert m is not None  # no admission rule: always measured or cached
        return m

    def remeasure(
        self, config: Config, point: ShapePoint, deadline: float | None = None
    ) -> Measurement | None:
        """A fresh measurement of ``config`` at ``point``: the backend is asked again, past the
        cache, and the answer is neither cached nor counted as an evaluation (None: refused, or
        the GPU came free only after ``deadline``). For re-measuring the few best configs of a
        narrow optimum, which may be the moment's rather than the config's (issue 23)."""
        refused, candidate = self._screen(self.space.normalize(config), point)
        if refused is not None or candidate is None:
            return None
        place = self._gpu.join()
        try:
            with place:
                if deadline is not None and time.monotonic() >= deadline:
                    return None
                m = self.backend.measure(candidate, point)
        finally:
            place.leave()
        self.log.write("remeasure", shape=point.name, config=dict(candidate.config), status=m.status.value,
                       single_us=m.single_us, graph_us=m.graph_us)  # fmt: skip
        return m

    def needs_gpu(self, config: Config | None, point: ShapePoint) -> bool:
        """Whether judging ``config`` (None: the original) at ``point`` would call the backend:
        not when the constraints refuse it or the cache holds it (another process of the run,
        such as a worker that measured it ahead, may have put it there)."""
        if config is None:
            candidate: Candidate | None = self.tunable.candidate({})
        else:
            candidate = self._screen(self.space.normalize(config), point)[1]
        if candidate is None:
            return False
        return self.cache.get(cache_key(candidate, point.name, self.fingerprint, self.context)) is None

    def refusal(self, config: Config, point: ShapePoint) -> Evaluation | None:
        """The static verdict on ``config`` at ``point``: None when it may be measured."""
        return self._screen(config, point)[0]

    def _screen(self, config: Config, point: ShapePoint) -> tuple[Evaluation | None, Candidate | None]:
        """(refusal, None) or (None, the candidate to measure): instantiated once, and only
        for configs that satisfy the constraints (templates refuse to instantiate the others)."""
        try:
            broken = self.space.violations(config, self.spec.env(point))
        except KtxError as exc:
            broken = (str(exc),)
        if broken:
            return Evaluation(config, INFEASIBLE, "static", reason=f"violates {broken[0]}"), None
        candidate = self.tunable.candidate(config)
        problem = self.launch_problem(candidate, point)
        if problem:
            return Evaluation(config, LAUNCH_LIMITS, "static", reason=problem), None
        return None, candidate

    def evaluate(
        self,
        config: Config,
        point: ShapePoint,
        shared: Lookup | None = None,
        admit: Callable[[], bool] | None = None,
        deadline: float | None = None,
    ) -> Evaluation:
        """Judge ``config`` at ``point`` (see the module doc for the order); ``shared``,
        ``admit`` and ``deadline`` are passed to :meth:`measure`."""
        config = self.space.normalize(config)
        refused, candidate = self._screen(config, point)
        if refused is not None or candidate is None:
            return refused or Evaluation(config, INFEASIBLE, "static")
        m, source, key = self.measure(candidate, point, shared, admit, deadline)
        if m is None and source == "deadline":
            return Evaluation(config, BUDGET, source, key, "the time share ran out before the GPU was free")
        if m is None:
            return Evaluation(config, BUDGET, source, key, "the evaluation budget is spent")
        status, reason = m.status.value, m.message
        if m.ok:
            rule = self.policy.check(m)
            if rule:
                status, reason = POLICY, rule
            elif objective_time(m, "graph") is None:
                status, reason = "crash", "ok but no usable time"
        return Evaluation(config, status, source, key, reason, m)
