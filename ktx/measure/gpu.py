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
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from ktx.ir.expr import Value, expand

from ktx.dtypes import decode, encode, poison
from ktx.measure.compile import CompileResult, cache_dir
from ktx.measure.guards import (
    GuardFault,
    check,
    guard_bytes,
    guarded_copy,
    is_spec_error,
    pattern,
    run_guarded,
)
from ktx.measure.occupancy import DeviceLimits, occupancy
from ktx.measure.protocol import WorkerFailure
from ktx.measure.refcache import Verdict, VerdictCache, spec_digest, verdict_key
from ktx.measure.types import Candidate, Measurement, Resources, Status, Timing
from ktx.measure.verify import (
    Draws,
    compare,
    compare_output,
    draw,
    load_python_reference,
    python_reference,
    round_seed,
    scalars,
    seeded_inputs,
)
from ktx.measure.warmup import settle_seconds, steady_samples, warm_up
from ktx.spec import ShapePoint, Spec
from ktx.specload import load_spec

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
    #: Before the first timing of a process: keep the GPU busy, then probe until steady.
    warm_up: bool = True
    #: Graph replays come in batches until two successive medians agree within this...
    stable_tolerance: float = 0.01
    #: ... or this many batches were taken.
    max_batches: int = 5
    #: About how long one batch of graph replays may take (fewer samples for long kernels).
    graph_budget_s: float = 0.1
    #: Untimed graph replays before the timed batches: this long normally...
    settle_s: float = 0.02
    #: ... and this long when the GPU timed nothing for ``idle_gap_s`` (the first timing of a
    #: process always): see :func:`ktx.measure.warmup.settle_seconds`.
    settle_idle_s: float = 0.25
    idle_gap_s: float = 0.5
    #: Timed graph batches dropped before the steady-state rule counts any.
    discard_batches: int = 1
    #: The first graph a process times is captured and measured twice, the first dropped.
    first_graph_twice: bool = True
    #: From this estimated time per launch on, neither the second capture nor the dropped batch
    #: is spent: both answer a sub-microsecond effect of short kernels, while one batch of a
    #: 40 ms kernel (llm.c's naive softmax) is 2 s, and the extra batches pushed its paired
    #: check past the timeout derived from its own time (H200 ladder, 2026-11-26).
    long_kernel_us: float = 1000.0

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
    """A byte-bounded LRU of arrays (host or device) the worker would otherwise rebuild for
    every candidate.

    Every candidate at a shape is verified on the same seeded inputs, against the same reference
    outputs: the original kernel's (kept on the device, or in pinned host memory when the device
    budget is spent) or the Python reference's (float64, on the host). Host entries are made
    read-only, so a caller that tried to change a shared array would fail loudly instead of
    corrupting later verifications.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[Any, ...], tuple[dict[str, Any], int]] = OrderedDict()
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    def lookup(self, key: tuple[Any, ...]) -> dict[str, Any] | None:
        found = self._items.get(key)
        if found is None:
            return None
        self._items.move_to_end(key)
        self.hits += 1
        return found[0]

    def put(self, key: tuple[Any, ...], value: dict[str, Any]) -> bool:
        """Keep ``value`` (evicting the least recently used); False when it is too big to keep."""
        for a in value.values():
            if isinstance(a, np.ndarray):
                a.flags.writeable = False
        size = sum(int(a.nbytes) for a in value.values())
        if size > self.max_bytes:
            return False
        old = self._items.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        self._items[key] = (value, size)
        self.bytes += size
        while self.bytes > self.max_bytes and self._items:
            _, (_, dropped) = self._items.popitem(last=False)
            self.bytes -= dropped
        return True

    def get(self, key: tuple[Any, ...], make: Callable[[], Mapping[str, Any]]) -> dict[str, Any]:
        found = self.lookup(key)
        if found is not None:
            return found
        self.misses += 1
        value = dict(make().items())
        self.put(key, value)  # too big to keep: computed each time, as before
        return value


def _gb(name: str, default: float) -> int:
    return int(float(os.environ.get(name, str(default))) * 2**30)


#: Python reference outputs (float64, host): at most KTX_VERIFY_MEMO_GB.
_MEMO = ArrayMemo(_gb("KTX_VERIFY_MEMO_GB", 8))
#: The original kernel's outputs on the device: KTX_VERIFY_DEVICE_GB, by default a quarter of
#: the device's memory (sized when the first entry comes).
_DEVICE_REFS: ArrayMemo | None = None
#: Where those go when the device budget is spent: pinned host memory, KTX_VERIFY_PINNED_GB.
_PINNED_REFS = ArrayMemo(_gb("KTX_VERIFY_PINNED_GB", 8))
_DIGESTS: dict[str, str] = {}


def _device_refs(limits: DeviceLimits) -> ArrayMemo:
    global _DEVICE_REFS
    if _DEVICE_REFS is None:
        default = (limits.total_memory or (16 << 30)) / 4 / 2**30
        _DEVICE_REFS = ArrayMemo(_gb("KTX_VERIFY_DEVICE_GB", default))
    return _DEVICE_REFS


def reference_outputs(
    key: tuple[Any, ...], make: Callable[[], dict[str, Array]], limits: DeviceLimits, stream: Any
) -> dict[str, Array]:
    """The original's outputs for ``key`` on the device: from the device memo, else uploaded
    from pinned host memory, else made (and kept on the device, or pinned when it is full)."""
    cp = _cupy()
    device = _device_refs(limits)
    found = device.lookup(key)
    if found is not None:
        return found
    pinned = _PINNED_REFS.lookup(key)
    if pinned is not None:
        with stream:
            return {name: cp.asarray(a) for name, a in pinned.items()}
    device.misses += 1
    value = make()
    if device.put(key, value):
        return value
    import cupyx  # type: ignore[import-not-found]

    host: dict[str, Any] = {}
    for name, a in value.items():
        buf = cupyx.empty_pinned(a.shape, dtype=a.dtype)
        a.get(out=buf, stream=stream)
        host[name] = buf
    stream.synchronize()
    _PINNED_REFS.put(key, host)
    return value


def _inputs(spec: Spec, point: ShapePoint, round_index: int) -> tuple[tuple[Any, ...], dict[str, Array]]:
    """(memo key, device arrays) of round ``round_index``'s seeded inputs at ``point``, drawn on
    the device (fresh each time: drawing costs far less than a copy from the host). The key names
    the reference outputs computed from them: the arguments' declarations, the shape, the seed."""
    seed = round_seed(spec, point, round_index)
    key = ("inputs", repr(spec.all_args), point.name, seed, round_index)
    return key, seeded_inputs(spec, point, seed, round_index, _cupy())


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
    from ktx.measure.argpack import pack, struct_layouts  # here: main's imports above move

    values = scalars(spec, env)
    structs = struct_layouts(spec, env)
    # the device addresses a struct's pointer fields hold: of the very arrays this launch gets
    addresses = {b: address(arrays[b]) for a in spec.args for _, b in a.pointers}
    out: list[Any] = []
    for arg in spec.args:
        if arg.is_array:
            out.append(arrays[arg.name])
        elif arg.null:  # a pointer the project passes as null (dist = "null")
            out.append(np.uint64(0))
        elif arg.is_struct:  # a structured scalar: CuPy passes its bytes
            out.append(pack(arg, structs[arg.name], env, addresses))
        elif arg.dtype.name in ("fp16", "bf16"):
            # a half by value (lmdeploy's ``T bscale``): its two bytes, bf16 as encoded bits
            out.append(encode(np.asarray([values[arg.name]], dtype=np.float64), arg.dtype)[0])
        else:
            out.append(np.dtype(arg.dtype.storage).type(values[arg.name]))
    return tuple(out)


