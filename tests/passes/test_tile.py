"""tile: strip-mining by TILE_<loop>, unrolled tile, stable loop labels."""

from __future__ import annotations

from passtest import apply, changed, code, remarks

SRC = """\
__global__ void k(float* x, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    x[i] = 2.f * x[i];
  }
}
"""


def test_strip_mine() -> None:
    t = apply(SRC, "tile{sizes=2|4}")
    assert [(k.name, k.values, k.default) for k in t.knobs] == [("TILE_L0", (1, 2, 4), 1)]
    assert changed(SRC, code(t)) == [
        "-  for (int i = threadIdx.x; i < n; i += blockDim.x) {",
        "-    x[i] = 2.f * x[i];",
        "+  for (int ktx_tile_L0 = threadIdx.x; ktx_tile_L0 < n; ktx_tile_L0 += blockDim.x * KTX_TILE_L0) {",
        "+#pragma unroll",
        "+    for (int ktx_j_L0 = 0; ktx_j_L0 < KTX_TILE_L0; ++ktx_j_L0) {",
        "+      const int i = ktx_tile_L0 + ktx_j_L0 * blockDim.x;",
        "+      if (!(i < n)) break;",
        "+      {",
        "+        x[i] = 2.f * x[i];",
        "+      }",
        "+    }",
    ]


def test_tile_then_unroll_uses_stable_labels() -> None:
    t = apply(SRC, "unroll,tile{unroll=false}")
    assert [k.name for k in t.knobs] == ["TILE_L0", "UNROLL_L0", "UNROLL_L0_1"]


def test_refusals() -> None:
    brk = SRC.replace("x[i] = 2.f * x[i];", "if (x[i] < 0) break;")
    assert remarks(apply(brk, "tile")) == ["L0: the body breaks out of the loop (line 3)"]
    bound = SRC.replace("x[i] = 2.f * x[i];", "n -= 1;")
    assert remarks(apply(bound, "tile")) == ["L0: the body assigns n, which the bound or the step reads"]
    index = SRC.replace("x[i] = 2.f * x[i];", "i += 1;")
    assert remarks(apply(index, "tile")) == ["L0: the body assigns the index i"]
    cond = SRC.replace("i < n;", "n > i;")
    assert remarks(apply(cond, "tile")) == ["L0: the condition is not i < bound"]
    full = SRC.replace("  for", "#pragma unroll\n  for")
    assert remarks(apply(full, "tile")) == [
        "L0: already fully unrolled by a bare #pragma unroll: nothing to tile"
    ]
