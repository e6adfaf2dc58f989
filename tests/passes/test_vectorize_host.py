"""vectorize's index logic run on the CPU: every config against the original, element for element.

No GPU here, so the rewritten kernels are compiled as C++ for the host (``host/host_cuda.h``
stands in for the CUDA names they use) and their threads run one after another. That says
nothing about the GPU's memory model, but everything about which elements the scalar head, the
packs and the scalar tail take: pointers on and off pack boundaries (``peel``), rows of odd
length, sizes below a pack, pointers that are the same, disjoint or overlapping (``ktx::apart``),
and packs written before they are read. The GPU tests verify the same rewrites on a device.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from passtest import apply

HOST = Path(__file__).resolve().parent / "host"
GXX = shutil.which("g++") or shutil.which("c++")

#: grid-stride, no __restrict__: out and in may be the same, disjoint or overlapping
SHIFT = """\
__global__ void shift_add(float* out, const float* in, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    out[i] = in[i] + 1.f;
  }
}
"""
#: block-stride over a row through local pointers; o is written, then read back (no load); o2 is
#: updated in place, so an element taken twice (or never) shows
TWICE = """\
__global__ void twice(float* out, float* out2, const float* inp, int C) {
  const float* x = inp + blockIdx.x * C;
  float* o = out + blockIdx.x * C;
  float* o2 = out2 + blockIdx.x * C;
  for (int i = threadIdx.x; i < C; i += blockDim.x) {
    o[i] = x[i] * 2.f;
    o2[i] += o[i] + 1.f;
  }
}
"""
#: a thread's own row (odd C: every row starts elsewhere on a pack), a branch-written maximum
ROWMAX = """\
__global__ void rowmax(float* out, float* m_out, const float* inp, int N, int C) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < N) {
    const float* x = inp + row * C;
    float* o = out + row * C;
    float m = -1e30f;
    for (int c = 0; c < C; ++c) {
      if (x[c] > m) m = x[c];
    }
    for (int c = 0; c < C; ++c) {
      o[c] = x[c] - m;
    }
    m_out[row] = m;
  }
}
"""

DRIVER = r"""
#include "host_cuda.h"
#include <cstdio>
#include <cstring>
#include <vector>
namespace orig {
#include "orig.cu"
}
namespace cand {
#include "cand.cu"
}
static void launch(unsigned grid, unsigned block, auto&& body) {
  gridDim.x = grid; blockDim.x = block;
  for (unsigned b = 0; b < grid; ++b)
    for (unsigned t = 0; t < block; ++t) { blockIdx.x = b; threadIdx.x = t; body(); }
}
static void launch_xy(unsigned grid, unsigned bx, unsigned by, auto&& body) {
  gridDim.x = grid; blockDim.x = bx; blockDim.y = by;
  for (unsigned b = 0; b < grid; ++b)
    for (unsigned ty = 0; ty < by; ++ty)
      for (unsigned tx = 0; tx < bx; ++tx) { blockIdx.x = b; threadIdx.x = tx; threadIdx.y = ty; body(); }
}
static void fill(std::vector<float>& m) {
  for (size_t i = 0; i < m.size(); ++i) m[i] = float((i * 37) % 101) * 0.25f - 7.f;
}
int main() {
  int bad = 0, cases = 0;
  auto check = [&](const char* what, std::vector<float>& a, std::vector<float>& b, int p, int q, int r) {
    ++cases;
    if (std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) != 0) {
      ++bad; std::printf("%s differs: %d %d %d\n", what, p, q, r);
    }
  };
  KERNEL_CASES
  std::printf("cases=%d bad=%d\n", cases, bad);
  return bad != 0;
}
"""

CASES = {
    "rotary": r"""
  for (int d : {1, 3, 8, 13}) for (int nd : {0, 2, 6, 13}) for (int p = 0; p < 5; ++p)
  for (int il = 0; il < 2; ++il) {
    if (nd > d) continue;
    std::vector<float> m1(800), m2(800); fill(m1); fill(m2);
    auto run = [&](auto k, std::vector<float>& m) {
      // p: 0 x apart; 1 x is y (in place); 2 x one ahead of y; 3 x one behind; 4 cos is y
      float* y = m.data() + 200;
      const float* x = p == 1 ? y : p == 2 ? y + 1 : p == 3 ? y - 1 : m.data() + 400;
      const float* cs = p == 4 ? y : m.data() + 600;
      launch(2, 4, [&] { k(x, m.data() + 700, cs, y, nd, d); });
    };
    if (il) { run(orig::rotary<true>, m1); run(cand::rotary<true>, m2); }
    else { run(orig::rotary<false>, m1); run(cand::rotary<false>, m2); }
    check("rotary", m1, m2, d, nd, p * 2 + il);
  }""",
    "twin": r"""
  for (int n : {0, 1, 5, 8, 13, 33}) for (int a = 0; a < 4; ++a) {
    std::vector<float> m1(300), m2(300); fill(m1); fill(m2);
    auto run = [&](auto k, std::vector<float>& m) {
      float* out = m.data() + 150 + a; const float* in = m.data() + 8 + a;  // on and off packs
      // the launch's grid as written, one block more: the rewrite keeps it, so threads past the
      // last pack (and past the data) must do nothing
      launch((n + 3) / 4 + 1, 4, [&] { k(out, in, n); });
    };
    run(orig::twin<float>, m1); run(cand::twin<float>, m2); check("twin", m1, m2, n, a, 0);
  }""",
    "cond_index": r"""
  for (int d : {1, 2, 3, 8, 13}) for (int t = 0; t < 4; ++t) for (int p = 0; p < 7; ++p) {
    std::vector<float> m1(800), m2(800); fill(m1); fill(m2);
    auto run = [&](auto k, std::vector<float>& m) {
      // p: 0 all apart; 1 as is y (as[j] reads block 0's row); 2 as inside block 1's row; 3 bs the
      // last element of block 1's row; 4 as right after the rows (apart); 5 bs right before them;
      // 6 as[2] is the first element of block 2's row, as[0 .. d) is not (d = 2): only the
      // branch `i` overlaps, so a check of the branch `j` alone would pack wrongly
      float* y = m.data() + 200;
      const float* as = p == 1 ? y : p == 2 ? y + d + 1 : p == 4 ? y + 3 * d
                      : p == 6 ? y + 2 * d - 2 : m.data() + 600;
      const float* bs = p == 3 ? y + 2 * d - 1 : p == 5 ? y - 2 * d : m.data() + 700;
      launch(3, 4, [&] { k(m.data() + 4, as, bs, (t & 1) != 0, (t & 2) != 0, y, d); });
    };
    run(orig::cond_index, m1); run(cand::cond_index, m2); check("cond_index", m1, m2, d, t, p);
  }""",
    "concat": r"""
  for (int m : {1, 2, 5}) for (int n : {1, 3, 8, 13}) for (int a = 0; a < 4; ++a) {
    std::vector<float> m1(600), m2(600); fill(m1); fill(m2);
    auto run = [&](auto k, std::vector<float>& mem) {
      float* out = mem.data() + 300 + a;  // on and off pack boundaries
      launch(2, 4, [&] { k(mem.data() + 5, out, mem.data() + 100, m, n); });
    };
    run(orig::concat, m1); run(cand::concat, m2); check("concat", m1, m2, m, n, a);
  }""",
    "bias_mod": r"""
  for (int n : {0, 1, 5, 33, 67}) for (int h : {1, 3, 8}) for (int b = 0; b < 7; ++b) {
    std::vector<float> m1(1200), m2(1200); fill(m1); fill(m2);
    auto run = [&](auto k, std::vector<float>& m) {
      // b: 0 all apart; 1 in[i + 1] is out[i + 4] (read ahead of the writes, in + 1 on a pack
      // boundary like out); 2 bias inside out; 3 scale inside out; 4 bias right after out (apart);
      // 5 in[i + 1] right after out (apart); 6 bias is out
      float* out = m.data() + 400;
      const float* in = b == 1 ? out + 3 : b == 5 ? out + n - 1 : m.data() + 7;
      const float* bias = b == 2 ? out + n / 2 : b == 4 ? out + n : b == 6 ? out : m.data() + 200;
      const float* scale = b == 3 ? out + n / 3 : m.data() + 300;
      launch(2, 4, [&] { k(out, in, bias, scale, n, h); });
    };
    run(orig::bias_mod, m1); run(cand::bias_mod, m2); check("bias_mod", m1, m2, n, h, b);
  }""",
    "groups_from": r"""
  for (int group : {1, 3, 5, 8, 33}) for (int cut : {0, 1, 7}) for (int a = 0; a < 4; ++a) {
    std::vector<float> m1(400), m2(400); fill(m1); fill(m2);
    int ne = 3 * group - cut; if (ne < 0) ne = 0;
    auto run = [&](auto k, std::vector<float>& m) {
      float* x = m.data() + 8 + a; float* dst = m.data() + 200 + (a ? 4 - a : 0);  // on and off packs
      launch(3, 4, [&] { k(dst, x, group, ne); });
    };
    run(orig::groups_from<4>, m1); run(cand::groups_from<4>, m2); check("groups_from", m1, m2, group, cut, a);
  }""",
    "ldg_axpy": r"""
  for (int n : {0, 1, 3, 5, 33, 67}) for (int a = 0; a < 4; ++a) {
    std::vector<float> m1(400), m2(400); fill(m1); fill(m2);
    auto run = [&](auto k, std::vector<float>& m) {
      float* x = m.data() + 8 + a; float* y = m.data() + 200 + a;
      launch(3, 4, [&] { k(y, x, n); });
    };
    run(orig::ldg_axpy, m1); run(cand::ldg_axpy, m2); check("ldg_axpy", m1, m2, n, a, 0);
  }""",
    "warp_rows": r"""
  for (int n : {0, 1, 3, 5, 33, 67}) for (int rows : {1, 3, 4}) for (int a = 0; a < 4; ++a) {
    std::vector<float> m1(800), m2(800); fill(m1); fill(m2);
    auto run = [&](auto k, std::vector<float>& m) {
      float* in = m.data() + 8 + a; float* out = m.data() + 400 + a;  // rows of odd n start off a pack
      launch_xy((rows + 1) / 2, 4, 2, [&] { k(out, in, rows, n); });
    };
    run(orig::warp_rows, m1); run(cand::warp_rows, m2); check("warp_rows", m1, m2, n, rows, a);
  }""",
    "cub_rows": r"""
  for (int n : {0, 1, 3, 5, 33, 67}) for (int a = 0; a < 4; ++a) {
    std::vector<float> m1(800), m2(800); fill(m1); fill(m2);
    auto run = [&](auto k, std::vector<float>& m) {
      float* in = m.data() + 8 + a; float* out = m.data() + 400 + a;
      launch(3, 4, [&] { k(out, in, n); });
    };
    run(orig::cub_rows<4>, m1); run(cand::cub_rows<4>, m2); check("cub_rows", m1, m2, n, a, 0);
  }""",
    "halve_rows": r"""
  for (int n : {0, 1, 3, 5, 33, 67}) for (int a = 0; a < 4; ++a) for (int b = 0; b < 3; ++b) {
    std::vector<float> m1(800), m2(800); fill(m1); fill(m2);
    auto run = [&](auto k, auto* base, std::vector<float>& m) {
      // a: elements off a pack boundary; b: 0 disjoint, 1 in place, 2 overlapping by one element
      auto* in = base + 8 + a; auto* out = b == 0 ? base + 400 + a : b == 1 ? in : in + 1;
      launch(3, 4, [&] { k(out, in, n); });
      (void)m;
    };
    run(orig::halve_rows<float>, m1.data(), m1); run(cand::halve_rows<float>, m2.data(), m2);
    check("halve_rows<float>", m1, m2, n, a, b);
    auto* s1 = reinterpret_cast<short*>(m1.data()); auto* s2 = reinterpret_cast<short*>(m2.data());
    run(orig::halve_rows<short>, s1, m1); run(cand::halve_rows<short>, s2, m2);
    check("halve_rows<short>", m1, m2, n, a, b);
  }""",
    "groups": r"""
  for (int n : {0, 1, 3, 5, 33, 67}) for (int a = 0; a < 4; ++a) for (int b = 0; b < 3; ++b) {
    std::vector<float> m1(600), m2(600); fill(m1); fill(m2);
    auto run = [&](auto k, std::vector<float>& m) {
      // b: 0 disjoint, 1 in place, 2 overlapping by one element
      float* in = m.data() + 8 + a; float* out = b == 0 ? m.data() + 300 + a : b == 1 ? in : in + 1;
      launch(3, 4, [&] { k(out, in, n); });
    };
    run(orig::groups, m1); run(cand::groups, m2); check("groups", m1, m2, n, a, b);
  }""",
    "capped": r"""
  for (int cols : {0, 1, 5, 64, 67}) for (int ncols : {-1, 0, 3, 5, 66, 100}) for (int a = 0; a < 4; ++a) {
    std::vector<float> m1(400), m2(400); fill(m1); fill(m2);
    auto run = [&](auto k, std::vector<float>& m) {
      float* in = m.data() + 8 + a; float* out = m.data() + 200 + a;  // both on or both off a pack
      launch(1, 8, [&] { k(out, in, cols, ncols); });
    };
    run(orig::capped, m1); run(cand::capped, m2); check("capped", m1, m2, cols, ncols, a);
  }""",
    "workers": r"""
  for (int n : {0, 1, 3, 5, 33, 67}) for (int a = 0; a < 4; ++a) for (int b = 0; b < 3; ++b) {
    std::vector<float> m1(400), m2(400); fill(m1); fill(m2);
    auto run = [&](auto k, std::vector<float>& m) {
      float* in = m.data() + 8 + a; float* out = m.data() + 200 + b;  // on and off pack boundaries
      launch_xy(3, 2, 4, [&] { k(out, in, n); });
    };
    run(orig::workers, m1); run(cand::workers, m2); check("workers", m1, m2, n, a, b);
  }""",
    "blocks": r"""
  for (int n : {0, 1, 3, 5, 33, 67}) for (int a = 0; a < 4; ++a) {
    std::vector<float> m1(400), m2(400); fill(m1); fill(m2);
    auto run = [&](auto k, std::vector<float>& m) {
      float* in = m.data() + 8 + a; float* out = m.data() + 200;
      launch(3, 4, [&] { k(out, in, n); });
    };
    run(orig::blocks, m1); run(cand::blocks, m2); check("blocks", m1, m2, n, a, 0);
  }""",
    "again": r"""
  for (int n : {1, 5, 64, 67}) for (int a = 0; a < 4; ++a) for (int b = 0; b < 3; ++b) {
    std::vector<float> m1(400), m2(400); fill(m1); fill(m2);
    auto run = [&](auto k, std::vector<float>& m) {
      float* x = m.data() + 8 + a;  // b: 0 the same array, 1 disjoint, 2 overlapping by a pack
      float* out = b == 0 ? x : b == 1 ? m.data() + 200 + a : x + 4;
      launch(2, 4, [&] { k(out, x, n); });
    };
    run(orig::again, m1); run(cand::again, m2); check("again", m1, m2, n, a, b);
  }""",
    "guarded": r"""
  for (int n : {1, 5, 64, 67}) for (int a = 0; a < 4; ++a) {
    std::vector<float> m1(400), m2(400); fill(m1); fill(m2);
    auto run = [&](auto k, std::vector<float>& m) {
      float* o = m.data() + a; const float* x = m.data() + 100 + a; float* y = m.data() + 200 + a;
      launch(1, 4, [&] { k(o, x, y, m.data() + 300, n); });
    };
    run(orig::guarded, m1); run(cand::guarded, m2); check("guarded", m1, m2, n, a, 0);
  }""",
    "shift_add": r"""
  for (int n : {0, 1, 3, 5, 33, 1000}) for (int a = 0; a < 4; ++a) for (int b = -1; b < 8; ++b) {
    std::vector<float> m1(2300), m2(2300); fill(m1); fill(m2);
    auto run = [&](auto k, std::vector<float>& m) {
      // b: -1 in place; 0-3 disjoint, on or off in's pack offset; 4, 5 overlapping by one element
      // (never both aligned); 6, 7 overlapping by a whole pack (aligned alike: only apart stops it)
      float* in = m.data() + 64 + a;
      float* out = b < 0 ? in : b == 4 ? in + 1 : b == 5 ? in - 1 : b == 6 ? in + 4 : b == 7 ? in - 4
                 : m.data() + 1200 + b;
      launch(3, 8, [&] { k(out, in, n); });
    };
    run(orig::shift_add, m1); run(cand::shift_add, m2); check("shift_add", m1, m2, n, a, b);
  }""",
    "twice": r"""
  for (int C : {1, 3, 4, 7, 64, 67}) for (int a = 0; a < 4; ++a) for (int b = 0; b < 4; ++b) {
    std::vector<float> m1(3 * 70 * 3 + 64), m2(m1.size()); fill(m1); fill(m2);
    auto run = [&](auto k, std::vector<float>& m) {
      // b < 2: all three rows equally far off a pack boundary (the peeled path); b == 2: out2 is
      // out (one array through two pointers); b == 3: out is off by one more element
      const float* inp = m.data() + a; float* out = m.data() + 3 * 70 + 10 + a + (b == 3);
      float* out2 = b == 2 ? out : out - (b == 3) + 3 * 70 + 10;
      launch(3, 8, [&] { k(out, out2, inp, C); });
    };
    run(orig::twice, m1); run(cand::twice, m2); check("twice", m1, m2, C, a, b);
  }""",
    "rowmax": r"""
  for (int C : {1, 2, 5, 8, 33, 50}) for (int a = 0; a < 4; ++a) for (int N : {1, 5, 9}) {
    std::vector<float> m1(2 * 9 * 50 + 80), m2(m1.size()); fill(m1); fill(m2);
    auto run = [&](auto k, std::vector<float>& m) {
      const float* inp = m.data() + a; float* out = m.data() + 9 * 50 + 8; float* mo = out + 9 * 50 + 8;
      launch(2, 4, [&] { k(out, mo, inp, N, C); });
    };
    run(orig::rowmax, m1); run(cand::rowmax, m2); check("rowmax", m1, m2, C, a, N);
  }""",
}

#: found in review: each pointer is packed on its own, so one array through two pointers
#: (out == x here) must not be packed when the body reaches it through one after writing it
#: through the other: ktx::disjoint, not ktx::apart
AGAIN = """\
__global__ void again(float* out, float* x, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    out[i] = x[i] * 2.f;
    out[i] += x[i];
  }
}
"""
#: found in review: a written pointer also reached under a condition stays scalar (a pack is
#: stored at its end; the conditional access would read memory before that)
WRITTEN_THEN_GUARDED = """\
__global__ void guarded(float* __restrict__ o, const float* __restrict__ x, float* __restrict__ y,
                        float* __restrict__ mo, int n) {
  float m = -1e30f;
  for (int i = 0; i < n; ++i) {
    if (x[i] > 0.f) o[i] = 0.5f * x[i];
    y[i] = o[i] * 2.f;
    if (y[i] > m) m = y[i];
  }
  mo[threadIdx.x] = m;
}
"""

#: a worker per row of a block's warps (flashinfer's norm): start and step read from y and the
#: block, not the usual x pairs; the threads along x take the same elements
WORKERS = """\
__global__ void workers(float* __restrict__ out, const float* __restrict__ in, int n) {
  for (int i = blockIdx.x * blockDim.y + threadIdx.y; i < n; i += blockDim.y * gridDim.x) {
    out[i] = in[i] * 3.f + 1.f;
  }
}
"""
#: blocks walk the elements (row += gridDim.x), every thread of a block alike
BLOCKS = """\
__global__ void blocks(float* __restrict__ out, const float* __restrict__ in, int n) {
  for (int r = blockIdx.x; r < n; r += gridDim.x) out[r] = in[r] - 2.f;
}
"""

#: a second bound written as a break (llama.cpp-style `if (col >= ncols) break;`): packs stop
#: at the smaller of the two bounds, the scalar tail keeps the break
CAPPED = """\
__global__ void capped(float* __restrict__ out, const float* __restrict__ in, int cols, int ncols) {
  for (int col = threadIdx.x; col < cols; col += blockDim.x) {
    if (col >= ncols) break;
    out[col] = in[col] * 2.f + 1.f;
  }
}
"""

#: cooperative groups (DeepSpeed's slice masks): tb.thread_index().x and tb.group_index().x are
#: threadIdx.x and blockIdx.x when tb is this_thread_block(); rows of odd length per block
GROUPS = """\
namespace cg = cooperative_groups;
__global__ void groups(float* out, const float* in, int n) {
  cg::thread_block tb = cg::this_thread_block();
  const float* x = in + tb.group_index().x * n;
  float* o = out + blockIdx.x * n;
  for (int i = tb.thread_index().x; i < n; i += blockDim.x) {
    o[i] = x[i] * 0.5f - 3.f;
  }
}
"""

#: a template kernel with no template arguments given: the file's launcher is instantiated for
#: float and short, so T's packs are sized for 4 bytes (widths 1, 2, 4) and both types run them
TEMPLATED = """\
template <typename T>
__global__ void halve_rows(T* out, const T* in, int n) {
  const T* x = in + blockIdx.x * n;
  T* o = out + blockIdx.x * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) o[i] = x[i] / T(2) + T(1);
}
#ifdef __CUDACC__
template <typename T>
void launch_halve_rows(T* out, const T* in, int rows, int n) {
  halve_rows<T><<<rows, 128>>>(out, in, n);
}
template void launch_halve_rows<float>(float*, const float*, int, int);
template void launch_halve_rows<short>(short*, const short*, int, int);
#endif
"""

#: a warp per row under a 2-D block (llama.cpp's `col += WARP_SIZE`): every launch's block x is
#: WARP_SIZE, so the facts read it as blockDim.x (4 here, so that the host run stays small)
WARP_ROWS = """\
#define WARP_SIZE 4
__global__ void warp_rows(float* __restrict__ out, const float* __restrict__ in, int rows, int n) {
  const int row = blockIdx.x * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  for (int col = threadIdx.x; col < n; col += WARP_SIZE) out[row * n + col] = in[row * n + col] * 3.f - 1.f;
}
#ifdef __CUDACC__
void launch_warp_rows(float* out, const float* in, int rows, int n) {
  warp_rows<<<(rows + 1) / 2, dim3(WARP_SIZE, 2)>>>(out, in, rows, n);
}
#endif
"""

#: no launch in the file (bitsandbytes launches from another): THREADS is blockDim.x because the
#: kernel instantiates cub::BlockReduce with it (a stand-in cub on the host)
CUB_ROWS = """\
#ifndef __CUDACC__
namespace cub { template <typename T, int N> struct BlockReduce {}; }
#endif
template <int THREADS>
__global__ void cub_rows(float* __restrict__ out, const float* __restrict__ in, int n) {
  using BlockReduceT = cub::BlockReduce<float, THREADS>;
  const float* x = in + blockIdx.x * n;
  for (int i = threadIdx.x; i < n; i += THREADS) out[blockIdx.x * n + i] = x[i] * 0.5f + 2.f;
}
"""

#: a project's load macro: `*(x)` on the host (no __CUDA_ARCH__), `__ldg(x)` on the device
LDG_AXPY = """\
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 350
#define LDG(x) __ldg(x)
#else
#define LDG(x) (*(x))
#endif
__global__ void ldg_axpy(float* __restrict__ y, const float* __restrict__ x, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    y[i] = 0.5f * LDG(&x[i]) + y[i];
}
"""

#: ggml's group_norm: each block walks its own group from a block-uniform offset
#: (`start = blockIdx.x * group + threadIdx.x`), the last group cut short by ne
GROUPS_FROM = """\
template <int block_size>
__global__ void groups_from(float* __restrict__ dst, const float* __restrict__ x, int group, int ne) {
  const int start = blockIdx.x * group + threadIdx.x;
  const int end = blockIdx.x * group + group < ne ? blockIdx.x * group + group : ne;
  for (int j = start; j < end; j += block_size) dst[j] = x[j] * 2.f + 1.f;
}
#ifdef __CUDACC__
void launch_groups_from(float* dst, const float* x, int group, int ne, int groups) {
  groups_from<4><<<groups, 4>>>(dst, x, group, ne);
}
#endif
"""

#: FasterTransformer's add-bias kernels: no __restrict__, reads at other indices than the write
#: (a bias by `i % h`, a scale at [0], the next element): packs only where a run-time check finds
#: each read's range apart from the written elements
BIAS_MOD = """\
__global__ void bias_mod(float* out, const float* in, const float* bias, const float* scale, int n, int h) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    const int b = i % h;  // FasterTransformer's `int b_idx = id % n;`
    out[i] = in[i + 1] * scale[0] + bias[b];
  }
}
"""

#: ViT's class-token concat: the one store `out[id]` in both branches of an if/else (which row
#: runs decides the value, not whether element id is written), rows of odd length across packs
CONCAT = """\
__global__ void concat(const float* __restrict__ in, float* __restrict__ out, const float* __restrict__ cls,
                       int m, int n) {
  for (int id = blockIdx.x * blockDim.x + threadIdx.x; id < m * n; id += blockDim.x * gridDim.x) {
    int row = id / n;
    if (row == 0) {
      out[id] = cls[id % n] + 1.f;
    } else {
      out[id] = in[id - n] * 2.f;
    }
  }
}
"""

#: CTranslate2's dequantize epilogue: scales read at `t ? j : i` (a row's column or the block's
#: row), no __restrict__: packs only where the hull of both ranges is apart from the row written
COND_INDEX = """\
__global__ void cond_index(const float* c, const float* as, const float* bs, bool ta, bool tb, float* y,
                           int depth) {
  const int i = blockIdx.x;
  for (int j = threadIdx.x; j < depth; j += blockDim.x) {
    const int index = i * depth + j;
    y[index] = c[index] * as[ta ? j : i] + bs[tb ? j : i];
  }
}
"""

#: FasterTransformer's sigmoid_kernel and its half2 specialization: one launch names both, so
#: the grid is kept and each thread takes its pack (none past the last)
TWIN = """\
template <typename T>
__global__ void twin(T* __restrict__ out, const T* __restrict__ in, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * 2.f + 1.f;
}
template <>
__global__ void twin(double* __restrict__ out, const double* __restrict__ in, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * 3.0;
}
#ifdef __CUDACC__
void launch_twin(float* out, const float* in, int n) { twin<<<(n + 3) / 4, 4>>>(out, in, n); }
#endif
"""

#: CTranslate2's rotary: y[i] stored in every branch of an if / else if / else chain, x read at
#: i +- 1 and i +- middle (no __restrict__; in place when x is y)
ROTARY = """\
template <bool interleave>
__global__ void rotary(const float* x, const float* sin, const float* cos, float* y, long ndims, long depth) {
  const long middle = ndims / 2;
  x += blockIdx.x * depth;
  y += blockIdx.x * depth;
  sin += blockIdx.x * ndims;
  cos += blockIdx.x * ndims;
  for (long i = threadIdx.x; i < depth; i += blockDim.x) {
    if (i >= ndims)
      y[i] = x[i];
    else if (interleave)
      y[i] = x[i] * cos[i] + (i % 2 == 0 ? -x[i + 1] : x[i - 1]) * sin[i];
    else
      y[i] = x[i] * cos[i] + (i < middle ? -x[i + middle] : x[i - middle]) * sin[i];
  }
}
"""

KERNELS = {
    "rotary": ROTARY,
    "twin": TWIN,
    "cond_index": COND_INDEX,
    "concat": CONCAT,
    "bias_mod": BIAS_MOD,
    "groups_from": GROUPS_FROM,
    "ldg_axpy": LDG_AXPY,
    "warp_rows": WARP_ROWS,
    "cub_rows": CUB_ROWS,
    "halve_rows": TEMPLATED,
    "groups": GROUPS,
    "capped": CAPPED,
    "workers": WORKERS,
    "blocks": BLOCKS,
    "shift_add": SHIFT,
    "twice": TWICE,
    "rowmax": ROWMAX,
    "again": AGAIN,
    "guarded": WRITTEN_THEN_GUARDED,
}
PIPELINES = ("vectorize", "vectorize{peel=true}", "vectorize{tie=true,peel=true}")


@pytest.mark.skipif(GXX is None, reason="no host C++ compiler")
@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.slow
def test_every_width_takes_every_element_once_on_the_host(tmp_path: Path, name: str, pipeline: str) -> None:
    assert GXX is not None
    # a file with two definitions of one name (a specialization) names its kernel
    t = apply(KERNELS[name], pipeline, **({"kernel": name} if name in ("twin", "rotary") else {}))
    knobs = [k for k in t.knobs if k.name.startswith("VEC_")]
    assert knobs, [o.message for o in t.outcomes]
    (tmp_path / "orig.cu").write_text(KERNELS[name])
    (tmp_path / "main.cpp").write_text(DRIVER.replace("KERNEL_CASES", CASES[name]))
    shutil.copy(HOST / "host_cuda.h", tmp_path / "host_cuda.h")
    widths = sorted({v for k in knobs for v in k.values if v > 1})
    for width in widths:
        config = {k.name: (width if width in k.values else max(k.values)) for k in knobs}
        if t.space.violations(config, {}):
            continue
        (tmp_path / "cand.cu").write_text(t.instantiate(config))
        exe = tmp_path / f"run_{width}"
        built = subprocess.run([GXX, "-std=c++20", "-O1", "-o", str(exe), str(tmp_path / "main.cpp")],
                               capture_output=True, text=True)  # fmt: skip
        assert built.returncode == 0, built.stderr[-3000:]
        ran = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
        assert ran.returncode == 0 and "bad=0" in ran.stdout, (config, ran.stdout[-2000:])
