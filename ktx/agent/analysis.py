"""Analyze: what the kernel is (from the IR) and what bounds it (from measurements).

A planner decides from two kinds of evidence, kept apart here so that each can be checked:

* :class:`KernelFacts`, read from the source: loops and their shapes, reductions (from the
  facts layer, :meth:`ktx.ir.Module.facts`: the loops that fold a variable, and the
  shared-memory tree reductions), warp shuffles, vector or scalar memory accesses,
  transcendental math and whether it sits loop-invariant inside a loop. These are *hints*:
  whether a pass really applies is what the pass's own ``sites()`` says (the loop probes every
  pass before planning).
* :class:`ShapeAnalysis`, one per shape, from a :class:`~ktx.measure.types.Measurement`: time,
  fraction of speed-of-light, achieved bandwidth against the device's measured copy bandwidth,
  registers, occupancy, blocks launched against SMs, and the *bound*:

  - ``memory``: achieved bandwidth at least :data:`MEMORY_BOUND` of the copy bandwidth (or,
    with Nsight Compute, DRAM throughput that high): more bytes per second is not available, so
    only moving fewer bytes helps;
  - ``compute``: Nsight Compute's SM throughput at least :data:`COMPUTE_BOUND`, or without it a
    kernel with a known flop count of many flops per byte that is not memory-bound;
  - ``latency``: everything else: the GPU is neither moving bytes nor computing at its rate,
    because too few blocks are in flight (fewer blocks than SMs), occupancy is low, or the whole
    call is so short that launch and tail effects dominate.

The thresholds are deliberately round numbers; the classification is a planner's heuristic,
and the report shows the numbers it came from.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import tree_sitter as ts
from ktx.ir import Function, Module, parse, syntax
from ktx.ir.analysis import perf_constants
from ktx.ir.facts.online import VariancePair, online_pairs
from ktx.ir.facts.rowkeep import ScalarKeep, row_keeps
from ktx.ir.facts.tuning import tuning_params

from ktx.measure.types import Measurement

Bound = Literal["memory", "latency", "compute", "unknown"]

#: Achieved bandwidth / copy bandwidth from which a kernel counts as memory-bound.
MEMORY_BOUND = 0.6
#: Nsight Compute SM throughput (fraction of peak) from which a kernel counts as compute-bound.
COMPUTE_BOUND = 0.6
#: Flops per byte above which a kernel with no Nsight data is taken as compute-heavy.
INTENSITY = 10.0
#: Calls that cost tens of cycles on the SFU or in software (the ones worth hoisting or fast-math).
EXPENSIVE = frozenset(
    (
        *("expf", "exp", "exp2f", "exp10f", "logf", "log", "log2f", "log10f", "powf", "pow"),
        *("sqrtf", "sqrt", "rsqrtf", "rsqrt", "sinf", "cosf", "tanf", "sin", "cos", "tan"),
        *("tanhf", "tanh", "erff", "erf", "sincosf", "__expf", "__logf", "__powf", "__sinf"),
        *("__cosf", "__tanf", "fdividef", "__fdividef"),
    )
)
_VECTOR = re.compile(
    r"\b(?:u?int[24]|u?longlong2|float[24]|double2|half2|__half2|__nv_bfloat162|nv_bfloat162|"
    r"__nv_fp8x[24]_\w+)\b"
)
_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
_KEYWORDS = frozenset(
    (
        "const",
        "int",
        "float",
        "unsigned",
        "long",
        "short",
        "char",
        "bool",
        "auto",
        "if",
        "for",
        "while",
        "return",
    )
)


@dataclass(frozen=True)
class LoopFact:
    """One loop of the kernel, as the IR sees it."""

    label: str
    line: int
    header: str
    depth: int
    grid_stride: bool
    tree_reduction: bool
    unroll_pragma: str | None = None


@dataclass(frozen=True)
class KernelFacts:
    """What the source says about the kernel (hints for the planner; passes have the last word)."""

    kernel: str
    loops: tuple[LoopFact, ...] = ()
    shared_arrays: tuple[str, ...] = ()
    tree_reductions: tuple[str, ...] = ()  # labels of shared-memory tree-reduction loops
    reductions: tuple[str, ...] = ()  # "L0: sum acc": loops folding variables, from the facts layer
    #: "L0, L1: max m, sum s": a row max and the sum of exp(x - max) after it, one pass can fuse
    online_pairs: tuple[str, ...] = ()
    #: why a dependent max/sum pair cannot be fused (ktx.ir.facts.online), for the planner's reasons
    online_refusals: tuple[str, ...] = ()
    #: "in (kept), w (early)": loads a block's second row loop can take from registers (rowkeep)
    row_keep: tuple[str, ...] = ()
    shuffles: bool = False
    vector_types: tuple[str, ...] = ()
    scalar_accesses: tuple[str, ...] = ()  # pointers indexed element by element in the kernel
    math_calls: tuple[str, ...] = ()
    invariant_math: tuple[str, ...] = ()  # "L3: expf(scale)": expensive calls with loop-invariant args
    syncthreads: int = 0
    launch_bounds: str | None = None
    perf_constants: tuple[str, ...] = ()

    @property
    def scalar_only(self) -> bool:
        """Memory is touched element by element with no vector type anywhere in device code."""
        return bool(self.scalar_accesses) and not self.vector_types

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["scalar_only"] = self.scalar_only
        return data

    def text(self) -> str:
        lines = [f"kernel {self.kernel}"]
        if self.launch_bounds:
            lines.append(f"  __launch_bounds__({self.launch_bounds})")
        for lp in self.loops:
            tags = [
                t for t, on in (("grid-stride", lp.grid_stride), ("tree-reduction", lp.tree_reduction)) if on
            ]
            if lp.unroll_pragma:
                tags.append(f"#pragma {lp.unroll_pragma}")
            extra = f" [{', '.join(tags)}]" if tags else ""
            lines.append(f"  {'  ' * lp.depth}loop {lp.label} line {lp.line}: for ({lp.header}){extra}")
        facts = [
            ("shared arrays", ", ".join(self.shared_arrays)),
            ("shared-memory tree reductions", ", ".join(self.tree_reductions)),
            ("reductions", "; ".join(self.reductions)),
            ("online pairs (dependent row reductions one pass fuses)", "; ".join(self.online_pairs)),
            ("dependent pairs not fusable", "; ".join(self.online_refusals)),
            ("second row loop's loads registers can serve", ", ".join(self.row_keep)),
            ("warp shuffles", "yes" if self.shuffles else ""),
            ("vector types", ", ".join(self.vector_types)),
            ("element-wise pointer accesses", ", ".join(self.scalar_accesses)),
            ("expensive math", ", ".join(self.math_calls)),
            ("loop-invariant expensive math", "; ".join(self.invariant_math)),
            ("__syncthreads", str(self.syncthreads) if self.syncthreads else ""),
            ("performance constants", ", ".join(self.perf_constants)),
        ]
        lines += [f"  {name}: {value}" for name, value in facts if value]
        return "\n".join(lines)


def _device_functions(module: Module, kernel: Function) -> list[Function]:
    """Device functions the kernel reaches by name (transitively): where its math and loads live."""
    by_name: dict[str, list[Function]] = {}
    for fn in module.device_functions:
        by_name.setdefault(fn.name, []).append(fn)
    seen: set[str] = set()
    out: list[Function] = []
    todo = [module.text(kernel.body)]
    while todo:
        text = todo.pop()
        for name in set(_CALL.findall(text)) | set(re.findall(r"\.(\w+)\s*\(", text)):
            if name in by_name and name not in seen:
                seen.add(name)
                for fn in by_name[name]:
                    out.append(fn)
                    todo.append(module.text(fn.body))
    return out


def _callees(module: Module, node: ts.Node) -> Iterator[str]:
    for call in syntax.calls(module, node):
        callee = call.child_by_field_name("function")
        if callee is not None:
            yield syntax.text(module, callee)


def _assigned(text: str) -> set[str]:
    """Names a block of code writes (assignments, declarations, increments)."""
    names = set(re.findall(r"\b([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*(?:[-+*/%&|^]|<<|>>)?=(?!=)", text))
    for before, after in re.findall(r"(?:\+\+|--)\s*([A-Za-z_]\w*)|([A-Za-z_]\w*)\s*(?:\+\+|--)", text):
        names.add(before or after)
    # Declarations (``const float x``, ``Pack<T> in``): a name declared inside varies per iteration.
    names |= set(re.findall(r"\b[A-Za-z_][\w:]*(?:<[^<>;]*>)?\s*[*&]?\s+([A-Za-z_]\w*)\s*(?=[=;,\[(])", text))
    return names - _KEYWORDS


def _call_args(text: str, open_at: int) -> str:
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : i]
    return text[open_at + 1 :]


def kernel_facts(module: Module, kernel: str | None = None) -> KernelFacts:
    """Read :class:`KernelFacts` from a parsed module."""
    fn = module.kernel(kernel)
    facts = module.facts(fn)
    body = module.text(fn.body)
    helpers = _device_functions(module, fn)
    device_text = body + "\n" + "\n".join(module.text(h.body) for h in helpers)
    shared = tuple(a.name for a in module.shared_arrays if a.function == fn.name)
    trees = {t.loop.start_byte for t in facts.tree_reductions if t.halving}
    loops: list[LoopFact] = []
    invariant: list[str] = []
    for lp in module.loops_in(fn):
        label = f"L{lp.id}"
        header = "; ".join(
            module.text(s).rstrip(";").strip() if s is not None else "" for s in (lp.init, lp.cond, lp.step)
        )
        step = module.text(lp.step) if lp.step is not None else ""
        loop_body = module.text(lp.body)
        grid_stride = bool(re.search(r"\b(?:blockDim|gridDim)\b|num_threads|stride", step))
        tree = lp.span.start in trees
        pragma = lp.pragma.text if lp.pragma is not None else None
        loops.append(LoopFact(label, lp.span.line, header, lp.depth, grid_stride, tree, pragma))
        written = _assigned(loop_body) | ({lp.var} if lp.var else set())
        for m in _CALL.finditer(loop_body):
            if m.group(1) not in EXPENSIVE:
                continue
            args = _call_args(loop_body, m.end() - 1)
            used = set(_IDENT.findall(args)) - _KEYWORDS
            if used and not (used & written):
                invariant.append(f"{label}: {m.group(1)}({' '.join(args.split())})")
    pointers = {p.name for p in fn.params if p.is_pointer}
    pointers |= set(re.findall(r"\*\s*(?:const\s+)?(?:__restrict__\s+)?([A-Za-z_]\w*)\s*=", body))
    indexed = sorted(
        {n for n in re.findall(r"\b([A-Za-z_]\w*)\s*\[", body) if n in pointers and n not in shared}
    )
    calls = sorted({c for c in _CALL.findall(device_text) if c in EXPENSIVE})
    if re.search(r"(?<![\w.])(?:\d+\.?\d*f?|[A-Za-z_]\w*)\s*/\s*\(?\s*1\.0f?\s*\+", device_text):
        calls = sorted(set(calls) | {"division"})
    constants = tuple(
        f"{c.name}={c.value}"
        for c in perf_constants(module)
        if c.kernel in (None, fn.name) and c.value is not None
    )
    # A block size, width or items count the file's launches give no value (the spec binds it:
    # FlashInfer's VEC_SIZE, bitsandbytes' THREADS): expose decides with the spec's value.
    constants += tuple(
        f"{t.name}=(the spec's)"
        for t in tuning_params(module, fn)
        if t.kind == "template-int"
        and t.value is None
        and not any(c.startswith(f"{t.name}=") for c in constants)
    )
    folds = tuple(
        f"{lf.label}: {r.op} {', '.join(r.carried)}"
        for r in facts.reductions()
        if (lf := facts.loop_at(r.loop)) is not None
    )
    pairs, refusals = online_pairs(module, fn)
    online = tuple(
        f"{la.label}, {lb_.label}: "
        + (f"sum {p.m}, squared deviations {p.v}" if isinstance(p, VariancePair) else f"max {p.m}, sum {p.s}")
        for p in pairs
        if (la := facts.loop_at(p.maximum.loop)) is not None
        and (lb_ := facts.loop_at(p.total.loop)) is not None
    )
    keeps = row_keeps(module, fn)
    kept = (
        ()
        if isinstance(keeps, str)
        else tuple(
            dict.fromkeys(
                f"{ld.element if isinstance(k, ScalarKeep) else ld.variable} ({ld.kind})"  # type: ignore[union-attr]
                for k in keeps
                for ld in k.loads
            )
        )
    )
    device = [module.node(fn.body), *(module.node(h.body) for h in helpers)]
    lb = fn.launch_bounds
    return KernelFacts(
        kernel=fn.name,
        loops=tuple(loops),
        shared_arrays=shared,
        tree_reductions=tuple(lp.label for lp in loops if lp.tree_reduction),
        reductions=folds,
        online_pairs=online,
        online_refusals=refusals,
        row_keep=kept,
        shuffles=any(name.startswith("__shfl") for node in device for name in _callees(module, node)),
        vector_types=tuple(sorted(set(_VECTOR.findall(device_text)))),
        scalar_accesses=tuple(indexed),
        math_calls=tuple(calls),
        invariant_math=tuple(dict.fromkeys(invariant)),
        syncthreads=sum(1 for _ in syntax.calls(module, module.node(fn.body), {"__syncthreads"})),
        launch_bounds=None
        if lb is None
        else lb.max_threads + (f", {lb.min_blocks}" if lb.min_blocks else ""),
        perf_constants=constants,
    )


def facts_of_source(source: str, kernel: str | None = None, path: str | None = None) -> KernelFacts:
    return kernel_facts(parse(source, path), kernel)


# -- measurements ------------------------------------------------------------------------------


@dataclass(frozen=True)
class NcuMetrics:
    """Nsight Compute numbers for one shape (percentages of peak, 0..100)."""

    dram_throughput_pct: float | None = None
    sm_throughput_pct: float | None = None
    achieved_occupancy_pct: float | None = None
    stalls: tuple[tuple[str, float], ...] = ()  # top stall reasons, cycles per issued instruction
    raw: Mapping[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "dram_throughput_pct": self.dram_throughput_pct,
            "sm_throughput_pct": self.sm_throughput_pct,
            "achieved_occupancy_pct": self.achieved_occupancy_pct,
            "stalls": [[n, v] for n, v in self.stalls],
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> NcuMetrics:
        return NcuMetrics(
            data.get("dram_throughput_pct"),
            data.get("sm_throughput_pct"),
            data.get("achieved_occupancy_pct"),
            tuple((str(n), float(v)) for n, v in data.get("stalls", [])),
        )

    def text(self) -> str:
        parts = []
        for name, value in (
            ("DRAM throughput", self.dram_throughput_pct),
            ("SM throughput", self.sm_throughput_pct),
            ("achieved occupancy", self.achieved_occupancy_pct),
        ):
            if value is not None:
                parts.append(f"{name} {value:.0f}%")
        if self.stalls:
            parts.append("top stalls " + ", ".join(f"{n} {v:.2f}" for n, v in self.stalls))
        return "; ".join(parts)


@dataclass(frozen=True)
class Device:
    """The numbers of the device the analysis needs (from the harness, or defaults for replay)."""

    name: str = "unknown device"
    sm_count: int = 132
    copy_bandwidth_gbs: float = 0.0
    max_threads_per_sm: int = 2048


@dataclass(frozen=True)
class ShapeAnalysis:
    """One shape: the numbers and the bound they imply, with the reason in words."""

    shape: str
    status: str
    metric: str
    time_us: float | None = None
    sol_fraction: float | None = None
    bandwidth_gbs: float | None = None
    bandwidth_fraction: float | None = None
    registers: int | None = None
    occupancy: float | None = None
    limiter: str | None = None  # what bounds blocks per SM: warps, blocks, registers, shared
    blocks: int | None = None
    threads_per_block: int | None = None
    sms: int = 0
    waves: float | None = None
    flops_per_byte: float | None = None
    bound: Bound = "unknown"
    why: str = ""
    ncu: NcuMetrics | None = None

    @property
    def underfilled(self) -> bool:
        """Fewer blocks than SMs: some SMs get no work at all."""
        return self.blocks is not None and self.sms > 0 and self.blocks < self.sms

    def to_json(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if k != "ncu"}
        data["ncu"] = None if self.ncu is None else self.ncu.to_json()
        data["underfilled"] = self.underfilled
        return data

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> ShapeAnalysis:
        known = set(ShapeAnalysis.__dataclass_fields__)
        kwargs = {k: v for k, v in data.items() if k in known and k != "ncu"}
        ncu = data.get("ncu")
        return ShapeAnalysis(**kwargs, ncu=None if not ncu else NcuMetrics.from_json(ncu))

    def text(self) -> str:
        if self.status != "ok" or self.time_us is None:
            return f"{self.shape}: {self.status}"
        parts = [f"{self.shape}: {self.time_us:.2f} µs ({self.metric})"]
        if self.sol_fraction is not None:
            parts.append(f"{self.sol_fraction:.0%} of speed-of-light")
        if self.bandwidth_gbs is not None:
            parts.append(f"{self.bandwidth_gbs:.0f} GB/s")
        if self.registers is not None:
            parts.append(f"{self.registers} registers")
        if self.occupancy is not None:
            limit = f" (limited by {self.limiter})" if self.limiter else ""
            parts.append(f"occupancy {self.occupancy:.0%}{limit}")
        if self.blocks is not None:
            parts.append(f"{self.blocks} blocks of {self.threads_per_block} threads on {self.sms} SMs")
        parts.append(f"-> {self.bound}-bound ({self.why})")
        line = ", ".join(parts)
        if self.ncu is not None and self.ncu.text():
            line += f"; ncu: {self.ncu.text()}"
        return line


def _objective(m: Measurement, metric: str) -> float | None:
    first, second = (m.graph_us, m.single_us) if metric == "graph" else (m.single_us, m.graph_us)
    value = first if first is not None else second
    return value if value is not None and math.isfinite(value) and value > 0 else None


def classify(
    bandwidth_fraction: float | None,
    blocks: int | None,
    sms: int,
    occupancy: float | None,
    time_us: float | None,
    flops_per_byte: float | None,
    ncu: NcuMetrics | None = None,
) -> tuple[Bound, str]:
    """The bound and the reason, from the numbers (see the module docstring for the rules)."""
    if (
        ncu is not None
        and ncu.dram_throughput_pct is not None
        and ncu.dram_throughput_pct >= 100 * MEMORY_BOUND
    ):
        return "memory", f"DRAM throughput {ncu.dram_throughput_pct:.0f}% of peak (Nsight Compute)"
    if bandwidth_fraction is not None and bandwidth_fraction >= MEMORY_BOUND:
        return "memory", f"{bandwidth_fraction:.0%} of the copy bandwidth"
    if ncu is not None and ncu.sm_throughput_pct is not None and ncu.sm_throughput_pct >= 100 * COMPUTE_BOUND:
        return "compute", f"SM throughput {ncu.sm_throughput_pct:.0f}% of peak (Nsight Compute)"
    if flops_per_byte is not None and flops_per_byte >= INTENSITY:
        return "compute", f"{flops_per_byte:.0f} flops per byte and not memory-bound"
    if time_us is None:
        return "unknown", "no time"
    reasons = []
    if blocks is not None and sms and blocks < sms:
        reasons.append(f"{blocks} blocks for {sms} SMs")
    if occupancy is not None and occupancy < 0.25:
        reasons.append(f"occupancy {occupancy:.0%}")
    if bandwidth_fraction is not None:
        reasons.append(f"only {bandwidth_fraction:.0%} of the copy bandwidth")
    if time_us < 5.0:
        reasons.append(f"a {time_us:.1f} µs call")
    return "latency", ", ".join(reasons) or "neither memory nor compute is saturated"


def analyze_measurement(
    m: Measurement, metric: str, device: Device, ncu: NcuMetrics | None = None
) -> ShapeAnalysis:
    """One shape's :class:`ShapeAnalysis` from its measurement at the objective's metric."""
    if not m.ok:
        return ShapeAnalysis(
            m.shape, m.status.value, metric, why=m.message[:200], sms=device.sm_count, ncu=ncu
        )
    t = _objective(m, metric)
    sol = None if m.sol_us is None or t is None else m.sol_us / t
    bw = None if m.bytes is None or t is None else m.bytes / t / 1e3
    if bw is None:
        bw = m.bandwidth_gbs
    bw_fraction = bw / device.copy_bandwidth_gbs if bw is not None and device.copy_bandwidth_gbs > 0 else sol
    blocks = math.prod(m.grid) if m.grid else None
    threads = math.prod(m.block) if m.block else None
    r = m.resources
    waves = None
    if blocks is not None and r is not None and r.blocks_per_sm > 0:
        waves = blocks / (device.sm_count * r.blocks_per_sm)
    intensity = None if m.flops is None or not m.bytes else m.flops / m.bytes
    bound, why = classify(
        bw_fraction, blocks, device.sm_count, None if r is None else r.occupancy, t, intensity, ncu
    )
    return ShapeAnalysis(
        shape=m.shape,
        status="ok",
        metric=metric,
        time_us=t,
        sol_fraction=sol,
        bandwidth_gbs=bw,
        bandwidth_fraction=bw_fraction,
        registers=None if r is None else r.registers,
        occupancy=None if r is None else r.occupancy,
        limiter=None if r is None else r.limiter,
        blocks=blocks,
        threads_per_block=threads,
        sms=device.sm_count,
        waves=waves,
        flops_per_byte=intensity,
        bound=bound,
        why=why,
        ncu=ncu,
    )


@dataclass(frozen=True)
class Analysis:
    """Everything a planner is told about the kernel as it stands (original or best so far)."""

    kernel: str
    pipeline: str
    device: Device
    facts: KernelFacts
    shapes: tuple[ShapeAnalysis, ...]
    flags: tuple[str, ...] = ()
    tolerance: str = ""
    fast_math_budget: bool = False  # the spec's error budget leaves room for fast math

    @property
    def fast_math_flags(self) -> bool:
        """The kernel already builds with fast math (the spec's flags say so)."""
        return any(f in ("-use_fast_math", "--use_fast_math") for f in self.flags)

    @property
    def bound(self) -> Bound:
        """The most common bound over the shapes that ran (memory wins ties, then latency)."""
        counts: Counter[str] = Counter(s.bound for s in self.shapes if s.bound != "unknown")
        if not counts:
            return "unknown"
        order: tuple[Bound, ...] = ("memory", "latency", "compute")
        return max(order, key=lambda b: (counts.get(b, 0), -order.index(b)))

    def shapes_bound(self, bound: Bound) -> tuple[ShapeAnalysis, ...]:
        return tuple(s for s in self.shapes if s.bound == bound)

    @property
    def underfilled(self) -> tuple[ShapeAnalysis, ...]:
        """Latency-bound shapes that launch fewer blocks than there are SMs."""
        return tuple(s for s in self.shapes if s.bound == "latency" and s.underfilled)

    def to_json(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "pipeline": self.pipeline,
            "device": asdict(self.device),
            "bound": self.bound,
            "facts": self.facts.to_json(),
            "shapes": [s.to_json() for s in self.shapes],
            "flags": list(self.flags),
            "tolerance": self.tolerance,
            "fast_math_budget": self.fast_math_budget,
        }

    def text(self) -> str:
        lines = [
            f"device: {self.device.name}, {self.device.sm_count} SMs, copy bandwidth "
            + (f"{self.device.copy_bandwidth_gbs:.0f} GB/s" if self.device.copy_bandwidth_gbs else "unknown"),
            f"compile flags: {' '.join(self.flags) or 'none'}"
            + (" (already fast math)" if self.fast_math_flags else ""),
            f"error budget: {self.tolerance or 'default'}"
            + ("; room for fast math" if self.fast_math_budget else "; tight (fast math unlikely to pass)"),
            f"overall: {self.bound}-bound",
            "per shape:",
        ]
        lines += [f"  {s.text()}" for s in self.shapes]
        return "\n".join(lines)


def analyze(
    kernel: str,
    pipeline: str,
    facts: KernelFacts,
    measurements: Iterable[tuple[Measurement, str]],
    device: Device,
    *,
    flags: Sequence[str] = (),
    tolerance: str = "",
    fast_math_budget: bool = False,
    ncu: Mapping[str, NcuMetrics] | None = None,
) -> Analysis:
    """An :class:`Analysis` from facts and (measurement, metric) pairs, one per shape."""
    shapes = tuple(
        analyze_measurement(m, metric, device, (ncu or {}).get(m.shape)) for m, metric in measurements
    )
    return Analysis(kernel, pipeline, device, facts, shapes, tuple(flags), tolerance, fast_math_budget)
