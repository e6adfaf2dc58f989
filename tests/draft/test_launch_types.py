"""Session 11: ``sizeof(T)`` in a launcher reads the type drafted for the kernel's ``T``, whether
the launch writes ``k<T>`` or deduces ``T`` from a pointer the launcher declares ``T*``; while
that type is a guess (the launcher's first instantiation), the launch lines that read it say so."""

from __future__ import annotations

from pathlib import Path

from ktx.draft.drafter import draft

SRC = """\
template <typename T>
__global__ void gelu(T* x, int n) {
  const int i = (blockIdx.x * blockDim.x + threadIdx.x) * (16 / sizeof(T));
  if (i < n) x[i] = x[i] * T(2);
}
template <typename T>
void launch_gelu(T* x, int rows, int cols) {
  constexpr int threads = 1024;
  const int per_block = threads * (16 / sizeof(T));
  gelu<<<(rows * cols + per_block - 1) / per_block, threads>>>(x, rows * cols);
}
template void launch_gelu<float>(float*, int, int);
"""


def test_sizeof_of_a_type_deduced_from_the_launchers_pointer(tmp_path: Path) -> None:
    src = tmp_path / "f.cu"
    src.write_text(SRC)
    lines = draft(src, None, tmp_path).text.splitlines()
    grid = next(ln for ln in lines if ln.startswith("grid ="))
    assert grid == 'grid = ["(rows * cols + 1024 * (16 // 4) - 1) // (1024 * (16 // 4))"]'
    assert lines[lines.index(grid) - 1].startswith("# TODO: grid: the launcher's sizeof(T) is read")
    block = next(ln for ln in lines if ln.startswith("block ="))
    assert block == 'block = ["1024"]'
    assert not lines[lines.index(block) - 1].startswith("# TODO")  # no sizeof read there
