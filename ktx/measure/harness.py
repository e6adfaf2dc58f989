"""The GPU backend: compile on CPU processes, measure in a replaceable worker process.

>>> with Harness(load_spec("kernels/silu_and_mul")) as h:            # doctest: +SKIP
...     m = h.measure(original_candidate(h.spec), h.spec.shape_set().points[0])
...     print(m.status, m.graph_us, m.sol_fraction)

Every call returns a :class:`~ktx.measure.types.Measurement`; compile errors, resource limits,
launch errors, wrong results, hangs and crashes are statuses, and a crash or hang costs only
the worker process, which is replaced on the next call.
"""

from __future__ import annotations

import contextlib
import importlib.util
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, replace
from typing import Any, Literal

from ktx.ir.errors import KtxError, Location, NoGpuError
from ktx.ir.expr import expand

from ktx.measure.compile import CompilePool, CompileRequest, CompileResult
from ktx.measure.cost import paired_options, request_overhead, rotated_sets, timing_scale, typical
from ktx.measure.gpu import Options, verify_shapes
from ktx.measure.guards import is_spec_error
from ktx.measure.occupancy import DeviceLimits
from ktx.measure.overload import overload_params
from ktx.measure.protocol import DEFAULT_HANDLER, Outcome, Supervisor
from ktx.measure.timeouts import TimeoutPolicy, candidate_cost, request_cost, timing_cost
from ktx.measure.types import Candidate, Measurement, Status, original_candidate
from ktx.spec import ShapePoint, Spec

ReferenceChoice = Literal["auto", "original", "python", "none"]

#: Requests whose overhead and timing scale a harness keeps (the latest).
OBSERVED = 32

#: Seconds a worker's restart is assumed to take before one was seen: the first warm-up of a run
#: is no guide (it compiles CuPy's verification kernels on a fresh host: 8-9 s on session 8's
#: H200), a restart (process, CUDA context, imports, clocks) took 2.9-4.7 s there (the re-checks
#: after a killed check in the session-8 real-code logs).
RESTART_S = 4.0

#: Knobs that trade precision for speed (``fast-math``'s): with ``precision_python`` a config
#: that turns one on is verified against the spec's float64 Python reference.
PRECISION_KNOBS = ("FAST_MATH",)


def gpu_available() -> tuple[bool, str]:
    """Whether CuPy is importable here (a cheap check made before starting any worker)."""
    if importlib.util.find_spec("cupy") is None:
        return False, "CuPy is not installed (pip install 'ktx[cuda12]' or 'ktx[cuda13]')"
    return True, ""


