"""Built-in passes, one module each; :data:`BUILTINS` is what the default registry loads.

| pass | knobs | what it rewrites |
| --- | --- | --- |
| expose | the constant's name | template ints, #define/constexpr, launch literals |
| block-size | BLOCK_X, BLOCK_Y | block dims, launcher, __launch_bounds__, mapping |
| launch-bounds | MIN_BLOCKS | __launch_bounds__'s second argument |
| unroll | UNROLL_<loop> | #pragma unroll per loop |
| coarsen | COARSEN | items per thread; grid / COARSEN |
| split | SPLIT | row loops over gridDim.y; grid gains y |
| tile | TILE_<loop> | strip-mined loop, unrolled tile |
| vectorize | VEC_<loop> | contiguous scalar accesses -> packed 2-16 byte accesses, scalar tail |
| cache-hints | CACHE_LD_<param>, CACHE_ST_<param> | __ldg / ld.global.nc / __ldcs loads, __stcs stores |
| warp-reduce | WARP_REDUCE_<loop> | shared-memory tree reduction -> shuffles + one shared step |
| hoist | none | loop-invariant pure expressions out of loops, expensive first |
| rows-per-block | ROWS | R rows per block along threadIdx.y; grid / R |
| fast-math | FAST_MATH | __expf & co., __fdividef or reciprocal-multiply, rsqrtf, under #if |
| cluster-rows | CLUSTER | one row's block reduction over a thread-block cluster (sm_90); grid gains y |
| early-loads | PREFETCH | loads of the loop after a reduction issued before it, into registers |
| row-owner | THREADS_PER_ROW | a thread-per-row kernel's rows to a warp or a block; shuffle reductions |
| loads-first | LOADS_FIRST | straight-line loads issued as soon as their addresses are known |
| row-registers | PACKS | row packs kept in registers between two loops; weight loaded early |
| online | ONLINE | a row max and the sum of exp(x - max) fused into one pass (running pair) |
| inline | none | a kernel that only calls a __device__ function takes its body in (run first) |
"""

from __future__ import annotations

from typing import Any

from ktx.passes.block_size import BlockSize
from ktx.passes.cache_hints import CacheHints
from ktx.passes.cluster_rows import ClusterRows
from ktx.passes.coarsen import Coarsen
from ktx.passes.early_loads import EarlyLoads
from ktx.passes.expose import Expose
from ktx.passes.fast_math import FastMath
from ktx.passes.hoist import Hoist
from ktx.passes.inline import Inline
from ktx.passes.launch_bounds import LaunchBounds
from ktx.passes.loads_first import LoadsFirst
from ktx.passes.online import Online
from ktx.passes.row_owner import RowOwner
from ktx.passes.row_registers import RowRegisters
from ktx.passes.rows_per_block import RowsPerBlock
from ktx.passes.split import Split
from ktx.passes.tile import Tile
from ktx.passes.unroll import Unroll
from ktx.passes.vectorize import Vectorize
from ktx.passes.warp_reduce import WarpReduce

from ktx.passbase import Pass

BUILTINS: tuple[type[Pass[Any]], ...] = (
    Expose,
    BlockSize,
    LaunchBounds,
    Unroll,
    Coarsen,
    Split,
    Tile,
    Vectorize,
    FastMath,
    CacheHints,
    WarpReduce,
    Hoist,
    RowsPerBlock,
    ClusterRows,
    EarlyLoads,
    LoadsFirst,
    RowOwner,
    Online,
    RowRegisters,
    Inline,
)

__all__ = [
    "BUILTINS",
    "BlockSize",
    "CacheHints",
    "ClusterRows",
    "Coarsen",
    "EarlyLoads",
    "Expose",
    "FastMath",
    "Hoist",
    "Inline",
    "LaunchBounds",
    "LoadsFirst",
    "Online",
    "RowOwner",
    "RowRegisters",
    "RowsPerBlock",
    "Split",
    "Tile",
    "Unroll",
    "Vectorize",
    "WarpReduce",
]