def address(array: Any) -> int:
    """Where ``array``'s first element lives: a CuPy array's device pointer, or (numpy, in the
    CPU tests' stand-in worker) its host address."""
    data = getattr(array, "data", None)
    ptr = getattr(data, "ptr", None)
    return int(ptr) if ptr is not None else int(array.ctypes.data)


def _run_once(
    spec: Spec,
    bound: _Bound,
    point: ShapePoint,
    pristine: Mapping[str, Array],
    stream: Any,
    original: bool = False,
) -> dict[str, Array]:
    """Launch on guarded copies of the arrays (inout and poisoned out arrays fresh from
    ``pristine``, inputs too); the outputs, on the device. A write outside a buffer changes its
    guard (:mod:`ktx.measure.guards`), checked on the device after the launch: a
    ``wrong_result`` for a candidate, a spec error for the ``original``."""
    cp = _cupy()
    env = spec.env(point)

    def launch(arrays: dict[str, Array]) -> None:
        _launch_checked(bound, _args(spec, env, arrays), stream)
        _sync(stream)

    with stream:
        try:
            return run_guarded(spec, point, pristine, launch, cp, original)
        except GuardFault as exc:
            raise _Fail(Status.WRONG_RESULT, exc.message, bound.resources) from None


def _run_reference(
    spec: Spec, bound: _Bound, point: ShapePoint, pristine: Mapping[str, Array], stream: Any
) -> dict[str, Array]:
    """The original kernel's outputs on ``pristine``; its failure is an infrastructure failure,
    except a write out of bounds, which is the spec's error (and fails the candidate too)."""
    try:
        return _run_once(spec, bound, point, pristine, stream, original=True)
    except _Fail as exc:
        if is_spec_error(exc.message):
            raise WorkerFailure(Status.WRONG_RESULT.value, exc.message) from None
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


