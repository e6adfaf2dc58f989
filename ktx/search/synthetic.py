"""A SYNTHETIC recording: an analytic cost model of a memory-bound row kernel, for CPU tests.

Nothing in here was measured. The numbers come from a closed-form model of a SwiGLU-like kernel
(read ``2*d``, write ``d`` bf16 values per token) on an H200-like device, so that the search,
the resume logic, the dispatch table and the sampler comparison can be tested on machines
without a GPU. Every recording this module writes says ``"synthetic": true`` and names the model;
:mod:`ktx.search.recording` refuses to present it as measured. Real recordings (taken with
``scripts/gpu_tune.sh``) use the same file format.

The model (times in microseconds; ``bw`` in bytes/µs):

* knobs ``BLOCK`` (threads per block), ``VEC`` (elements per load), ``UNROLL`` (independent loads
  in flight per thread), ``SPLIT`` (blocks per row) and ``COARSEN`` (rows per block, only when
  ``SPLIT == 1``: a conditional knob);
* constraints ``d % (VEC * SPLIT) == 0`` and ``BLOCK * VEC * SPLIT <= 2 * d``;
* registers ``16 + 3 * VEC * UNROLL`` per thread; occupancy from the CUDA occupancy rules; a block
  whose registers exceed 64K is a ``resources`` failure;
* bandwidth by Little's law: ``min(peak, bytes in flight / latency)`` with ``peak = 4000`` B/ns
  and ``latency = 0.9`` µs, bytes in flight = resident threads x ``6 * VEC * UNROLL``;
* lane utilisation = useful elements / (iterations x BLOCK x VEC) per row slice;
* a per-iteration cost of 0.015 µs / UNROLL and a fixed 1.1 µs per kernel; graph time adds 0.6 µs,
  single-launch time 2.4 µs;
* two planted failures so failures are exercised: ``UNROLL == 4 and COARSEN == 4`` gives a
  ``wrong_result`` (as a real race would), ``VEC * UNROLL == 32 and SPLIT == 8`` a compile error;
* a deterministic +-1.5% ripple hashed from (config, shape), so the landscape is not smooth.

The original kernel is modelled as ``BLOCK = min(d // 8, 256), VEC = 8`` with the rest at 1.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from ktx.ir.expr import Expr

from ktx.measure.occupancy import DeviceLimits, occupancy
from ktx.measure.types import Measurement, Resources, Status, Timing, config_key
from ktx.search.space import Knob, Space

MODEL = "ktx.search.synthetic/1: Little's-law bandwidth model of a SwiGLU-like row kernel (not measured)"

PEAK_BYTES_PER_US = 4.0e6
LATENCY_US = 0.9
FIXED_US = 1.1
GRAPH_OVERHEAD_US = 0.6
SINGLE_OVERHEAD_US = 2.4
DEVICE = DeviceLimits(name="synthetic H200-like device", sm_count=132)


def space() -> Space:
    """The modelled template's knob space (360 configs before shape constraints)."""
    return Space(
        (
            Knob("BLOCK", (64, 128, 256, 512, 1024), 256, owner="block-size"),
            Knob("VEC", (1, 2, 4, 8), 8, owner="expose"),
            Knob("UNROLL", (1, 2, 4), 1, owner="unroll"),
            Knob("SPLIT", (1, 2, 4, 8), 1, owner="split"),
            Knob("COARSEN", (1, 2, 4), 1, Expr.parse("SPLIT == 1"), owner="coarsen"),
        ),
        (Expr.parse("d % (VEC * SPLIT) == 0"), Expr.parse("BLOCK * VEC * SPLIT <= 2 * d")),
    )


def _ripple(config: Mapping[str, int], shape: str) -> float:
    digest = hashlib.sha256(f"{config_key(config)}|{shape}".encode()).digest()
    return 1.0 + 0.03 * (int.from_bytes(digest[:4], "little") / 2**32 - 0.5)


