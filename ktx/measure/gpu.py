"""The GPU side: what the worker process does with a measurement request (CuPy, lazily).

One request measures one candidate at one shape, in this order, stopping at the first failure:

1. load the precompiled cubins (``RawModule(path=...)``), read the function attributes and check
   block size, shared memory and occupancy against the device (``resources``);
2. verify against the reference on fresh seeded inputs, ``rounds`` times, at the shape and at its
   odd variants, outputs poisoned and inout arguments copied fresh before every run
   (``wrong_result``);
3. time: single launches between CUDA events with L2 flushed before each, then a CUDA graph of
   many launches over rotating input sets that together exceed twice the L2, per launch.

A CUDA error at launch is a ``launch_error`` (or ``resources``) and the worker goes on; an error
at synchronisation (illegal address, ...) poisons the context, so the worker reports ``crash``
and exits, and the harness starts a new one. A hang is the harness's to detect (it kills us).
"""

from __future__ import annotations

import datetime
import json
import math
import os
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ktx.expr import Value
from ktx.measure.compile import CompileResult, cache_dir
from ktx.measure.occupancy import DeviceLimits, occupancy
from ktx.measure.protocol import WorkerFailure
from ktx.measure.types import Candidate, Measurement, Resources, Status, Timing
from ktx.measure.verify import (
    compare,
    host_inputs,
    load_python_reference,
    python_reference,
    round_seed,
    scalars,
)
from ktx.spec import ShapePoint, Spec, expand, load_spec

Array = Any  # a cupy.ndarray; CuPy has no type stubs


def _cupy() -> Any:
    import cupy

    return cupy


@dataclass(frozen=True)
class Options:
    """How hard to look. Defaults follow docs: >= 3 rounds, >= 50 timed runs."""

    rounds: int = 3
    verify: bool = True
    odd: bool = True
    odd_rounds: int = 0  # rounds for each odd-size variant; 0: the same as ``rounds``
    time: bool = True
    warmup: int = 10
    min_runs: int = 50
    max_runs: int = 500
    graph_launches: int = 100
    graph_replays: int = 20
    flush_l2: bool = True
    max_rotate_bytes: int = 2 << 30
    max_sets: int = 4096

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Options:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in (data or {}).items() if k in known})


