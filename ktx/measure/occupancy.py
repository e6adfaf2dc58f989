"""Device limits and the standard occupancy calculation.

Occupancy is computed here from the kernel's registers, shared memory and block size against
the device's per-SM limits (what the CUDA occupancy calculator does), so that the search can
reject or rank configurations from compile results alone, before any GPU time is spent.

>>> h100 = DeviceLimits()
>>> occ = occupancy(h100, threads=256, registers=32, shared=0)
>>> occ.blocks_per_sm, occ.occupancy, occ.limiter
(8, 1.0, 'warps')
>>> occupancy(h100, threads=1024, registers=128, shared=0).limiter
'registers'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class DeviceLimits:
    """Per-device numbers that bound a launch (defaults: an H100 SXM, compute capability 9.0)."""

    name: str = "NVIDIA H100 80GB HBM3"
    cc: str = "90"
    sm_count: int = 132
    warp_size: int = 32
    max_threads_per_block: int = 1024
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    regs_per_sm: int = 65536
    regs_per_block: int = 65536
    shared_per_sm: int = 233472
    shared_per_block: int = 49152  # without opting in
    shared_per_block_optin: int = 232448
    reserved_shared_per_block: int = 1024
    l2_bytes: int = 52428800
    max_block: tuple[int, int, int] = (1024, 1024, 64)
    max_grid: tuple[int, int, int] = (2147483647, 65535, 65535)
    total_memory: int = 0
    driver: str = ""
    runtime: str = ""
    copy_bandwidth_gbs: float = 0.0  # measured device-to-device, read + write

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["max_block"] = list(self.max_block)
        data["max_grid"] = list(self.max_grid)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DeviceLimits:
        known = set(cls.__dataclass_fields__)
        kwargs = {k: v for k, v in data.items() if k in known}
        for key in ("max_block", "max_grid"):
            if key in kwargs:
                kwargs[key] = tuple(kwargs[key])
        return cls(**kwargs)


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int
    active_warps: int
    max_warps: int
    occupancy: float
    limiter: str


#: Registers are allocated per warp in units of 256 (sm_50 and later).
REG_ALLOC_UNIT = 256
#: Shared memory is allocated per block in units of 128 bytes (sm_80 and later).
SHARED_ALLOC_UNIT = 128


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy(limits: DeviceLimits, threads: int, registers: int, shared: int) -> Occupancy:
    """Resident blocks per SM for a block of ``threads`` threads using ``registers`` per thread
    and ``shared`` bytes of shared memory (static + dynamic) per block."""
    max_warps = limits.max_threads_per_sm // limits.warp_size
    if threads <= 0:
        return Occupancy(0, 0, max_warps, 0.0, "threads")
    warps = -(-threads // limits.warp_size)
    bounds: dict[str, int] = {
        "warps": max_warps // warps,
        "blocks": limits.max_blocks_per_sm,
    }
    if registers > 0:
        per_warp = _round_up(registers * limits.warp_size, REG_ALLOC_UNIT)
        if per_warp * warps > limits.regs_per_block:
            bounds["registers"] = 0
        else:
            bounds["registers"] = (limits.regs_per_sm // per_warp) // warps
    per_block = _round_up(shared, SHARED_ALLOC_UNIT) + limits.reserved_shared_per_block
    if shared > limits.shared_per_block_optin:
        bounds["shared"] = 0
    else:
        bounds["shared"] = limits.shared_per_sm // per_block
    limiter = min(bounds, key=lambda k: (bounds[k], list(bounds).index(k)))
    blocks = max(0, bounds[limiter])
    active = blocks * warps
    return Occupancy(blocks, active, max_warps, active / max_warps, limiter)