class Harness:
    """Implements :class:`~ktx.measure.backend.Backend` on a real GPU."""

    def __init__(
        self,
        spec: Spec,
        *,
        reference: ReferenceChoice = "auto",
        options: Options | None = None,
        timeout_s: float = 180.0,
        compile_workers: int | None = None,
        handler: str = DEFAULT_HANDLER,
        supervisor: Supervisor | None = None,
        precision_python: bool = False,
        timeout_floor_s: float = 3.0,
        timeout_multiple: float = 50.0,
        warm_workers: bool | None = None,
        bandwidth: bool = True,
    ) -> None:
        self.spec = spec
        #: Whether :meth:`device` measures the copy bandwidth (when the device cache lacks it).
        #: The main process of ``ktx tune --workers N`` asks without: it opens its harness while
        #: worker 0 starts on the same GPU, and two copy-bandwidth runs at once halve both.
        self.bandwidth = bandwidth
        self.reference = reference
        #: Under ``reference="auto"``: verify configs with a precision knob on (``FAST_MATH > 0``)
        #: against the spec's Python reference when it has one, not against the original kernel
        #: (which only bounds the difference from the original math).
        self.precision_python = precision_python
        self.options = options or Options(rounds=spec.verify.rounds)
        #: The longest a measurement may take, and the timeout until the original has been
        #: measured at a shape; after that, ``timeout_multiple`` times the original's cost there
        #: (at least ``timeout_floor_s``): see :mod:`ktx.measure.timeouts`.
        self.timeout_s = timeout_s
        self.timeout_floor_s = timeout_floor_s
        self.timeout_multiple = timeout_multiple
        #: Seconds the original's request took per shape (without one-off costs).
        self.original_cost: dict[str, float] = {}
        #: Seconds a candidate's measurement is expected to take per shape, from the original's
        #: own account (:func:`candidate_cost`): what a round of the loop spends per evaluation.
        self.candidate_cost: dict[str, float] = {}
        #: ... and a timing-only measurement's (a side of a paired check: no verification).
        self.timing_cost: dict[str, float] = {}
        self._timed_out: set[tuple[str, str]] = set()
        self._calibrated: set[str] = set()
        #: Ask a fresh worker to warm up before its first measurement (the GPU worker knows the
        #: ``warmup`` request; stand-in handlers need not).
        self.warm_workers = handler == DEFAULT_HANDLER if warm_workers is None else warm_workers
        self.handler = handler
        self.supervisor = supervisor or Supervisor(handler)
        self._own_supervisor = supervisor is None
        self.pool = CompilePool(compile_workers)
        self.original = original_candidate(spec)
        self._limits: DeviceLimits | None = None
        #: Shapes where the original writes outside a buffer (guard zones): the spec is wrong
        #: there, so no candidate is measured (or tuned) against it; the message says what to fix.
        self.spec_errors: dict[str, str] = {}
        #: The supervisor's start count when this harness last warmed its worker (-1: never).
        self._warmed_start = -1
        #: Every compile this harness waited for, by request key (the run's phase timings count
        #: them by compiler: :meth:`compile_results`).
        self._compiled: dict[str, CompileResult] = {}
        #: Per ok measure request (the last :data:`OBSERVED`): its seconds outside warm-up,
        #: verification and timing, and its timing's wall time over the launches' count: what a
        #: paired check's estimate adds to its launches (:attr:`request_overhead_s`).
        self._overheads: list[float] = []
        self._scales: list[float] = []
        #: Wall seconds of each warm-up this harness waited for (the first, then every restart of a
        #: retired worker): what a final check pays first where its worker must start again.
        self._starts: list[float] = []
        #: The last measure request's wall seconds and the worker's account of them (``costs``:
        #: warm-up, Python reference, verification, timing, and with ``KTX_COST_DETAIL=1`` their
        #: steps); None after a failed request. The run log keeps it with each measurement, so
        #: that a recorded run shows where a request's seconds went (session 8's first request
        #: of llm.c layernorm cost 12.6 s that no record explains).
        self.last_costs: dict[str, Any] | None = None
        #: The warm-up running beside the compiles (:meth:`warm_in_background`), if any.
        self._warming: threading.Thread | None = None
        self._warm_lock = threading.Lock()

    # -- lifecycle ------------------------------------------------------------------------

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.pool.close()
        running = self._warming
        if running is not None:
            running.join(timeout=max(self.timeout_s, 120.0))
        if self._own_supervisor:
            self.supervisor.close()

    # -- device ---------------------------------------------------------------------------

    def device(self) -> DeviceLimits:
        """The device's limits (and copy bandwidth), asked of the worker once."""
        if self._limits is None:
            if self.handler == DEFAULT_HANDLER:
                ok, why = gpu_available()
                if not ok:
                    raise NoGpuError(f"no GPU: {why}", None, "run this on a machine with a CUDA GPU")
            outcome = self.supervisor.call("device", {"bandwidth": self.bandwidth}, timeout=self.timeout_s)
            if not outcome.ok:
                lines = outcome.message.strip().splitlines() or ["the worker failed"]
                raise NoGpuError(
                    f"no usable GPU: {lines[-1]}", None, "check nvidia-smi and that CuPy matches the driver"
                )
            self._limits = DeviceLimits.from_dict(outcome.result)
        return self._limits

    # -- compile --------------------------------------------------------------------------

    def _shapes(self, cand: Candidate, point: ShapePoint) -> list[ShapePoint]:
        """``point``, and where verification runs, its odd variants that ``cand``'s constraints allow."""
        return verify_shapes(self.spec, cand, point, self.options)[0] if self.options.verify else [point]

    def _requests(self, cand: Candidate, point: ShapePoint) -> list[CompileRequest]:
        arch = self.device().cc
        names = dict.fromkeys(
            expand(cand.name_expression, cand.env(self.spec, p)) for p in self._shapes(cand, point)
        )
        source = self.spec.compile_source(cand.source)  # the prelude, where the spec has one
        # several kernels of the spec's name (lmdeploy's ActivationKernel): its args pick one
        pick = overload_params(source, self.spec.kernel, [a.name for a in self.spec.args])
        return [
            CompileRequest(source, name, tuple(cand.flags), arch, self.spec.include_dirs, param_names=pick)
            for name in names
        ]

    def _reference_for(self, cand: Candidate) -> str:
        if self.reference != "auto":
            return self.reference
        if cand.digest == self.original.digest:
            # The original checks itself against the Python reference when there is one, else
            # against a second run of itself (which still catches races and unwritten outputs).
            return "python" if self.spec.reference.python else "original"
        if self.precision_python and self.spec.reference.python and _precision_on(cand):
            return "python"
        return self.spec.reference.use

    def prefetch(self, cand: Candidate, point: ShapePoint) -> None:
        """Start compiling what measuring ``cand`` at ``point`` will need."""
        for req in self._requests(cand, point):
            self.pool.submit(req)
        if self._reference_for(cand) == "original":
            for req in self._requests(self.original, point):
                self.pool.submit(req)

    def _modules(self, cand: Candidate, point: ShapePoint) -> tuple[dict[str, Any], CompileResult | None]:
        modules: dict[str, Any] = {}
        for req in self._requests(cand, point):
            result = self.pool.result(req)
            self._compiled.setdefault(req.key, result)
            if not result.ok:
                return modules, result
            modules[req.name_expression] = result.to_dict()
        return modules, None

    def compile_results(self) -> list[dict[str, Any]]:
        """Each compile this harness waited for, once (``CompileResult.to_dict()``): the run's
        phase timings count them by compiler (NVRTC, nvcc, nvcc after NVRTC failed, cached)."""
        return [r.to_dict() for r in self._compiled.values()]

    # -- measure --------------------------------------------------------------------------

    def measure(self, candidate: Candidate, shape: ShapePoint | str) -> Measurement:
        point = self.spec.find_point(shape) if isinstance(shape, str) else shape
        try:
            launch = candidate.launch(self.spec, point)
        except KtxError as exc:
            return Measurement.failure(self.spec, candidate, point.name, Status.LAUNCH_ERROR, str(exc))
        del launch
        refused = self._spec_error(candidate, point)  # known already: not even compiled
        if refused is not None:
            return refused
        self.prefetch(candidate, point)
        self.warm_in_background()  # the worker warms up while the compile processes work
        modules, failed = self._modules(candidate, point)
        if failed is not None:
            return Measurement.failure(
                self.spec, candidate, point.name, Status.COMPILE_ERROR, _clip(failed.log or "compile failed")
            )
        ref_kind = self._reference_for(candidate) if self.options.verify else "none"
        reference: dict[str, Any] | None = None
        if ref_kind == "original":
            ref_modules, ref_failed = self._modules(self.original, point)
            if ref_failed is not None:
                raise KtxError(
                    f"{self.spec.name}: the original kernel does not compile: {_clip(ref_failed.log)}",
                    Location(str(self.spec.path)),
                )
            reference = {"kind": "original", "candidate": self.original.to_dict(), "modules": ref_modules}
        elif ref_kind == "python":
            # the worker checks the original itself once per shape and round (cached on disk)
            reference = {"kind": "python", "original_digest": self.original.digest}
        job = {
            "spec": str(self.spec.path),
            "shape": point.name,
            "candidate": candidate.to_dict(),
            "modules": modules,
            "reference": reference,
            "options": asdict(self.options),
        }
        if not self._is_original(candidate) and point.name not in self._calibrated:
            # The timeout derives from the original's cost here: measure it first when no
            # measurement of it was made by this harness (a search may have it from its cache).
            self._calibrated.add(point.name)
            if point.name not in self.original_cost:
                self.measure(self.original, point)
        refused = self._spec_error(candidate, point)  # found by the calibration just now
        if refused is not None:
            return refused
        timeout = self.timeout_for(candidate, point)
        self._warm_worker()
        outcome = self.supervisor.call("measure", job, timeout=timeout)
        key = (candidate.digest, point.name)
        if outcome.status is Status.TIMEOUT:
            self._timed_out.add(key)
            outcome = replace(outcome, message=f"{outcome.message} ({self._timeout_reason(point)})")
        else:
            self._timed_out.discard(key)
        if self._is_original(candidate):
            self._calibrated.add(point.name)
        if outcome.ok and self._is_original(candidate) and isinstance(outcome.result, Mapping):
            costs = outcome.result.get("costs")
            cost = request_cost(outcome.seconds, costs if isinstance(costs, dict) else None)
            self.original_cost[point.name] = max(cost, self.original_cost.get(point.name, 0.0))
            if isinstance(costs, dict) and isinstance(costs.get("time_s"), int | float):
                # only from the worker's account: a stand-in's whole request says nothing of it
                expected = candidate_cost(outcome.seconds, costs)
                self.candidate_cost[point.name] = max(expected, self.candidate_cost.get(point.name, 0.0))
                timing = timing_cost(outcome.seconds, costs)
                self.timing_cost[point.name] = max(timing, self.timing_cost.get(point.name, 0.0))
        result = self._result(candidate, point, outcome, ref_kind)
        self.last_costs = None
        if outcome.ok and isinstance(outcome.result, Mapping):
            self._observe(outcome.seconds, outcome.result.get("costs"), result)
            reported = outcome.result.get("costs")
            self.last_costs = {"request_s": round(outcome.seconds, 6),
                               **(reported if isinstance(reported, Mapping) else {})}  # fmt: skip
        if is_spec_error(result.message):  # the original's, or the original reference run's
            self.spec_errors[point.name] = result.message
        return result

    def _observe(self, seconds: float, costs: object, measured: Measurement) -> None:
        report = costs if isinstance(costs, Mapping) else None
        self._overheads = [*self._overheads, request_overhead(seconds, report)][-OBSERVED:]
        spent = None if report is None else report.get("time_s")
        us = measured.single_us or measured.graph_us
        if measured.ok and us and isinstance(spent, int | float) and spent > 0:
            nsets = rotated_sets(measured.bytes, self.options)
            self._scales = [*self._scales, timing_scale(float(spent), us, self.options, nsets)][-OBSERVED:]

    @property
    def request_overhead_s(self) -> float | None:
        """The typical seconds of a measure request outside its warm-up, verification and timing,
        as measured by this harness (None before any): each side of each pair of a paired check
        costs this much besides its launches (:func:`ktx.search.final.pair_estimate`)."""
        return typical(self._overheads)

    @property
    def observed_timing_scale(self) -> float | None:
        """The typical ratio of a timing's measured wall time to its launches' count
        (:func:`ktx.measure.cost.timing_scale`); None before any timing."""
        return typical(self._scales)

    def _spec_error(self, candidate: Candidate, point: ShapePoint) -> Measurement | None:
        """A candidate at a shape where the original writes out of bounds is not measured: the
        spec is wrong there (:mod:`ktx.measure.guards`), and nothing may be tuned against it."""
        if self._is_original(candidate) or point.name not in self.spec_errors:
            return None
        return Measurement.failure(
            self.spec,
            candidate,
            point.name,
            Status.WRONG_RESULT,
            f"not measured: {self.spec_errors[point.name]}",
        )

    def _result(
        self, candidate: Candidate, point: ShapePoint, outcome: Outcome, ref_kind: str
    ) -> Measurement:
        """The measurement a worker's answer stands for (a failure keeps what the worker knew)."""
        if outcome.ok:
            measured = Measurement.from_dict(outcome.result)
            if ref_kind != "none" and measured.ok:
                skipped = verify_shapes(self.spec, candidate, point, self.options)[1]
                measured = replace(measured, odd_skipped=tuple(p.name for p in skipped))
            # what was measured, so that a replay never answers for another source
            return measured if measured.digest else replace(measured, digest=candidate.digest)
        base = Measurement.failure(self.spec, candidate, point.name, outcome.status, _clip(outcome.message))
        if isinstance(outcome.result, Mapping) and "status" in outcome.result:
            return replace(Measurement.from_dict(outcome.result), status=outcome.status, message=base.message)
        return base

    # -- timeouts -------------------------------------------------------------------------

    @property
    def timeouts(self) -> TimeoutPolicy:
        return TimeoutPolicy(self.timeout_s, self.timeout_floor_s, self.timeout_multiple)

    def _is_original(self, candidate: Candidate) -> bool:
        return candidate.digest == self.original.digest

    def timeout_for(self, candidate: Candidate, point: ShapePoint) -> float:
        """Seconds the worker gets for ``candidate`` at ``point``: derived from the original's
        cost there once known; short when the candidate timed out here just before (the retry
        only tells a flaky worker from a hang)."""
        cost = self.original_cost.get(point.name)
        if (candidate.digest, point.name) in self._timed_out:
            return self.timeouts.retry_timeout(cost)
        return self.timeouts.timeout(cost)

    def _timeout_reason(self, point: ShapePoint) -> str:
        cost = self.original_cost.get(point.name)
        if cost is None:
            return f"the original's time at {point.name} is not known yet: the {self.timeout_s:g} s ceiling"
        return (
            f"{self.timeout_multiple:g}x the original's {cost:.3g} s at {point.name}, "
            f"at least {self.timeout_floor_s:g} s, at most {self.timeout_s:g} s"
        )

    def _is_warm(self) -> bool:
        worker = self.supervisor.worker
        return worker is not None and worker.alive and self._warmed_start == self.supervisor.starts

    def _warm_now(self) -> None:
        if self.warm_workers and not self._is_warm():
            clock = time.monotonic()
            self.supervisor.call("warmup", {"spec": str(self.spec.path)}, timeout=max(self.timeout_s, 120.0))
            self._starts.append(time.monotonic() - clock)
            self._warmed_start = self.supervisor.starts

    def worker_ready(self) -> bool:
        """Whether the next request finds a warm worker (no restart to pay first)."""
        return not self.warm_workers or self._is_warm()

    @property
    def worker_start_s(self) -> float:
        """Seconds a worker's (re)start costs before its first request: the typical restart this
        harness saw, else :data:`RESTART_S` (at most the first warm-up's time).

        Why (issue 23 item 6): every final check of the session-8 real-code runs that took more
        than twice its estimate (8 of 105) came right after a check the time limit cut, which
        killed the worker; the next check paid a fresh worker's 3-4 s, which no estimate counted."""
        restarts = self._starts[1:]
        if restarts:
            return float(typical(restarts) or 0.0)
        return min(RESTART_S, self._starts[0]) if self._starts else RESTART_S

    def warm_worker(self) -> None:
        """Start and warm the worker now, if it is not (the final check does this apart from its
        timed request, so that a restart neither eats the request's timeout nor reads as a slow
        host to the estimate of the checks after it)."""
        self._warm_worker()

    def warm_in_background(self) -> None:
        """Start the worker's warm-up in a thread and return at once.

        Why (session 8's probe, H200): a fresh worker's warm-up (CUDA's start, CuPy's imports,
        :func:`~ktx.measure.gpu.prime` compiling the verification kernels, the clocks' ramp)
        took 8-9 s, and it ran only after the original's compile (nvcc: seconds more) had
        finished, one after the other, inside the run's budget. Started here, it overlaps the
        compiles and whatever the caller does meanwhile (``ktx optimize`` reads the kernel's
        facts). The worker is used by nothing else until :meth:`_warm_worker` joins the thread."""
        if not self.warm_workers:
            return
        with self._warm_lock:
            if self._warming is not None and self._warming.is_alive():
                return
            if self._is_warm():
                return
            self._warming = threading.Thread(target=self._warm_now, name="ktx-warm-worker", daemon=True)
            self._warming.start()

    def _warm_worker(self) -> None:
        """A worker warms up before its first measurement, outside any measurement's timeout.

        Keyed by the supervisor's start count, not by whether a worker is alive: the ``device``
        request (made before anything compiles) starts the worker, so "not alive yet" never
        held and the warm-up (with :func:`~ktx.measure.gpu.prime`, which compiles CuPy's
        verification kernels) never ran as a request of its own (issue 18). A warm-up started
        by :meth:`warm_in_background` is waited for, not repeated."""
        with self._warm_lock:
            running = self._warming
            self._warming = None
        if running is not None:
            running.join()
        self._warm_now()

    def measure_paired(
        self, first: Candidate, second: Candidate, point: ShapePoint, pairs: int, timeout: float | None = None
    ) -> list[tuple[Measurement, Measurement]]:
        """Time ``first`` and ``second`` alternately (A B A B ..., ``pairs`` times) in one request
        to one worker process, without verifying (both were verified before): the search's
        paired final check (:mod:`ktx.search.paired`). A failure fails every pair."""
        jobs: list[dict[str, Any]] = []
        for cand in (first, second):
            self.prefetch(cand, point)
        for cand in (first, second):
            modules, failed = self._modules(cand, point)
            if failed is not None:
                bad = Measurement.failure(
                    self.spec, cand, point.name, Status.COMPILE_ERROR, _clip(failed.log or "compile failed")
                )
                return [(bad, bad)] * pairs
            # timing only, with fewer graph batches: both were verified and timed before (the
            # final check's cost estimate counts the launches of these very options)
            options = paired_options(self.options)
            job: dict[str, Any] = {"spec": str(self.spec.path), "shape": point.name}
            job["candidate"] = cand.to_dict()
            job.update(modules=modules, reference=None, options=asdict(options), paired=True)
            jobs.append(job)
        if timeout is None:
            timeout = 2 * pairs * max(self.timeout_for(c, point) for c in (first, second))
        self._warm_worker()
        outcome = self.supervisor.call("paired", {"jobs": jobs, "pairs": pairs}, timeout=timeout)
        if not outcome.ok or not isinstance(outcome.result, list):
            status = Status.CRASH if outcome.ok else outcome.status
            failed_pair = tuple(
                Measurement.failure(self.spec, c, point.name, status, _clip(outcome.message or "no pairs"))
                for c in (first, second)
            )
            return [(failed_pair[0], failed_pair[1])] * pairs
        return [(Measurement.from_dict(a), Measurement.from_dict(b)) for a, b in outcome.result]

    def measure_many(self, jobs: Iterable[tuple[Candidate, ShapePoint]]) -> Iterator[Measurement]:
        """Measure in order while later candidates compile in the background."""
        pending = list(jobs)
        for cand, point in pending:
            with contextlib.suppress(KtxError):  # reported by measure() below
                self.prefetch(cand, point)
        for cand, point in pending:
            yield self.measure(cand, point)


def _precision_on(cand: Candidate) -> bool:
    return any(
        int(value) != 0
        for name, value in cand.config.items()
        if any(name == knob or name.startswith(knob + "_") for knob in PRECISION_KNOBS)
    )


def _clip(text: str, limit: int = 4000) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit // 2] + "\n...\n" + text[-limit // 2 :]
