"""split: a row's block-strided loops interleave over gridDim.y; reductions are refused."""

from __future__ import annotations

from passtest import apply, changed, code, remarks, suite_source

ROWS = """\
__global__ void k(float* out, const float* in, int d) {
  const float* row = in + blockIdx.x * d;
  for (int i = threadIdx.x; i < d; i += blockDim.x) out[blockIdx.x * d + i] = row[i] * 2.f;
}
void launch(float* out, const float* in, int rows, int d) {
  k<<<rows, 256>>>(out, in, d);
}
"""


def test_row_loops_interleave_over_grid_y() -> None:
    t = apply(ROWS, "split")
    assert [(k.name, k.values, k.default) for k in t.knobs] == [("SPLIT", (1, 2, 4, 8, 16, 32), 1)]
    assert changed(ROWS, code(t)) == [
        "-  for (int i = threadIdx.x; i < d; i += blockDim.x) out[blockIdx.x * d + i] = row[i] * 2.f;",
        "+  for (int i = blockIdx.y * blockDim.x + threadIdx.x; i < d; i += blockDim.x * gridDim.y) "
        "out[blockIdx.x * d + i] = row[i] * 2.f;",
        "-  k<<<rows, 256>>>(out, in, d);",
        "+  k<<<dim3(rows, KTX_SPLIT), 256>>>(out, in, d);",
    ]
    launch = t.launch()
    assert launch is not None and launch.grid == ("rows", "SPLIT")
    assert "k<<<dim3(rows, 16), 256>>>" in t.instantiate({"SPLIT": 16})


def test_silu_and_mul_pack_and_tail_loops() -> None:
    t = apply(suite_source("silu_and_mul"), "split")
    assert "row loops L0, L2 interleave over gridDim.y" in remarks(t)[0]
    assert "dim3 grid(num_tokens, KTX_SPLIT);" in t.source
    assert "for (int idx = num_packs * VEC + blockIdx.y * blockDim.x + threadIdx.x; idx < d;" in t.source


def test_norms_are_refused_because_the_row_is_reduced() -> None:
    t = apply(suite_source("rmsnorm"), "split")
    assert t.source == t.original
    assert remarks(t) == [
        "L0: loop L0 accumulates sum_sq across the row, and the kernel combines it across the block "
        "after the loop (__shfl_xor_sync at line 96): split over blocks, each block would reduce only "
        "part of the row",
        "L2: loop L2 accumulates sum_sq across the row, and the kernel combines it across the block "
        "after the loop (__shfl_xor_sync at line 96): split over blocks, each block would reduce only "
        "part of the row",
        "rmsnorm_kernel: not split: loop(s) L0, L2 cannot be split, and the row loops of a kernel are "
        "split together",
    ]
    assert apply(suite_source("fused_add_rmsnorm"), "split").knobs == ()


def test_other_refusals() -> None:
    store = ROWS.replace("  for (int i", "  if (threadIdx.x == 0) out[0] = 1.f;\n  for (int i")
    assert "writes memory outside its row loops" in remarks(apply(store, "split"))[0]
    sync = ROWS.replace("row[i] * 2.f;", "row[i] * 2.f;\n  __syncthreads();")
    assert "synchronises the block outside its row loops" in remarks(apply(sync, "split"))[0]
    used = ROWS.replace("blockIdx.x * d + i", "blockIdx.y * d + i")
    assert remarks(apply(used, "split")) == ["k: the kernel already uses blockIdx.y"]
    none = ROWS.replace("i += blockDim.x", "i += 256")
    assert "no row loop" in remarks(apply(none, "split"))[0]