def checks_the_original(cand: Candidate, reference: Mapping[str, Any] | None) -> bool:
    """Whether a request verifies the original kernel itself (against the Python reference, or
    against a second run of itself): a guard violation then is the spec's error, not a
    candidate's wrong result."""
    if not reference:
        return False
    if reference.get("kind") == "python":
        return bool(reference.get("original_digest") == cand.digest)
    ref = reference.get("candidate")
    return isinstance(ref, Mapping) and Candidate.from_dict(ref).digest == cand.digest


def verify_shapes(
    spec: Spec, cand: Candidate, point: ShapePoint, opts: Options
) -> tuple[list[ShapePoint], list[ShapePoint]]:
    """(shapes to verify ``cand`` at: ``point`` and its odd variants where the candidate's
    constraints hold, the odd variants its constraints exclude)."""
    if not opts.odd:
        return [point], []
    kept, skipped = spec.odd_split(point, cand.config, cand.constraints)
    return [point, *kept], skipped


@dataclass
class _Costs:
    """Where a request's seconds went (returned with the measurement as ``costs``): the harness
    derives timeouts from the original's repeatable cost, without the one-off parts."""

    warmup_s: float = 0.0
    python_s: float = 0.0  # the Python reference, for the original (cached on disk) or a candidate
    verify_s: float = 0.0
    time_s: float = 0.0
    #: With ``KTX_COST_DETAIL=1``: seconds of the steps inside those (module load and binding,
    #: input draws, the reference's outputs, the guarded run, the comparison, the timing arena,
    #: the launches), each ended by a synchronise so that the device's work lands in its own
    #: step. Off by default: the synchronises cost a little, and only scripts/gpu_s9_overhead.sh
    #: reads them.
    parts: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: round(v, 6) for k, v in self.__dict__.items() if isinstance(v, float)}
        if self.parts:
            out["parts"] = {k: round(v, 6) for k, v in self.parts.items()}
        return out


def cost_detail() -> bool:
    """Whether the worker books the steps of a request apart (``KTX_COST_DETAIL=1``)."""
    return os.environ.get("KTX_COST_DETAIL") == "1"


@contextmanager
def _step(costs: _Costs | None, name: str, stream: Any = None) -> Iterator[None]:
    """Book the seconds of ``name`` (and the device work it queued on ``stream``) in ``costs``
    when :func:`cost_detail` is on; nothing otherwise."""
    if costs is None or not cost_detail():
        yield
        return
    start = time.perf_counter()
    try:
        yield
    finally:
        if stream is not None:
            stream.synchronize()
        costs.parts[name] = costs.parts.get(name, 0.0) + time.perf_counter() - start


#: Names how the original's cached verdicts were reached: with guard zones (verdicts cached
#: before guards existed never saw an out-of-bounds write, so they are not reused).
_GENERATOR = "cupy+guards"


def _digest(spec: Spec) -> str:
    key = str(spec.path)
    if key not in _DIGESTS:
        _DIGESTS[key] = spec_digest(spec)
    return _DIGESTS[key]


def _python_key(spec: Spec, inputs_key: tuple[Any, ...]) -> tuple[Any, ...]:
    """The memo key of the Python reference's outputs on the inputs ``inputs_key`` names."""
    return ("python", str(spec.path), spec.reference.python, *inputs_key)


