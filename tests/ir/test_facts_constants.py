"""Facts of constants in the source that block-size asks (``ktx.ir.facts.constants``)."""

from __future__ import annotations

from ktx.ir import parse
from ktx.ir.facts.constants import assumes_warp_x

SRC = """
__device__ float lanes(float v) { return __shfl_xor_sync(0xffffffffu, v, 16); }
__global__ void shuffles(float* y) { y[threadIdx.y] = lanes(y[threadIdx.x]); }
__global__ void warp_word(float* y) {
  constexpr int warp_size = 32;
  y[threadIdx.y * warp_size + threadIdx.x] = 0.f;
}
__global__ __launch_bounds__(32) void neither(float* y) { y[threadIdx.y * blockDim.x + threadIdx.x] = 0.f; }
"""


def test_a_kernel_assumes_x_is_a_warp_when_it_shuffles_or_writes_32() -> None:
    module = parse(SRC)
    fns = {f.name: f for f in module.functions}
    assert assumes_warp_x(module, fns["shuffles"]) == "the kernel shuffles across the lanes of a warp along x"
    assert assumes_warp_x(module, fns["warp_word"]) == (
        "the kernel writes the warp size 32 (line 5): it assumes x is one warp"
    )
    # Only the body counts: a bound of 32 in the signature is not the kernel's own assumption.
    assert assumes_warp_x(module, fns["neither"]) is None
