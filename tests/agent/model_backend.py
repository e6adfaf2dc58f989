"""A MODELLED GPU for the loop's CPU tests: Little's-law times for row kernels like silu_and_mul.

Nothing here is measured. Times follow bytes / min(peak, bytes in flight / latency), so that the
original kernel at one token (one block) is latency-bound and the planner's ``split`` helps it,
while thousands of tokens are memory-bound. Knobs it understands: SPLIT, BLOCK_X, BLOCK_MAX,
UNROLL_*, TILE_*; any other knob adds a deterministic ripple of a few percent. Planted failures:
``SPLIT == 32 and UNROLL_L0 == 8`` is a wrong result, ``BLOCK_X == 1024 and TILE_L0 == 8`` a
compile error, so that failures by type show up in logs and reports.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any

from ktx.measure.occupancy import DeviceLimits
from ktx.measure.types import Candidate, Measurement, Resources, Status, Timing, config_key
from ktx.spec import ShapePoint

PEAK = 4.0e6  # bytes per µs (4000 GB/s)
LATENCY = 0.9  # µs
LIMITS = DeviceLimits(name="MODELLED H200-like device", sm_count=132, copy_bandwidth_gbs=4000.0)


def _ripple(config: Mapping[str, int], shape: str) -> float:
    digest = hashlib.sha256(f"{config_key(config)}|{shape}".encode()).digest()
    return 1.0 + 0.02 * (int.from_bytes(digest[:4], "little") / 2**32 - 0.5)


def _timing(us: float) -> Timing:
    return Timing(us, us * 0.995, us * 1.005, us * 0.99, us * 1.02, us, 200)


class ModelBackend:
    """Implements the search's Backend protocol from the model above."""

    def __init__(self, kernel: str = "silu_and_mul") -> None:
        self.kernel = kernel
        self.limits = LIMITS
        self.fingerprint = "model:silu-like/1"
        self.calls = 0

    def measure(self, candidate: Candidate, shape: ShapePoint) -> Measurement:
        self.calls += 1
        c = dict(candidate.config)
        point = shape.as_dict()
        tokens, d = point["tokens"], point["d"]
        base = {"kernel": self.kernel, "shape": shape.name, "config": c, "label": candidate.label}
        if c.get("SPLIT") == 32 and c.get("UNROLL_L0") == 8:
            return Measurement(**base, status=Status.WRONG_RESULT, message="model: planted race")
        if c.get("BLOCK_X") == 1024 and c.get("TILE_L0") == 8:
            return Measurement(**base, status=Status.COMPILE_ERROR, message="model: planted compile error")
        threads = c.get("BLOCK_X") or max(1, min(d // 8, c.get("BLOCK_MAX") or 256))
        split = c.get("SPLIT", 1)
        unroll = max([1] + [v for k, v in c.items() if k.startswith(("UNROLL_", "TILE_"))])
        blocks = tokens * split
        per_sm = max(1, min(32, 2048 // threads))
        resident = min(blocks, LIMITS.sm_count * per_sm) * threads
        work_threads = min(resident, max(1, tokens * d // 8))
        in_flight = work_threads * 32 * (1.0 + 0.25 * math.log2(unroll))
        bandwidth = min(PEAK, in_flight / LATENCY)
        nbytes = tokens * d * 2 * 3
        kernel_us = 1.5 + nbytes / bandwidth + 0.02 * (threads / 256) * (d / 4096)
        kernel_us *= _ripple(c, shape.name)
        graph = kernel_us + 0.6
        sol = nbytes / PEAK
        occupancy = min(1.0, per_sm * threads / 2048)
        return Measurement(
            **base,
            status=Status.OK,
            single=_timing(kernel_us + 2.4),
            graph=_timing(graph),
            resources=Resources(24, 0, 0, 0, 1024, threads, per_sm, occupancy, "warps"),
            grid=(tokens, split),
            block=(threads,),
            bytes=nbytes,
            bandwidth_gbs=nbytes / graph / 1e3,
            sol_us=sol,
            sol_fraction=sol / graph,
            verified=(shape.name,),
        )


def recording_from_cache(cache_lines: list[dict[str, object]], kernel: str) -> dict[str, object]:
    """A ``ktx.recording/1`` document of every measurement a run's cache holds."""
    return {
        "format": "ktx.recording/1",
        "kernel": kernel,
        "synthetic": True,
        "method": "tests/agent/model_backend.py (modelled, not measured)",
        "device": LIMITS.name,
        "toolkit": "none (model)",
        "space": {"knobs": [], "constraints": []},
        "measurements": [row["measurement"] for row in cache_lines],
    }


class GenericBackend:
    """A MODELLED backend for any spec: time grows with bytes and with SMs left idle, plus a ripple
    hashed from (config, shape). Enough to drive every suite kernel through the loop on a CPU."""

    def __init__(self, spec: Any) -> None:
        self.spec = spec
        self.limits = DeviceLimits(name="MODELLED generic device", copy_bandwidth_gbs=3000.0)
        self.fingerprint = "model:generic/1"

    def measure(self, candidate: Candidate, shape: ShapePoint) -> Measurement:
        grid, block, shared = candidate.launch(self.spec, shape)  # the launch mapping must evaluate
        nbytes = self.spec.bytes_moved(self.spec.env(shape))
        blocks = math.prod(grid)
        idle = max(0, LIMITS.sm_count - blocks) / LIMITS.sm_count
        factor = (
            1.0 if not candidate.config else 0.8 + 0.4 * (_ripple(candidate.config, shape.name) - 0.99) / 0.02
        )
        us = 2.0 + nbytes / 3.0e6 * (1.0 + 3.0 * idle) * factor
        threads = math.prod(block)
        return Measurement(
            kernel=self.spec.name,
            shape=shape.name,
            config=dict(candidate.config),
            status=Status.OK,
            single=_timing(us + 2.0),
            graph=_timing(us),
            resources=Resources(32, 0, shared, 0, 1024, threads, 4, 0.5, "warps"),
            grid=grid,
            block=block,
            bytes=nbytes,
            bandwidth_gbs=nbytes / us / 1e3,
            sol_us=nbytes / 3.0e6,
            sol_fraction=nbytes / 3.0e6 / us,
        )