def _python_want(
    spec: Spec,
    shape: ShapePoint,
    inputs_key: tuple[Any, ...],
    pristine: Mapping[str, Array],
    costs: _Costs,
    stream: Any,
) -> dict[str, Array]:
    """The float64 Python reference's outputs on these inputs, on the device (computed on the
    host from the decoded inputs, kept in the host memo). Both copies run on ``stream``, the
    non-blocking stream the inputs were written and the candidate runs on."""
    cp = _cupy()
    key = str(spec.path)
    if key not in _PYREFS:
        _PYREFS[key] = load_python_reference(spec)
    pyref = _PYREFS[key]

    def make() -> dict[str, np.ndarray]:
        host = {a.name: cp.asnumpy(pristine[a.name], stream=stream)
                for a in spec.all_args if a.is_array and a.role != "out"}  # fmt: skip
        return python_reference(spec, shape, host, pyref)

    start = time.perf_counter()
    want = _MEMO.get(_python_key(spec, inputs_key), make)
    costs.python_s += time.perf_counter() - start
    with stream:
        return {name: cp.asarray(a) for name, a in want.items()}


def _verify(
    spec: Spec,
    cand: Candidate,
    modules: Mapping[str, Any],
    reference: Mapping[str, Any],
    point: ShapePoint,
    opts: Options,
    limits: DeviceLimits,
    stream: Any,
    costs: _Costs,
) -> _Verdict:
    """Check ``cand`` on the device, round after round, at ``point`` and its odd variants.

    Against the original: its outputs come from the reference memo (device, or pinned host
    memory), run once per shape and round. Against the Python reference: the original itself
    is checked once per shape and round and its passing verdict kept on disk
    (:mod:`ktx.measure.refcache`); any other candidate is compared with the reference's float64
    outputs, uploaded. Comparisons run where the arrays are; only the verdict comes back.
    """
    kind = reference.get("kind", "original")
    ref_cand = Candidate.from_dict(reference["candidate"]) if kind == "original" else None
    ref_modules = reference.get("modules", {})
    is_original = kind == "python" and reference.get("original_digest") == cand.digest
    verdicts = VerdictCache() if is_original else None
    shapes = verify_shapes(spec, cand, point, opts)[0]
    device = f"{limits.name}|sm_{limits.cc}|runtime {limits.runtime}|driver {limits.driver}"
    pending: dict[tuple[Any, ...], Future[dict[str, np.ndarray]]] = {}
    pool = None
    if verdicts is not None:
        todo = [
            (shape, r)
            for shape in shapes
            for r in range(opts.rounds if shape == point or opts.odd_rounds <= 0 else opts.odd_rounds)
            if verdicts.get(_digest(spec), verdict_key(
                _digest(spec), shape.name, round_seed(spec, shape, r), r, _GENERATOR, device)) is None
        ]  # fmt: skip
        if todo:
            pool = ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1, len(todo))))
            start = time.perf_counter()
            # drawing every round's inputs and copying them to the host serves the Python
            # reference alone: a one-off cost like the reference itself (no candidate repeats it)
            pending = _start_python(spec, todo, stream, pool)
            costs.python_s += time.perf_counter() - start
    try:
        return _verify_rounds(
            spec, cand, modules, kind, ref_cand, ref_modules, verdicts, pending, shapes, point, opts,
            limits, stream, costs, device, checks_the_original(cand, reference),
        )  # fmt: skip
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _start_python(
    spec: Spec, todo: list[tuple[ShapePoint, int]], stream: Any, pool: ThreadPoolExecutor
) -> dict[tuple[Any, ...], Future[dict[str, np.ndarray]]]:
    """Start the float64 Python reference of every (shape, round) the original's check still
    needs, in threads: numpy releases the GIL in its array loops, so on a many-core host the
    first (uncached) check of the original takes a fraction of the serial time."""
    cp = _cupy()
    key = str(spec.path)
    if key not in _PYREFS:
        _PYREFS[key] = load_python_reference(spec)
    pyref = _PYREFS[key]
    futures: dict[tuple[Any, ...], Future[dict[str, np.ndarray]]] = {}
    for shape, r in todo:
        with stream:
            inputs_key, pristine = _inputs(spec, shape, r)
            host = {a.name: cp.asnumpy(pristine[a.name], stream=stream) for a in spec.all_args
                    if a.is_array and a.role != "out"}  # fmt: skip
        futures[inputs_key] = pool.submit(python_reference, spec, shape, host, pyref)
        del pristine, host
    return futures


