"""row-registers' index logic run on the CPU: a fused residual add with a stash, every PACKS.

No GPU here. The golden kernel ``tests/golden/row_registers/fused_stash.cu`` (the first loop
stores the sum in place of the residual and stashes it in shared memory, the second reads the
stash back) is compiled as C++20 for the host with ``host/host_cuda_threads.h``: a block's
threads are OS threads meeting at real barriers, so the reduction between the two loops runs as
on a device. Each PACKS (0 is the original) runs beside the original on rows whose pack count is
below, equal to and above ``threads x PACKS`` (the heads alone, the heads and the rest loop),
with small integer inputs so that the atomic sum is exact in any order; both outputs (the
normalised row and the residual) must match the original's bit for bit. It says nothing about
the GPU's memory model, everything about which packs the heads, the forwarded stash and the
prefetched loads take.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from passtest import ROOT, apply

HOST = Path(__file__).resolve().parent / "host"
GXX = shutil.which("g++") or shutil.which("c++")
KERNEL = ROOT / "tests" / "golden" / "row_registers" / "fused_stash.cu"

DRIVER = r"""
#include "host_cuda_threads.h"
#include <cstdio>
namespace orig {
float smem[4096];
#include "orig.cu"
}
namespace cand {
float smem[4096];
#include "cand.cu"
}
int main() {
  const unsigned rows = 3, threads = 4;
  int bad = 0, runs = 0;
  for (int packs : {1, 3, 4, 5, 8, 9, 13, 16, 17, 21}) {
    const int n = rows * packs * 4;
    std::vector<float> x0(n), r0(n), w(packs * 4);
    for (int i = 0; i < n; ++i) { x0[i] = float((i * 7) % 5) - 2.f; r0[i] = float((i * 3) % 7) - 3.f; }
    for (int i = 0; i < packs * 4; ++i) w[i] = float(1 + i % 3);
    // a row summing to 0 would divide by 0 in both: make every row's total non-zero
    for (unsigned b = 0; b < rows; ++b) x0[b * packs * 4] += 100.f;
    auto xa = x0, ra = r0, xb = x0, rb = r0;
    ktx_host_launch(rows, threads, [&] { orig::add_scale_rows(xa.data(), ra.data(), w.data(), packs); });
    ktx_host_launch(rows, threads, [&] { cand::add_scale_rows(xb.data(), rb.data(), w.data(), packs); });
    ++runs;
    for (int i = 0; i < n; ++i) {
      if (xa[i] != xb[i] || ra[i] != rb[i]) {
        if (bad < 5)
          std::printf("packs=%d element %d: x %g vs %g, res %g vs %g\n", packs, i, xa[i], xb[i], ra[i],
                      rb[i]);
        ++bad;
      }
    }
  }
  std::printf("runs=%d mismatches=%d\n", runs, bad);
  return bad != 0;
}
"""


@pytest.mark.skipif(GXX is None, reason="no C++ compiler on PATH")
@pytest.mark.slow
@pytest.mark.parametrize("packs", [0, 1, 2, 4])
def test_every_packs_config_matches_the_original_on_the_host(tmp_path: Path, packs: int) -> None:
    src = KERNEL.read_text()
    cand = apply(src, "row-registers").instantiate({"PACKS": packs})
    if packs:
        assert "ktx_keep_t[ktx_k] = t;" in cand and "ktx_pre_a[ktx_k].load(" in cand
    (tmp_path / "orig.cu").write_text(src)
    (tmp_path / "cand.cu").write_text(cand)
    (tmp_path / "main.cpp").write_text(DRIVER)
    exe = tmp_path / "main"
    assert GXX is not None
    build = subprocess.run(
        [GXX, "-std=c++20", "-O1", "-pthread", "-I", str(HOST), "-I", str(tmp_path), "-o", str(exe),
         str(tmp_path / "main.cpp")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr[-3000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "runs=10 mismatches=0" in run.stdout, run.stdout + run.stderr
