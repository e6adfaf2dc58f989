"""rows-per-block: rows along threadIdx.y, grid / ROWS, constraints, refusals."""

from __future__ import annotations

from passtest import apply, remarks
from semantic import APPLIES, build, load, spec_dirs

SRC = """\
__global__ void k(float* __restrict__ y, const float* __restrict__ x, int d) {
  const long long row = blockIdx.x;
  for (int i = threadIdx.x; i < d; i += blockDim.x) y[row * d + i] = 2.f * x[row * d + i];
}

void launch(float* y, const float* x, int rows, int d) {
  dim3 grid(rows);
  dim3 block(d < 128 ? d : 128);
  k<<<grid, block>>>(y, x, d);
}
"""


def test_rows_stack_along_y() -> None:
    t = apply(SRC, "rows-per-block")
    assert [(k.name, k.values, k.default) for k in t.knobs] == [("ROWS", (1, 2, 4, 8, 16), 1)]
    assert t.space.constraints == ("(rows) % ROWS == 0", "(d if d < 128 else 128) * ROWS <= 1024")
    launch = t.launch()
    assert launch is not None and launch.grid == ("rows // ROWS",) and launch.block[1] == "ROWS"
    out = t.instantiate({"ROWS": 4})
    assert "const long long row = (blockIdx.x * 4 + threadIdx.y);" in out
    assert "dim3 grid((rows) / 4);" in out and "dim3 block(d < 128 ? d : 128, 4);" in out
    assert t.space.feasible({"ROWS": 4}, {"rows": 8, "d": 100})
    assert not t.space.feasible({"ROWS": 16}, {"rows": 8, "d": 100})
    assert not t.space.feasible({"ROWS": 16}, {"rows": 32, "d": 1000})


def test_spec_mapping_and_launch_bounds() -> None:
    t = build(load("act_and_mul_scalar"), "rows-per-block")
    assert t.space.constraints == ("(tokens) % ROWS == 0", "(min(d, 1024)) * ROWS <= 1024")
    bounded = SRC.replace("__global__ void k", "__global__ void __launch_bounds__(128) k")
    assert "__launch_bounds__(512)" in apply(bounded, "rows-per-block").instantiate({"ROWS": 4})


def test_shuffles_need_whole_warps() -> None:
    src = SRC.replace("2.f * x[row * d + i];", "__shfl_xor_sync(0xffffffffu, x[row * d + i], 1);")
    t = apply(src, "rows-per-block")
    assert "ROWS == 1 or (d if d < 128 else 128) % 32 == 0" in t.space.constraints


def test_refusals() -> None:
    shared = SRC.replace("  const long long", "  __shared__ float tmp[32];\n  const long long")
    assert remarks(apply(shared, "rows-per-block")) == [
        "k: the kernel uses shared memory (tmp), which the rows of a block would share"
    ]
    two_d = SRC.replace("threadIdx.x; i < d", "threadIdx.x + threadIdx.y; i < d")
    assert remarks(apply(two_d, "rows-per-block")) == [
        "k: the kernel reads threadIdx.y: its blocks are already more than one row"
    ]
    stride = SRC.replace(
        "const long long row = blockIdx.x;", "for (long long row = blockIdx.x; row < 9; row += gridDim.x)"
    )
    assert "gridDim" in remarks(apply(stride, "rows-per-block"))[0]
    flat = "__global__ void k(float* y) { y[threadIdx.x] = 0.f; }\n"
    assert "never reads blockIdx.x" in remarks(apply(flat, "rows-per-block"))[0]


def test_applies_where_pinned() -> None:
    found = {p.name for p in spec_dirs() if build(load(p.name), "rows-per-block").knobs}
    assert found == APPLIES["rows-per-block"]


THREE = """\
__global__ void k(float* __restrict__ y, const float* __restrict__ x, int d) {
  const int row = blockIdx.x;
  for (int i = threadIdx.x; i < d; i += 32) y[row * d + i] = 2.f * x[row * d + i];
}

void launch(float* y, const float* x, int rows, int d) {
  const dim3 blocks_num(rows, 1, 1);
  const dim3 block_dims(32, 1, 1);
  k<<<blocks_num, block_dims>>>(y, x, d);
}
"""


def test_trailing_ones_are_a_1d_launch() -> None:
    """llama.cpp's ``dim3 block_dims(WARP_SIZE, 1, 1)``: the y of 1 becomes ROWS, the grid's 1s stay."""
    t = apply(THREE, "rows-per-block")
    assert [k.name for k in t.knobs] == ["ROWS"]
    launch = t.launch()
    assert launch is not None and launch.grid == ("rows // ROWS",) and launch.block == ("32", "ROWS")
    out = t.instantiate({"ROWS": 4})
    assert "const dim3 blocks_num((rows) / 4, 1, 1);" in out and "const dim3 block_dims(32, 4, 1);" in out
    assert "const int row = (blockIdx.x * 4 + threadIdx.y);" in out


def test_a_real_second_dimension_still_refuses() -> None:
    for old, new in (
        ("block_dims(32, 1, 1)", "block_dims(32, 2, 1)"),
        ("blocks_num(rows, 1, 1)", "blocks_num(rows, 2, 1)"),
    ):
        assert (
            "second grid or block dimension" in remarks(apply(THREE.replace(old, new), "rows-per-block"))[0]
        )


#: DeepSpeed top_k_gating_kernel: one token per block, reduced over the whole block through a
#: helper (from a header) that takes the cooperative-groups block.
BLOCK_GROUP = """\
namespace cg = cooperative_groups;
__global__ void gate(float* out, const float* logits, int n) {
  cg::thread_block tb = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(tb);
  float v = threadIdx.x < n ? logits[blockIdx.x * n + threadIdx.x] : 0.f;
  reduce::block<ROp::Add>(tb, warp, v);
  if (threadIdx.x == 0) out[blockIdx.x] = v;
}
void launch(float* out, const float* logits, int tokens, int n) { gate<<<tokens, 128>>>(out, logits, n); }
"""


def test_a_kernel_that_hands_its_block_to_a_collective_is_refused() -> None:
    """Session 9: ROWS = 2 and 4 reduced two and four tokens' logits together: 4 candidates
    failed verification."""
    t = apply(BLOCK_GROUP, "rows-per-block")
    assert not t.knobs
    assert any(
        "reduce::block<ROp::Add>() takes the whole block (tb = this_thread_block()) at line 6" in r
        for r in remarks(t, "skipped")
    )


def test_a_block_group_only_split_into_warps_keeps_the_knob() -> None:
    """The control: a kernel that only partitions its block into warps (each warp its own
    shuffles) still stacks rows."""
    t = apply(
        BLOCK_GROUP.replace("  reduce::block<ROp::Add>(tb, warp, v);\n", "  v += warp.shfl_down(v, 1);\n"),
        "rows-per-block",
    )
    assert [k.name for k in t.knobs] == ["ROWS"]


def test_a_called_device_function_that_synchronises_the_block_is_refused() -> None:
    src = """\
__device__ float block_sum(float v) { __syncthreads(); return v; }
__global__ void k(float* out, const float* x, int n) {
  float v = threadIdx.x < n ? x[blockIdx.x * n + threadIdx.x] : 0.f;
  v = block_sum(v);
  if (threadIdx.x == 0) out[blockIdx.x] = v;
}
void launch(float* out, const float* x, int rows, int n) { k<<<rows, 128>>>(out, x, n); }
"""
    t = apply(src, "rows-per-block")
    assert not t.knobs
    assert any(
        "block_sum(), which the kernel calls, synchronises the block at line 1" in r
        for r in remarks(t, "skipped")
    )