def _verify_rounds(
    spec: Spec,
    cand: Candidate,
    modules: Mapping[str, Any],
    kind: str,
    ref_cand: Candidate | None,
    ref_modules: Mapping[str, Any],
    verdicts: VerdictCache | None,
    pending: Mapping[tuple[Any, ...], Future[dict[str, np.ndarray]]],
    shapes: list[ShapePoint],
    point: ShapePoint,
    opts: Options,
    limits: DeviceLimits,
    stream: Any,
    costs: _Costs,
    device: str,
    is_self: bool,
) -> _Verdict:
    cp = _cupy()
    max_abs = 0.0
    rel = 0.0
    for shape in shapes:
        with _step(costs, "bind"):
            bound = _bind(spec, cand, shape, modules, limits)
            ref_bound = _bind(spec, ref_cand, shape, ref_modules, limits) if ref_cand is not None else None
        count = opts.rounds if shape == point or opts.odd_rounds <= 0 else opts.odd_rounds
        for r in range(count):
            seed = round_seed(spec, shape, r)
            vkey = verdict_key(_digest(spec), shape.name, seed, r, _GENERATOR, device)
            if verdicts is not None:
                cached = verdicts.get(_digest(spec), vkey)
                if cached is not None and cached.ok:
                    max_abs, rel = max(max_abs, cached.max_abs_err), max(rel, cached.rel_err)
                    continue
            with _step(costs, "inputs", stream), stream:
                inputs_key, pristine = _inputs(spec, shape, r)
            if ref_bound is not None:
                assert ref_cand is not None
                run_ref = partial(_run_reference, spec, ref_bound, shape, pristine, stream)
                memo_key = ("original", ref_cand.digest, *inputs_key)
                with _step(costs, "reference", stream):
                    want = reference_outputs(memo_key, run_ref, limits, stream)
                stored = True
            elif inputs_key in pending:  # the original's check, started in a thread
                start = time.perf_counter()
                # On the measuring stream: it does not wait for the legacy default stream, and a
                # copy from pageable memory returns before its DMA lands (the compare read the
                # tail of large outputs before they arrived).
                host_want = pending[inputs_key].result()
                # kept for the candidates checked against the Python reference on these inputs
                # (a precision knob on): they find it in the memo instead of running it again
                _MEMO.put(_python_key(spec, inputs_key), host_want)
                with stream:
                    want = {name: cp.asarray(a) for name, a in host_want.items()}
                costs.python_s += time.perf_counter() - start
                stored = False
            else:
                want = _python_want(spec, shape, inputs_key, pristine, costs, stream)
                stored = False
            with _step(costs, "run", stream):
                got = _run_once(spec, bound, shape, pristine, stream, original=is_self)
            round_abs = round_rel = 0.0
            with _step(costs, "compare", stream), stream:
                for arg in spec.all_args:
                    if not arg.is_output:
                        continue
                    tol = spec.tolerance_for(arg.dtype)
                    result = compare_output(arg, got, want, tol, stored, spec, cp)
                    round_abs, round_rel = max(round_abs, result.max_abs_err), max(round_rel, result.rel_err)
                    if not result.ok:
                        raise _Fail(
                            Status.WRONG_RESULT,
                            f"shape {shape.name}, round {r + 1}/{count} (vs {kind}): {result.message}",
                            bound.resources,
                        )
            max_abs, rel = max(max_abs, round_abs), max(rel, round_rel)
            if verdicts is not None:
                verdicts.put(_digest(spec), vkey, Verdict(True, round_abs, round_rel))
            del got, pristine, want
    return _Verdict(max_abs, rel, tuple(s.name for s in shapes))


# -- timing -------------------------------------------------------------------------------


