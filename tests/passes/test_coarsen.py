"""coarsen: COARSEN items per thread; grid divided; bounds checks kept."""

from __future__ import annotations

from passtest import apply, changed, code, remarks, suite_source

ITEM = """\
__global__ void k(float* x, const float* y, int n) {
  const int scale = 2;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  x[i] = y[i] * scale;
}
void launch(float* x, const float* y, int n) {
  k<<<(n + 127) / 128, 128>>>(x, y, n);
}
"""


def test_item_per_thread_kernel() -> None:
    t = apply(ITEM, "coarsen")
    assert [(k.name, k.values, k.default) for k in t.knobs] == [("COARSEN", (1, 2, 4, 8), 1)]
    assert changed(ITEM, code(t)) == [
        "-  const int i = blockIdx.x * blockDim.x + threadIdx.x;",
        "-  if (i >= n) return;",
        "-  x[i] = y[i] * scale;",
        "+#pragma unroll",
        "+  for (int ktx_k = 0; ktx_k < KTX_COARSEN; ++ktx_k) {",
        "+    const int i = (blockIdx.x * KTX_COARSEN + ktx_k) * blockDim.x + threadIdx.x;",
        "+    if (i >= n) continue;",
        "+    x[i] = y[i] * scale;",
        "+  }",
        "-  k<<<(n + 127) / 128, 128>>>(x, y, n);",
        "+  k<<<KTX_CDIV((n + 127) / 128, KTX_COARSEN), 128>>>(x, y, n);",
    ]
    launch = t.launch()
    assert launch is not None and launch.grid == ("ceil_div((n + 127) // 128, COARSEN)",)
    assert "k<<<((n + 127) / 128 + 3) / 4, 128>>>" in t.instantiate({"COARSEN": 4})


def test_grid_stride_kernels_change_only_the_launch() -> None:
    src = ITEM.replace(
        "  if (i >= n) return;\n  x[i] = y[i] * scale;\n",
        "  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += blockDim.x * gridDim.x)\n"
        "    x[j] = 0;\n",
    ).replace("  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n", "")
    t = apply(src, "coarsen")
    assert changed(src, code(t)) == [
        "-  k<<<(n + 127) / 128, 128>>>(x, y, n);",
        "+  k<<<KTX_CDIV((n + 127) / 128, KTX_COARSEN), 128>>>(x, y, n);",
    ]
    assert "grid-stride loop" in remarks(t)[0]


def test_suite_merge_attn_states() -> None:
    t = apply(suite_source("merge_attn_states"), "coarsen")
    assert [k.name for k in t.knobs] == ["COARSEN"]
    assert t.source.count("continue;") == 2
    assert "return;" not in code(t).split("launch_merge_attn_states")[0].split("merge_attn_states_kernel")[-1]


def test_refusals() -> None:
    sync = ITEM.replace("  x[i] = y[i] * scale;\n", "  __syncthreads();\n  x[i] = y[i] * scale;\n")
    assert "synchronises after its index (__syncthreads" in remarks(apply(sync, "coarsen"))[0]
    nested = ITEM.replace("  if (i >= n) return;\n", "  for (int j = 0; j < 2; ++j) if (j > i) return;\n")
    assert "a return inside a loop or switch" in remarks(apply(nested, "coarsen"))[0]
    reuse = ITEM.replace("y[i] * scale", "y[i] * blockIdx.x")
    assert "blockIdx.x is used beyond the global index" in remarks(apply(reuse, "coarsen"))[0]
    rows = remarks(apply(suite_source("silu_and_mul"), "coarsen"))
    assert "kernels with one row per block can use split" in rows[0]


def test_grid_spacing_puts_a_threads_items_a_grid_apart() -> None:
    t = apply(ITEM, "coarsen{spacing=grid}")
    assert "+    const int i = (blockIdx.x + ktx_k * gridDim.x) * blockDim.x + threadIdx.x;" in changed(
        ITEM, code(t)
    )
    launch = t.launch()
    assert launch is not None and launch.grid == ("ceil_div((n + 127) // 128, COARSEN)",)
    # every item once: blocks b < G' and k < COARSEN cover [0, COARSEN * G' * 128)
    for n, c in ((1, 2), (1000, 4), (128 * 8 + 1, 8)):
        (grid,), (block,), _ = launch.evaluate({"n": n, "COARSEN": c})
        items = sorted(
            (b + k * grid) * block + t for b in range(grid) for k in range(c) for t in range(block)
        )
        assert items == list(range(grid * c * block)) and grid * c * block >= n
    bad = apply(ITEM, "coarsen{spacing=warp}")
    assert "spacing=warp: expected block or grid" in remarks(bad)[0]
