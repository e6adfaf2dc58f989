"""vectorize refuses a loop whose body reads which thread runs it, other than through the loop
variable (:mod:`ktx.ir.facts.thread_values`).

Packs change which thread takes which element, so ``y[i] = x[i] + threadIdx.x`` or ``x[i + o]``
with ``o = threadIdx.x % 3`` would compute other numbers; before session 10 such loops were
packed. Values the threads sharing the loop agree on stay packable: ``threadIdx.y`` rows beside a
loop over ``threadIdx.x``, ``blockIdx`` in a block-stride loop, the warp's index in a lane loop.
"""

from __future__ import annotations

import pytest
from passtest import apply, remarks

BLOCK = """\
__global__ void k(const float* __restrict__ x, float* __restrict__ y, long n) {
  const long o = threadIdx.x % 3;
  const long r = threadIdx.y;
  for (long i = threadIdx.x; i < n; i += blockDim.x) {
    BODY
  }
}
void run(const float* x, float* y, long n) { k<<<1, dim3(128, 2)>>>(x, y, n); }
"""

GRID = BLOCK.replace(
    "long i = threadIdx.x; i < n; i += blockDim.x",
    "long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x",
)

WARP = """\
__global__ void k(const float* __restrict__ x, float* __restrict__ y, int rows, int n) {
  const int row = blockIdx.x * 4 + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  for (int i = lane; i < n; i += 32) {
    BODY
  }
}
void run(const float* x, float* y, int rows, int n) { k<<<(rows + 3) / 4, 128>>>(x, y, rows, n); }
"""


@pytest.mark.parametrize(
    ("source", "body", "read"),
    [
        (BLOCK, "y[i] = x[i] + threadIdx.x;", "threadIdx.x"),
        (BLOCK, "y[i] = x[i] * o;", "o"),
        (BLOCK, "y[i] = x[i + o];", "o"),
        (GRID, "y[i] = x[i] + blockIdx.x;", "blockIdx.x"),
        (WARP, "y[row * n + i] = x[row * n + i] + lane;", "lane"),
    ],
)
def test_a_body_reading_the_thread_is_refused(source: str, body: str, read: str) -> None:
    t = apply(source.replace("BODY", body), "vectorize")
    assert not t.knobs, remarks(t)
    assert any(f"the body reads `{read}`" in r and "differs between the threads" in r for r in remarks(t))


@pytest.mark.parametrize(
    ("source", "body"),
    [
        (BLOCK, "y[r * n + i] = x[r * n + i] * 2.f;"),  # the row on threadIdx.y: one per sharing group
        (BLOCK, "y[i] = x[i] + blockIdx.x;"),  # a block-stride loop: blockIdx is the block's own
        (BLOCK, "y[i] = x[i] + threadIdx.y;"),
        (WARP, "y[row * n + i] = x[row * n + i] * 2.f;"),  # the warp's row: threadIdx.x / 32
    ],
)
def test_values_the_sharing_threads_agree_on_stay_packable(source: str, body: str) -> None:
    t = apply(source.replace("BODY", body), "vectorize")
    assert [k.name for k in t.knobs] == ["VEC_L0"], remarks(t)
