"""What is measured and what comes back: candidates and measurements, as plain data.

Everything here round-trips through JSON (``to_dict`` / ``from_dict``), because measurements
recorded on a GPU are replayed later by the search on a CPU (see :mod:`ktx.measure.replay`).
Failures are values (a :class:`Status` other than ``ok`` with a message), never exceptions:
a wrong or crashing candidate is recorded and the run goes on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from typing import Any

from ktx.ir.expr import Expr, Value

from ktx.spec import ShapePoint, Spec


class Status(str, Enum):
    """How a measurement ended. Only ``ok`` carries trustworthy times."""

    OK = "ok"
    COMPILE_ERROR = "compile_error"  # NVRTC and nvcc both refused the source
    RESOURCES = "resources"  # block, shared memory or registers beyond the device's limits
    LAUNCH_ERROR = "launch_error"  # the driver refused the launch (bad configuration)
    WRONG_RESULT = "wrong_result"  # ran, but outputs differ from the reference
    TIMEOUT = "timeout"  # did not finish in time: the worker was killed
    CRASH = "crash"  # faulted (illegal address, ...) or the worker died

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Candidate:
    """One concrete kernel to measure: source, which instantiation, how to launch it.

    ``grid``, ``block`` and ``shared`` are expressions over the spec's shape variables (and
    derived ``[vars]``) and the knob names in ``config``, whose values join the environment.
    ``name_expression`` may hold ``{expr}`` placeholders expanded per shape (e.g. a template
    argument that follows a shape variable).
    """

    source: str
    name_expression: str
    grid: tuple[str, ...]
    block: tuple[str, ...]
    shared: str = "0"
    flags: tuple[str, ...] = ()
    config: Mapping[str, int] = field(default_factory=dict)
    label: str = ""
    #: The template's constraints over shapes and knobs: odd-size verification skips the odd
    #: variants of a shape where they break (see :meth:`ktx.spec.Spec.odd_split`).
    constraints: tuple[str, ...] = ()

    def env(self, spec: Spec, point: ShapePoint) -> dict[str, Value]:
        return spec.env(point, self.config)

    def launch(self, spec: Spec, point: ShapePoint) -> tuple[tuple[int, ...], tuple[int, ...], int]:
        """(grid, block, dynamic shared bytes) at ``point``; raises KtxError on a bad expression."""
        env = self.env(spec, point)
        grid = tuple(Expr.parse(g).evaluate_int(env) for g in self.grid)
        block = tuple(Expr.parse(b).evaluate_int(env) for b in self.block)
        shared = Expr.parse(self.shared).evaluate_int(env)
        return grid, block, shared

    @property
    def config_key(self) -> str:
        return config_key(self.config)

    @property
    def digest(self) -> str:
        """A short hash of everything that makes this candidate what it is."""
        blob = json.dumps(self.to_dict(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["config"] = dict(self.config)
        data["grid"] = list(self.grid)
        data["block"] = list(self.block)
        data["flags"] = list(self.flags)
        if self.constraints:
            data["constraints"] = list(self.constraints)
        else:  # keeps the digests and cache keys of candidates without constraints as they were
            del data["constraints"]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Candidate:
        return cls(
            source=data["source"],
            name_expression=data["name_expression"],
            grid=tuple(data["grid"]),
            block=tuple(data["block"]),
            shared=data.get("shared", "0"),
            flags=tuple(data.get("flags", ())),
            config={str(k): int(v) for k, v in data.get("config", {}).items()},
            label=data.get("label", ""),
            constraints=tuple(str(c) for c in data.get("constraints", ())),
        )


def original_candidate(spec: Spec) -> Candidate:
    """The spec's own kernel, launched as the spec says: the baseline and default reference."""
    return Candidate(
        source=spec.source_text(),
        name_expression=spec.name_expression,
        grid=tuple(e.text for e in spec.launch.grid),
        block=tuple(e.text for e in spec.launch.block),
        shared=spec.launch.shared.text,
        flags=spec.flags,
        config={},
        label="original",
    )


def config_key(config: Mapping[str, int]) -> str:
    """Canonical text of a knob assignment (``{}`` for the original), used to key records."""
    return json.dumps({k: config[k] for k in sorted(config)}, separators=(",", ":"))


