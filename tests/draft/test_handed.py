"""Session 10: a kernel that only hands its pointers on to a ``__device__`` function of the
file (apex's ``cuApplyRMSNorm`` calls ``cuApplyLayerNorm_``) gets their roles and extents
from that function, its scalar parameters named as the kernel passes them."""

from __future__ import annotations

from pathlib import Path

from ktx.draft.drafter import draft

SRC = """\
template <typename T, typename U>
__device__ void norm_(T* out, U* stats, const T* in, int n1, int n2) {
  int r = blockIdx.x;
  if (r >= n1) return;
  for (int c = threadIdx.x; c < n2; c += blockDim.x) out[r * n2 + c] = in[r * n2 + c];
  if (threadIdx.x == 0) stats[r] = 1;
}
template <typename T, typename U>
__global__ void norm(T* out, U* stats, const T* in, int n1, int n2) { norm_<T, U>(out, stats, in, n1, n2); }
void go(float* out, float* stats, const float* in, int n1, int n2) {
  norm<float, float><<<n1, 256>>>(out, stats, in, n1, n2);
}
"""


def _arg(text: str, name: str) -> str:
    return text.split(f'name = "{name}"', 1)[1].split("[[args]]", 1)[0].split("[shapes]", 1)[0]


def test_roles_and_extents_come_from_the_device_function(tmp_path: Path) -> None:
    src = tmp_path / "g.cu"
    src.write_text(SRC)
    d = draft(src, None, tmp_path)
    assert 'shape = "[n1, n2]"' in _arg(d.text, "out") and 'role = "out"' in _arg(d.text, "out")
    assert 'shape = "[n1]"' in _arg(d.text, "stats") and 'role = "out"' in _arg(d.text, "stats")
    assert 'shape = "[n1, n2]"' in _arg(d.text, "in")
    assert d.todos == ()


def test_a_name_the_kernel_does_not_give_leaves_the_extent_a_todo(tmp_path: Path) -> None:
    # the kernel passes a literal-free expression for n2: the callee's extent names n2, which
    # the kernel's arguments do not give, so no extent is drafted from it
    src = tmp_path / "g.cu"
    src.write_text(SRC.replace("in, n1, n2); }", "in, n1, n2 / 2); }"))
    text = draft(src, None, tmp_path).text
    assert 'shape = "[TODO]"' in _arg(text, "out")