def _time(
    spec: Spec,
    bound: _Bound,
    point: ShapePoint,
    opts: Options,
    limits: DeviceLimits,
    stream: Any,
    costs: _Costs | None = None,
) -> tuple[Timing, Timing]:
    cp = _cupy()
    env = spec.env(point)
    # Whether the GPU sat idle before this measurement (verification on the CPU, a new process)
    settle_s = settle_seconds(
        _LAST_TIMED[0] if _LAST_TIMED else None, time.perf_counter(), opts.settle_s,
        opts.settle_idle_s, opts.idle_gap_s,
    )  # fmt: skip
    with stream:
        with _step(costs, "arena", stream):
            arrays = _timing_arena(spec, point, opts, limits)
            sets = [_args(spec, env, a) for a in arrays]
            nsets = len(sets)
            flush = _flush_buffer(limits) if opts.flush_l2 else None

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
        samples_single: list[float] = []
        s, e = cp.cuda.Event(), cp.cuda.Event()
        first = min(runs, LONG_FIRST_RUNS) if estimate_us >= opts.long_kernel_us else runs
        for i in range(runs):
            if i == first and steady_single(samples_single, opts.stable_tolerance):
                break  # a long kernel whose first launches agree: the rest would cost seconds
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
        launches, replays = graph_shape(launches, opts.graph_replays, nsets, estimate_us, opts.graph_budget_s)

        def graph_samples() -> list[float]:
            stream.begin_capture()
            try:
                for i in range(launches):
                    bound(sets[i % nsets], stream)
            finally:
                graph = stream.end_capture()
            graph.launch(stream)  # instantiate, upload and warm
            _sync(stream)

            def replay() -> float:
                s, e = cp.cuda.Event(), cp.cuda.Event()
                s.record(stream)
                graph.launch(stream)
                e.record(stream)
                _sync(stream)
                return float(cp.cuda.get_elapsed_time(s, e)) * 1e3 / launches

            # Settle (longer after the GPU sat idle), drop the first batch, then batches until
            # two successive medians agree: the reported one is from steady state (issue 18).
            got, _ = steady_samples(
                replay, replays, settle_s, opts.stable_tolerance, opts.max_batches, discard
            )
            return got

        long_kernel = estimate_us >= opts.long_kernel_us
        discard = 0 if long_kernel else opts.discard_batches
        samples = graph_samples()
        if opts.first_graph_twice and not long_kernel and first_graph_of_process():
            # The first graph a process times is measured again from a fresh capture, and only
            # the second counts. On an H200 (2026-11-26) one fresh process in ten still read its
            # first graph 12.8% *low* after the settle and the dropped batch (2.405 vs 2.758 µs,
            # fused_add_rmsnorm tokens=16,d=4096), with the SM clock at its 1980 MHz maximum
            # throughout, while the identical code measured next in the same process, on the
            # same arena addresses, agreed with the other nine within 0.5%. Not clocks (a low
            # time at maximum clock), not placement (same addresses), not a transient in time
            # (the settle did not remove it): something of the process's first captured graph.
            samples = graph_samples()
        graph_timing = Timing.of(samples)
    _LAST_TIMED[:] = [time.perf_counter()]
    del flush, arrays  # sets and the graphs go with graph_samples on return
    return single, graph_timing


