"""Names the facts equate with ``blockDim.x`` beyond a 1-D launch's block (issue 22, item 3).

:func:`ktx.ir.block_alias.block_x_equalities`: the x component of every launch's 2-D block
(``dim3(WARP_SIZE, nwarps)``), and the ``BLOCK_DIM_X`` a kernel hands to a CUB block collective.
They are read as ``blockDim.x`` by the index analysis (so ``col += WARP_SIZE`` is a block-stride
loop) but are kept apart from :attr:`KernelIndex.block_aliases`, which block-size rewrites as the
block size. Also :func:`ktx.ir.facts.elements.nothing_to_pack`, the remark of a kernel that gives
vectorize no site.
"""

from __future__ import annotations

import doctest
import importlib

import pytest
from ktx.ir import parse
from ktx.ir.affine import kernel_index
from ktx.ir.block_alias import block_x_equalities, cub_block_sizes
from ktx.ir.facts.elements import nothing_to_pack

WARP_ROWS = """\
#define WARP_SIZE 32
__global__ void k(float* __restrict__ y, const float* __restrict__ x, int n, int rows) {
  const int row = blockIdx.x * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  for (int c = threadIdx.x; c < n; c += WARP_SIZE) y[row * n + c] = x[row * n + c];
}
"""


def _loop_strides(src: str) -> list[str | None]:
    m = parse(src)
    ix = kernel_index(m, m.kernel())
    shapes = [ix.loop_shape(lp) for lp in m.loops_in(m.kernel())]
    return [s.stride if s is not None else None for s in shapes]


@pytest.mark.parametrize(
    "launch",
    [
        "k<<<(rows + 3) / 4, dim3(WARP_SIZE, 4)>>>(y, x, n, rows);",
        "const dim3 b(WARP_SIZE, 4, 1); k<<<(rows + 3) / 4, b, 0, s>>>(y, x, n, rows);",
        "k<<<(rows + 3) / 4, {WARP_SIZE, 4, 1}>>>(y, x, n, rows);",
    ],
)
def test_the_x_of_every_2d_block_is_blockdim_x(launch: str) -> None:
    src = WARP_ROWS + f"void go(float* y, const float* x, int n, int rows, cudaStream_t s) {{ {launch} }}\n"
    m = parse(src)
    ix = kernel_index(m, m.kernel())
    assert list(ix.block_x_equal) == ["WARP_SIZE"] and ix.block_aliases == {}
    assert _loop_strides(src) == ["block"]
    assert [a.name for a in m.facts().launch.block_x_equal] == ["WARP_SIZE"]


def test_no_equality_where_launches_disagree_or_hide_the_block() -> None:
    two = (
        "void go(float* y, const float* x, int n, int rows) {\n"
        "  k<<<rows, dim3(WARP_SIZE, 4)>>>(y, x, n, rows);\n"
        "  k<<<rows, dim3(64, 2)>>>(y, x, n, rows);\n}\n"
    )
    # a step of 32 with no block fact is a warp's stride: vectorize refuses it from threadIdx.x
    assert _loop_strides(WARP_ROWS + two) == ["warp"]
    hidden = "void go(float* y, const float* x, int n, int rows, dim3 b) { k<<<rows, b>>>(y, x, n, rows); }\n"
    assert _loop_strides(WARP_ROWS + hidden) == ["warp"]
    assert _loop_strides(WARP_ROWS) == ["warp"]  # no launch: nothing says what the block is


def test_a_template_block_size_in_2d_blocks_follows_each_launch() -> None:
    src = """\
template <int BS>
__global__ void k(float* y, int n) {
  for (int c = threadIdx.x; c < n; c += BS) y[blockIdx.x * n + c] = 0.f;
}
void go(float* y, int n, int r) {
  if (n < 512) k<32><<<r, dim3(32, 4)>>>(y, n);
  else k<64><<<r, dim3(64, 2)>>>(y, n);
}
"""
    m = parse(src)
    eq = kernel_index(m, m.kernel()).block_x_equal
    assert [(a.name, a.kind) for a in eq.values()] == [("BS", "template")]
    assert _loop_strides(src) == ["block"]