def _timing(us: float) -> Timing:
    return Timing(us, us * 0.99, us * 1.01, us * 0.985, us * 1.03, us, 100)


def model(config: Mapping[str, int], tokens: int, d: int, kernel: str = "synthetic_silu") -> Measurement:
    """One modelled measurement; ``config == {}`` is the original kernel."""
    shape = f"tokens={tokens},d={d}"
    full = dict(config) or {
        "BLOCK": max(1, min(d // 8, 256)),
        "VEC": 8,
        "UNROLL": 1,
        "SPLIT": 1,
        "COARSEN": 1,
    }
    block, vec, unroll = full["BLOCK"], full["VEC"], full["UNROLL"]
    split, coarsen = full["SPLIT"], full["COARSEN"]
    base = Measurement(kernel, shape, dict(config), Status.OK, label="synthetic")
    if unroll == 4 and coarsen == 4:
        return replace(base, status=Status.WRONG_RESULT, message="synthetic: planted race")
    if vec * unroll == 32 and split == 8:
        return replace(base, status=Status.COMPILE_ERROR, message="synthetic: planted compile error")
    registers = 16 + 3 * vec * unroll
    occ = occupancy(DEVICE, threads=block, registers=registers, shared=0)
    blocks = -(-tokens // coarsen) * split
    resources = Resources(registers, 0, 0, 0, 1024, block, occ.blocks_per_sm, occ.occupancy, occ.limiter)
    if occ.blocks_per_sm == 0:
        return replace(
            base,
            status=Status.RESOURCES,
            message="synthetic: registers exceed the block limit",
            resources=resources,
        )
    resident = min(blocks, DEVICE.sm_count * occ.blocks_per_sm) * block
    in_flight = resident * 6 * vec * unroll
    bandwidth = min(PEAK_BYTES_PER_US, in_flight / LATENCY_US)
    slice_elems = d // split
    iterations = -(-slice_elems // (block * vec))
    utilisation = slice_elems / (iterations * block * vec)
    nbytes = tokens * 3 * d * 2
    waves = -(-blocks // (DEVICE.sm_count * occ.blocks_per_sm))
    kernel_us = FIXED_US + nbytes / bandwidth / utilisation + coarsen * iterations * 0.015 / unroll
    kernel_us += 0.05 * (waves - 1)
    kernel_us *= _ripple(config, shape)
    sol_us = nbytes / PEAK_BYTES_PER_US
    graph_us = kernel_us + GRAPH_OVERHEAD_US
    return replace(
        base,
        single=_timing(kernel_us + SINGLE_OVERHEAD_US),
        graph=_timing(graph_us),
        resources=resources,
        grid=(blocks,),
        block=(block,),
        bytes=nbytes,
        bandwidth_gbs=nbytes / graph_us / 1e3,
        sol_us=sol_us,
        sol_fraction=sol_us / graph_us,
    )


def recording(shapes: Iterable[tuple[int, int]], kernel: str = "synthetic_silu") -> dict[str, Any]:
    """A complete (exhaustive) synthetic recording over ``shapes`` = (tokens, d) pairs."""
    sp = space()
    measurements: list[dict[str, Any]] = []
    for tokens, d in shapes:
        env = {"tokens": tokens, "d": d}
        measurements.append(model({}, tokens, d, kernel).to_dict())
        for config in sp.feasible_configs(env):
            measurements.append(model(config, tokens, d, kernel).to_dict())
    return {
        "format": "ktx.recording/1",
        "kernel": kernel,
        "synthetic": True,
        "method": MODEL,
        "device": DEVICE.name,
        "toolkit": "none (synthetic)",
        "space": {"knobs": sp.describe(), "constraints": [c.text for c in sp.constraints]},
        "measurements": measurements,
    }


def shape_name(tokens: int, d: int) -> str:
    return f"tokens={tokens},d={d}"
