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


def test_a_callee_that_takes_its_lane_from_x_or_shuffles_through_a_macro_assumes_a_warp() -> None:
    # apex's cuWelfordMuSigma2 (layer_norm_cuda_kernel.cu): WARP_SHFL is a header's macro, and
    # the lane is (threadIdx.x + (1 << l)) & 31; its block is dim3(32, 4)
    src = """
__device__ void welford(float& v) {
  for (int l = 0; l <= 4; ++l) {
    int src = (threadIdx.x + (1 << l)) & 31;
    v += WARP_SHFL(v, src);
  }
}
__device__ void lanes_only(float* buf, float v) { buf[threadIdx.y * 32 + (threadIdx.x % 32)] = v; }
__global__ void by_macro(float* y) { float v = y[threadIdx.x]; welford(v); y[threadIdx.y] = v; }
__global__ void by_lane(float* y) { lanes_only(y, y[threadIdx.x]); }
"""
    module = parse(src)
    fns = {f.name: f for f in module.functions}
    assert assumes_warp_x(module, fns["by_macro"]) == "the kernel shuffles across the lanes of a warp along x"
    assert assumes_warp_x(module, fns["by_lane"]) == (
        "the lane is `threadIdx.x % 32` in lanes_only() at line 8: it assumes x is one warp"
    )


def test_ceil_divide_literals_round_up_or_refuse() -> None:
    from ktx.ir.facts.constants import ceil_divide_literals
    from ktx.ir.syntax import walk

    module = parse(
        "void f(int n) { int a = (n + 255) / 256; int b = (n + 256 - 1) / 256; int c = (n - 1) / 256 + 1;"
        " int d = n / 256; int e = (n + 255) / 256 + 256; }"
    )
    inits = [x for x in walk(module.tree.root_node) if x.type == "init_declarator"]
    values = [x.child_by_field_name("value") for x in inits]
    texts = []
    for v in values:
        assert v is not None
        found = ceil_divide_literals(module, [v], 256)
        texts.append(
            None
            if found is None
            else ([module.text(module.span(n.start_byte, n.end_byte)) for n in found[0]], len(found[1]))
        )
    assert texts == [(["256"], 1), (["256", "256"], 0), (["256"], 0), None, None]


def test_a_static_assert_of_another_kernel_does_not_narrow_a_template_parameter_of_the_same_name() -> None:
    # ggml's norm.cu: rms_norm_f32 asserts block_size == 1024 for itself; norm_f32's own
    # block_size is free. With the kernel's span as scope only its own asserts count.
    from ktx.ir.facts.constants import allowed_by_asserts

    m = parse(
        """
template <int block_size> __global__ void norm(float* y) { y[threadIdx.x] = block_size; }
template <int block_size> __global__ void rms(float* y) {
  static_assert(block_size == 1024, "unexpected block_size");
  y[threadIdx.x] = block_size;
}
static_assert(sizeof(float) == 4, "file scope");
"""
    )
    norm, rms = m.kernels
    values = (32, 256, 1024)
    assert allowed_by_asserts(m, "block_size", values, {}, norm.span) == (values, None)
    assert allowed_by_asserts(m, "block_size", values, {}, rms.span) == ((1024,), None)
    assert allowed_by_asserts(m, "block_size", values, {}) == ((1024,), None)  # no scope: file-wide