class _Arena:
    """The timing buffers of one shape, kept for the process: every candidate at a shape is
    timed on the very same device addresses as the original. Where buffers sit (which L2 slices
    and DRAM channels their lines map to) can move a few-microsecond kernel by 10% or more, so
    placement that differs between the original and a candidate would read as a speedup."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.items: OrderedDict[tuple[Any, ...], tuple[dict[str, Array], list[dict[str, Array]], int]] = (
            OrderedDict()
        )
        self.bytes = 0


_ARENA = _Arena(_gb("KTX_TIMING_ARENA_GB", 8))
#: When this process last finished timing a graph (perf_counter seconds); empty before.
_LAST_TIMED: list[float] = []


def first_graph_of_process() -> bool:
    """Whether no graph has been timed in this process yet (see :func:`_time`)."""
    return not _LAST_TIMED


_FLUSH: list[Array] = []


def _flush_buffer(limits: DeviceLimits) -> Array:
    """A 2x L2 buffer whose writes evict the L2 before single launches; one per process."""
    if not _FLUSH:
        _FLUSH.append(_cupy().empty(max(1, 2 * limits.l2_bytes // 4), dtype=_cupy().int32))
    return _FLUSH[0]


def _timing_arena(
    spec: Spec, point: ShapePoint, opts: Options, limits: DeviceLimits
) -> list[dict[str, Array]]:
    """The input sets timing rotates over at ``point`` (together over 2x L2, bounded), every
    array restored from a pristine copy (in place: the addresses stay; a candidate that wrote
    to its inputs cannot change what the next one is timed on)."""
    key = (repr(spec.all_args), point.name, opts.max_sets, opts.max_rotate_bytes)
    found = _ARENA.items.get(key)
    if found is not None:
        _ARENA.items.move_to_end(key)
        pristine, sets, _ = found
        for arrays in sets:
            for name, value in pristine.items():
                arrays[name][...] = value
        return sets
    _, pristine = _inputs(spec, point, 1000)
    set_bytes = max(1, sum(int(v.nbytes) for v in pristine.values()))
    want_sets = math.ceil(2 * limits.l2_bytes / set_bytes)
    nsets = max(1, min(want_sets, opts.max_sets, opts.max_rotate_bytes // set_bytes))
    sets = [{name: value.copy() for name, value in pristine.items()} for _ in range(nsets)]
    size = set_bytes * (nsets + 1)
    if size <= _ARENA.max_bytes:
        _ARENA.items[key] = (pristine, sets, size)
        _ARENA.bytes += size
        while _ARENA.bytes > _ARENA.max_bytes:
            _, (_, _, dropped) = _ARENA.items.popitem(last=False)
            _ARENA.bytes -= dropped
    return sets


def graph_shape(
    launches: int, replays: int, nsets: int, estimate_us: float, budget_s: float
) -> tuple[int, int]:
    """(launches per graph, replays per batch) so that one batch takes about ``budget_s``.

    100 launches x 20 replays is 2,000 launches: 0.7 s per batch for a 350 µs kernel
    (silu at 4096x14336), several batches per measurement, far over issue 12's second per
    candidate. Long kernels need fewer samples (their launch overhead, which graphs amortise,
    is a small share), so replays drop first (to 5), then launches (to 10, and never below
    one pass over the rotated input sets). Above 500 µs that floor of 10 falls: a graph holds at
    least :data:`GRAPH_REPLAY_US` of work, so that a replay's launch latency (a few µs) stays
    under 0.2% of it, and a kernel that long alone is timed one launch a graph.

    Why (issue 23 item 6, llm.c softmax_forward, H200): the naive original takes 40 ms a launch;
    ten launches a graph and five replays a batch made a batch 2 s and a timing 13 s, up to five
    batches, so three originals took 41 s to measure and each pair of its final check 7.7 s.

    >>> [graph_shape(100, 20, 1, us, 0.1) for us in (40_000.0, 4_000.0, 1_000.0, 350.0)]
    [(1, 5), (5, 5), (20, 5), (57, 5)]
    """
    if estimate_us <= 0 or budget_s <= 0:
        return launches, replays
    allowed = max(1, int(budget_s * 1e6 / estimate_us))
    if launches * replays <= allowed:
        return launches, replays
    replays = max(5, min(replays, allowed // max(1, launches)))
    if launches * replays > allowed:
        least = min(10, max(1, math.ceil(GRAPH_REPLAY_US / estimate_us)))
        launches = max(least, nsets, allowed // replays)
    return launches, replays


#: Single launches of a long kernel (``Options.long_kernel_us``) taken before
#: :func:`steady_single` may end its single-launch timing.
LONG_FIRST_RUNS = 10


def steady_single(samples_us: list[float], tolerance: float) -> bool:
    """Whether a long kernel's first single-launch samples already pin its median: their spread
    ((p90 - p10) / median) is within ``tolerance`` (``Options.stable_tolerance``, the rule that
    ends graph batches).

    Why (issue 23 item 6, llm.c softmax_forward, H200): 50 single launches of a 40 ms original
    are 2 s of every timing, and each pair of its final check has one; ten that agree within 1%
    give the same median to within that. A noisy kernel still takes all its runs.

    >>> steady_single([40_000.0 + i for i in range(10)], 0.01), steady_single([40_000.0, 44_000.0] * 5, 0.01)
    (True, False)
    """
    return bool(samples_us) and Timing.of(samples_us).spread <= tolerance


#: The least work (µs) a graph of a long kernel holds (:func:`graph_shape`).
GRAPH_REPLAY_US = 5_000.0


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
    costs = _Costs()
    if opts.time and opts.warm_up:
        costs.warmup_s = _warm(limits)
    base = Measurement.failure(spec, cand, point.name, Status.OK, "")
    stream = cp.cuda.Stream(non_blocking=True)
    resources: Resources | None = None
    try:
        with _step(costs, "bind"):
            bound = _bind(spec, cand, point, job["modules"], limits)
        resources = bound.resources
        verdict = _Verdict(0.0, 0.0, ())
        clock = time.perf_counter()
        if opts.verify and job.get("reference"):
            verdict = _verify(
                spec, cand, job["modules"], job["reference"], point, opts, limits, stream, costs
            )
        costs.verify_s = time.perf_counter() - clock
        single = graph = None
        clock = time.perf_counter()
        if opts.time:
            single, graph = _time(spec, bound, point, opts, limits, stream, costs)
        costs.time_s = time.perf_counter() - clock
    except _Fail as exc:
        failed = replace(base, status=exc.status, message=exc.message, resources=exc.resources or resources)
        return {**failed.to_dict(), "costs": costs.to_dict()}
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
    done = replace(
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
    )
    # ``costs`` is not a Measurement field: Measurement.from_dict leaves it out, the harness reads it.
    return {**done.to_dict(), "costs": costs.to_dict()}


def _warm(limits: DeviceLimits) -> float:
    """Seconds the process warm-up took now (0 after the first time)."""
    start = time.perf_counter()
    first = warm_up_info() is None
    warm_up(limits.sm_count)
    return time.perf_counter() - start if first else 0.0


def prime(spec: Spec, xp: Any = None) -> None:
    """Run the verification path once on tiny arrays of the spec's types, so that CuPy compiles
    (or loads from its disk cache) the elementwise kernels drawing, encoding and comparing use
    before any request is timed: on a new machine that compilation takes seconds, more than a
    timeout derived from a fast original allows. (``xp``: numpy runs the same path in tests.)"""
    cp = _cupy() if xp is None else xp
    draws = Draws(0, cp)
    dims = (4, 16)
    for arg in spec.all_args:
        if not arg.is_array:
            continue
        values = draw(arg, dims, draws, cp)
        guard = pattern(cp, guard_bytes())
        check([guarded_copy(arg.name, values, guard, cp)], guard, cp)  # the guard zones' check
        if not arg.is_output:
            continue
        tol = spec.tolerance_for(arg.dtype)
        for r in range(2):
            hole = poison(dims, arg.dtype, r, cp)
            compare(arg, values, values.copy(), tol, True, cp)  # identical
            compare(arg, hole, values, tol, True, cp)  # differs: the failure path
            compare(arg, hole, decode(values, arg.dtype, cp), tol, False, cp)  # float64 reference
        if arg.dtype.kind == "float":  # every value finite: the shortcut, passing and failing
            compare(arg, values, decode(values, arg.dtype, cp), tol, False, cp)
            compare(arg, values, decode(values, arg.dtype, cp) + 1.0, tol, False, cp)
    ordered = [a for a in spec.all_args if a.is_output and a.order]
    if ordered:  # the multiset comparisons' sorts and unique (compare_output)
        outs = {a.name: draw(a, dims, draws, cp) for a in spec.all_args if a.is_output}
        floats = {a.name: decode(outs[a.name], a.dtype, cp) for a in spec.all_args if a.is_output}
        for arg in ordered:
            tol = spec.tolerance_for(arg.dtype)
            compare_output(arg, outs, outs, tol, True, spec, cp)
            compare_output(arg, outs, floats, tol, False, spec, cp)
    if xp is None:
        cp.cuda.Device().synchronize()


def warm_up_info() -> dict[str, Any] | None:
    from ktx.measure import warmup

    return None if warmup._DONE is None else warmup._DONE.to_dict()


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
    if op == "warmup":
        # A fresh worker warms up before the harness times its first request against a timeout
        # derived from the original's cost: startup costs (CuPy's first kernels, clocks ramping)
        # belong to no candidate.
        limits = device_limits()
        warm_up(limits.sm_count)
        if isinstance(payload, Mapping) and payload.get("spec"):
            prime(_spec(str(payload["spec"])))
        return warm_up_info()
    raise WorkerFailure("crash", f"unknown request {op!r}", fatal=False)