@dataclass(frozen=True)
class Timing:
    """Per-launch times in microseconds over ``n`` samples."""

    median_us: float
    p10_us: float
    p90_us: float
    min_us: float
    max_us: float
    mean_us: float
    n: int

    @classmethod
    def of(cls, samples_us: list[float]) -> Timing:
        if not samples_us:
            raise ValueError("no samples")
        s = sorted(samples_us)

        def pct(q: float) -> float:
            pos = q * (len(s) - 1)
            lo = int(pos)
            hi = min(lo + 1, len(s) - 1)
            return s[lo] + (s[hi] - s[lo]) * (pos - lo)

        return cls(pct(0.5), pct(0.1), pct(0.9), s[0], s[-1], sum(s) / len(s), len(s))

    @property
    def spread(self) -> float:
        """(p90 - p10) / median: the relative noise of this timing."""
        return (self.p90_us - self.p10_us) / self.median_us if self.median_us else 0.0


@dataclass(frozen=True)
class Resources:
    """What the compiled kernel uses, and the occupancy that follows on this device."""

    registers: int
    shared_static: int
    shared_dynamic: int
    local_bytes: int  # spills and local arrays, per thread
    max_threads_per_block: int  # the function's limit (registers can lower it below 1024)
    block_threads: int
    blocks_per_sm: int
    occupancy: float  # active warps / maximum warps per SM
    limiter: str  # what bounds blocks_per_sm: warps, blocks, registers, shared
    compiler: str = ""  # nvrtc | nvcc | nvrtc (dropped flags ...)


@dataclass(frozen=True)
class Measurement:
    """One candidate at one shape. Times are None unless ``status`` is ok (and timing ran)."""

    kernel: str
    shape: str
    config: Mapping[str, int]
    status: Status
    message: str = ""
    label: str = ""
    single: Timing | None = None  # one launch between events, L2 flushed before each
    graph: Timing | None = None  # per launch, inside a CUDA graph of many launches
    resources: Resources | None = None
    grid: tuple[int, ...] = ()
    block: tuple[int, ...] = ()
    bytes: int | None = None
    flops: int | None = None
    bandwidth_gbs: float | None = None  # bytes / time_us
    sol_us: float | None = None  # bytes / measured copy bandwidth
    sol_fraction: float | None = None  # sol_us / time_us
    max_abs_err: float | None = None
    rel_err: float | None = None
    verified: tuple[str, ...] = ()  # shapes verified (the shape itself and odd variants)
    odd_skipped: tuple[str, ...] = ()  # odd variants not verified: the config's constraints exclude them
    rounds: int = 0
    digest: str = ""

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @property
    def single_us(self) -> float | None:
        return None if self.single is None else self.single.median_us

    @property
    def graph_us(self) -> float | None:
        return None if self.graph is None else self.graph.median_us

    @property
    def time_us(self) -> float | None:
        """The objective: graph time when measured (what serving sees), else single launch."""
        return self.graph_us if self.graph_us is not None else self.single_us

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Status):
                value = value.value
            elif isinstance(value, Timing | Resources):
                value = asdict(value)
            elif isinstance(value, tuple):
                value = list(value)
            elif f.name == "config":
                value = dict(value)
            data[f.name] = value
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Measurement:
        known = {f.name for f in fields(cls)}
        kwargs: dict[str, Any] = {k: v for k, v in data.items() if k in known}
        kwargs["status"] = Status(data["status"])
        kwargs["config"] = {str(k): int(v) for k, v in data.get("config", {}).items()}
        for name in ("single", "graph"):
            if data.get(name) is not None:
                kwargs[name] = Timing(**data[name])
        if data.get("resources") is not None:
            kwargs["resources"] = Resources(**data["resources"])
        for name in ("grid", "block", "verified", "odd_skipped"):
            kwargs[name] = tuple(data.get(name, ()))
        return cls(**kwargs)

    @classmethod
    def failure(
        cls, spec: Spec, candidate: Candidate, shape: str, status: Status, message: str
    ) -> Measurement:
        return cls(
            kernel=spec.name,
            shape=shape,
            config=dict(candidate.config),
            status=status,
            message=message,
            label=candidate.label,
            digest=candidate.digest,
        )