class _Fail(Exception):
    def __init__(self, status: Status, message: str, resources: Resources | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.resources = resources


# -- device ------------------------------------------------------------------------------

_LIMITS: DeviceLimits | None = None


def _version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def device_limits(measure_bandwidth: bool = True) -> DeviceLimits:
    """Device properties, and the copy bandwidth (measured once, cached per device name)."""
    global _LIMITS
    if _LIMITS is not None:
        return _LIMITS
    cp = _cupy()
    rt = cp.cuda.runtime
    dev = cp.cuda.Device()
    props = rt.getDeviceProperties(dev.id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    base = DeviceLimits()

    def get(key: str, default: int) -> int:
        return int(props.get(key, default))

    limits = DeviceLimits(
        name=name,
        cc=f"{props['major']}{props['minor']}",
        sm_count=get("multiProcessorCount", base.sm_count),
        warp_size=get("warpSize", 32),
        max_threads_per_block=get("maxThreadsPerBlock", 1024),
        max_threads_per_sm=get("maxThreadsPerMultiProcessor", base.max_threads_per_sm),
        max_blocks_per_sm=get("maxBlocksPerMultiProcessor", base.max_blocks_per_sm),
        regs_per_sm=get("regsPerMultiprocessor", base.regs_per_sm),
        regs_per_block=get("regsPerBlock", base.regs_per_block),
        shared_per_sm=get("sharedMemPerMultiprocessor", base.shared_per_sm),
        shared_per_block=get("sharedMemPerBlock", base.shared_per_block),
        shared_per_block_optin=get("sharedMemPerBlockOptin", base.shared_per_block_optin),
        reserved_shared_per_block=get("reservedSharedMemPerBlock", base.reserved_shared_per_block),
        l2_bytes=get("l2CacheSize", base.l2_bytes),
        max_block=tuple(int(x) for x in props.get("maxThreadsDim", base.max_block)),  # type: ignore[arg-type]
        max_grid=tuple(int(x) for x in props.get("maxGridSize", base.max_grid)),  # type: ignore[arg-type]
        total_memory=get("totalGlobalMem", 0),
        driver=_version(rt.driverGetVersion()),
        runtime=_version(rt.runtimeGetVersion()),
    )
    if measure_bandwidth:
        limits = replace(limits, copy_bandwidth_gbs=copy_bandwidth(limits))
    _LIMITS = limits
    return limits


def copy_bandwidth(limits: DeviceLimits) -> float:
    """Device-to-device copy bandwidth in GB/s (bytes read + written), cached in device.json."""
    path = cache_dir() / "device.json"
    try:
        cached = json.loads(path.read_text())
    except (OSError, ValueError):
        cached = {}
    entry = cached.get(limits.name)
    if isinstance(entry, dict) and entry.get("copy_bandwidth_gbs"):
        return float(entry["copy_bandwidth_gbs"])
    cp = _cupy()
    free, _total = cp.cuda.runtime.memGetInfo()
    size = int(min(1 << 30, free // 8)) & ~0xFFFF
    src = cp.empty(size, dtype=cp.uint8)
    dst = cp.empty(size, dtype=cp.uint8)
    src.fill(1)
    cp.cuda.Device().synchronize()
    stream = cp.cuda.Stream(non_blocking=True)
    kind = cp.cuda.runtime.memcpyDeviceToDevice
    samples = []
    for i in range(13):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record(stream)
        cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, size, kind, stream.ptr)
        end.record(stream)
        end.synchronize()
        if i >= 3:
            samples.append(cp.cuda.get_elapsed_time(start, end) / 1e3)
    del src, dst
    seconds = float(np.median(samples))
    gbs = 2 * size / seconds / 1e9
    cached[limits.name] = {
        "copy_bandwidth_gbs": gbs,
        "bytes": 2 * size,
        "measured": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "driver": limits.driver,
        "method": "cudaMemcpyAsync device-to-device, 1 GiB, median of 10 after 3 warm-ups; read + write",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(cached, indent=2))
    tmp.replace(path)
    return gbs


# -- kernels ------------------------------------------------------------------------------

_MODULES: dict[str, Any] = {}
_SPECS: dict[str, Spec] = {}
_PYREFS: dict[str, Callable[..., Mapping[str, Any]]] = {}


class ArrayMemo:
    """A byte-bounded LRU of host arrays the worker would otherwise rebuild for every candidate.

    Every candidate at a shape is verified on the same seeded inputs, against the same reference
    outputs. At large shapes, drawing those inputs and running a float64 reference on the CPU took
    seconds per round, many times longer than the kernels themselves, and dominated the tuner's time
    (found on an H200: a 4096x14336 scalar baseline did not finish a 24-config grid in 500 s).
    Entries are made read-only, so a caller that tried to change a shared array would fail loudly
    instead of corrupting later verifications.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[Any, ...], tuple[dict[str, np.ndarray], int]] = OrderedDict()
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    def get(
        self, key: tuple[Any, ...], make: Callable[[], Mapping[str, np.ndarray]]
    ) -> dict[str, np.ndarray]:
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
            self.hits += 1
            return found[0]
        self.misses += 1
        value = {name: np.asarray(a) for name, a in make().items()}
        for a in value.values():
            a.flags.writeable = False
        size = sum(int(a.nbytes) for a in value.values())
        if size > self.max_bytes:
            return value  # too big to keep: computed each time, as before
        self._items[key] = (value, size)
        self.bytes += size
        while self.bytes > self.max_bytes and self._items:
            _, (_, dropped) = self._items.popitem(last=False)
            self.bytes -= dropped
        return value


_MEMO = ArrayMemo(int(float(os.environ.get("KTX_VERIFY_MEMO_GB", "8")) * 2**30))


def _inputs(spec: Spec, point: ShapePoint, seed: int) -> tuple[tuple[Any, ...], dict[str, np.ndarray]]:
    """(memo key, host arrays) of the seeded inputs at ``point``; the key also names the
    reference outputs computed from them. Inputs depend on the arguments' declarations, the
    shape and the seed."""
    key = ("inputs", repr(spec.args), point.name, seed)
    return key, _MEMO.get(key, partial(host_inputs, spec, point, seed))


def _function(result: CompileResult) -> Any:
    cp = _cupy()
    module = _MODULES.get(result.cubin_path)
    if module is None:
        module = cp.RawModule(path=result.cubin_path)
        _MODULES[result.cubin_path] = module
    return module.get_function(result.lowered_name)


def _pad3(dims: tuple[int, ...]) -> tuple[int, int, int]:
    d = (*dims, 1, 1, 1)
    return (d[0], d[1], d[2])


@dataclass
class _Bound:
    """A candidate bound to one shape: its function and launch geometry."""

    fn: Any
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    resources: Resources

    def __call__(self, args: tuple[Any, ...], stream: Any) -> None:
        self.fn(self.grid, self.block, args, shared_mem=self.shared, stream=stream)


def _bind(
    spec: Spec, cand: Candidate, point: ShapePoint, modules: Mapping[str, Any], limits: DeviceLimits
) -> _Bound:
    env = cand.env(spec, point)
    name = expand(cand.name_expression, env)
    compiled = modules.get(name)
    if compiled is None:
        raise _Fail(Status.COMPILE_ERROR, f"no compiled module for {name}")
    result = CompileResult.from_dict(compiled) if isinstance(compiled, dict) else compiled
    if not result.ok:
        raise _Fail(Status.COMPILE_ERROR, result.log)
    fn = _function(result)
    grid, block, shared = cand.launch(spec, point)
    threads = math.prod(block)
    regs = int(fn.num_regs)
    static = int(fn.shared_size_bytes)
    occ = occupancy(limits, threads, regs, static + shared)
    res = Resources(
        registers=regs,
        shared_static=static,
        shared_dynamic=shared,
        local_bytes=int(fn.local_size_bytes),
        max_threads_per_block=int(fn.max_threads_per_block),
        block_threads=threads,
        blocks_per_sm=occ.blocks_per_sm,
        occupancy=occ.occupancy,
        limiter=occ.limiter,
        compiler=result.compiler,
    )
    if threads > res.max_threads_per_block or threads <= 0:
        raise _Fail(
            Status.RESOURCES,
            f"block of {threads} threads; this kernel allows at most {res.max_threads_per_block} "
            f"({regs} registers per thread)",
            res,
        )
    if any(b > m for b, m in zip(_pad3(block), limits.max_block, strict=True)):
        raise _Fail(Status.RESOURCES, f"block {block} exceeds the device's {limits.max_block}", res)
    if any(g > m or g <= 0 for g, m in zip(_pad3(grid), limits.max_grid, strict=True)):
        raise _Fail(Status.LAUNCH_ERROR, f"grid {grid} outside 1..{limits.max_grid}", res)
    if static + shared > limits.shared_per_block_optin:
        raise _Fail(
            Status.RESOURCES,
            f"{static} static + {shared} dynamic bytes of shared memory exceed the device's "
            f"{limits.shared_per_block_optin} per block",
            res,
        )
    if occ.blocks_per_sm == 0:
        raise _Fail(Status.RESOURCES, f"no block fits on an SM (limited by {occ.limiter})", res)
    if shared + static > limits.shared_per_block:
        fn.max_dynamic_shared_size_bytes = shared
    return _Bound(fn, _pad3(grid), _pad3(block), shared, res)


def _args(spec: Spec, env: Mapping[str, Value], arrays: Mapping[str, Array]) -> tuple[Any, ...]:
    values = scalars(spec, env)
    out: list[Any] = []
    for arg in spec.args:
        if arg.is_array:
            out.append(arrays[arg.name])
        else:
            out.append(np.dtype(arg.dtype.storage).type(values[arg.name]))
    return tuple(out)


def _run_once(
    spec: Spec, bound: _Bound, point: ShapePoint, host: Mapping[str, np.ndarray], stream: Any
) -> dict[str, np.ndarray]:
    """Upload fresh copies (inout too; outputs poisoned), launch, download the outputs."""
    cp = _cupy()
    env = spec.env(point)
    with stream:  # uploads, launch and downloads all in order on one stream
        device = {name: cp.asarray(value) for name, value in host.items()}
        _launch_checked(bound, _args(spec, env, device), stream)
        _sync(stream)
        return {a.name: cp.asnumpy(device[a.name], stream=stream) for a in spec.args if a.is_output}


def _run_reference(
    spec: Spec, bound: _Bound, point: ShapePoint, host: Mapping[str, np.ndarray], stream: Any
) -> dict[str, np.ndarray]:
    """The original kernel's outputs on ``host``; its failure is an infrastructure failure."""
    try:
        return _run_once(spec, bound, point, host, stream)
    except _Fail as exc:
        raise WorkerFailure(Status.CRASH.value, f"reference failed: {exc.message}") from None


def _launch_checked(bound: _Bound, args: tuple[Any, ...], stream: Any) -> None:
    try:
        bound(args, stream)
    except Exception as exc:
        status, fatal = classify(exc)
        if fatal:
            raise WorkerFailure(status.value, f"launch failed: {exc}", fatal=True) from None
        raise _Fail(status, f"launch failed: {exc}", bound.resources) from None


def _sync(stream: Any) -> None:
    try:
        stream.synchronize()
    except Exception as exc:
        # Errors surfacing at synchronisation come from the kernel itself and are sticky.
        raise WorkerFailure(Status.CRASH.value, f"kernel faulted: {exc}", fatal=True) from None


def classify(exc: BaseException) -> tuple[Status, bool]:
    """(status, fatal) for a CUDA error raised by CuPy."""
    text = str(exc).lower().replace(" ", "").replace("_", "")
    if "outofresources" in text or "toomanyresources" in text:
        return Status.RESOURCES, False
    sticky = ("illegal", "misaligned", "launchfailed", "launchfailure", "hardwarestack", "assert",
              "invalidpc", "exception", "launchtimeout", "unknown")  # fmt: skip
    if any(s in text for s in sticky):
        return Status.CRASH, True
    return Status.LAUNCH_ERROR, False


# -- verification -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Verdict:
    max_abs_err: float
    rel_err: float
    shapes: tuple[str, ...]


def verify_shapes(
    spec: Spec, cand: Candidate, point: ShapePoint, opts: Options
) -> tuple[list[ShapePoint], list[ShapePoint]]:
    """(shapes to verify ``cand`` at: ``point`` and its odd variants where the candidate's
    constraints hold, the odd variants its constraints exclude)."""
    if not opts.odd:
        return [point], []
    kept, skipped = spec.odd_split(point, cand.config, cand.constraints)
    return [point, *kept], skipped


def _verify(
    spec: Spec,
    cand: Candidate,
    modules: Mapping[str, Any],
    reference: Mapping[str, Any],
    point: ShapePoint,
    opts: Options,
    limits: DeviceLimits,
    stream: Any,
) -> _Verdict:
    kind = reference.get("kind", "original")
    ref_cand = Candidate.from_dict(reference["candidate"]) if kind == "original" else None
    ref_modules = reference.get("modules", {})
    pyref = None
    if kind == "python":
        key = str(spec.path)
        if key not in _PYREFS:
            _PYREFS[key] = load_python_reference(spec)
        pyref = _PYREFS[key]
    shapes = verify_shapes(spec, cand, point, opts)[0]
    max_abs = 0.0
    rel = 0.0
    for shape in shapes:
        bound = _bind(spec, cand, shape, modules, limits)
        ref_bound = _bind(spec, ref_cand, shape, ref_modules, limits) if ref_cand is not None else None
        count = opts.rounds if shape == point or opts.odd_rounds <= 0 else opts.odd_rounds
        for r in range(count):
            inputs_key, host = _inputs(spec, shape, round_seed(spec, shape, r))
            got = _run_once(spec, bound, shape, host, stream)
            if ref_bound is not None:
                assert ref_cand is not None
                run_ref = partial(_run_reference, spec, ref_bound, shape, host, stream)
                want = _MEMO.get(("original", ref_cand.digest, *inputs_key), run_ref)
                stored = True
            else:
                assert pyref is not None
                py_key = ("python", str(spec.path), spec.reference.python, *inputs_key)
                want = _MEMO.get(py_key, partial(python_reference, spec, shape, host, pyref))
                stored = False
            for arg in spec.args:
                if not arg.is_output:
                    continue
                result = compare(arg, got[arg.name], want[arg.name], spec.tolerance_for(arg.dtype), stored)
                max_abs = max(max_abs, result.max_abs_err)
                rel = max(rel, result.rel_err)
                if not result.ok:
                    raise _Fail(
                        Status.WRONG_RESULT,
                        f"shape {shape.name}, round {r + 1}/{count} (vs {kind}): {result.message}",
                        bound.resources,
                    )
    return _Verdict(max_abs, rel, tuple(s.name for s in shapes))


# -- timing -------------------------------------------------------------------------------


def _time(
    spec: Spec, bound: _Bound, point: ShapePoint, opts: Options, limits: DeviceLimits, stream: Any
) -> tuple[Timing, Timing]:
    cp = _cupy()
    env = spec.env(point)
    _, host = _inputs(spec, point, round_seed(spec, point, 1000))
    set_bytes = max(1, sum(int(v.nbytes) for v in host.values()))
    want_sets = math.ceil(2 * limits.l2_bytes / set_bytes)
    nsets = max(1, min(want_sets, opts.max_sets, opts.max_rotate_bytes // set_bytes))
    with stream:
        sets = []
        for _ in range(nsets):
            device = {name: cp.asarray(value) for name, value in host.items()}
            sets.append(_args(spec, env, device))
        flush = cp.empty(max(1, 2 * limits.l2_bytes // 4), dtype=cp.int32) if opts.flush_l2 else None

        # Warm-up, and a first estimate of the kernel's time.
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record(stream)
        for i in range(opts.warmup):
            _launch_checked(bound, sets[i % nsets], stream)
        end.record(stream)
        _sync(stream)
        estimate_us = max(cp.cuda.get_elapsed_time(start, end) * 1e3 / max(1, opts.warmup), 0.5)
        runs = int(min(opts.max_runs, max(opts.min_runs, 50_000 / estimate_us)))

        # One launch at a time, as production kernels are benchmarked: the host waits for each
        # launch, so the next one starts on an idle queue behind a fresh L2 flush (a deep queue
        # of back-to-back launches would measure something between single and graph time).
        samples_single = []
        s, e = cp.cuda.Event(), cp.cuda.Event()
        for i in range(runs):
            if flush is not None:
                flush.fill(i & 0x7F)
            s.record(stream)
            _launch_checked(bound, sets[0], stream)
            e.record(stream)
            _sync(stream)
            samples_single.append(cp.cuda.get_elapsed_time(s, e) * 1e3)
        single = Timing.of(samples_single)

        launches = max(opts.graph_launches, nsets if nsets > 1 else 0)
        launches = min(launches, max(opts.graph_launches, opts.max_sets))
        stream.begin_capture()
        try:
            for i in range(launches):
                bound(sets[i % nsets], stream)
        finally:
            graph = stream.end_capture()
        graph.launch(stream)  # instantiate and warm
        _sync(stream)
        samples = []
        for _ in range(opts.graph_replays):
            s, e = cp.cuda.Event(), cp.cuda.Event()
            s.record(stream)
            graph.launch(stream)
            e.record(stream)
            _sync(stream)
            samples.append(cp.cuda.get_elapsed_time(s, e) * 1e3 / launches)
        graph_timing = Timing.of(samples)
    del sets, flush, graph
    return single, graph_timing


# -- the request --------------------------------------------------------------------------


def _spec(path: str) -> Spec:
    if path not in _SPECS:
        _SPECS[path] = load_spec(Path(path))
    return _SPECS[path]


def measure_job(job: Mapping[str, Any]) -> dict[str, Any]:
    cp = _cupy()
    spec = _spec(job["spec"])
    point = ShapePoint.from_name(job["shape"])
    cand = Candidate.from_dict(job["candidate"])
    opts = Options.from_dict(job.get("options"))
    limits = device_limits()
    base = Measurement.failure(spec, cand, point.name, Status.OK, "")
    stream = cp.cuda.Stream(non_blocking=True)
    resources: Resources | None = None
    try:
        bound = _bind(spec, cand, point, job["modules"], limits)
        resources = bound.resources
        verdict = _Verdict(0.0, 0.0, ())
        if opts.verify and job.get("reference"):
            verdict = _verify(spec, cand, job["modules"], job["reference"], point, opts, limits, stream)
        single = graph = None
        if opts.time:
            single, graph = _time(spec, bound, point, opts, limits, stream)
    except _Fail as exc:
        return replace(
            base, status=exc.status, message=exc.message, resources=exc.resources or resources
        ).to_dict()
    env = spec.env(point)
    skipped = tuple(p.name for p in verify_shapes(spec, cand, point, opts)[1])
    nbytes = spec.bytes_moved(env)
    time_us = None if graph is None else graph.median_us
    bw = sol_us = frac = None
    if time_us:
        bw = nbytes / (time_us * 1e-6) / 1e9
        if limits.copy_bandwidth_gbs > 0:
            sol_us = nbytes / (limits.copy_bandwidth_gbs * 1e9) * 1e6
            frac = sol_us / time_us
    return replace(
        base,
        single=single,
        graph=graph,
        resources=resources,
        grid=bound.grid,
        block=bound.block,
        bytes=nbytes,
        flops=spec.flops_done(env),
        bandwidth_gbs=bw,
        sol_us=sol_us,
        sol_fraction=frac,
        max_abs_err=verdict.max_abs_err if verdict.shapes else None,
        rel_err=verdict.rel_err if verdict.shapes else None,
        verified=verdict.shapes,
        odd_skipped=skipped if verdict.shapes else (),
        rounds=opts.rounds if verdict.shapes else 0,
    ).to_dict()


def handle(op: str, payload: Any) -> Any:
    """Worker entry point (see :mod:`ktx.measure.worker`)."""
    if op == "ping":
        return "pong"
    if op == "device":
        cp = _cupy()
        if cp.cuda.runtime.getDeviceCount() < 1:
            raise WorkerFailure("crash", "no CUDA device", fatal=False)
        limits = device_limits(measure_bandwidth=bool((payload or {}).get("bandwidth", True)))
        return limits.to_dict()
    if op == "measure":
        return measure_job(payload)
    raise WorkerFailure("crash", f"unknown request {op!r}", fatal=False)