def test_cub_block_dim_x_is_the_kernels_contract() -> None:
    src = """\
template <typename T, int THREADS, int ITEMS>
__global__ void k(T* y, int n) {
  typedef bnb_cub::BlockLoad<T, THREADS, ITEMS> Load;
  for (int i = threadIdx.x; i < n; i += THREADS) y[blockIdx.x * n + i] = T(0);
}
"""
    m = parse(src)
    assert [(a.name, a.kind) for a in cub_block_sizes(m, m.kernel(), {}).values()] == [("THREADS", "cub")]
    assert _loop_strides(src) == ["block"]


@pytest.mark.parametrize(
    "typedef",
    [
        "typedef mylib::BlockReduce<T, THREADS> R;",  # not CUB: promises nothing
        "typedef cub::WarpReduce<T, THREADS> R;",  # a warp collective: the block may be larger
        "typedef cub::BlockReduce<T, 128> R;",  # a literal: says nothing of the name the loop reads
    ],
)
def test_other_collectives_give_no_equality(typedef: str) -> None:
    src = f"""\
template <typename T, int THREADS>
__global__ void k(T* y, int n) {{
  {typedef}
  for (int i = threadIdx.x; i < n; i += THREADS) y[blockIdx.x * n + i] = T(0);
}}
"""
    m = parse(src)
    assert block_x_equalities(m, m.kernel(), {}) == {}
    assert _loop_strides(src) == ["other"]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4; y[i] = x[i];", "scales the thread index by 4"),
        (
            "int row = blockIdx.x; int id = threadIdx.x; y[row * 8 + id] = x[id];",
            "leaves out blockIdx.x * blockDim.x",
        ),
        (
            "int i = blockIdx.x * blockDim.y + threadIdx.y; y[i] = x[i];",
            "follows threadIdx.y, not threadIdx.x",
        ),
        ("y[0] = x[0];", "no thread index declared at the top"),
        ("helper(y, x, 16);", "its loops are in the __device__ function helper (line 1, loop at line 2)"),
    ],
)
def test_a_kernel_with_nothing_to_pack_says_why_and_where(body: str, says: str) -> None:
    src = (
        "__device__ void helper(float* y, const float* x, int n) {\n"
        "  for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = x[i];\n}\n"
        f"__global__ void k(float* y, const float* x) {{\n  {body}\n}}\n"
    )
    m = parse(src)
    why, node = nothing_to_pack(m, m.kernel())
    assert says in why
    assert node.start_point[0] + 1 == 5 or "no thread index" in why  # the statement's own line


@pytest.mark.parametrize("name", ["ktx.ir.block_alias", "ktx.ir.facts.elements"])
def test_docstring_examples(name: str) -> None:
    assert doctest.testmod(importlib.import_module(name)).failed == 0


HEADER_ROWS = """\
#include "common.cuh"
__global__ void k(const float* __restrict__ x, float* __restrict__ y, int n) {
  for (int i = threadIdx.x; i < n; i += WARP_SIZE) y[blockIdx.x * n + i] = x[blockIdx.x * n + i];
}
"""


GO = "void go(const float* x, float* y, int n, int r"


@pytest.mark.parametrize(
    ("launcher", "stride"),
    [
        # WARP_SIZE comes from a header this file does not define: every launch passes it
        (GO + ") { const dim3 b(WARP_SIZE, 1, 1); k<<<r, b>>>(x, y, n); }", "block"),
        (GO + ") { k<<<r, WARP_SIZE>>>(x, y, n); }", "block"),
        # the launcher's own WARP_SIZE (a parameter, a local) is not the kernel's name
        (GO + ", int WARP_SIZE) { k<<<r, WARP_SIZE>>>(x, y, n); }", "other"),
        (GO + ") { int WARP_SIZE = 128; k<<<r, WARP_SIZE>>>(x, y, n); }", "other"),
    ],
)
def test_a_header_name_every_launch_passes_is_blockdim_x(launcher: str, stride: str) -> None:
    src = HEADER_ROWS + launcher + "\n"
    assert _loop_strides(src) == [stride]
    m = parse(src)
    kinds = [a.kind for a in m.facts().launch.block_x_equal]
    assert kinds == (["header"] if stride == "block" else [])
    assert m.facts().launch.block_aliases == ()  # block-size never rewrites a header's definition
